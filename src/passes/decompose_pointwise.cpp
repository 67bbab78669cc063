// decompose, pointwise family: explicit type promotion of core pointwise ops (convert inserted,
// scalars as literals of the computation dtype's Python kind; a number first in s - x, s / x, s ** x
// as torch computes them), add/sub alpha, div rounding modes, rsub, square, where, masked_fill, clamp and its aliases, addcmul/addcdiv, and the activations (gelu exact
// and tanh, silu, mish, hardswish, hardsigmoid, relu6, hardtanh) computed in float32 for
// float16/bfloat16 inputs.
#include <cmath>

#include "passes/decompose_rules.h"
#include "shapes/shape_rules.h"

namespace ember::passes::decomp {

namespace {

// torch's type promotion over tensor and scalar operands (shapes::result_type), for the dtypes
// the decompositions model (no complex, no float8) and torch's default dtype, float32. At least
// one operand is a tensor.
DType result_type(Rewriter& rw, const std::vector<Arg>& operands) {
  std::vector<shapes::Operand> ops;
  bool tensor = false;
  for (const Arg& a : operands) {
    if (a.kind == Arg::Kind::Value) {
      const ir::TensorType& t = rw.type(a.value);
      if (is_complex(t.dtype) || is_float8(t.dtype)) refuse();
      ops.push_back(shapes::Operand::of_tensor(&t));
      tensor = true;
    } else if (bool_literal(a) || int_literal(a) ||
               (a.kind == Arg::Kind::Literal && std::holds_alternative<double>(a.literal))) {
      ops.push_back(shapes::Operand::of_literal(a.literal));
    } else {
      refuse();
    }
  }
  auto dt = tensor ? shapes::result_type(ops, DType::Float32) : std::nullopt;
  if (!dt) refuse();
  return *dt;
}

bool is_comparison_or_logical(Op op) {
  return op == Op::Eq || op == Op::Ne || op == Op::Lt || op == Op::Le || op == Op::Gt || op == Op::Ge ||
         op == Op::LogicalAnd || op == Op::LogicalOr;
}

// An operand brought to dtype `dt`: tensors converted, literals re-spelled.
Arg operand(Rewriter& rw, const Arg& a, DType dt) {
  if (a.kind == Arg::Kind::Value) return V(convert(rw, a.value, dt));
  return scalar_for(a, dt);
}

bool same_operand(Rewriter& rw, const Arg& before, const Arg& after) {
  if (before.kind == Arg::Kind::Value) return after.kind == Arg::Kind::Value && after.value == before.value;
  return before.literal.index() == after.literal.index();
}

// Core binary ops: promotion made explicit; alpha and rounding_mode decomposed; a scalar first
// operand moved second where that is exact.
void binary_rule(Ctx& c, Op op) {
  const ir::Node& n = c.node;
  if (n.args.size() != 2) refuse();
  Arg a = c.rw.map(n.args[0]), b = c.rw.map(n.args[1]);
  std::optional<double> alpha;
  std::string rounding;
  for (const auto& [name, value] : n.kwargs) {
    if (name == "alpha" && (op == Op::Add || op == Op::Sub)) {
      alpha = number_literal(value);
      if (!alpha) refuse();
    } else if (name == "rounding_mode" && op == Op::Div) {
      if (is_none(value)) continue;
      const std::string* s = value.kind == Arg::Kind::Literal ? std::get_if<std::string>(&value.literal) : nullptr;
      if (!s) refuse();
      rounding = *s;
    } else {
      refuse();
    }
  }
  // torch raises for a subtraction involving a bool tensor (`mask - 1`, `x - True`) although its meta kernel
  // gives a type: the call stays with torch, so that its error surfaces.
  if (op == Op::Sub)
    for (const Arg* x : {&a, &b})
      if (x->kind == Arg::Kind::Value ? c.rw.type(x->value).dtype == DType::Bool
                                      : std::holds_alternative<bool>(x->literal))
        refuse();
  DType r = c.result_type().dtype;
  DType compute = is_comparison_or_logical(op) ? result_type(c.rw, {a, b}) : r;
  if (op == Op::Div && !rounding.empty()) compute = result_type(c.rw, {a, b});
  if (a.kind != Arg::Kind::Value) {
    // s op x: commutative ops swap; s - x is (-x) + s exactly; in a float dtype, s / x is torch's
    // `x.reciprocal() * s` (Tensor.__rtruediv__: the same bits, not a division's) and s ** x raises a 0-d
    // fill of s (`10000 ** (arange(0, d, 2) / d)`, MPT's `torch.pow(2, base)`: position codes made on
    // every call); others stay with torch.
    if (b.kind != Arg::Kind::Value || alpha) refuse();
    if ((op == Op::Div || op == Op::Pow) && is_floating_point(compute) && rounding.empty()) {
      auto s = number_literal(a);
      if (!s) refuse();
      ValueId x = convert(c.rw, b.value, compute);
      ValueId out = op == Op::Div ? binary_s(c.rw, Op::Mul, unary(c.rw, Op::Reciprocal, x), *s)
                                  : binary(c.rw, Op::Pow, full(c.rw, {}, *s, compute, c.rw.type(x).device), V(x));
      return c.finish(convert(c.rw, out, r));
    }
    bool commutes = op == Op::Add || op == Op::Mul || op == Op::Maximum || op == Op::Minimum || op == Op::Eq ||
                    op == Op::Ne || op == Op::BitwiseAnd || op == Op::BitwiseOr || op == Op::BitwiseXor ||
                    op == Op::LogicalAnd || op == Op::LogicalOr;
    bool mirrors = op == Op::Lt || op == Op::Le || op == Op::Gt || op == Op::Ge;
    if (op == Op::Sub) {
      ValueId neg = unary(c.rw, Op::Neg, convert(c.rw, b.value, compute));
      ValueId out = binary(c.rw, Op::Add, neg, a);
      return c.finish(convert(c.rw, out, r));
    }
    if (!commutes && !mirrors) refuse();
    std::swap(a, b);
    if (mirrors) op = op == Op::Lt ? Op::Gt : op == Op::Le ? Op::Ge : op == Op::Gt ? Op::Lt : Op::Le;
  }
  Arg a2 = operand(c.rw, a, compute), b2 = operand(c.rw, b, compute);
  if (alpha && *alpha != 1.0) {
    if (b2.kind == Arg::Kind::Value) {
      b2 = V(binary_s(c.rw, Op::Mul, b2.value, *alpha));
    } else {
      auto bv = number_literal(b2);
      b2 = scalar(*bv * *alpha, compute);
    }
  }
  if (op == Op::Div && !rounding.empty()) {
    if (rounding == "floor") return c.finish(binary(c.rw, Op::FloorDivide, a2.value, b2));
    if (rounding != "trunc" || !is_floating_point(compute)) refuse();
    return c.finish(unary(c.rw, Op::Trunc, binary(c.rw, Op::Div, a2.value, b2)));
  }
  bool unchanged = n.op != Op::TorchCall && !alpha && same_operand(c.rw, a, a2) && same_operand(c.rw, b, b2) && c.node.args[0].kind == Arg::Kind::Value;
  if (unchanged) refuse();
  ValueId out = binary(c.rw, op, a2.value, b2);
  if (c.rw.type(out).dtype != r) out = convert(c.rw, out, r);
  c.finish(out);
}

// Core unary ops on integer or bool inputs whose result is floating: torch converts first.
void unary_rule(Ctx& c, Op op) {
  const ir::Node& n = c.node;
  if (n.args.size() != 1 || !n.kwargs.empty() || n.args[0].kind != Arg::Kind::Value) refuse();
  ValueId x = c.tensor(n.args[0]);
  DType r = c.result_type().dtype;
  if (c.rw.type(x).dtype == r || !is_floating_point(r) || is_floating_point(c.rw.type(x).dtype)) refuse();
  c.finish(unary(c.rw, op, convert(c.rw, x, r)));
}

// Float32 math for float16/bfloat16 inputs of composite activations; Refuse for non-float.
ValueId upcast(Ctx& c, ValueId x) {
  DType dt = c.rw.type(x).dtype;
  if (!is_floating_point(dt) || ir::dtype_itemsize(dt) == 1) refuse();
  return convert(c.rw, x, opmath(dt));
}

void finish_as(Ctx& c, ValueId y) { c.finish(convert(c.rw, y, c.result_type().dtype)); }

void no_inplace(Ctx& c) {
  if (c.bool_arg("inplace")) refuse();
}

void gelu(Ctx& c) {
  const Arg& approx = c.arg("approximate");
  const std::string* mode = approx.kind == Arg::Kind::Literal ? std::get_if<std::string>(&approx.literal) : nullptr;
  if (!mode) refuse();
  ValueId x = upcast(c, c.tensor("input"));
  Rewriter& rw = c.rw;
  if (*mode == "none") {
    ValueId half_x = binary_s(rw, Op::Mul, x, 0.5);
    ValueId e = unary(rw, Op::Erf, binary_s(rw, Op::Mul, x, M_SQRT1_2));
    return finish_as(c, binary(rw, Op::Mul, half_x, V(binary_s(rw, Op::Add, e, 1.0))));
  }
  if (*mode != "tanh") refuse();
  const double beta = M_SQRT2 * M_2_SQRTPI * 0.5, kappa = 0.044715;
  ValueId cube = binary(rw, Op::Mul, binary(rw, Op::Mul, x, V(x)), V(x));
  ValueId inner = binary_s(rw, Op::Mul, binary(rw, Op::Add, x, V(binary_s(rw, Op::Mul, cube, kappa))), beta);
  ValueId t = binary_s(rw, Op::Add, unary(rw, Op::Tanh, inner), 1.0);
  finish_as(c, binary(rw, Op::Mul, binary_s(rw, Op::Mul, x, 0.5), V(t)));
}

void silu(Ctx& c) {
  no_inplace(c);
  ValueId x = upcast(c, c.tensor("input"));
  finish_as(c, binary(c.rw, Op::Mul, x, V(unary(c.rw, Op::Sigmoid, x))));
}

void mish(Ctx& c) {
  no_inplace(c);
  ValueId x = upcast(c, c.tensor("input"));
  ValueId sp = unary(c.rw, Op::Log1p, unary(c.rw, Op::Exp, x));
  finish_as(c, binary(c.rw, Op::Mul, x, V(unary(c.rw, Op::Tanh, sp))));
}

// x > 0 ? x : x * slope
void leaky_relu(Ctx& c) {
  no_inplace(c);
  double slope = c.number_arg("negative_slope");
  ValueId x = upcast(c, c.tensor("input"));
  DType dt = c.rw.type(x).dtype;
  ValueId pos = binary_s(c.rw, Op::Gt, x, 0.0);
  finish_as(c, pointwise(c.rw, Op::Where, {V(pos), V(x), V(binary_s(c.rw, Op::Mul, x, slope))}, dt));
}

// x > 0 ? x : alpha * expm1(x)
void elu(Ctx& c) {
  no_inplace(c);
  double alpha = c.number_arg("alpha");
  ValueId x = upcast(c, c.tensor("input"));
  DType dt = c.rw.type(x).dtype;
  ValueId pos = binary_s(c.rw, Op::Gt, x, 0.0);
  ValueId neg = binary_s(c.rw, Op::Mul, unary(c.rw, Op::Expm1, x), alpha);
  finish_as(c, pointwise(c.rw, Op::Where, {V(pos), V(x), V(neg)}, dt));
}

// x * beta > threshold ? x : log1p(exp(x * beta)) / beta
void softplus(Ctx& c) {
  double beta = c.number_arg("beta"), threshold = c.number_arg("threshold");
  ValueId x = upcast(c, c.tensor("input"));
  DType dt = c.rw.type(x).dtype;
  ValueId scaled = beta == 1.0 ? x : binary_s(c.rw, Op::Mul, x, beta);
  ValueId big = binary_s(c.rw, Op::Gt, scaled, threshold);
  ValueId soft = unary(c.rw, Op::Log1p, unary(c.rw, Op::Exp, scaled));
  if (beta != 1.0) soft = binary_s(c.rw, Op::Div, soft, beta);
  finish_as(c, pointwise(c.rw, Op::Where, {V(big), V(x), V(soft)}, dt));
}

// min(max(x + 3, 0), 6)
ValueId relu6_of_shift(Ctx& c, ValueId x) {
  ValueId shifted = binary_s(c.rw, Op::Add, x, 3.0);
  DType dt = c.rw.type(x).dtype;
  return pointwise(c.rw, Op::Clamp, {V(shifted), scalar(0.0, dt), scalar(6.0, dt)}, dt);
}

void hardsigmoid(Ctx& c) {
  no_inplace(c);
  ValueId x = upcast(c, c.tensor("input"));
  finish_as(c, binary_s(c.rw, Op::Div, relu6_of_shift(c, x), 6.0));
}

void hardswish(Ctx& c) {
  no_inplace(c);
  ValueId x = upcast(c, c.tensor("input"));
  finish_as(c, binary_s(c.rw, Op::Div, binary(c.rw, Op::Mul, x, V(relu6_of_shift(c, x))), 6.0));
}

// clamp(x, lo, hi) with literal bounds, in the result dtype.
void clamp_to(Ctx& c, ValueId x, const Arg& lo, const Arg& hi) {
  if (is_none(lo) && is_none(hi)) refuse();
  if (lo.kind == Arg::Kind::Value || hi.kind == Arg::Kind::Value) refuse();
  DType r = c.result_type().dtype;
  if (r == DType::Bool) refuse();
  auto bound = [&](const Arg& a) { return is_none(a) ? a : scalar_for(a, r); };
  c.finish(pointwise(c.rw, Op::Clamp, {V(convert(c.rw, x, r)), bound(lo), bound(hi)}, r));
}

void clamp(Ctx& c) {
  const ir::Node& n = c.node;
  if (n.kwargs.empty() && n.args.size() == 3 && n.args[0].kind == Arg::Kind::Value) {
    // Already the primitive when the dtype and the literals' kinds need no change.
    DType r = c.result_type().dtype;
    bool primitive = c.rw.type(c.tensor(n.args[0])).dtype == r;
    for (size_t i = 1; i < 3; ++i)
      if (!is_none(n.args[i]))
        primitive = primitive && n.args[i].kind == Arg::Kind::Literal &&
                    scalar_for(n.args[i], r).literal.index() == n.args[i].literal.index();
    if (primitive) refuse();
  }
  clamp_to(c, c.tensor("input"), c.arg("min"), c.arg("max"));
}

void where(Ctx& c) {
  ValueId cond = c.tensor("condition");
  if (c.rw.type(cond).dtype != DType::Bool) refuse();
  DType r = c.result_type().dtype;
  Arg a = c.rw.map(c.arg("input")), b = c.rw.map(c.arg("other"));
  Arg a2 = operand(c.rw, a, r), b2 = operand(c.rw, b, r);
  if (c.node.kwargs.empty() && same_operand(c.rw, a, a2) && same_operand(c.rw, b, b2) &&
      (a.kind == Arg::Kind::Value || a.literal.index() == a2.literal.index()) &&
      (b.kind == Arg::Kind::Value || b.literal.index() == b2.literal.index()))
    refuse();
  c.finish(pointwise(c.rw, Op::Where, {V(cond), a2, b2}, r));
}

void masked_fill(Ctx& c) {
  ValueId x = c.tensor("input");
  ValueId mask = c.tensor("mask");
  if (c.rw.type(mask).dtype != DType::Bool) refuse();
  const ir::TensorType& xt = c.rw.type(x);
  if (broadcast(xt.sizes, c.rw.type(mask).sizes) != xt.sizes) refuse();
  Arg value = c.rw.map(c.arg("value"));
  if (value.kind == Arg::Kind::Value && !c.rw.type(value.value).sizes.empty()) refuse();
  c.finish(pointwise(c.rw, Op::Where, {V(mask), operand(c.rw, value, xt.dtype), V(x)}, xt.dtype));
}

// addcmul: input + value * tensor1 * tensor2; addcdiv: input + value * tensor1 / tensor2 — aten's
// order of operations, in float32 for float16/bfloat16 (one rounding, as aten's CPU kernel).
void addc(Ctx& c, Op op) {
  Rewriter& rw = c.rw;
  const std::vector<Arg> operands = {c.arg("input"), c.arg("tensor1"), c.arg("tensor2")};
  for (const Arg& a : operands)
    if (a.kind != Arg::Kind::Value) refuse();
  DType r = c.result_type().dtype;
  if (!is_floating_point(r) || result_type(rw, {V(c.tensor("input")), V(c.tensor("tensor1")), V(c.tensor("tensor2"))}) != r)
    refuse();
  double value = c.number_arg("value");
  DType dt = opmath(r);
  ValueId t1 = convert(rw, c.tensor("tensor1"), dt);
  if (value != 1.0) t1 = binary_s(rw, Op::Mul, t1, value);
  ValueId term = binary(rw, op, t1, V(convert(rw, c.tensor("tensor2"), dt)));
  c.finish(convert(rw, binary(rw, Op::Add, convert(rw, c.tensor("input"), dt), V(term)), r));
}

}  // namespace

// torch._foreach_<op>_(xs, other) and torch._foreach_<op>(xs, other) for add, sub, mul and div over floating
// tensors: x_i <op> other_i as primitives (a kernel each), `other` a number, a list of numbers, one tensor (a
// 0-d clip coefficient) or a list of tensors, each of x_i's dtype and broadcasting to it (add and sub of
// tensors may scale them by `alpha`, as torch.add does); in place, then one
// `torch._foreach_copy_(xs, results)`, which the scheduler turns into each kernel's store into x_i when x_i is
// a graph input (docs/scheduler.md, "Stores into inputs"), as Ember's optimizer step is built
// (hand-written optimizers and gradient clipping). A form outside these stays one torch call.
void foreach_binary(Ctx& c, Op op, bool in_place) {
  const ir::Node& n = c.node;
  if (n.args.size() != 2 || n.args[0].kind != Arg::Kind::List) refuse();
  std::optional<double> alpha;
  for (const auto& [name, value] : n.kwargs) {
    if (name != "alpha" || (op != Op::Add && op != Op::Sub)) refuse();
    alpha = number_literal(value);
    if (!alpha || std::holds_alternative<bool>(value.literal)) refuse();
  }
  const std::vector<Arg>& xs = n.args[0].items;
  const Arg& other = n.args[1];
  if (xs.empty() || n.results.size() != xs.size()) refuse();
  if (other.kind == Arg::Kind::List && other.items.size() != xs.size()) refuse();
  std::vector<Arg> targets, values;
  std::vector<ir::TensorType> types;
  for (size_t i = 0; i < xs.size(); ++i) {
    const ValueId x = c.tensor(xs[i]);
    const ir::TensorType& t = c.rw.type(x);
    const Arg& operand = other.kind == Arg::Kind::List ? other.items[i] : other;
    if (!ir::is_floating(t.dtype) || operand.kind == Arg::Kind::List || operand.kind == Arg::Kind::Tuple) refuse();
    ValueId y;
    if (operand.kind == Arg::Kind::Literal) {
      const std::optional<double> s = number_literal(operand);
      if (!s || std::holds_alternative<bool>(operand.literal) || alpha) refuse();  // torch takes no alpha here
      y = binary_s(c.rw, op, x, *s);
    } else {
      ValueId o = c.tensor(operand);
      if (c.rw.type(o).dtype != t.dtype || c.rw.type(o).device != t.device) refuse();
      if (alpha && *alpha != 1.0) o = binary_s(c.rw, Op::Mul, o, *alpha);
      y = binary(c.rw, op, x, Arg::of_value(o));
    }
    if (c.rw.type(y).sizes != t.sizes || c.rw.type(y).dtype != t.dtype) refuse();
    if (!in_place) {
      c.finish(y, i);
      continue;
    }
    targets.push_back(Arg::of_value(x));
    values.push_back(Arg::of_value(y));
    types.push_back(t);
  }
  if (!in_place) return;
  const std::vector<ValueId> written =
      c.rw.emit_torch_tuple("torch._foreach_copy_", {Arg::list(std::move(targets)), Arg::list(std::move(values))}, {},
                            std::move(types));
  for (size_t i = 0; i < written.size(); ++i) c.finish(written[i], i);
}

// torch._foreach_norm(xs, ord) of float32/float64 tensors: each ||x||_ord over all its elements (2, 1 or inf),
// a 0-d tensor per x; other dtypes (torch computes half types in float32) and orders stay one torch call.
void foreach_norm(Ctx& c) {
  const ir::Node& n = c.node;
  if (n.args.empty() || n.args.size() > 2 || !n.kwargs.empty() || n.args[0].kind != Arg::Kind::List ||
      n.results.size() != n.args[0].items.size())
    refuse();
  const std::optional<double> p = n.args.size() == 2 ? number_literal(n.args[1]) : 2.0;
  if (!p) refuse();
  for (size_t i = 0; i < n.results.size(); ++i) {
    const ValueId x = c.tensor(n.args[0].items[i]);
    const ir::TensorType& t = c.rw.type(x);
    if ((t.dtype != DType::Float32 && t.dtype != DType::Float64) || c.result_type(i).dtype != t.dtype) refuse();
    c.finish(vector_norm(c.rw, x, all_dims(rank_of(c.rw, x)), *p, /*keepdim=*/false), i);
  }
}

void add_pointwise_rules(RuleMap& rules) {
  for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::FloorDivide, Op::Remainder, Op::Pow, Op::Maximum, Op::Minimum,
                Op::Eq, Op::Ne, Op::Lt, Op::Le, Op::Gt, Op::Ge, Op::BitwiseAnd, Op::BitwiseOr, Op::BitwiseXor,
                Op::LogicalAnd, Op::LogicalOr})
    rules[ir::op_info(op).torch_target] = [op](Ctx& c) { binary_rule(c, op); };
  for (Op op : {Op::Exp, Op::Log, Op::Sqrt, Op::Rsqrt, Op::Sin, Op::Cos, Op::Tanh, Op::Sigmoid, Op::Erf,
                Op::Reciprocal, Op::Log1p, Op::Expm1})
    rules[ir::op_info(op).torch_target] = [op](Ctx& c) { unary_rule(c, op); };
  const std::pair<const char*, Op> kForeach[] = {
      {"add", Op::Add}, {"sub", Op::Sub}, {"mul", Op::Mul}, {"div", Op::Div}};
  for (const auto& [name, op] : kForeach) {
    Op o = op;
    rules[std::string("torch._foreach_") + name] = [o](Ctx& c) { foreach_binary(c, o, false); };
    rules[std::string("torch._foreach_") + name + "_"] = [o](Ctx& c) { foreach_binary(c, o, true); };
  }
  rules["torch._foreach_norm"] = foreach_norm;
  // Python operators on tensors, captured under their operator.* names.
  const std::pair<const char*, Op> kOperators[] = {
      {"operator.add", Op::Add},        {"operator.sub", Op::Sub},       {"operator.mul", Op::Mul},
      {"operator.truediv", Op::Div},    {"operator.floordiv", Op::FloorDivide}, {"operator.mod", Op::Remainder},
      {"operator.pow", Op::Pow},        {"operator.and_", Op::BitwiseAnd}, {"operator.or_", Op::BitwiseOr},
      {"operator.xor", Op::BitwiseXor}, {"operator.eq", Op::Eq},          {"operator.ne", Op::Ne},
      {"operator.lt", Op::Lt},          {"operator.le", Op::Le},          {"operator.gt", Op::Gt},
      {"operator.ge", Op::Ge}};
  for (const auto& [name, op] : kOperators) {
    Op o = op;
    rules[name] = [o](Ctx& c) { binary_rule(c, o); };
  }
  // torch.max(a, b) / torch.min(a, b) of two tensors are maximum / minimum (NaN-propagating, as those); their
  // reduction forms (one tensor, a dim) stay with torch.
  const std::pair<const char*, Op> kExtremes[] = {{"torch.max", Op::Maximum}, {"torch.Tensor.max", Op::Maximum},
                                                  {"torch.min", Op::Minimum}, {"torch.Tensor.min", Op::Minimum}};
  for (const auto& [name, op] : kExtremes) {
    Op o = op;
    rules[name] = [o](Ctx& c) {
      const ir::Node& n = c.node;
      if (n.args.size() != 2 || !n.kwargs.empty() || n.args[0].kind != Arg::Kind::Value ||
          n.args[1].kind != Arg::Kind::Value)
        refuse();
      binary_rule(c, o);
    };
  }
  rules["operator.neg"] = [](Ctx& c) {
    const ir::Node& n = c.node;
    if (n.args.size() != 1 || !n.kwargs.empty()) refuse();
    ValueId x = c.tensor(n.args[0]);
    if (c.rw.type(x).dtype != c.result_type().dtype || c.rw.type(x).dtype == DType::Bool) refuse();
    c.finish(unary(c.rw, Op::Neg, x));
  };
  rules["torch.nn.functional.sigmoid"] = [](Ctx& c) { c.finish(unary(c.rw, Op::Sigmoid, upcast(c, c.tensor("input")))); };
  rules["torch.nn.functional.tanh"] = [](Ctx& c) { c.finish(unary(c.rw, Op::Tanh, upcast(c, c.tensor("input")))); };
  rules["torch.nn.functional.relu"] = [](Ctx& c) {
    no_inplace(c);
    c.finish(unary(c.rw, Op::Relu, c.tensor("input")));
  };
  rules["torch.rsub"] = rules["torch.Tensor.__rsub__"] = [](Ctx& c) {
    if (c.number_arg("alpha") != 1.0) refuse();
    ValueId x = c.tensor("input");
    DType r = c.result_type().dtype;
    Arg other = c.rw.map(c.arg("other"));
    ValueId xr = convert(c.rw, x, r);
    if (other.kind == Arg::Kind::Value) return c.finish(binary(c.rw, Op::Sub, convert(c.rw, other.value, r), V(xr)));
    c.finish(binary(c.rw, Op::Add, unary(c.rw, Op::Neg, xr), other));
  };
  rules["torch.square"] = rules["torch.Tensor.square"] = [](Ctx& c) {
    ValueId x = c.tensor("input");
    if (c.rw.type(x).dtype != c.result_type().dtype || c.rw.type(x).dtype == DType::Bool) refuse();
    c.finish(binary(c.rw, Op::Mul, x, V(x)));
  };
  rules["torch.nn.functional.gelu"] = gelu;
  rules["torch.nn.functional.silu"] = silu;
  rules["torch.nn.functional.mish"] = mish;
  rules["torch.nn.functional.hardsigmoid"] = hardsigmoid;
  rules["torch.nn.functional.hardswish"] = hardswish;
  rules["torch.nn.functional.leaky_relu"] = leaky_relu;
  rules["torch.nn.functional.elu"] = elu;
  rules["torch.nn.functional.softplus"] = softplus;
  rules["torch.clamp"] = clamp;
  rules["torch.clamp_min"] = rules["torch.Tensor.clamp_min"] = [](Ctx& c) {
    clamp_to(c, c.tensor("input"), c.arg("min"), Arg::of_literal(ir::NoneLiteral{}));
  };
  rules["torch.clamp_max"] = rules["torch.Tensor.clamp_max"] = [](Ctx& c) {
    clamp_to(c, c.tensor("input"), Arg::of_literal(ir::NoneLiteral{}), c.arg("max"));
  };
  rules["torch.nn.functional.relu6"] = [](Ctx& c) {
    no_inplace(c);
    clamp_to(c, c.tensor("input"), Arg::of_literal(int64_t{0}), Arg::of_literal(int64_t{6}));
  };
  rules["torch.nn.functional.hardtanh"] = [](Ctx& c) {
    no_inplace(c);
    clamp_to(c, c.tensor("input"), c.arg("min_val"), c.arg("max_val"));
  };
  rules["torch.where"] = where;
  rules["torch.addcmul"] = rules["torch.Tensor.addcmul"] = [](Ctx& c) { addc(c, Op::Mul); };
  rules["torch.addcdiv"] = rules["torch.Tensor.addcdiv"] = [](Ctx& c) { addc(c, Op::Div); };
  rules["torch.masked_fill"] = masked_fill;
}

}  // namespace ember::passes::decomp
