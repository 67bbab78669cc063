// Signs the emitter can prove from a kernel's structure, so that a math function may take a form
// that is cheaper on the proven range and gives the same bits there (docs/codegen-cpp.md,
// "Performance").
//
// The one proof today: softmax's exp(x - max(x)). When exp's operand is `a - m`, m is a reduce_max
// over a loop L1, and a (in loop L2) computes, point for point, the same value as m's operand (the
// same operations on the same loads, L1 and L2 of equal extents), then every a is one of the
// values m took the maximum of: a <= m, or one of them is NaN. With IEEE subtraction (generated
// code is compiled with -ffp-contract=off) a - m is then <= 0 or NaN (inf - inf included), which
// is what ev::exp_nonpositive needs.
//
// Needs: loads only of buffers the kernel never writes (a value read in two loops is the same),
// and no store into an input or an extern's result (it might alias any load); index expressions
// that read no node values. Otherwise nothing is proven and the plain exp is emitted.
#include <algorithm>

#include "codegen/cpp/emit_internal.h"

namespace ember::codegen::detail {

namespace {

bool reads_node_values(const sym::Expr& e) {
  if (e.kind() == sym::ExprKind::Symbol) return !e.symbol_name().empty() && e.symbol_name()[0] == 't';
  for (const sym::Expr& o : e.operands())
    if (reads_node_values(o)) return true;
  return false;
}

struct SameValue {
  const NodeEnv& env;
  std::vector<BufferId> written;  // storage roots of the kernel's stores
  bool any_aliasing_store = false;

  explicit SameValue(const NodeEnv& e) : env(e) {
    const Program& p = *env.program;
    for (const Node& n : env.kernel->nodes) {
      if (n.op != ScalarOp::Store) continue;
      BufferId root = p.storage_root(n.buffer);
      written.push_back(root);
      Buffer::Kind kind = p.buffers.at(root).kind;
      if (kind == Buffer::Kind::Input || kind == Buffer::Kind::Extern) any_aliasing_store = true;
    }
  }

  bool unwritten(BufferId b) const {
    return std::find(written.begin(), written.end(), env.program->storage_root(b)) == written.end();
  }

  // Node a (loop la) and node b (loop lb) give the same value at every point of the two loops,
  // whose extents are equal (the caller checked).
  bool operator()(NodeId a_id, int la, NodeId b_id, int lb) const {
    const Node& a = env.node(a_id);
    const Node& b = env.node(b_id);
    const bool a_in = a.loop == la, b_in = b.loop == lb;
    if (!a_in || !b_in) return !a_in && !b_in && a_id == b_id;  // one value per outer point
    if (a.op != b.op || a.dtype != b.dtype || a.operands.size() != b.operands.size()) return false;
    switch (loop_ir::op_info(a.op).cls) {
      case loop_ir::OpClass::Leaf:
        if (a.op == ScalarOp::Constant) return a.constant == b.constant;
        if (a.op != ScalarOp::Load || a.buffer != b.buffer || !a.operands.empty() || !unwritten(a.buffer)) return false;
        if (a.index.size() != b.index.size()) return false;
        for (size_t d = 0; d < a.index.size(); ++d)
          if (a.index[d] != b.index[d] || reads_node_values(a.index[d])) return false;
        return true;
      case loop_ir::OpClass::Unary:
      case loop_ir::OpClass::Binary:
      case loop_ir::OpClass::Compare:
      case loop_ir::OpClass::Ternary:
        for (size_t o = 0; o < a.operands.size(); ++o)
          if (!(*this)(a.operands[o], la, b.operands[o], lb)) return false;
        return true;
      case loop_ir::OpClass::Reduce:
      case loop_ir::OpClass::Effect: return false;
    }
    return false;
  }
};

}  // namespace

bool exp_argument_nonpositive(const NodeEnv& env, const Node& exp_node) {
  if (exp_node.op != ScalarOp::Exp || exp_node.operands.size() != 1) return false;
  const Node& sub = env.node(exp_node.operands[0]);
  if (sub.op != ScalarOp::Sub || sub.dtype != DType::Float32 || sub.loop != exp_node.loop) return false;
  const Node& a = env.node(sub.operands.at(0));
  const Node& m = env.node(sub.operands.at(1));
  if (m.op != ScalarOp::ReduceMax || m.dtype != DType::Float32 || a.loop != sub.loop || m.loop == sub.loop)
    return false;
  const Kernel& k = *env.kernel;
  if (m.loop < 0 || a.loop < 0 || static_cast<size_t>(std::max(m.loop, a.loop)) >= k.loops.size()) return false;
  const auto& lm = k.loops[static_cast<size_t>(m.loop)].ranges;
  const auto& la = k.loops[static_cast<size_t>(a.loop)].ranges;
  if (lm.empty() || lm.size() != la.size()) return false;
  for (size_t d = 0; d < lm.size(); ++d)
    if (lm[d] != la[d]) return false;
  SameValue same(env);
  if (same.any_aliasing_store) return false;
  return same(a.id, a.loop, m.operands.at(0), m.loop);
}

}  // namespace ember::codegen::detail
