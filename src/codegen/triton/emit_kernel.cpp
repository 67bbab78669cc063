// One kernel's @triton.jit body: index set-up, then every node of every loop as Python statements
// over Triton blocks (docs/codegen-triton.md has the shapes and an example).
//
// Shapes. A pointwise kernel's values are [XBLOCK] blocks. In a reduction kernel every value is
// 2-D: [XBLOCK, 1] for values of outer points (range-less loops, reduction results) and
// [XBLOCK, RBLOCK] inside ranged loops. A value's class (X or XR) is what it depends on; a load
// whose address or mask does not reach a class its context needs is widened with zeros, because
// tl.load and tl.store broadcast the mask to the pointer's shape, never the other way round.
//
// Reductions. Persistent: the loop's row is one [XBLOCK, RBLOCK] block; a reduction is one
// cross-lane tl.sum/eh.reduce_max/... of it (masked lanes replaced by the identity); Welford is an
// exact two-pass mean and sum of squared deviations over the row. Looped: one [XBLOCK, RBLOCK]
// accumulator per reduction, updated lane by lane in `for roffset in range(0, N, RBLOCK)`, reduced
// across lanes after the loop; Welford keeps per-lane (count, mean, m2) and combines lanes with
// Chan's formula using tl.sum only (a custom-combine tl.reduce is ~1000x slower in the interpreter).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "codegen/cpp/spelling.h"  // detail::expand: the one pattern expander
#include "codegen/triton/emit_internal.h"
#include "codegen/triton/spelling.h"
#include "sym/range.h"

namespace ember::codegen::triton {

using loop_ir::Buffer;
using loop_ir::Kernel;
using loop_ir::Node;
using loop_ir::NodeId;
using loop_ir::OpClass;
using loop_ir::Program;
using loop_ir::ScalarOp;
using codegen::detail::expand;

std::string node_desc(const Node& n) {
  return "%t" + std::to_string(n.id) + " (" + loop_ir::op_info(n.op).name + " : " + ir::dtype_name(n.dtype) + ")";
}

namespace {

[[noreturn]] void refuse(const Node& n, const std::string& why) { throw CodegenError("node " + node_desc(n) + ": " + why); }

std::string var(NodeId id) { return "t" + std::to_string(id); }

const TDTypeSpelling& spelled(ir::DType dt, const std::string& what) {
  const TDTypeSpelling& s = dtype_spelling(dt);
  if (s.kind == TKind::None)
    throw CodegenError(what + ": Triton code generation does not support dtype " + ir::dtype_name(dt));
  return s;
}

bool is_welford(ScalarOp op) { return op == ScalarOp::WelfordMean || op == ScalarOp::WelfordM2; }

// Python literals.
std::string float_text(double v, bool single) {
  if (std::isnan(v)) return "float('nan')";
  if (std::isinf(v)) return v < 0 ? "float('-inf')" : "float('inf')";
  char buf[64];
  if (single) {
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(static_cast<float>(v)));
  } else {
    std::snprintf(buf, sizeof buf, "%.17g", v);
  }
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string literal(const loop_ir::Scalar& value, ir::DType dt) {
  double d = 0;
  int64_t i = 0;
  if (const bool* b = std::get_if<bool>(&value)) {
    d = *b ? 1 : 0;
    i = *b ? 1 : 0;
  } else if (const int64_t* p = std::get_if<int64_t>(&value)) {
    d = static_cast<double>(*p);
    i = *p;
  } else {
    d = std::get<double>(value);
    i = std::isfinite(d) ? static_cast<int64_t>(d) : 0;
  }
  switch (dtype_spelling(dt).kind) {
    case TKind::Bool: return d != 0 ? "1" : "0";
    case TKind::Int: return std::to_string(i);
    case TKind::Float: return float_text(d, dt != ir::DType::Float64);
    case TKind::None: break;
  }
  throw CodegenError(std::string("no Triton literal for dtype ") + ir::dtype_name(dt));
}

enum class Cls : uint8_t { X, XR };  // depends on outer points only / also on the loop's lanes

class BodyEmitter {
 public:
  BodyEmitter(const Program& p, const Kernel& k, const KernelShape& s, std::vector<std::string>* sites)
      : program_(p), kernel_(k), shape_(s), sites_(sites) {
    for (size_t i = 0; i < k.nodes.size(); ++i) position_[k.nodes[i].id] = i;
    cls_.resize(k.nodes.size(), Cls::X);
  }

