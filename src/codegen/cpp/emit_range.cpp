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
//
// The other: the interval of an integer value (int32_lane_range), from the extents of the loop
// variables its index expressions read, carried through the integer ops vector code has int32
// lanes for. Index arithmetic is int64 in torch and in scalar code; a value whose every
// intermediate provably lies in int32 (and in its own dtype, so nothing wraps) comes out of 32-bit
// lanes with the same bits.
#include <algorithm>
#include <functional>
#include <limits>
#include <variant>

#include "codegen/cpp/emit_internal.h"

namespace ember::codegen::detail {

namespace {

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
        if (a.op == ScalarOp::Index) return a.index == b.index && !reads_node_values(a.index.at(0));
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

// A closed interval of integers; wide enough that sums and products of int32-bounded operands, and
// of index terms bounded by kLimit, cannot overflow.
struct Interval {
  __int128 lo, hi;
};
constexpr __int128 kLimit = __int128(1) << 62;
// The widest vector (AVX-512's 16 lanes): a masked tail computes lanes up to 15 past the last point.
constexpr int64_t kMaxLanes = 16;

std::optional<Interval> bounded(Interval r) {
  if (r.lo < -kLimit || r.hi > kLimit) return std::nullopt;
  return r;
}

std::optional<Interval> product(Interval a, Interval b) {
  const __int128 c[] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
  return bounded({*std::min_element(c, c + 4), *std::max_element(c, c + 4)});
}

__int128 floor_div(__int128 a, __int128 b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// `e` over the loop variables' ranges (`var_range`), nullopt when unknown or unbounded.
std::optional<Interval> expr_range(const sym::Expr& e,
                                   const std::function<std::optional<Interval>(const std::string&)>& var_range) {
  const auto& ops = e.operands();
  auto operand = [&](size_t k) { return expr_range(ops[k], var_range); };
  switch (e.kind()) {
    case sym::ExprKind::Constant: return bounded({e.constant(), e.constant()});
    case sym::ExprKind::Symbol: return var_range(e.symbol_name());
    case sym::ExprKind::Add:
    case sym::ExprKind::Mul: {
      std::optional<Interval> acc = operand(0);
      for (size_t k = 1; k < ops.size() && acc; ++k) {
        std::optional<Interval> r = operand(k);
        if (!r) return std::nullopt;
        acc = e.kind() == sym::ExprKind::Add ? bounded({acc->lo + r->lo, acc->hi + r->hi}) : product(*acc, *r);
      }
      return acc;
    }
    case sym::ExprKind::FloorDiv:
    case sym::ExprKind::Mod: {
      // Python rounding by a positive constant: floordiv is monotonic, mod lies in [0, c).
      std::optional<Interval> a = operand(0);
      if (!a || !ops[1].is_constant() || ops[1].constant() <= 0) return std::nullopt;
      const __int128 c = ops[1].constant();
      if (e.kind() == sym::ExprKind::FloorDiv) return Interval{floor_div(a->lo, c), floor_div(a->hi, c)};
      if (a->lo >= 0 && a->hi < c) return a;
      return Interval{0, c - 1};
    }
    case sym::ExprKind::Max:
    case sym::ExprKind::Min: {
      std::optional<Interval> a = operand(0), b = operand(1);
      if (!a || !b) return std::nullopt;
      if (e.kind() == sym::ExprKind::Max) return Interval{std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
      return Interval{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
    }
  }
  return std::nullopt;
}

std::optional<Interval> dtype_range(DType dt) {
  switch (dt) {
    case DType::UInt8: return Interval{0, 255};
    case DType::Int8: return Interval{-128, 127};
    case DType::Int16: return Interval{-32768, 32767};
    case DType::Int32:
    case DType::Int64: return Interval{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case DType::Bool:
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32:
    case DType::Float64:
    case DType::Complex64:
    case DType::Complex128:
    case DType::Float8E4M3FN:
    case DType::Float8E5M2: return std::nullopt;
  }
  return std::nullopt;
}

struct LaneRanges {
  const NodeEnv& env;
  const std::string& var;

  // Loop variables of node `n`: i<d> over the kernel's ranges, r<d> over its loop's; `var` runs
  // kMaxLanes - 1 further.
  std::optional<Interval> variable(const Node& n, const std::string& name) const {
    const Kernel& k = *env.kernel;
    if (name.size() < 2 || (name[0] != 'i' && name[0] != 'r')) return std::nullopt;
    for (size_t c = 1; c < name.size(); ++c)
      if (name[c] < '0' || name[c] > '9') return std::nullopt;
    const size_t d = std::stoul(name.substr(1));
    const std::vector<sym::Expr>* ranges = &k.ranges;
    if (name[0] == 'r') {
      if (n.loop < 0 || static_cast<size_t>(n.loop) >= k.loops.size()) return std::nullopt;
      ranges = &k.loops[static_cast<size_t>(n.loop)].ranges;
    }
    if (d >= ranges->size() || !(*ranges)[d].is_constant() || (*ranges)[d].constant() < 1) return std::nullopt;
    return Interval{0, (*ranges)[d].constant() - 1 + (name == var ? kMaxLanes - 1 : 0)};
  }

  std::optional<Interval> operator()(const Node& n) const {
    std::optional<Interval> r = unchecked(n);
    std::optional<Interval> fits = dtype_range(n.dtype);
    if (!r || !fits || r->lo < fits->lo || r->hi > fits->hi) return std::nullopt;
    return r;
  }

  // The interval of an integer node, before checking that it fits; ops without int32 lanes have none.
  std::optional<Interval> unchecked(const Node& n) const {
    if (n.op == ScalarOp::Index)
      return expr_range(n.index.at(0), [&](const std::string& name) { return variable(n, name); });
    if (n.op == ScalarOp::Constant) {
      const int64_t* v = std::get_if<int64_t>(&n.constant);
      return v ? std::optional<Interval>(Interval{*v, *v}) : std::nullopt;
    }
    std::vector<Interval> in;
    for (NodeId id : n.operands) {
      const Node& o = env.node(id);
      if (o.loop != n.loop) return std::nullopt;  // another loop's variables mean other things
      std::optional<Interval> r = o.dtype == DType::Bool ? Interval{0, 1} : (*this)(o);
      if (!r) return std::nullopt;
      in.push_back(*r);
    }
    using Op = ScalarOp;
    const Op op = n.op;
    if (op == Op::Cast) return in.at(0);  // from bool or an integer (a float operand has no interval)
    if (op == Op::Neg) return Interval{-in[0].hi, -in[0].lo};
    if (op == Op::Abs) {
      if (in[0].lo >= 0) return in[0];
      if (in[0].hi <= 0) return Interval{-in[0].hi, -in[0].lo};
      return Interval{0, std::max(-in[0].lo, in[0].hi)};
    }
    if (op == Op::Add) return bounded({in[0].lo + in[1].lo, in[0].hi + in[1].hi});
    if (op == Op::Sub) return bounded({in[0].lo - in[1].hi, in[0].hi - in[1].lo});
    if (op == Op::Mul) return product(in[0], in[1]);
    if (op == Op::Maximum) return Interval{std::max(in[0].lo, in[1].lo), std::max(in[0].hi, in[1].hi)};
    if (op == Op::Minimum) return Interval{std::min(in[0].lo, in[1].lo), std::min(in[0].hi, in[1].hi)};
    if (op == Op::Where) return Interval{std::min(in[1].lo, in[2].lo), std::max(in[1].hi, in[2].hi)};
    return std::nullopt;
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

bool fits_int32_lanes(const NodeEnv& env, const Node& n, const std::string& var) {
  return LaneRanges{env, var}(n).has_value();
}

std::optional<std::pair<int64_t, int64_t>> int32_lane_interval(const NodeEnv& env, const Node& n, const std::string& var) {
  const std::optional<Interval> r = LaneRanges{env, var}(n);
  if (!r) return std::nullopt;
  return std::make_pair(static_cast<int64_t>(r->lo), static_cast<int64_t>(r->hi));
}

}  // namespace ember::codegen::detail
