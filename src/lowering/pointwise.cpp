// Pointwise primitives (unary, binary, where, clamp, convert, masked_fill): one kernel per value,
// ranges = the result's sizes, operands loaded with torch's broadcasting.
//
// Every operand is cast to the computation dtype (the result's, f16/bf16 computing in f32;
// compares: the operands' promoted dtype) whatever the graph says, so a graph that skipped a
// `convert` still computes what torch computes. Forms whose integer semantics torch guards with
// an error (integer division by a tensor, integer pow by a tensor, subtraction of a bool tensor)
// are refused and run through torch, so its error surfaces.
#include "lowering/lower_internal.h"

namespace ember::lowering::detail {

namespace {

using loop_ir::NodeId;

constexpr std::pair<ir::Op, ScalarOp> kUnaryOps[] = {
    {ir::Op::Neg, ScalarOp::Neg},
    {ir::Op::Abs, ScalarOp::Abs},
    {ir::Op::Exp, ScalarOp::Exp},
    {ir::Op::Log, ScalarOp::Log},
    {ir::Op::Log1p, ScalarOp::Log1p},
    {ir::Op::Expm1, ScalarOp::Expm1},
    {ir::Op::Sqrt, ScalarOp::Sqrt},
    {ir::Op::Rsqrt, ScalarOp::Rsqrt},
    {ir::Op::Sin, ScalarOp::Sin},
    {ir::Op::Cos, ScalarOp::Cos},
    {ir::Op::Tanh, ScalarOp::Tanh},
    {ir::Op::Sigmoid, ScalarOp::Sigmoid},
    {ir::Op::Erf, ScalarOp::Erf},
    {ir::Op::Reciprocal, ScalarOp::Reciprocal},
    {ir::Op::Relu, ScalarOp::Relu},
    {ir::Op::Floor, ScalarOp::Floor},
    {ir::Op::Ceil, ScalarOp::Ceil},
    {ir::Op::Trunc, ScalarOp::Trunc},
    {ir::Op::Round, ScalarOp::Round},
    {ir::Op::Sign, ScalarOp::Sign},
    {ir::Op::LogicalNot, ScalarOp::LogicalNot},
    {ir::Op::BitwiseNot, ScalarOp::BitwiseNot},
};

std::optional<ScalarOp> unary_op(ir::Op op) {
  for (const auto& [graph_op, scalar_op] : kUnaryOps)
    if (graph_op == op) return scalar_op;
  return std::nullopt;
}

constexpr std::pair<ir::Op, ScalarOp> kBinaryOps[] = {
    {ir::Op::Add, ScalarOp::Add},
    {ir::Op::Sub, ScalarOp::Sub},
    {ir::Op::Mul, ScalarOp::Mul},
    {ir::Op::Div, ScalarOp::Div},
    {ir::Op::FloorDivide, ScalarOp::FloorDiv},
    {ir::Op::Remainder, ScalarOp::Mod},
    {ir::Op::Pow, ScalarOp::Pow},
    {ir::Op::Maximum, ScalarOp::Maximum},
    {ir::Op::Minimum, ScalarOp::Minimum},
    {ir::Op::Eq, ScalarOp::Eq},
    {ir::Op::Ne, ScalarOp::Ne},
    {ir::Op::Lt, ScalarOp::Lt},
    {ir::Op::Le, ScalarOp::Le},
    {ir::Op::Gt, ScalarOp::Gt},
    {ir::Op::Ge, ScalarOp::Ge},
    {ir::Op::LogicalAnd, ScalarOp::LogicalAnd},
    {ir::Op::LogicalOr, ScalarOp::LogicalOr},
    {ir::Op::BitwiseAnd, ScalarOp::BitwiseAnd},
    {ir::Op::BitwiseOr, ScalarOp::BitwiseOr},
    {ir::Op::BitwiseXor, ScalarOp::BitwiseXor},
};

std::optional<ScalarOp> binary_op(ir::Op op) {
  for (const auto& [graph_op, scalar_op] : kBinaryOps)
    if (graph_op == op) return scalar_op;
  return std::nullopt;
}

// Ops defined on floats only: an integer operand computes in the (float) result dtype.
bool is_transcendental(ScalarOp op) {
  constexpr ScalarOp kFloatOnly[] = {ScalarOp::Exp,  ScalarOp::Log,  ScalarOp::Log1p,   ScalarOp::Expm1,
                                     ScalarOp::Sqrt, ScalarOp::Rsqrt, ScalarOp::Sin,    ScalarOp::Cos,
                                     ScalarOp::Tanh, ScalarOp::Sigmoid, ScalarOp::Erf, ScalarOp::Reciprocal};
  for (ScalarOp f : kFloatOnly)
    if (f == op) return true;
  return false;
}

// An operand: a tensor value or a literal scalar.
struct Operand {
  std::optional<ir::ValueId> value;
  ir::Literal literal;
};

std::optional<Operand> operand_of(const ir::Arg& a) {
  if (a.kind == ir::Arg::Kind::Value) return Operand{a.value, {}};
  if (a.kind != ir::Arg::Kind::Literal) return std::nullopt;
  if (!std::holds_alternative<bool>(a.literal) && !std::holds_alternative<int64_t>(a.literal) &&
      !std::holds_alternative<double>(a.literal) && !std::holds_alternative<Expr>(a.literal))
    return std::nullopt;
  return Operand{std::nullopt, a.literal};
}

// The dtype a literal takes next to a tensor of dtype `dt` (torch: a scalar of a higher kind
// promotes to the default dtype of its kind; otherwise the tensor's dtype wins).
DType literal_dtype(const ir::Literal& lit, DType tensor_dt) {
  bool tensor_float = ir::is_floating(tensor_dt), tensor_bool = tensor_dt == DType::Bool;
  if (std::holds_alternative<double>(lit) && !tensor_float) return DType::Float32;
  if ((std::holds_alternative<int64_t>(lit) || std::holds_alternative<Expr>(lit)) && tensor_bool) return DType::Int64;
  return tensor_dt;
}

class PointwiseKernel {
 public:
  PointwiseKernel(Lowerer& L, ir::ValueId result)
      : L_(L), result_(result), sizes_(L.type(result).sizes), kb_(L.program(), sizes_), idx_(kb_.outer_vars()) {}