  std::string emit() {
    header();
    size_t i = 0;
    for (size_t l = 0; l < kernel_.loops.size(); ++l) {
      size_t end = i;
      while (end < kernel_.nodes.size() && kernel_.nodes[end].loop == static_cast<int>(l)) ++end;
      if (kernel_.loops[l].ranges.empty()) {
        for (; i < end; ++i) node(kernel_.nodes[i], "    ", l);
      } else if (shape_.kind == TritonKernel::Kind::LoopedReduction) {
        looped_loop(l, i, end);
        i = end;
      } else {
        line("    ", "rindex = rbase");
        lanes(l, "    ");
        for (; i < end; ++i) node(kernel_.nodes[i], "    ", l);
      }
    }
    return out_;
  }

 private:
  bool reduction() const { return shape_.kind != TritonKernel::Kind::Pointwise; }
  const Node& node_of(NodeId id) const { return kernel_.nodes[position_.at(id)]; }
  Cls cls_of(NodeId id) const { return cls_[position_.at(id)]; }
  void set_cls(const Node& n, Cls c) { cls_[position_.at(n.id)] = c; }
  void line(const std::string& indent, const std::string& text) { out_ += indent + text + "\n"; }
  const TDTypeSpelling& dt(ir::DType d, const Node& n) { return spelled(d, "node " + node_desc(n)); }

  std::string x_shape() const {
    if (shape_.tile) return "[BLOCK_M, BLOCK_N]";
    return reduction() ? "[XBLOCK, 1]" : "[XBLOCK]";
  }

  // Constant sizes are rebound to literals, as Inductor does: masks compare against constants, and
  // the interpreter's numpy >= 2.4 bug on runtime loop bounds is avoided. Symbolic ones stay the
  // parameters (xnumel, rnumel, s0, ...) the launcher passes.
  void header() {
    if (shape_.tile) return;  // the template defines i<k> and xmask over its tile
    if (shape_.xnumel.is_constant()) line("    ", "xnumel = " + shape_.xnumel.str());
    const std::string block = shape_.block_param.empty() ? "tl.program_id(0)" : shape_.block_param;
    const std::string pid = shape_.int64 ? block + ".to(tl.int64)" : block;
    line("    ", "xoffset = " + pid + " * XBLOCK");
    line("    ", std::string("xindex = xoffset + tl.arange(0, XBLOCK)") + (reduction() ? "[:, None]" : ""));
    if (shape_.xmask) line("    ", "xmask = xindex < xnumel");
    split("xindex", "i", kernel_.ranges, "    ");
    if (!reduction()) return;
    if (shape_.rnumel.is_constant()) line("    ", "rnumel = " + shape_.rnumel.str());
    line("    ", std::string("rbase = tl.arange(0, RBLOCK)[None, :]") + (shape_.int64 ? ".to(tl.int64)" : ""));
  }

  // v0, v1, ... recovered from a flat row-major index over `ranges`. A size-1 range's variable is 0 as a
  // block of the flat index's shape (`rindex * 0`), not the scalar 0: a load addressed by such variables
  // alone must still be a block of its loop's shape (a reduction over it needs its axis).
  void split(const std::string& flat, const std::string& prefix, const std::vector<sym::Expr>& ranges,
             const std::string& indent) {
    sym::Expr inner = 1;
    for (size_t k = ranges.size(); k-- > 0;) {
      const sym::Expr& extent = ranges[k];
      std::string v = flat;
      if (extent.is_constant() && extent.constant() == 1) {
        v = flat + " * 0";
      } else {
        if (!(inner.is_constant() && inner.constant() == 1)) v += " // " + atom(inner);
        if (k != 0) v += " % " + atom(extent);
      }
      line(indent, prefix + std::to_string(k) + " = " + v);
      inner = inner * extent;
    }
  }

  // rmask and the r-variables of loop `l` from `rindex`.
  void lanes(size_t l, const std::string& indent) {
    if (shape_.rmask[l]) line(indent, "rmask = rindex < " + atom(shape_.loop_numel[l]));
    split("rindex", "r", kernel_.loops[l].ranges, indent);
  }

  // ---- index expressions

  bool shape_symbol(const std::string& name) const {
    return std::any_of(shape_.symbols->begin(), shape_.symbols->end(), [&](const sym::SymbolInfo& s) { return s.name == name; });
  }

