// Derivative rules of reductions, softmax, layer_norm and vector norms (rules.h). The fused rules are torch's
// backward formulas; layer_norm's recomputes mean and rstd with the nodes its decomposition emits,
// so CSE merges them with the forward's and the partitioner chooses between saving and
// recomputing them.
#include "autograd/rules.h"

namespace ember::autograd::rules {

namespace {

ValueId opmath_of(Rewriter& rw, ValueId v) { return convert(rw, v, opmath(rw.type(v).dtype)); }

ValueId sum_keep(Rewriter& rw, ValueId x, const std::vector<int64_t>& dims) { return reduce(rw, Op::Sum, x, dims, true); }

int64_t softmax_dim(VjpCtx& c, ValueId x) {
  if (c.none("dim")) passes::refuse();
  return norm_dim(c.int_arg("dim"), rank_of(c.rw, x));
}

}  // namespace

void sum_vjp(VjpCtx& c) {
  ValueId x = c.in("input");
  Sizes sizes = sizes_of(c.rw, x);
  std::vector<int64_t> dims = reduction_dims(c.arg("dim"), rank_of(c.rw, x), true);
  c.give("input", unreduce(c.rw, *c.grad(), dims, c.bool_arg("keepdim"), sizes));
}

namespace {

// amax / amin: the gradient is shared evenly among the elements equal to the extremum (torch).
void extremum(VjpCtx& c) {
  Rewriter& rw = c.rw;
  ValueId x = c.in("input");
  Sizes sizes = sizes_of(rw, x);
  std::vector<int64_t> dims = reduction_dims(c.arg("dim"), rank_of(rw, x), true);
  bool keepdim = c.bool_arg("keepdim");
  ValueId g = *c.grad();
  DType dt = rw.type(g).dtype;
  ValueId hit = convert(rw, binary(rw, Op::Eq, x, V(unreduce(rw, c.out(), dims, keepdim, sizes))), dt);
  ValueId share = binary(rw, Op::Div, unreduce(rw, g, dims, keepdim, sizes),
                         V(expand_symbolic(rw, sum_keep(rw, hit, dims), sizes)));
  c.give("input", mul(rw, share, hit));
}

}  // namespace

void amax_vjp(VjpCtx& c) { extremum(c); }
void amin_vjp(VjpCtx& c) { extremum(c); }

void var_mean_vjp(VjpCtx& c) {  // var: g * 2 (x - mean) / (n - correction); mean: g / n
  Rewriter& rw = c.rw;
  ValueId x = c.in("input");
  Sizes sizes = sizes_of(rw, x);
  std::vector<int64_t> dims = reduction_dims(c.arg("dim"), rank_of(rw, x), true);
  bool keepdim = c.bool_arg("keepdim");
  double correction = c.none("correction") ? 1.0 : c.number_arg("correction");
  sym::Expr n = count(sizes, dims);
  ValueId xf = opmath_of(rw, x);
  DType dt = rw.type(xf).dtype;
  std::optional<ValueId> grad;
  if (c.grad(0)) {
    ValueId mean = unreduce(rw, convert(rw, c.out(1), dt), dims, keepdim, sizes);
    ValueId centered = binary(rw, Op::Sub, xf, V(mean));
    ValueId g = unreduce(rw, convert(rw, *c.grad(0), dt), dims, keepdim, sizes);
    ValueId twice = mul(rw, g, centered);
    if (n.is_constant()) {
      grad = binary_s(rw, Op::Mul, twice, 2.0 / (static_cast<double>(n.constant()) - correction));
    } else {  // 2 / (n - correction) with n symbolic: an integer correction keeps the divisor a size
      if (correction != static_cast<double>(static_cast<int64_t>(correction))) passes::refuse();
      grad = div_count(rw, binary_s(rw, Op::Mul, twice, 2.0), n - sym::Expr(static_cast<int64_t>(correction)));
    }
  }
  if (c.grad(1)) {
    ValueId g = div_count(rw, unreduce(rw, convert(rw, *c.grad(1), dt), dims, keepdim, sizes), n);
    grad = grad ? binary(rw, Op::Add, *grad, V(g)) : g;
  }
  c.give("input", *grad);
}

void softmax_vjp(VjpCtx& c) {  // y * (g - sum(g * y))
  Rewriter& rw = c.rw;
  ValueId x = c.in("input");
  int64_t dim = softmax_dim(c, x);
  ValueId g = opmath_of(rw, *c.grad());
  ValueId y = convert(rw, c.out(), rw.type(g).dtype);
  ValueId gy = mul(rw, g, y);
  ValueId s = expand_symbolic(rw, sum_keep(rw, gy, {dim}), sizes_of(rw, y));
  c.give("input", binary(rw, Op::Sub, gy, V(mul(rw, y, s))));
}

void log_softmax_vjp(VjpCtx& c) {  // g - exp(y) * sum(g)
  Rewriter& rw = c.rw;
  ValueId x = c.in("input");
  int64_t dim = softmax_dim(c, x);
  ValueId g = opmath_of(rw, *c.grad());
  ValueId y = convert(rw, c.out(), rw.type(g).dtype);
  ValueId s = expand_symbolic(rw, sum_keep(rw, g, {dim}), sizes_of(rw, y));
  c.give("input", binary(rw, Op::Sub, g, V(mul(rw, unary(rw, Op::Exp, y), s))));
}

void layer_norm_vjp(VjpCtx& c) {
  Rewriter& rw = c.rw;
  ValueId x = c.in("input");
  Sizes sizes = sizes_of(rw, x);
  auto shape = passes::int_list(c.arg("normalized_shape"), true);
  if (!shape || shape->empty() || shape->size() > sizes.size()) passes::refuse();
  int64_t rank = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> norm_dims;
  for (int64_t d = rank - static_cast<int64_t>(shape->size()); d < rank; ++d) norm_dims.push_back(d);
  double eps = c.number_arg("eps");
  sym::Expr n = count(sizes, norm_dims);
  // The forward's normalization, node for node as decompose writes it (CSE merges the two).
  ValueId xf = opmath_of(rw, x);
  DType dt = rw.type(xf).dtype;
  auto [var, mean] = var_mean(rw, xf, norm_dims, 0, true);
  ValueId rstd = unary(rw, Op::Rsqrt, binary_s(rw, Op::Add, var, eps));
  ValueId xhat = mul(rw, binary(rw, Op::Sub, xf, V(mean)), rstd);
  ValueId g = convert(rw, *c.grad(), dt);
  // give() sums over the leading dims (the weight and bias broadcast along them).
  if (!c.none("weight")) c.give("weight", mul(rw, g, xhat));
  if (!c.none("bias")) c.give("bias", g);
  if (!c.needs("input")) return;
  ValueId gx = c.none("weight") ? g : mul(rw, g, convert(rw, c.in("weight"), dt));
  // rstd * (gx - mean(gx) - xhat * mean(gx * xhat)), the means over the normalized dims
  ValueId mean_gx = div_count(rw, sum_keep(rw, gx, norm_dims), n);
  ValueId mean_gx_xhat = div_count(rw, sum_keep(rw, mul(rw, gx, xhat), norm_dims), n);
  ValueId inner = binary(rw, Op::Sub, binary(rw, Op::Sub, gx, V(mean_gx)), V(mul(rw, xhat, mean_gx_xhat)));
  c.give("input", mul(rw, inner, rstd));
}

// --- Vector norms (torch calls: forward as captured, the backward in primitives) -------------

namespace {

// The order of a vector norm the rules differentiate: 1 or 2 ('fro', the Frobenius norm, is the
// 2-norm of the elements reduced); others refuse (an island).
double norm_order(const Arg* p, double dflt) {
  if (!p || passes::is_none(*p)) return dflt;
  if (p->kind == Arg::Kind::Literal)
    if (const std::string* s = std::get_if<std::string>(&p->literal); s && *s == "fro") return 2.0;
  std::optional<double> v = passes::number_literal(*p);
  if (!v || passes::bool_literal(*p) || (*v != 1.0 && *v != 2.0)) passes::refuse();
  return *v;
}

// The gradient of ||x||_p given the norm's gradient `gn` and the norm `n` (both expanded to x's
// sizes, x's dtype): sign(x) gn for p = 1; x gn / n for p = 2, 0 where n = 0 (torch's
// norm_backward: an all-zero row gets no NaN).
ValueId norm_backward(Rewriter& rw, ValueId x, ValueId gn, ValueId n, double order) {
  if (order == 1.0) return mul(rw, unary(rw, Op::Sign, x), gn);
  DType dt = rw.type(x).dtype;
  ValueId zero = pointwise(rw, Op::Eq, {V(n), scalar(0.0, dt)}, DType::Bool);
  ValueId scale = pointwise(rw, Op::Where, {V(zero), scalar(0.0, dt), V(binary(rw, Op::Div, gn, V(n)))}, dt);
  return mul(rw, x, scale);
}

}  // namespace

// torch.linalg.vector_norm(x, ord, dim, keepdim, *, dtype) (captured as its C function) and
// Tensor.norm(x, p, dim, keepdim, dtype): the positions of p, dim and keepdim are the same; dtype is refused.
void vector_norm_vjp(VjpCtx& c) {
  Rewriter& rw = c.rw;
  const bool linalg = c.node.target == "torch._C._linalg.linalg_vector_norm";
  const Arg* input = argument(c.node, 0, "input");
  if (!input || input->kind != Arg::Kind::Value) passes::refuse();
  const double order = norm_order(argument(c.node, 1, linalg ? "ord" : "p"), 2.0);
  for (const auto& [name, value] : c.node.kwargs)
    if ((name == "dtype" || name == "out") && !passes::is_none(value)) passes::refuse();
  if (c.node.args.size() > 4) passes::refuse();  // Tensor.norm's positional dtype
  ValueId x = c.in(*input);
  const int64_t rank = rank_of(rw, x);
  const Arg* dim = argument(c.node, 2, "dim");
  std::vector<int64_t> dims = dim && !passes::is_none(*dim) ? reduction_dims(*dim, rank, true) : all_dims(rank);
  bool keepdim = false;
  if (const Arg* k = argument(c.node, 3, "keepdim")) {
    std::optional<bool> b = passes::bool_literal(*k);
    if (!b) passes::refuse();
    keepdim = *b;
  }
  if (dims.empty() || rw.type(c.out()).dtype != rw.type(x).dtype) passes::refuse();
  Sizes sizes = sizes_of(rw, x);
  ValueId xf = opmath_of(rw, x);
  ValueId gn = unreduce(rw, opmath_of(rw, *c.grad()), dims, keepdim, sizes);
  ValueId n = unreduce(rw, opmath_of(rw, c.out()), dims, keepdim, sizes);
  c.give(*input, norm_backward(rw, xf, gn, n, order));
}

// F.normalize(x, p, dim, eps) = x / max(||x||_p, eps) (the norm over dim, kept): the gradient
// through the quotient, then through clamp_min (where ||x|| >= eps) into the norm, whose backward
// recomputes the norm in primitives (the forward's is inside the captured call).
void normalize_vjp(VjpCtx& c) {
  Rewriter& rw = c.rw;
  const Arg* input = argument(c.node, 0, "input");
  if (!input || input->kind != Arg::Kind::Value) passes::refuse();
  if (const Arg* out = argument(c.node, 4, "out"); out && !passes::is_none(*out)) passes::refuse();
  const double order = norm_order(argument(c.node, 1, "p"), 2.0);
  ValueId x = c.in(*input);
  int64_t d = 1;
  if (const Arg* dim = argument(c.node, 2, "dim")) {
    std::optional<int64_t> v = passes::int_literal(*dim);
    if (!v) passes::refuse();
    d = *v;
  }
  double eps = 1e-12;
  if (const Arg* e = argument(c.node, 3, "eps")) {
    std::optional<double> v = passes::number_literal(*e);
    if (!v) passes::refuse();
    eps = *v;
  }
  const std::vector<int64_t> dims = {norm_dim(d, rank_of(rw, x))};
  Sizes sizes = sizes_of(rw, x);
  ValueId xf = opmath_of(rw, x), g = opmath_of(rw, *c.grad());
  DType dt = rw.type(xf).dtype;
  ValueId n = vector_norm(rw, xf, dims, order);
  ValueId denom = binary_s(rw, Op::Maximum, n, eps);
  ValueId gx = binary(rw, Op::Div, g, V(expand_symbolic(rw, denom, sizes)));
  // d/d(denom) of sum(g * x / denom) = -sum(g * x) / denom^2, passed to the norm where it is >= eps.
  ValueId gd = unary(rw, Op::Neg, binary(rw, Op::Div, sum_keep(rw, mul(rw, g, xf), dims), V(mul(rw, denom, denom))));
  ValueId kept = pointwise(rw, Op::Ge, {V(n), scalar(eps, dt)}, DType::Bool);
  ValueId gn = pointwise(rw, Op::Where, {V(kept), V(gd), scalar(0.0, dt)}, dt);
  gx = binary(rw, Op::Add, gx,
              V(norm_backward(rw, xf, expand_symbolic(rw, gn, sizes), expand_symbolic(rw, n, sizes), order)));
  c.give(*input, gx);
}

}  // namespace ember::autograd::rules