  // Loads a tensor operand, or makes a literal a constant of dtype `dt`.
  std::optional<NodeId> get(const Operand& op, DType dt) {
    if (op.value) return L_.load_broadcast(kb_, *op.value, idx_, sizes_);
    // A symbolic int (decompose's `x / s0` of a mean): its value converted, as torch converts a count.
    if (const Expr* e = std::get_if<Expr>(&op.literal)) return kb_.cast(kb_.index_value(*e), dt);
    std::optional<loop_ir::Scalar> s = scalar_of(op.literal, dt);
    if (!s) return std::nullopt;
    return kb_.constant(*s, dt);
  }

  void finish(NodeId value) {
    BufferId out = L_.new_result_buffer(result_);
    kb_.store(out, idx_, value);
    kb_.finish();
    L_.bind_realized(result_, out);
  }

  KernelBuilder& kb() { return kb_; }

 private:
  Lowerer& L_;
  ir::ValueId result_;
  std::vector<Expr> sizes_;
  KernelBuilder kb_;
  Index idx_;
};

DType operand_dtype(Lowerer& L, const Operand& op, DType other) {
  return op.value ? L.type(*op.value).dtype : literal_dtype(op.literal, other);
}

// torch's pow by a float or double scalar exponent takes these forms (products, a quotient, sqrt, rsqrt,
// reciprocal) before any pow call: the same forms give the same bits, and a multiply is far cheaper than
// a scalar libm pow per element. Exponents 0 and 1 are a fill and a copy in torch. Other exponents keep
// pow. float16/bfloat16 data compute the same forms in float32 and round once (eager's rounding between
// the products differs per device: within one ulp of the result dtype either way); GPT-2's GELU,
// `torch.pow(x, 3.0)` in bfloat16, was a libdevice pow per element, 3x Inductor's kernel on the H200.
std::optional<NodeId> pow_by_constant(KernelBuilder& kb, NodeId x, double e, DType cdt) {
  auto mul = [&](NodeId p, NodeId q) { return kb.binary(ScalarOp::Mul, p, q, cdt); };
  if (e == 0.0) return kb.constant(loop_ir::Scalar{1.0}, cdt);
  if (e == 1.0) return x;
  if (e == 2.0) return mul(x, x);
  if (e == 3.0) return mul(mul(x, x), x);
  if (e == -2.0) return kb.binary(ScalarOp::Div, kb.constant(loop_ir::Scalar{1.0}, cdt), mul(x, x), cdt);
  if (e == 0.5) return kb.unary(ScalarOp::Sqrt, x);
  if (e == -0.5) return kb.unary(ScalarOp::Rsqrt, x);
  if (e == -1.0) return kb.unary(ScalarOp::Reciprocal, x);
  return std::nullopt;
}

std::string lower_unary(Lowerer& L, const ir::Node& node, ScalarOp op) {
  if (node.args.size() != 1 || !node.kwargs.empty() || node.args[0].kind != ir::Arg::Kind::Value)
    return "expects one tensor operand";
  ir::ValueId x = node.args[0].value, r = node.results[0];
  DType rdt = L.type(r).dtype, xdt = L.type(x).dtype;
  DType cdt = compute_dtype(rdt);
  if (is_transcendental(op) && !ir::is_floating(rdt)) return "a float op with a non-float result";
  if (op == ScalarOp::BitwiseNot && ir::is_floating(xdt)) return "bitwise_not of a float";
  if ((op == ScalarOp::Neg || op == ScalarOp::Sign) && rdt == DType::Bool) return "neg/sign of bool";
  PointwiseKernel k(L, r);
  NodeId v = L.load_broadcast(k.kb(), x, k.kb().outer_vars(), L.type(r).sizes);
  bool rounding = op == ScalarOp::Floor || op == ScalarOp::Ceil || op == ScalarOp::Trunc || op == ScalarOp::Round;
  if (op == ScalarOp::LogicalNot) {
    v = k.kb().unary(op, v);
  } else if (op == ScalarOp::BitwiseNot && xdt == DType::Bool) {
    v = k.kb().unary(ScalarOp::LogicalNot, v);
  } else if (rounding && !ir::is_floating(rdt)) {
    v = k.kb().cast(v, cdt);  // rounding an integer is the integer itself
  } else {
    v = k.kb().unary(op, k.kb().cast(v, cdt));
  }
  k.finish(v);
  return "";
}

std::string lower_binary(Lowerer& L, const ir::Node& node, ScalarOp op) {
  if (node.args.size() != 2 || !node.kwargs.empty()) return "expects two operands";
  std::optional<Operand> a = operand_of(node.args[0]), b = operand_of(node.args[1]);
  if (!a || !b || !a->value) return "expects a tensor and a tensor or scalar";
  ir::ValueId r = node.results[0];
  DType rdt = L.type(r).dtype;
  DType adt = L.type(*a->value).dtype, bdt = operand_dtype(L, *b, adt);
  bool compare = loop_ir::op_info(op).cls == loop_ir::OpClass::Compare;
  DType cdt = compute_dtype(rdt);
  if (op == ScalarOp::LogicalAnd || op == ScalarOp::LogicalOr) {
    cdt = DType::Bool;
  } else if (compare) {
    cdt = compute_dtype(*ir::promote_types(adt, bdt));  // lowerable dtypes always promote
  } else {
    if (cdt == DType::Bool && op != ScalarOp::BitwiseAnd && op != ScalarOp::BitwiseOr && op != ScalarOp::BitwiseXor)
      return "arithmetic on bool";
    // torch raises for any subtraction involving a bool tensor (`mask - 1`), while its meta kernel
    // gives a type: torch must run it so that its error surfaces.
    if (op == ScalarOp::Sub && (adt == DType::Bool || (b->value && L.type(*b->value).dtype == DType::Bool)))
      return "subtraction with a bool tensor (torch raises)";
    if ((op == ScalarOp::BitwiseAnd || op == ScalarOp::BitwiseOr || op == ScalarOp::BitwiseXor) && ir::is_floating(cdt))
      return "bitwise op on floats";
    if (op == ScalarOp::Div && !ir::is_floating(cdt)) return "true division with an integer result";
    if (!ir::is_floating(cdt) && (op == ScalarOp::FloorDiv || op == ScalarOp::Mod)) {
      // torch raises on an integer division by zero; a tensor divisor could hold one.
      std::optional<loop_ir::Scalar> d = b->value ? std::nullopt : scalar_of(b->literal, cdt);
      if (!d || std::get<int64_t>(*d) == 0) return "integer division by a tensor or by zero";
    }
    if (!ir::is_floating(cdt) && op == ScalarOp::Pow) {
      std::optional<loop_ir::Scalar> e = b->value ? std::nullopt : scalar_of(b->literal, cdt);
      if (!e || std::get<int64_t>(*e) < 0) return "integer pow by a tensor or a negative exponent";
    }
  }
  PointwiseKernel k(L, r);
  std::optional<NodeId> av = k.get(*a, cdt), bv = k.get(*b, cdt);
  if (!bv) throw std::logic_error("lowering: scalar operand checked above does not convert");
  if (op == ScalarOp::Pow && !b->value && ir::is_floating(rdt) && (cdt == DType::Float32 || cdt == DType::Float64)) {
    std::optional<loop_ir::Scalar> e = scalar_of(b->literal, cdt);
    std::optional<NodeId> v;
    if (e && std::holds_alternative<double>(*e)) v = pow_by_constant(k.kb(), *av, std::get<double>(*e), cdt);
    if (v) {
      k.finish(*v);
      return "";
    }
  }
  k.finish(k.kb().binary(op, *av, *bv, cdt));
  return "";
}

std::string lower_where(Lowerer& L, const ir::Node& node) {
  if (node.args.size() != 3 || !node.kwargs.empty()) return "expects where(cond, a, b)";
  std::optional<Operand> c = operand_of(node.args[0]), a = operand_of(node.args[1]), b = operand_of(node.args[2]);
  if (!c || !a || !b || !c->value) return "expects a tensor condition";
  ir::ValueId r = node.results[0];
  DType cdt = compute_dtype(L.type(r).dtype);
  if ((!a->value && !scalar_of(a->literal, cdt)) || (!b->value && !scalar_of(b->literal, cdt)))
    return "a scalar that the result dtype cannot hold exactly";
  PointwiseKernel k(L, r);
  NodeId cv = *k.get(*c, DType::Bool);
  NodeId av = *k.get(*a, cdt), bv = *k.get(*b, cdt);
  k.finish(k.kb().where(cv, av, bv, cdt));
  return "";
}

std::string lower_clamp(Lowerer& L, const ir::Node& node) {
  if (node.args.empty() || node.args.size() > 3 || !node.kwargs.empty() || node.args[0].kind != ir::Arg::Kind::Value)
    return "expects clamp(x, lo, hi)";
  ir::ValueId r = node.results[0];
  DType cdt = compute_dtype(L.type(r).dtype);
  if (cdt == DType::Bool) return "clamp of bool";
  std::optional<loop_ir::Scalar> bounds[2];
  for (size_t k = 1; k < node.args.size(); ++k) {
    const ir::Arg& a = node.args[k];
    if (a.kind == ir::Arg::Kind::Literal && std::holds_alternative<ir::NoneLiteral>(a.literal)) continue;
    if (a.kind != ir::Arg::Kind::Literal) return "tensor bounds";
    bounds[k - 1] = scalar_of(a.literal, cdt);
    if (!bounds[k - 1]) return "a bound the result dtype cannot hold exactly";
  }
  if (!bounds[0] && !bounds[1]) return "no bound";
  PointwiseKernel k(L, r);
  NodeId v = k.kb().cast(*k.get(Operand{node.args[0].value, {}}, cdt), cdt);
  // torch: min(max(x, lo), hi), NaN propagating (so lo > hi gives hi).
  if (bounds[0]) v = k.kb().binary(ScalarOp::Maximum, v, k.kb().constant(*bounds[0], cdt), cdt);
  if (bounds[1]) v = k.kb().binary(ScalarOp::Minimum, v, k.kb().constant(*bounds[1], cdt), cdt);
  k.finish(v);
  return "";
}

std::string lower_convert(Lowerer& L, const ir::Node& node) {
  if (node.args.empty() || node.args[0].kind != ir::Arg::Kind::Value) return "expects convert(x, dtype)";
  ir::ValueId r = node.results[0];
  PointwiseKernel k(L, r);
  NodeId v = *k.get(Operand{node.args[0].value, {}}, DType::Float32);
  k.finish(k.kb().cast(v, L.type(r).dtype));
  return "";
}

// masked_fill(x, mask, value) = where(mask, value, x), for graphs that were not decomposed.
std::string lower_masked_fill(Lowerer& L, const ir::Node& node) {
  if (node.args.size() != 3 || !node.kwargs.empty()) return "expects masked_fill(x, mask, value)";
  std::optional<Operand> x = operand_of(node.args[0]), m = operand_of(node.args[1]), f = operand_of(node.args[2]);
  if (!x || !m || !f || !x->value || !m->value || f->value) return "expects a literal fill value";
  ir::ValueId r = node.results[0];
  DType cdt = compute_dtype(L.type(r).dtype);
  if (!scalar_of(f->literal, cdt)) return "a fill value the dtype cannot hold exactly";
  PointwiseKernel k(L, r);
  NodeId mv = *k.get(*m, DType::Bool), xv = *k.get(*x, cdt), fv = *k.get(*f, cdt);
  k.finish(k.kb().where(mv, fv, xv, cdt));
  return "";
}

}  // namespace

std::string lower_pointwise(Lowerer& L, const ir::Node& node) {
  if (node.results.size() != 1) return "expects one result";
  if (std::optional<ScalarOp> op = unary_op(node.op)) return lower_unary(L, node, *op);
  if (std::optional<ScalarOp> op = binary_op(node.op)) return lower_binary(L, node, *op);
  if (node.op == ir::Op::Where) return lower_where(L, node);
  if (node.op == ir::Op::Clamp) return lower_clamp(L, node);
  if (node.op == ir::Op::Convert) return lower_convert(L, node);
  if (node.op == ir::Op::MaskedFill) return lower_masked_fill(L, node);
  return "not a pointwise primitive";  // gelu, silu: composites the decompose pass expands
}

}  // namespace ember::lowering::detail