  // Whether `e` varies across a block's lanes (mentions a loop variable or a node), rather than
  // being one scalar for the whole program (constants and shape symbols).
  // An index value's constant term when it lies outside int32 (philox_rand's counters start at
  // k << 32), split off to be added in int64 after the index math; else (e, 0).
  static std::pair<sym::Expr, int64_t> split_wide_constant(const sym::Expr& e) {
    const int64_t lim = std::numeric_limits<int32_t>::max();
    if (e.kind() != sym::ExprKind::Add) return {e, 0};
    for (const sym::Expr& term : e.operands())
      if (term.is_constant() && (term.constant() > lim || term.constant() < -lim)) return {e - term, term.constant()};
    return {e, 0};
  }
  static std::string plus(int64_t wide) { return wide == 0 ? "" : " + " + std::to_string(wide); }

  bool per_lane(const sym::Expr& e) const {
    if (e.kind() == sym::ExprKind::Symbol) return !shape_symbol(e.symbol_name());
    return std::any_of(e.operands().begin(), e.operands().end(), [&](const sym::Expr& o) { return per_lane(o); });
  }

  Cls expr_cls(const sym::Expr& e) const {
    if (e.kind() == sym::ExprKind::Symbol) {
      const std::string& s = e.symbol_name();
      if (shape_symbol(s)) return Cls::X;
      if (s[0] == 'r') return Cls::XR;
      if (s[0] == 't') return cls_of(std::stoi(s.substr(1)));
      return Cls::X;
    }
    Cls c = Cls::X;
    for (const sym::Expr& o : e.operands())
      if (expr_cls(o) == Cls::XR) c = Cls::XR;
    return c;
  }

  bool non_negative(const sym::Expr& e) const {
    switch (e.kind()) {
      case sym::ExprKind::Constant: return e.constant() >= 0;
      case sym::ExprKind::Symbol: {
        const std::string& s = e.symbol_name();
        if (shape_symbol(s)) return sym::bound(e, *shape_.symbols).lo >= 0;
        return s[0] != 't' || node_of(std::stoi(s.substr(1))).op == ScalarOp::CheckIndex;
      }
      case sym::ExprKind::Add:
      case sym::ExprKind::Mul:
      case sym::ExprKind::Max:
      case sym::ExprKind::Min:
        for (const sym::Expr& o : e.operands())
          if (!non_negative(o)) return false;
        return true;
      case sym::ExprKind::FloorDiv:
      case sym::ExprKind::Mod:
        return non_negative(e.operands()[0]) && positive(e.operands()[1]);
    }
    return false;
  }

  // A divisor > 0 for every value: a constant, or an expression of shape symbols alone.
  bool positive(const sym::Expr& e) const { return !per_lane(e) && sym::bound(e, *shape_.symbols).lo > 0; }

  std::string atom(const sym::Expr& e) const {
    std::string s = index(e);
    bool simple = e.kind() == sym::ExprKind::Symbol || (e.is_constant() && e.constant() >= 0) ||
                  e.kind() == sym::ExprKind::Max || e.kind() == sym::ExprKind::Min;
    return simple ? s : "(" + s + ")";
  }

  // `e` as Python over the kernel's variables. Symbols other than i<k>, r<k>, t<n> are refused
  // by emit.cpp before the body is printed.
  std::string index(const sym::Expr& e) const {
    switch (e.kind()) {
      case sym::ExprKind::Constant: return std::to_string(e.constant());
      case sym::ExprKind::Symbol: {
        const std::string& s = e.symbol_name();
        if (!shape_symbol(s) && s[0] == 't' && shape_.int64 && node_of(std::stoi(s.substr(1))).dtype != ir::DType::Int64)
          return s + ".to(tl.int64)";
        return s;
      }
      case sym::ExprKind::Add: {
        std::string s;
        for (const sym::Expr& term : e.operands()) {
          std::string t = index(term);
          bool negative = t[0] == '-';
          if (s.empty()) {
            s = t;
          } else {
            s += negative ? " - " + t.substr(1) : " + " + t;
          }
        }
        return s;
      }
      case sym::ExprKind::Mul: {
        // A negative constant factor prints bare ("-4*x"): the Add above turns "a + -4*x" into "a - 4*x".
        const std::vector<sym::Expr>& f = e.operands();
        std::string s = f[0].is_constant() ? std::to_string(f[0].constant()) : atom(f[0]);
        for (size_t k = 1; k < f.size(); ++k) s += "*" + atom(f[k]);
        return s;
      }
      case sym::ExprKind::FloorDiv:
      case sym::ExprKind::Mod: {
        const bool div = e.kind() == sym::ExprKind::FloorDiv;
        const sym::Expr& a = e.operands()[0];
        const sym::Expr& b = e.operands()[1];
        // Triton's // and % truncate; they agree with Python's when both sides are >= 0.
        if (non_negative(a) && positive(b)) return atom(a) + (div ? " // " : " % ") + atom(b);
        return std::string(div ? "eh.floordiv_int(" : "eh.mod_int(") + index(a) + ", " + index(b) + ")";
      }
      case sym::ExprKind::Max:
      case sym::ExprKind::Min: {
        const char* fn = e.kind() == sym::ExprKind::Max ? "tl.maximum(" : "tl.minimum(";
        std::string acc = index(e.operands()[0]);
        for (size_t k = 1; k < e.operands().size(); ++k) acc = fn + acc + ", " + index(e.operands()[k]) + ")";
        return acc;
      }
    }
    throw CodegenError("unknown index expression kind");
  }

