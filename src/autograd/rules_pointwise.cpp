// Derivative rules of the pointwise ops (rules.h). Each is torch's formula (derivatives.yaml and
// the *_backward kernels), written so that a rule computes in the result's dtype, or in float32 for
// float16/bfloat16 results where torch's backward kernels do (the transcendental ones), and give()
// rounds once to the argument's dtype.
#include <cmath>

#include "autograd/rules.h"

namespace ember::autograd::rules {

namespace {

// An operand of a binary op as an argument in dtype `dt`: a converted tensor or a literal.
Arg operand(VjpCtx& c, const Arg& a, DType dt) {
  if (a.kind == Arg::Kind::Value) return V(convert(c.rw, c.in(a), dt));
  return scalar_for(a, dt);
}

ValueId opmath_of(VjpCtx& c, ValueId v) { return convert(c.rw, v, opmath(c.rw.type(v).dtype)); }

// The incoming gradient and the input x of a unary op, both in the op's computation dtype.
struct Unary {
  ValueId g, x;
};
Unary unary_operands(VjpCtx& c) {
  ValueId g = opmath_of(c, *c.grad());
  return {g, convert(c.rw, c.in(c.pos(0)), c.rw.type(g).dtype)};
}

ValueId result_in(VjpCtx& c, ValueId g) { return convert(c.rw, c.out(), c.rw.type(g).dtype); }

ValueId lit(Rewriter& rw, Op op, ValueId a, double b) { return binary_s(rw, op, a, b); }

}  // namespace

void neg_vjp(VjpCtx& c) { c.give(c.pos(0), unary(c.rw, Op::Neg, *c.grad())); }

void abs_vjp(VjpCtx& c) {
  auto [g, x] = unary_operands(c);
  c.give(c.pos(0), mul(c.rw, g, unary(c.rw, Op::Sign, x)));
}

void exp_vjp(VjpCtx& c) {
  auto [g, x] = unary_operands(c);
  c.give(c.pos(0), mul(c.rw, g, result_in(c, g)));
}

void log_vjp(VjpCtx& c) {
  auto [g, x] = unary_operands(c);
  c.give(c.pos(0), binary(c.rw, Op::Div, g, V(x)));
}

void sqrt_vjp(VjpCtx& c) {
  auto [g, x] = unary_operands(c);
  c.give(c.pos(0), binary(c.rw, Op::Div, g, V(lit(c.rw, Op::Mul, result_in(c, g), 2.0))));
}

void rsqrt_vjp(VjpCtx& c) {  // -0.5 * g * y^3
  auto [g, x] = unary_operands(c);
  ValueId y = result_in(c, g);
  ValueId y3 = mul(c.rw, mul(c.rw, y, y), y);
  c.give(c.pos(0), mul(c.rw, lit(c.rw, Op::Mul, g, -0.5), y3));
}

void sin_vjp(VjpCtx& c) {
  auto [g, x] = unary_operands(c);
  c.give(c.pos(0), mul(c.rw, g, unary(c.rw, Op::Cos, x)));
}

void cos_vjp(VjpCtx& c) {
  auto [g, x] = unary_operands(c);
  c.give(c.pos(0), mul(c.rw, g, unary(c.rw, Op::Neg, unary(c.rw, Op::Sin, x))));
}

void tanh_vjp(VjpCtx& c) {  // g * (1 - y^2)
  auto [g, x] = unary_operands(c);
  ValueId y = result_in(c, g);
  ValueId one_minus = lit(c.rw, Op::Add, unary(c.rw, Op::Neg, mul(c.rw, y, y)), 1.0);
  c.give(c.pos(0), mul(c.rw, g, one_minus));
}

void sigmoid_vjp(VjpCtx& c) {  // g * (1 - y) * y
  auto [g, x] = unary_operands(c);
  ValueId y = result_in(c, g);
  ValueId one_minus = lit(c.rw, Op::Add, unary(c.rw, Op::Neg, y), 1.0);
  c.give(c.pos(0), mul(c.rw, mul(c.rw, g, one_minus), y));
}

void erf_vjp(VjpCtx& c) {  // g * 2/sqrt(pi) * exp(-x^2)
  auto [g, x] = unary_operands(c);
  ValueId e = unary(c.rw, Op::Exp, unary(c.rw, Op::Neg, mul(c.rw, x, x)));
  c.give(c.pos(0), mul(c.rw, g, lit(c.rw, Op::Mul, e, 2.0 / std::sqrt(M_PI))));
}

void reciprocal_vjp(VjpCtx& c) {  // -g * y^2
  auto [g, x] = unary_operands(c);
  ValueId y = result_in(c, g);
  c.give(c.pos(0), mul(c.rw, unary(c.rw, Op::Neg, g), mul(c.rw, y, y)));
}

void relu_vjp(VjpCtx& c) {  // torch's threshold_backward: the gradient where the result is positive
  ValueId g = *c.grad();
  DType dt = c.rw.type(g).dtype;
  ValueId positive = binary_s(c.rw, Op::Gt, c.out(), 0.0);
  c.give(c.pos(0), pointwise(c.rw, Op::Where, {V(positive), V(g), scalar(0.0, dt)}, dt));
}

void gelu_vjp(VjpCtx& c) {
  auto [g, x] = unary_operands(c);
  Rewriter& rw = c.rw;
  std::string approximate = "none";
  if (c.bound) {
    const Arg& a = c.arg("approximate");
    const std::string* s = a.kind == Arg::Kind::Literal ? std::get_if<std::string>(&a.literal) : nullptr;
    if (!s) passes::refuse();
    approximate = *s;
  }
  ValueId d;
  if (approximate == "none") {  // cdf(x) + x * pdf(x)
    ValueId cdf = lit(rw, Op::Mul, lit(rw, Op::Add, unary(rw, Op::Erf, lit(rw, Op::Mul, x, M_SQRT1_2)), 1.0), 0.5);
    ValueId pdf = lit(rw, Op::Mul, unary(rw, Op::Exp, lit(rw, Op::Mul, mul(rw, x, x), -0.5)), 0.5 * M_2_SQRTPI * M_SQRT1_2);
    d = binary(rw, Op::Add, cdf, V(mul(rw, x, pdf)));
  } else if (approximate == "tanh") {  // torch's gelu_backward, tanh form
    const double beta = M_SQRT2 * M_2_SQRTPI * 0.5, kappa = 0.044715;
    ValueId x2 = mul(rw, x, x);
    ValueId inner = lit(rw, Op::Mul, binary(rw, Op::Add, x, V(lit(rw, Op::Mul, mul(rw, x2, x), kappa))), beta);
    ValueId t = unary(rw, Op::Tanh, inner);
    ValueId left = lit(rw, Op::Mul, x, 0.5);
    ValueId left_d = lit(rw, Op::Mul, lit(rw, Op::Add, t, 1.0), 0.5);
    ValueId sech2 = lit(rw, Op::Add, unary(rw, Op::Neg, mul(rw, t, t)), 1.0);
    ValueId inner_d = lit(rw, Op::Mul, lit(rw, Op::Add, lit(rw, Op::Mul, x2, 3.0 * kappa), 1.0), beta);
    d = binary(rw, Op::Add, left_d, V(mul(rw, mul(rw, left, sech2), inner_d)));
  } else {
    passes::refuse();
  }
  c.give(c.pos(0), mul(rw, g, d));
}

void silu_vjp(VjpCtx& c) {  // g * s * (1 + x * (1 - s))
  auto [g, x] = unary_operands(c);
  Rewriter& rw = c.rw;
  ValueId s = unary(rw, Op::Sigmoid, x);
  ValueId inner = lit(rw, Op::Add, mul(rw, x, lit(rw, Op::Add, unary(rw, Op::Neg, s), 1.0)), 1.0);
  c.give(c.pos(0), mul(rw, mul(rw, g, s), inner));
}

void log1p_vjp(VjpCtx& c) {
  auto [g, x] = unary_operands(c);
  c.give(c.pos(0), binary(c.rw, Op::Div, g, V(lit(c.rw, Op::Add, x, 1.0))));
}

void expm1_vjp(VjpCtx& c) {
  auto [g, x] = unary_operands(c);
  c.give(c.pos(0), mul(c.rw, g, lit(c.rw, Op::Add, result_in(c, g), 1.0)));
}

void convert_vjp(VjpCtx& c) { c.give(c.pos(0), *c.grad()); }

void add_vjp(VjpCtx& c) {
  ValueId g = *c.grad();
  double alpha = c.bound ? c.number_arg("alpha") : 1.0;
  c.give(c.pos(0), g);
  c.give(c.pos(1), alpha == 1.0 ? g : lit(c.rw, Op::Mul, g, alpha));
}

void sub_vjp(VjpCtx& c) {
  ValueId g = *c.grad();
  double alpha = c.bound ? c.number_arg("alpha") : 1.0;
  c.give(c.pos(0), g);
  c.give(c.pos(1), lit(c.rw, Op::Mul, g, -alpha));
}

void mul_vjp(VjpCtx& c) {
  ValueId g = *c.grad();
  DType dt = c.rw.type(g).dtype;
  const Arg& a = c.pos(0);
  const Arg& b = c.pos(1);
  if (c.needs(a)) c.give(a, binary(c.rw, Op::Mul, g, operand(c, b, dt)));
  if (c.needs(b)) c.give(b, binary(c.rw, Op::Mul, g, operand(c, a, dt)));
}

void div_vjp(VjpCtx& c) {  // a / b: g / b, and -g * y / b
  ValueId g = *c.grad();
  if (c.bound && !c.none("rounding_mode")) {  // floor or trunc division: torch's gradient is zeros
    for (size_t i : {0, 1})
      if (c.needs(c.pos(i))) c.give(c.pos(i), zeros_like(c.rw, c.in(c.pos(i))));
    return;
  }
  DType dt = c.rw.type(g).dtype;
  const Arg& a = c.pos(0);
  const Arg& b = c.pos(1);
  Arg bv = operand(c, b, dt);
  c.give(a, binary(c.rw, Op::Div, g, bv));
  if (c.needs(b)) {
    ValueId y = convert(c.rw, c.out(), dt);
    c.give(b, binary(c.rw, Op::Div, unary(c.rw, Op::Neg, mul(c.rw, g, y)), bv));
  }
}

void remainder_vjp(VjpCtx& c) {  // a - floor(a / b) * b: g, and -g * floor(a / b)
  ValueId g = *c.grad();
  DType dt = c.rw.type(g).dtype;
  const Arg& a = c.pos(0);
  const Arg& b = c.pos(1);
  c.give(a, g);
  if (c.needs(b)) {
    ValueId q = unary(c.rw, Op::Floor, binary(c.rw, Op::Div, convert(c.rw, c.in(a), dt), operand(c, b, dt)));
    c.give(b, unary(c.rw, Op::Neg, mul(c.rw, g, q)));
  }
}

void pow_vjp(VjpCtx& c) {
  ValueId g = *c.grad();
  DType dt = c.rw.type(g).dtype;
  Rewriter& rw = c.rw;
  const Arg& base = c.pos(0);
  const Arg& e = c.pos(1);
  if (c.needs(base)) {
    ValueId x = convert(rw, c.in(base), dt);
    if (e.kind == Arg::Kind::Literal) {  // g * e * x^(e - 1); e = 0 gives zeros, as torch does
      double ev = passes::number_literal(e).value_or(NAN);
      if (std::isnan(ev)) passes::refuse();
      ValueId d = ev == 0.0 ? zeros_like(rw, x) : lit(rw, Op::Mul, lit(rw, Op::Pow, x, ev - 1.0), ev);
      c.give(base, mul(rw, g, d));
    } else {
      ValueId ev = convert(rw, c.in(e), dt);
      ValueId d = mul(rw, ev, binary(rw, Op::Pow, x, V(lit(rw, Op::Sub, ev, 1.0))));
      ValueId zero_e = binary_s(rw, Op::Eq, ev, 0.0);
      c.give(base, mul(rw, g, pointwise(rw, Op::Where, {V(zero_e), scalar(0.0, dt), V(d)}, dt)));
    }
  }
  if (c.needs(e) && base.kind == Arg::Kind::Literal) {  // s ** e: g * y * log(s)
    double s = passes::number_literal(base).value_or(0.0);
    if (!(s > 0.0)) passes::refuse();  // torch's masking at s == 0: an island
    c.give(e, mul(rw, g, lit(rw, Op::Mul, convert(rw, c.out(), dt), std::log(s))));
  } else if (c.needs(e)) {  // g * y * log(x), zero where x == 0 and e >= 0 (torch's mask)
    ValueId x = convert(rw, c.in(base), dt);
    ValueId ev = convert(rw, c.in(e), dt);
    ValueId y = convert(rw, c.out(), dt);
    ValueId d = mul(rw, y, unary(rw, Op::Log, x));
    ValueId masked = binary(rw, Op::LogicalAnd, binary_s(rw, Op::Eq, x, 0.0), V(binary_s(rw, Op::Ge, ev, 0.0)));
    c.give(e, mul(rw, g, pointwise(rw, Op::Where, {V(masked), scalar(0.0, dt), V(d)}, dt)));
  }
}

namespace {

// maximum / minimum: the gradient goes to the operand that won, split in half on a tie (torch).
void extremum(VjpCtx& c, Op wins) {
  ValueId g = *c.grad();
  DType dt = c.rw.type(g).dtype;
  Rewriter& rw = c.rw;
  const Arg& a = c.pos(0);
  const Arg& b = c.pos(1);
  ValueId av = convert(rw, c.in(a), dt), bv = convert(rw, c.in(b), dt);
  ValueId half = lit(rw, Op::Mul, g, 0.5);
  ValueId tie = binary(rw, Op::Eq, av, V(bv));
  ValueId g_tie = pointwise(rw, Op::Where, {V(tie), V(half), scalar(0.0, dt)}, dt);
  ValueId a_wins = binary(rw, wins, av, V(bv));
  c.give(a, pointwise(rw, Op::Where, {V(a_wins), V(g), V(g_tie)}, dt));
  if (c.needs(b)) {
    ValueId b_wins = binary(rw, wins, bv, V(av));
    c.give(b, pointwise(rw, Op::Where, {V(b_wins), V(g), V(g_tie)}, dt));
  }
}

}  // namespace

void maximum_vjp(VjpCtx& c) { extremum(c, Op::Gt); }
void minimum_vjp(VjpCtx& c) { extremum(c, Op::Lt); }

void where_vjp(VjpCtx& c) {
  ValueId g = *c.grad();
  DType dt = c.rw.type(g).dtype;
  ValueId cond = c.in(c.pos(0));
  c.give(c.pos(1), pointwise(c.rw, Op::Where, {V(cond), V(g), scalar(0.0, dt)}, dt));
  c.give(c.pos(2), pointwise(c.rw, Op::Where, {V(cond), scalar(0.0, dt), V(g)}, dt));
}

void clamp_vjp(VjpCtx& c) {  // the gradient where lo <= x <= hi (torch's clamp_backward)
  ValueId g = *c.grad();
  DType dt = c.rw.type(g).dtype;
  Rewriter& rw = c.rw;
  ValueId x = convert(rw, c.in(c.pos(0)), dt);
  std::optional<ValueId> inside;
  for (auto [name, op] : {std::pair<const char*, Op>{"min", Op::Ge}, {"max", Op::Le}}) {
    const Arg& bound = c.arg(name);
    if (passes::is_none(bound)) continue;
    if (bound.kind != Arg::Kind::Literal) passes::refuse();
    ValueId ok = binary(rw, op, x, scalar_for(bound, dt));
    inside = inside ? binary(rw, Op::LogicalAnd, *inside, V(ok)) : ok;
  }
  if (!inside) passes::refuse();
  c.give(c.pos(0), pointwise(rw, Op::Where, {V(*inside), V(g), scalar(0.0, dt)}, dt));
}

}  // namespace ember::autograd::rules