  // ---- addresses and masks

  // Element offset of an access from its root buffer's element 0.
  sym::Expr offset_of(const Node& n) const {
    const Buffer& b = program_.buffers.at(static_cast<size_t>(n.buffer));
    sym::Expr off = shape_.root_offset.at(n.buffer);
    for (size_t k = 0; k < n.index.size(); ++k) {
      // A dimension of size 1 is always read at index 0, whatever its stride says.
      if (b.sizes[k].is_constant() && b.sizes[k].constant() == 1) continue;
      off = off + n.index[k] * b.strides[k];
    }
    return loop_ir::simplify(off, {});
  }

  std::string mask_of(Cls c, size_t loop, const std::string& extra = "") const {
    std::string m;
    auto add = [&m](const std::string& part) { m += (m.empty() ? "" : " & ") + part; };
    if (shape_.xmask) add("xmask");
    if (c == Cls::XR && shape_.rmask[loop]) add("rmask");
    if (!extra.empty()) add(extra);
    return m;
  }

  // "in_ptr0 + (addr)" widened to class `c`; returns the class it has. `full` (a store: tl.store
  // broadcasts the value and mask to the pointer's shape, never the pointer to theirs): an address over
  // the loop's lanes that no outer point moves (a row every program stores, [1, RBLOCK]) is widened to
  // the whole block.
  std::string pointer(const Node& n, Cls want, Cls* got, bool full = false) const {
    const sym::Expr off = offset_of(n);
    const bool lanes = per_lane(off);
    Cls c = lanes ? expr_cls(off) : Cls::X;
    std::string addr = index(off);
    if (!lanes) addr += " + tl.zeros(" + x_shape() + ", tl.int32)";
    auto rows_only = [&] {  // no outer variable (i<k>) or loaded index value (t<n>) moves the address
      std::set<std::string> used;
      sym::free_symbols(off, used);
      return std::none_of(used.begin(), used.end(), [&](const std::string& v) { return v[0] == 'i' || v[0] == 't'; });
    };
    if ((want == Cls::XR && c == Cls::X) || (full && lanes && c == Cls::XR && rows_only())) {
      addr += " + tl.zeros([XBLOCK, RBLOCK], tl.int32)";
      c = Cls::XR;
    }
    *got = c;
    const loop_ir::BufferId root = program_.storage_root(n.buffer);
    return shape_.pointer.at(root) + " + (" + addr + ")";
  }

  // ---- nodes

  // In a persistent reduction every ranged loop over the same ranges sees the same row in
  // registers, so a value a previous loop computed (the scheduler repeats a softmax row's load and
  // exp per loop) is reused rather than recomputed. Loads qualify only from buffers the kernel
  // never stores to. The key: what the node computes, over operands already renamed to their
  // first computation.
  std::string reuse_key(const Node& n, size_t loop) const {
    if (shape_.kind != TritonKernel::Kind::PersistentReduction || kernel_.loops[loop].ranges.empty()) return "";
    const OpClass c = loop_ir::op_info(n.op).cls;
    if (c == OpClass::Reduce || c == OpClass::Effect || n.op == ScalarOp::CheckIndex) return "";
    std::string key = std::string(loop_ir::op_info(n.op).name) + ":" + ir::dtype_name(n.dtype) + ":";
    for (const sym::Expr& r : kernel_.loops[loop].ranges) key += r.str() + ",";
    for (NodeId o : n.operands) key += " " + first(o);
    if (n.op == ScalarOp::Load) {
      const loop_ir::BufferId root = program_.storage_root(n.buffer);
      for (const Node& other : kernel_.nodes)
        if (other.op == ScalarOp::Store && program_.storage_root(other.buffer) == root) return "";
      key += " " + shape_.pointer.at(root) + "[" + offset_of(n).str() + "]";
    }
    if (n.op == ScalarOp::Constant || (n.op == ScalarOp::Load && !n.operands.empty()))
      key += " " + literal(n.constant, n.dtype);
    if (n.op == ScalarOp::Index) key += " " + n.index.at(0).str();
    return key;
  }

  std::string first(NodeId id) const {
    auto it = same_as_.find(id);
    return it == same_as_.end() ? var(id) : var(it->second);
  }

  void node(const Node& n, const std::string& indent, size_t loop) {
    dt(n.dtype, n);
    const std::string def = var(n.id) + " = ";
    if (const std::string key = reuse_key(n, loop); !key.empty()) {
      auto [it, inserted] = computed_.emplace(key, n.id);
      if (!inserted) {
        same_as_[n.id] = it->second;
        set_cls(n, cls_of(it->second));
        return line(indent, def + var(it->second));
      }
    }
    auto operand_cls = [&] {
      Cls c = Cls::X;
      for (NodeId o : n.operands)
        if (cls_of(o) == Cls::XR) c = Cls::XR;
      return c;
    };
    switch (loop_ir::op_info(n.op).cls) {
      case OpClass::Leaf:
        if (n.op == ScalarOp::Load) return load(n, indent, loop);
        if (n.op == ScalarOp::Constant) {
          const TDTypeSpelling& s = dt(n.dtype, n);
          std::string v = "tl.full(" + x_shape() + ", " + literal(n.constant, n.dtype) + ", " + s.tl + ")";
          if (std::string(s.tl) != s.value_tl) v += std::string(".to(") + s.value_tl + ")";
          return line(indent, def + v);
        }
        {
          const auto [e, wide] = split_wide_constant(n.index.at(0));
          if (e.is_constant()) {
            line(indent, def + "tl.full(" + x_shape() + ", " + std::to_string(e.constant() + wide) + ", tl.int64)");
          } else if (!per_lane(e)) {
            line(indent, def + "(" + index(e) + ") + tl.zeros(" + x_shape() + ", tl.int64)" + plus(wide));
          } else {
            set_cls(n, expr_cls(e));
            line(indent, def + "(" + index(e) + ").to(tl.int64)" + plus(wide));
          }
        }
        return;
      case OpClass::Effect: return store(n, indent, loop);
      case OpClass::Reduce:
        if (shape_.kind == TritonKernel::Kind::LoopedReduction) return reduction_update(n, indent, loop);
        return persistent_reduction(n, indent, loop);
      case OpClass::Unary:
        if (n.op == ScalarOp::Cast) {
          set_cls(n, operand_cls());
          return line(indent, def + cast(n, node_of(n.operands[0]).dtype, n.dtype, var(n.operands[0])));
        }
        if (n.op == ScalarOp::CheckIndex) return check_index(n, indent, loop, operand_cls());
        break;
      case OpClass::Binary:
      case OpClass::Ternary:
      case OpClass::Compare: break;
    }
    set_cls(n, operand_cls());
    std::vector<std::string> operands;
    for (NodeId o : n.operands) operands.push_back(var(o));
    // A compare computes in its operands' dtype; a where's condition is bool, its values the node's.
    const bool compare = loop_ir::op_info(n.op).cls == OpClass::Compare;
    line(indent, def + pattern(n, n.op, compare ? node_of(n.operands[0]).dtype : n.dtype, operands));
  }

  std::string pattern(const Node& n, ScalarOp op, ir::DType d, const std::vector<std::string>& operands) {
    const TDTypeSpelling& s = dt(d, n);
    const TOpSpelling& row = op_spelling(op);
    const char* p = row.value[static_cast<int>(s.kind)];
    if (!p) refuse(n, row.unsupported ? row.unsupported : "has no Triton form");
    return expand(p, operands, s.value_tl);
  }

  // A float value `x` narrowed to f16/bf16 storage type `tl`, rounding to nearest even. That is the
  // GPU's default; spelled out because Triton's interpreter truncates otherwise (its cast_impl).
  static std::string narrowed(const std::string& x, const char* tl) {
    return x + ".to(" + tl + ", fp_downcast_rounding=\"rtne\")";
  }

  // torch's conversions: to bool is != 0; f16/bf16 values round to what their storage holds.
  std::string cast(const Node& n, ir::DType from, ir::DType to, const std::string& x) {
    const TDTypeSpelling& f = dt(from, n);
    const TDTypeSpelling& t = dt(to, n);
    if (t.kind == TKind::Bool) return f.kind == TKind::Bool ? x : x + " != 0";
    if (std::string(t.tl) != t.value_tl)
      return (f.kind == TKind::Float ? narrowed(x, t.tl) : x + ".to(" + t.tl + ")") + ".to(" + t.value_tl + ")";
    if (std::string(f.value_tl) == t.value_tl) return x;
    return x + ".to(" + t.value_tl + ")";
  }

  void load(const Node& n, const std::string& indent, size_t loop) {
    if (n.buffer == shape_.accumulator) return line(indent, var(n.id) + " = acc");
    const Buffer& b = program_.buffers.at(static_cast<size_t>(n.buffer));
    const TDTypeSpelling& s = spelled(b.dtype, "buffer %" + b.name());
    const bool masked = !n.operands.empty();
    Cls want = masked ? cls_of(n.operands[0]) : Cls::X;
    Cls c = Cls::X;
    std::string ptr = pointer(n, want, &c);
    set_cls(n, c);
    const std::string mask = mask_of(c, loop, masked ? var(n.operands[0]) : "");
    std::string v = "tl.load(" + ptr;
    if (!mask.empty()) v += ", " + mask + ", other=" + (masked ? literal(n.constant, b.dtype) : "0");
    if (const char* policy = eviction_policy(n, loop)) v += std::string(", eviction_policy='") + policy + "'";
    v += ")";
    if (std::string(s.tl) != s.value_tl) v += std::string(".to(") + s.value_tl + ")";
    line(indent, var(n.id) + " = " + v);
  }

  // L2 hints in reductions (Inductor's): what other programs read too (an address without outer
  // variables: a weight row) stays, evict_last; in a looped reduction, a row that a later loop of the
  // kernel reads again stays for it (evict_last) and a row read for the last time goes first
  // (evict_first), so streaming it does not push out what is still to be read. A persistent row is
  // read once, into registers: no hint.
  const char* eviction_policy(const Node& n, size_t loop) const {
    if (shape_.kind == TritonKernel::Kind::Pointwise || kernel_.loops[loop].ranges.empty()) return nullptr;
    std::set<std::string> used;
    sym::free_symbols(offset_of(n), used);
    const bool shared = std::none_of(used.begin(), used.end(), [&](const std::string& s) {
      return !shape_symbol(s) && s[0] != 'r';  // outer variables i<k> and node values t<k>
    });
    if (shared) return "evict_last";
    if (shape_.kind != TritonKernel::Kind::LoopedReduction) return nullptr;
    const loop_ir::BufferId root = program_.storage_root(n.buffer);
    for (size_t i = position_.at(n.id) + 1; i < kernel_.nodes.size(); ++i) {
      const Node& later = kernel_.nodes[i];
      if (later.op == ScalarOp::Load && later.loop != n.loop && program_.storage_root(later.buffer) == root)
        return "evict_last";
    }
    return "evict_first";
  }

  void store(const Node& n, const std::string& indent, size_t loop) {
    const Buffer& b = program_.buffers.at(static_cast<size_t>(n.buffer));
    const TDTypeSpelling& s = spelled(b.dtype, "buffer %" + b.name());
    const NodeId value = n.operands.at(0);
    Cls c = Cls::X;
    std::string ptr = pointer(n, cls_of(value), &c, /*full=*/true);
    std::string v = var(value);
    if (c == Cls::XR && cls_of(value) == Cls::X) v = "tl.broadcast_to(" + v + ", [XBLOCK, RBLOCK])";
    if (std::string(s.tl) != dtype_spelling(node_of(value).dtype).value_tl)
      v = s.kind == TKind::Float && std::string(s.tl) != "tl.float64" && std::string(s.tl) != "tl.float32"
              ? narrowed(v, s.tl)
              : v + ".to(" + s.tl + ")";
    const std::string mask = mask_of(c, loop);
    if (n.accumulate) {  // points may add into one element: atomically (f32 or an integer: verify())
      line(indent, "tl.atomic_add(" + ptr + ", " + v + (mask.empty() ? "" : ", mask=" + mask) + ", sem=\"relaxed\")");
      return;
    }
    line(indent, "tl.store(" + ptr + ", " + v + (mask.empty() ? "" : ", " + mask) + ")");
  }

  void check_index(const Node& n, const std::string& indent, size_t loop, Cls c) {
    set_cls(n, c);
    const std::string t = var(n.id), bound = atom(n.bound);
    sites_->push_back(kernel_.name + " %t" + std::to_string(n.id));
    line(indent, t + " = " + var(n.operands.at(0)));
    const std::string mask = mask_of(c, loop);
    std::string cond = "(0 <= " + t + ") & (" + t + " < " + bound + ")";
    if (!mask.empty()) cond = "(" + cond + ") | ~(" + mask + ")";
    line(indent, "tl.device_assert(" + cond + ", \"index out of bounds: 0 <= " + t + " < " + bound + "\")");
  }

  // ---- reductions

  // The dtype a reduction accumulates in: bool counts as int32; f16/bf16 values are f32 already.
  ir::DType acc_dtype(const Node& n) const { return n.dtype == ir::DType::Bool ? ir::DType::Int32 : n.dtype; }

  std::string widened(const Node& n) const {
    const std::string v = var(n.operands.at(0));
    return n.dtype == ir::DType::Bool ? v + ".to(tl.int32)" : v;
  }

  std::string identity(const Node& n) {
    const TReduction& r = op_spelling(n.op).reduction;
    if (!r.across) refuse(n, "is not a reduction with an accumulator");
    const ir::DType a = acc_dtype(n);
    const TDTypeSpelling& s = dt(a, n);
    std::string lowest = "0", highest = "0";
    if (s.kind == TKind::Int) {
      const bool is_signed = a != ir::DType::UInt8;
      const int bits = ir::dtype_itemsize(a) * 8;
      lowest = is_signed ? (bits == 64 ? "-9223372036854775808" : std::to_string(-(int64_t{1} << (bits - 1)))) : "0";
      highest = bits == 64 ? "9223372036854775807"
                           : std::to_string(is_signed ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1);
    }
    return expand(r.identity[static_cast<int>(s.kind)], {"", lowest, highest});
  }

  // The [XBLOCK, 1] value of a reduction's cross-lane result `across` (cast back from int32 for bool).
  std::string finished(const Node& n, const std::string& block) {
    std::string v = expand(op_spelling(n.op).reduction.across, {block}) + "[:, None]";
    const TDTypeSpelling& s = dt(n.dtype, n);
    if (n.dtype == ir::DType::Bool) return v + " != 0";
    if (s.kind == TKind::Int) return v + ".to(" + s.value_tl + ")";
    return v;
  }

  std::string full_block(NodeId id) const {
    return cls_of(id) == Cls::XR ? var(id) : "tl.broadcast_to(" + var(id) + ", [XBLOCK, RBLOCK])";
  }

  std::string masked(size_t loop, const std::string& v, const std::string& other) const {
    return shape_.rmask[loop] ? "tl.where(rmask, " + v + ", " + other + ")" : v;
  }

  NodeId welford_leader(const Node& n) const {
    for (const Node& other : kernel_.nodes) {
      if (other.id == n.id) return n.id;
      if (is_welford(other.op) && other.loop == n.loop && other.operands == n.operands) return other.id;
    }
    return n.id;
  }

  void persistent_reduction(const Node& n, const std::string& indent, size_t loop) {
    const std::string def = var(n.id) + " = ";
    if (!is_welford(n.op)) {
      const std::string src = n.dtype == ir::DType::Bool ? "tl.broadcast_to(" + widened(n) + ", [XBLOCK, RBLOCK])"
                                                         : full_block(n.operands[0]);
      return line(indent, def + finished(n, masked(loop, src, identity(n))));
    }
    // Two passes over the register row: exact mean, then the sum of squared deviations.
    const NodeId leader = welford_leader(n);
    const std::string w = "w" + std::to_string(leader);
    const std::string v = full_block(n.operands[0]);
    if (leader == n.id) {
      line(indent, w + "_mean = eh.div(tl.sum(" + masked(loop, v, "0.0") + ", 1)[:, None], " + count(n, loop) + ")");
      line(indent, w + "_dev = " + masked(loop, v + " - " + w + "_mean", "0.0"));
    }
    if (n.op == ScalarOp::WelfordMean) return line(indent, def + w + "_mean");
    line(indent, def + "tl.sum(" + w + "_dev * " + w + "_dev, 1)[:, None]");
  }

  // A Welford reduction's element count as a float of its dtype: "100.0", or "(s1).to(tl.float32)".
  std::string count(const Node& n, size_t loop) {
    const sym::Expr& c = shape_.loop_numel[loop];
    if (c.is_constant()) return std::to_string(c.constant()) + ".0";
    return "(" + index(c) + ").to(" + dt(acc_dtype(n), n).value_tl + ")";
  }

  void looped_loop(size_t l, size_t begin, size_t end) {
    const std::string in = "        ";
    for (size_t i = begin; i < end; ++i) {
      const Node& n = kernel_.nodes[i];
      if (loop_ir::op_info(n.op).cls != OpClass::Reduce) continue;
      const std::string tl_acc = dt(acc_dtype(n), n).value_tl;
      if (is_welford(n.op)) {
        if (welford_leader(n) != n.id) continue;
        const std::string w = "w" + std::to_string(n.id);
        for (const char* f : {"_n", "_mean", "_m2"})
          line("    ", w + f + " = tl.zeros([XBLOCK, RBLOCK], " + tl_acc + ")");
        continue;
      }
      line("    ", "acc" + std::to_string(n.id) + " = tl.full([XBLOCK, RBLOCK], " + identity(n) + ", " + tl_acc + ")");
    }
    line("    ", "for roffset in range(0, " + index(shape_.loop_numel[l]) + ", RBLOCK):");
    line(in, "rindex = roffset + rbase");
    lanes(l, in);
    for (size_t i = begin; i < end; ++i) node(kernel_.nodes[i], in, l);
    for (size_t i = begin; i < end; ++i) {
      const Node& n = kernel_.nodes[i];
      if (loop_ir::op_info(n.op).cls == OpClass::Reduce) reduction_final(n, l);
    }
  }

  void reduction_update(const Node& n, const std::string& indent, size_t loop) {
    set_cls(n, Cls::X);
    if (is_welford(n.op)) {
      if (welford_leader(n) != n.id) return;
      // Welford's update per lane; lanes past the row's end keep count 0. Unmasked, every lane's
      // count is the iteration's number: one reciprocal per iteration, not a division per element
      // (an IEEE division is a dozen instructions, enough to make the pass compute-bound on an
      // H200). The update's division is internal to the algorithm, not a torch op: it needs no
      // IEEE rounding (Inductor's welford_reduce uses the 2-ulp `/` too).
      const std::string w = "w" + std::to_string(n.id), v = var(n.operands[0]);
      line(indent, w + "_d = " + v + " - " + w + "_mean");
      line(indent, w + "_n = " + masked(loop, w + "_n + 1", w + "_n"));
      const std::string step = shape_.rmask[loop] ? w + "_d / tl.maximum(" + w + "_n, 1)"
                                                  : w + "_d * (1.0 / (roffset // RBLOCK + 1))";
      line(indent, w + "_mean = " + masked(loop, w + "_mean + " + step, w + "_mean"));
      line(indent, w + "_m2 = " + masked(loop, w + "_m2 + " + w + "_d * (" + v + " - " + w + "_mean)", w + "_m2"));
      return;
    }
    const std::string acc = "acc" + std::to_string(n.id);
    const std::string combined = pattern(n, op_spelling(n.op).reduction.combine, acc_dtype(n), {acc, widened(n)});
    line(indent, acc + " = " + masked(loop, combined, acc));
  }

  void reduction_final(const Node& n, size_t loop) {
    const std::string def = var(n.id) + " = ";
    if (!is_welford(n.op)) return line("    ", def + finished(n, "acc" + std::to_string(n.id)));
    // Chan's parallel combination of the lanes: n = Σ n_i, mean = Σ n_i mean_i / n,
    // m2 = Σ (m2_i + n_i (mean_i - mean)²).
    const NodeId leader = welford_leader(n);
    const std::string w = "w" + std::to_string(leader);
    if (leader == n.id) {
      line("    ", w + "_mu = eh.div(tl.sum(" + w + "_mean * " + w + "_n, 1)[:, None], " + count(n, loop) + ")");
    }
    if (n.op == ScalarOp::WelfordMean) return line("    ", def + w + "_mu");
    line("    ", def + "tl.sum(" + w + "_m2 + " + w + "_n * (" + w + "_mean - " + w + "_mu) * (" + w + "_mean - " + w +
                       "_mu), 1)[:, None]");
  }

  const Program& program_;
  const Kernel& kernel_;
  const KernelShape& shape_;
  std::vector<std::string>* sites_;
  std::unordered_map<NodeId, size_t> position_;
  std::vector<Cls> cls_;
  std::string out_;
  std::map<std::string, NodeId> computed_;      // reuse_key -> the node that computed it first
  std::unordered_map<NodeId, NodeId> same_as_;  // a reused node -> that node
};

}  // namespace

std::string emit_body(const Program& program, const Kernel& kernel, const KernelShape& shape,
                      std::vector<std::string>* check_sites) {
  return BodyEmitter(program, kernel, shape, check_sites).emit();
}

}  // namespace ember::codegen::triton
