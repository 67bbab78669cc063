// decompose, reduction family: sum, mean, amax/amin, var/std (and their _mean forms) in
// canonical form; logsumexp, softmax, log_softmax; layer_norm, rms_norm, group_norm, batch_norm (inference,
// and training with the running statistics written back through `torch.Tensor.copy_`), _weight_norm,
// F.normalize (p = 1, 2, inf);
// cross_entropy and nll_loss (class indices, class dim 1); adaptive average pooling to dividing sizes,
// max_pool2d without indices, avg_pool2d; a depthwise 1x1 conv2d (a per-channel affine).
// float16/bfloat16 inputs compute in float32 and convert back, as torch's kernels do.
#include <algorithm>
#include <limits>

#include "passes/decompose_rules.h"

namespace ember::passes::decomp {

namespace {

int64_t rank_of(Rewriter& rw, ValueId x) { return static_cast<int64_t>(rw.type(x).sizes.size()); }

ValueId floating_input(Ctx& c, ValueId x, DType compute) {
  if (!is_floating_point(compute) || ir::dtype_itemsize(compute) == 1) refuse();
  return convert(c.rw, x, compute);
}

sym::Expr count(Rewriter& rw, ValueId x, const std::vector<int64_t>& dims) {
  sym::Expr n = 1;
  for (int64_t d : dims) n = n * rw.type(x).sizes.at(d);
  return n;
}

// sum/mean's dtype= keyword: a dtype literal or None.
std::optional<DType> dtype_kw(Ctx& c) {
  const Arg& a = c.arg("dtype");
  if (is_none(a)) return std::nullopt;
  const DType* dt = a.kind == Arg::Kind::Literal ? std::get_if<DType>(&a.literal) : nullptr;
  if (!dt) refuse();
  return *dt;
}

void sum(Ctx& c) {
  ValueId x = c.tensor("input");
  std::vector<int64_t> dims = reduction_dims(c.arg("dim"), rank_of(c.rw, x), true);
  bool keepdim = c.bool_arg("keepdim");
  dtype_kw(c);
  DType r = c.result_type().dtype;
  if (is_complex(r) || (ir::dtype_itemsize(r) == 1 && is_floating_point(r))) refuse();
  ValueId xin = convert(c.rw, x, opmath(r));
  c.finish(convert(c.rw, reduce(c.rw, Op::Sum, xin, dims, keepdim), r));
}

void mean(Ctx& c) {
  ValueId x = c.tensor("input");
  std::vector<int64_t> dims = reduction_dims(c.arg("dim"), rank_of(c.rw, x), true);
  bool keepdim = c.bool_arg("keepdim");
  dtype_kw(c);
  DType r = c.result_type().dtype;
  ValueId xin = floating_input(c, x, opmath(r));
  ValueId s = reduce(c.rw, Op::Sum, xin, dims, keepdim);
  c.finish(convert(c.rw, div_count(c.rw, s, count(c.rw, x, dims)), r));
}

void amax_amin(Ctx& c, Op op) {
  ValueId x = c.tensor("input");
  std::vector<int64_t> dims = reduction_dims(c.arg("dim"), rank_of(c.rw, x), true);
  c.finish(reduce(c.rw, op, x, dims, c.bool_arg("keepdim")));
}

// var, std, var_mean, std_mean: one var_mean primitive.
void variance(Ctx& c, bool take_sqrt, bool with_mean) {
  ValueId x = c.tensor("input");
  Arg dim = c.arg("dim");
  std::optional<bool> unbiased;
  if (auto u = bool_literal(dim)) {
    if (c.bound->was_given("unbiased")) refuse();
    unbiased = *u;
    dim = Arg::of_literal(ir::NoneLiteral{});
  } else if (!c.none("unbiased")) {
    unbiased = c.bool_arg("unbiased");
  }
  int64_t correction = 1;
  if (unbiased) correction = *unbiased ? 1 : 0;
  if (!c.none("correction")) {
    if (unbiased) refuse();
    correction = c.int_arg("correction");
  }
  bool keepdim = c.bool_arg("keepdim");
  std::vector<int64_t> dims = reduction_dims(dim, rank_of(c.rw, x), true);
  DType r = c.result_type().dtype;
  ValueId xin = floating_input(c, x, opmath(c.rw.type(x).dtype));
  auto [var, m] = var_mean(c.rw, xin, dims, correction, keepdim);
  ValueId first = take_sqrt ? unary(c.rw, Op::Sqrt, var) : var;
  c.finish(convert(c.rw, first, r), 0);
  if (with_mean) c.finish(convert(c.rw, m, c.result_type(1).dtype), 1);
}

void logsumexp(Ctx& c) {
  ValueId x = c.tensor("input");
  std::vector<int64_t> dims = reduction_dims(c.arg("dim"), rank_of(c.rw, x), false);
  bool keepdim = c.bool_arg("keepdim");
  DType r = c.result_type().dtype;
  Rewriter& rw = c.rw;
  ValueId xf = floating_input(c, x, opmath(r));
  DType dt = rw.type(xf).dtype;
  // An infinite max is replaced by 0, so that all -inf (or +inf) rows give -inf (+inf), not NaN.
  ValueId m = reduce(rw, Op::Amax, xf, dims, true);
  ValueId is_inf = binary_s(rw, Op::Eq, unary(rw, Op::Abs, m), std::numeric_limits<double>::infinity());
  ValueId m0 = pointwise(rw, Op::Where, {V(is_inf), scalar(0.0, dt), V(m)}, dt);
  ValueId s = reduce(rw, Op::Sum, unary(rw, Op::Exp, binary(rw, Op::Sub, xf, V(m0))), dims, keepdim);
  ValueId shift = keepdim ? m0 : reshape_symbolic(rw, m0, rw.type(s).sizes);
  c.finish(convert(rw, binary(rw, Op::Add, unary(rw, Op::Log, s), V(shift)), r));
}

// softmax / log_softmax over `dim` of `x` in dtype `compute`.
ValueId softmax_of(Rewriter& rw, ValueId x, int64_t dim, bool log) {
  ValueId m = reduce(rw, Op::Amax, x, {dim}, true);
  ValueId shifted = binary(rw, Op::Sub, x, V(m));
  ValueId e = unary(rw, Op::Exp, shifted);
  ValueId s = reduce(rw, Op::Sum, e, {dim}, true);
  if (log) return binary(rw, Op::Sub, shifted, V(unary(rw, Op::Log, s)));
  // exp * (1 / sum), as torch's kernels compute it: the same bits as eager, and one reciprocal per
  // row instead of a division per element.
  return binary(rw, Op::Mul, e, V(unary(rw, Op::Reciprocal, s)));
}

void softmax(Ctx& c, bool log) {
  ValueId x = c.tensor("input");
  if (c.none("dim") || rank_of(c.rw, x) == 0) refuse();
  int64_t dim = norm_dim(c.int_arg("dim"), rank_of(c.rw, x));
  std::optional<DType> dt;
  if (!c.none("dtype")) {
    const Arg& a = c.arg("dtype");
    const DType* d = a.kind == Arg::Kind::Literal ? std::get_if<DType>(&a.literal) : nullptr;
    if (!d) refuse();
    dt = *d;
  }
  DType r = c.result_type().dtype;
  ValueId xin = dt ? convert(c.rw, x, *dt) : x;
  ValueId xf = floating_input(c, xin, opmath(c.rw.type(xin).dtype));
  c.finish(convert(c.rw, softmax_of(c.rw, xf, dim, log), r));
}

// A per-channel parameter (size C) shaped to broadcast against [N, C, *] (rank `rank`).
ValueId channel_param(Rewriter& rw, ValueId p, int64_t channels, int64_t rank, DType dt) {
  std::vector<int64_t> shape(rank, 1);
  shape[1] = channels;
  if (const_sizes(rw.type(p)) != std::vector<int64_t>{channels}) refuse();
  return reshape(rw, convert(rw, p, dt), shape);
}

// (x - mean) * rsqrt(var + eps)
ValueId normalize(Rewriter& rw, ValueId x, ValueId mean, ValueId var, double eps) {
  ValueId rstd = unary(rw, Op::Rsqrt, binary_s(rw, Op::Add, var, eps));
  return binary(rw, Op::Mul, binary(rw, Op::Sub, x, V(mean)), V(rstd));
}

std::optional<ValueId> optional_tensor(Ctx& c, std::string_view name) {
  if (c.none(name)) return std::nullopt;
  return c.tensor(name);
}

// The trailing dims that normalized_shape names, checked against x.
std::vector<int64_t> trailing_dims(Ctx& c, ValueId x) {
  auto shape = int_list(c.arg("normalized_shape"), true);
  const std::vector<sym::Expr>& sizes = c.rw.type(x).sizes;
  if (!shape || shape->empty() || shape->size() > sizes.size()) refuse();
  std::vector<int64_t> dims;
  for (size_t i = 0; i < shape->size(); ++i) {
    size_t d = sizes.size() - shape->size() + i;
    if (sizes[d] != sym::Expr((*shape)[i])) refuse();
    dims.push_back(static_cast<int64_t>(d));
  }
  return dims;
}

void layer_norm(Ctx& c) {
  ValueId x = c.tensor("input");
  std::vector<int64_t> dims = trailing_dims(c, x);
  auto w = optional_tensor(c, "weight"), b = optional_tensor(c, "bias");
  double eps = c.number_arg("eps");
  Rewriter& rw = c.rw;
  ValueId xf = floating_input(c, x, opmath(rw.type(x).dtype));
  DType dt = rw.type(xf).dtype;
  auto [var, mean] = var_mean(rw, xf, dims, 0, true);
  ValueId y = normalize(rw, xf, mean, var, eps);
  if (w) y = binary(rw, Op::Mul, y, V(convert(rw, *w, dt)));
  if (b) y = binary(rw, Op::Add, y, V(convert(rw, *b, dt)));
  c.finish(convert(rw, y, c.result_type().dtype));
}

// torch._weight_norm(v, g, dim) (nn.utils.parametrizations.weight_norm): v * (g / ||v||), the 2-norm over
// every dim but `dim` (every dim for dim = -1), kept, as aten's _weight_norm_interface computes it; in
// float32 for float16/bfloat16, converted once.
void weight_norm(Ctx& c) {
  Rewriter& rw = c.rw;
  ValueId v = c.tensor("v"), g = c.tensor("g");
  const int64_t rank = rank_of(rw, v);
  const int64_t dim = c.int_arg("dim");
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d)
    if (dim == -1 || d != norm_dim(dim, rank)) dims.push_back(d);
  if (dims.empty()) refuse();
  DType dt = c.result_type().dtype;
  if (!is_floating_point(dt) || rw.type(g).dtype != dt || rw.type(v).dtype != dt) refuse();
  ValueId vf = convert(rw, v, opmath(dt));
  ValueId scale = binary(rw, Op::Div, convert(rw, g, opmath(dt)), V(vector_norm(rw, vf, dims, 2.0)));
  c.finish(convert(rw, binary(rw, Op::Mul, vf, V(scale)), dt));
}

// F.normalize: x / max(||x||_p over dim, eps), torch's composite (norm, clamp_min, expand_as, div) as one
// reduction and a pointwise tail, in opmath and rounded once; p = 2 (the square root of the sum of squares),
// 1 (the sum of |x|) or inf (the largest |x|). Other p, and out=, stay torch's. (XCiT normalizes its queries
// and keys this way in every block: six torch calls a call, a quarter of Ember's CPU time behind Inductor.)
void functional_normalize(Ctx& c) {
  ValueId x = c.tensor("input");
  if (!c.none("out")) refuse();
  Rewriter& rw = c.rw;
  const std::vector<int64_t> dims = reduction_dims(c.arg("dim"), rank_of(rw, x), false);
  const double p = c.number_arg("p"), eps = c.number_arg("eps");
  const DType r = c.result_type().dtype;
  if (!is_floating_point(r) || rw.type(x).dtype != r) refuse();
  ValueId xf = convert(rw, x, opmath(r));
  ValueId norm = vector_norm(rw, xf, dims, p);
  const DType dt = rw.type(xf).dtype;
  ValueId denom = pointwise(rw, Op::Clamp, {V(norm), scalar(eps, dt), Arg::of_literal(ir::NoneLiteral{})}, dt);
  c.finish(convert(rw, binary(rw, Op::Div, xf, V(denom)), r));
}

// torch.linalg.vector_norm and Tensor.norm / torch.norm of a floating tensor: ||x||_ord over `dim` (every dim
// for None or []), in opmath and rounded once, as torch's kernels; ord 2 ("fro" and None too), 1 or inf. Other
// orders, dtype= and out= stay torch's.
void norm_rule(Ctx& c, std::string_view order, bool has_out) {
  ValueId x = c.tensor("input");
  Rewriter& rw = c.rw;
  if (!c.none("dtype") || (has_out && !c.none("out"))) refuse();
  const Arg& ord = c.arg(order);
  const std::string* name = ord.kind == Arg::Kind::Literal ? std::get_if<std::string>(&ord.literal) : nullptr;
  if (name && *name != "fro") refuse();
  const double p = is_none(ord) || name ? 2.0 : c.number_arg(order);
  const DType r = c.result_type().dtype;
  if (!is_floating(r) || rw.type(x).dtype != r) refuse();
  const std::vector<int64_t> dims = reduction_dims(c.arg("dim"), rank_of(rw, x), true);
  ValueId xf = convert(rw, x, opmath(r));
  c.finish(convert(rw, vector_norm(rw, xf, dims, p, c.bool_arg("keepdim")), r));
}

void rms_norm(Ctx& c) {
  ValueId x = c.tensor("input");
  std::vector<int64_t> dims = trailing_dims(c, x);
  auto w = optional_tensor(c, "weight");
  Rewriter& rw = c.rw;
  DType in_dt = rw.type(x).dtype;
  ValueId xf = floating_input(c, x, opmath(in_dt));
  DType dt = rw.type(xf).dtype;
  double eps = c.none("eps") ? (dt == DType::Float64 ? std::numeric_limits<double>::epsilon()
                                                     : static_cast<double>(std::numeric_limits<float>::epsilon()))
                             : c.number_arg("eps");
  ValueId ms = div_count(rw, reduce(rw, Op::Sum, binary(rw, Op::Mul, xf, V(xf)), dims, true), count(rw, x, dims));
  ValueId y = binary(rw, Op::Mul, xf, V(unary(rw, Op::Rsqrt, binary_s(rw, Op::Add, ms, eps))));
  // The weight multiplies in the compute dtype and the result rounds once, as torch's fused
  // kernels do (`_fused_rms_norm`: CUDA, and CPU since 2.13, whatever the weight's dtype): bit for
  // bit equal to eager there, and closer to a float64 reference than torch's older composite,
  // which rounded to the input dtype before the weight (one more rounding, twice the error).
  if (w) y = binary(rw, Op::Mul, y, V(convert(rw, *w, dt)));
  c.finish(convert(rw, y, c.result_type().dtype));
}

void group_norm(Ctx& c) {
  ValueId x = c.tensor("input");
  int64_t groups = c.int_arg("num_groups");
  auto w = optional_tensor(c, "weight"), b = optional_tensor(c, "bias");
  double eps = c.number_arg("eps");
  Rewriter& rw = c.rw;
  const std::vector<sym::Expr> sizes = rw.type(x).sizes;  // the batch and spatial sizes may be symbolic
  if (sizes.size() < 2 || groups <= 0 || !sizes[1].is_constant() || sizes[1].constant() % groups != 0) refuse();
  // Over a channels-last input, a group's channels are strided apart: its statistics would be a strided
  // reduction and the normalization would index a group per channel, where torch's CPU kernel has a
  // channels-last path (diffusers' VAE decoder, channels-last after its attention block: 13.7 against
  // eager's 10.2 ms while both ran scalar here; since they load lane by lane, the whole VAE measured
  // 10.1 ms decomposed against 9.8 with torch's kernel, so torch's stays). One group (PoolFormer's)
  // reduces all of [C, H, W], dense either way.
  const ir::TensorType& tx = rw.type(x);
  if (groups > 1 && ir::strictly_channels_last(tx.sizes, tx.strides)) refuse();
  const int64_t channels = sizes[1].constant(), rank = static_cast<int64_t>(sizes.size());
  ValueId xf = floating_input(c, x, opmath(rw.type(x).dtype));
  DType dt = rw.type(xf).dtype;
  const sym::Expr per_group = sym::product({sizes.begin() + 2, sizes.end()}) * sym::Expr(channels / groups);
  ValueId grouped = reshape_symbolic(rw, xf, {sizes[0], groups, per_group});
  auto [var, mean] = var_mean(rw, grouped, {2}, 0, true);
  ValueId y = reshape_symbolic(rw, normalize(rw, grouped, mean, var, eps), sizes);
  if (w) y = binary(rw, Op::Mul, y, V(channel_param(rw, *w, channels, rank, dt)));
  if (b) y = binary(rw, Op::Add, y, V(channel_param(rw, *b, channels, rank, dt)));
  c.finish(convert(rw, y, c.result_type().dtype));
}

void batch_norm(Ctx& c) {
  ValueId x = c.tensor("input");
  auto rm = optional_tensor(c, "running_mean"), rv = optional_tensor(c, "running_var");
  auto w = optional_tensor(c, "weight"), b = optional_tensor(c, "bias");
  bool training = c.bool_arg("training");
  double eps = c.number_arg("eps");
  Rewriter& rw = c.rw;
  std::vector<int64_t> sizes = const_sizes(rw.type(x));
  if (sizes.size() < 2 || rm.has_value() != rv.has_value()) refuse();
  int64_t channels = sizes[1], rank = static_cast<int64_t>(sizes.size());
  ValueId xf = floating_input(c, x, opmath(rw.type(x).dtype));
  DType dt = rw.type(xf).dtype;
  ValueId y;
  if (!training) {
    if (!rm) refuse();
    ValueId mean = channel_param(rw, *rm, channels, rank, dt), var = channel_param(rw, *rv, channels, rank, dt);
    y = normalize(rw, xf, mean, var, eps);
  } else {
    std::vector<int64_t> dims = {0};
    for (int64_t d = 2; d < rank; ++d) dims.push_back(d);
    int64_t n = count(rw, x, dims).constant();  // const_sizes above: constant
    if (n <= 1) refuse();  // torch raises: more than one value per channel is needed
    std::optional<double> momentum;
    if (rm) {
      if (c.none("momentum")) refuse();  // a cumulative average needs num_batches_tracked
      momentum = c.number_arg("momentum");
    }
    auto [var, mean] = var_mean(rw, xf, dims, 0, true);
    if (rm) {
      // running = (1 - momentum) * running + momentum * batch statistic (variance unbiased).
      auto update = [&](ValueId running, ValueId stat, double scale) {
        const ir::TensorType& rt = rw.type(running);
        if (const_sizes(rt) != std::vector<int64_t>{channels}) refuse();
        ValueId s = reshape(rw, stat, {channels});
        if (scale != 1.0) s = binary_s(rw, Op::Mul, s, scale);
        ValueId old = binary_s(rw, Op::Mul, convert(rw, running, dt), 1.0 - *momentum);
        ValueId fresh = convert(rw, binary(rw, Op::Add, old, V(binary_s(rw, Op::Mul, s, *momentum))), rt.dtype);
        rw.emit_torch("torch.Tensor.copy_", {V(running), V(fresh)}, {}, rt);
      };
      update(*rm, mean, 1.0);
      update(*rv, var, static_cast<double>(n) / static_cast<double>(n - 1));
    }
    y = normalize(rw, xf, mean, var, eps);
  }
  if (w) y = binary(rw, Op::Mul, y, V(channel_param(rw, *w, channels, rank, dt)));
  if (b) y = binary(rw, Op::Add, y, V(channel_param(rw, *b, channels, rank, dt)));
  c.finish(convert(rw, y, c.result_type().dtype));
}

// nll_loss over log-probabilities `lp` [N, C, d...] and class indices `target` [N, d...]; with
// label smoothing e (cross_entropy), each element's loss is (1 - e) * nll + e / C * smooth, where smooth =
// -sum over classes of lp * weight (0 where the target is ignored). torch reduces the two terms apart with
// the same divisor, so mixing per element and then reducing is the same sum.
void nll(Ctx& c, ValueId lp, ValueId target, double smoothing) {
  if (!c.none("size_average") || !c.none("reduce")) refuse();
  const Arg& red = c.arg("reduction");
  const std::string* reduction = red.kind == Arg::Kind::Literal ? std::get_if<std::string>(&red.literal) : nullptr;
  if (!reduction || (*reduction != "none" && *reduction != "sum" && *reduction != "mean")) refuse();
  int64_t ignore = c.int_arg("ignore_index");
  auto weight = optional_tensor(c, "weight");
  Rewriter& rw = c.rw;
  DType dt = rw.type(lp).dtype;
  std::vector<int64_t> xs = const_sizes(rw.type(lp)), ts = const_sizes(rw.type(target));
  if (xs.size() < 2 || ts.size() != xs.size() - 1 || rw.type(target).dtype != DType::Int64) refuse();
  for (size_t d = 0; d < ts.size(); ++d)
    if (ts[d] != xs[d == 0 ? 0 : d + 1]) refuse();
  ValueId keep = binary(rw, Op::Ne, target, Arg::of_literal(ignore));
  ValueId safe = pointwise(rw, Op::Where, {V(keep), V(target), Arg::of_literal(int64_t{0})}, DType::Int64);
  std::vector<int64_t> index_shape = ts;
  index_shape.insert(index_shape.begin() + 1, 1);
  ValueId index = reshape(rw, safe, index_shape);
  ir::TensorType gt = make_type(dt, to_exprs(index_shape), rw.type(lp).device, rw.type(lp).requires_grad);
  ValueId picked = rw.emit(Op::Gather, {V(lp), Arg::of_literal(int64_t{1}), V(index)}, {}, gt);
  ValueId neg = unary(rw, Op::Neg, reshape(rw, picked, ts));
  ValueId loss, w;
  if (weight) {
    if (const_sizes(rw.type(*weight)) != std::vector<int64_t>{xs[1]}) refuse();
    ValueId flat = reshape(rw, safe, {numel(ts)});
    ir::TensorType wt = make_type(dt, {numel(ts)}, rw.type(lp).device, rw.type(*weight).requires_grad);
    ValueId per = rw.emit(Op::IndexSelect, {V(convert(rw, *weight, dt)), Arg::of_literal(int64_t{0}), V(flat)}, {}, wt);
    w = pointwise(rw, Op::Where, {V(keep), V(reshape(rw, per, ts)), scalar(0.0, dt)}, dt);
    loss = binary(rw, Op::Mul, neg, V(w));
  } else {
    w = convert(rw, keep, dt);
    loss = pointwise(rw, Op::Where, {V(keep), V(neg), scalar(0.0, dt)}, dt);
  }
  if (smoothing != 0.0) {
    ValueId per_class = lp;
    if (weight) {
      std::vector<int64_t> along_classes(xs.size(), 1);
      along_classes[1] = xs[1];
      per_class = binary(rw, Op::Mul, lp, V(reshape(rw, convert(rw, *weight, dt), along_classes)));
    }
    ValueId smooth = unary(rw, Op::Neg, reduce(rw, Op::Sum, per_class, {1}, false));
    smooth = pointwise(rw, Op::Where, {V(keep), V(smooth), scalar(0.0, dt)}, dt);
    loss = binary(rw, Op::Add, binary(rw, Op::Mul, loss, scalar(1.0 - smoothing, dt)),
                  V(binary(rw, Op::Mul, smooth, scalar(smoothing / static_cast<double>(xs[1]), dt))));
  }
  DType r = c.result_type().dtype;
  if (*reduction == "none") return c.finish(convert(rw, loss, r));
  std::vector<int64_t> all = all_dims(static_cast<int64_t>(ts.size()));
  ValueId total = reduce(rw, Op::Sum, loss, all, false);
  if (*reduction == "sum") return c.finish(convert(rw, total, r));
  c.finish(convert(rw, binary(rw, Op::Div, total, V(reduce(rw, Op::Sum, w, all, false))), r));
}

// cross_entropy is log_softmax then nll_loss, as eager runs it: in float16/bfloat16 the log-probabilities
// are computed in float32 and rounded to the input's dtype (log_softmax's result), and nll_loss reads
// those (its sums accumulate in float32, as every reduction's do here).
bool float_of_16_bits_or_more(DType dt) { return is_floating(dt) && ir::dtype_itemsize(dt) >= 2; }

void cross_entropy(Ctx& c) {
  double smoothing = c.number_arg("label_smoothing");
  if (smoothing < 0.0 || smoothing > 1.0) refuse();  // torch's own error then comes from the eager call
  ValueId x = c.tensor("input");
  DType dt = c.rw.type(x).dtype;
  if (!float_of_16_bits_or_more(dt) || rank_of(c.rw, x) < 2) refuse();
  ValueId xf = convert(c.rw, x, opmath(dt));
  // The log_softmax op, which this pass then decomposes as torch.log_softmax's (decompose's next round):
  // a training graph keeps it whole, so the joint differentiates it by its fused rule (g - exp(y) * sum(g)),
  // not through amax's tie rule and the logsumexp's parts.
  ValueId lp = c.rw.emit(Op::LogSoftmax, {V(xf), Arg::of_literal(int64_t{1})}, {}, c.rw.type(xf));
  nll(c, convert(c.rw, lp, dt), c.tensor("target"), smoothing);
}

void nll_loss(Ctx& c) {
  ValueId x = c.tensor("input");
  if (!float_of_16_bits_or_more(c.rw.type(x).dtype)) refuse();
  nll(c, x, c.tensor("target"), 0.0);
}

}  // namespace

// Adaptive average pooling over the last `dims` dimensions to sizes that divide the input's: each window
// is kernel = stride = in / out wide, so each pooled dim splits into [out, in / out] (a view) and the
// result is the mean over the window dims, accumulated in opmath as torch's CPU kernel does. Pooling
// to one value per channel (every CNN's head, squeeze-and-excite blocks) is then a reduction the
// scheduler fuses with its producer. Windows that overlap (sizes that do not divide) stay aten's.
void adaptive_avg_pool(Ctx& c, size_t dims) {
  ValueId x = c.tensor("input");
  auto out = int_list(c.arg("output_size"), true);
  std::vector<int64_t> sizes = const_sizes(c.rw.type(x));
  if (!out || sizes.size() < dims + 1) refuse();
  if (out->size() == 1) out->resize(dims, out->front());
  DType r = c.result_type().dtype;
  if (out->size() != dims || !is_floating(r)) refuse();
  std::vector<int64_t> split(sizes.begin(), sizes.end() - static_cast<std::ptrdiff_t>(dims)), windows;
  int64_t window = 1;
  for (size_t i = 0; i < dims; ++i) {
    int64_t in = sizes[sizes.size() - dims + i], o = (*out)[i];
    if (o <= 0 || in % o != 0) refuse();
    split.push_back(o);
    windows.push_back(static_cast<int64_t>(split.size()));
    split.push_back(in / o);
    window *= in / o;
  }
  Rewriter& rw = c.rw;
  ValueId pooled = reduce(rw, Op::Sum, reshape(rw, floating_input(c, x, opmath(r)), split), windows, false);
  c.finish(convert(rw, div_count(rw, pooled, sym::Expr(window)), r));
}

// The windows of a 2-d pooling over the last two dims of an input of `sizes`: torch's arguments (an int
// or a pair; stride defaults to the kernel) and output sizes (pooling_output_shape, ceil_mode's extra
// window kept only where it starts inside the input or the left padding).
struct PoolWindows {
  std::vector<int64_t> kernel, stride, padding, dilation, out;
};

PoolWindows pool_windows(Ctx& c, const std::vector<int64_t>& sizes, bool dilated) {
  auto pair = [&](std::string_view name, std::optional<std::vector<int64_t>> fallback) {
    std::optional<std::vector<int64_t>> v = c.none(name) ? fallback : int_list(c.arg(name), true);
    if (v && v->empty()) v = fallback;  // stride=[] means the kernel size, as torch reads it
    if (!v || (v->size() != 1 && v->size() != 2)) refuse();
    if (v->size() == 1) v->push_back(v->front());
    return *v;
  };
  PoolWindows w;
  w.kernel = pair("kernel_size", std::nullopt);
  w.stride = pair("stride", w.kernel);
  w.padding = pair("padding", std::nullopt);
  w.dilation = dilated ? pair("dilation", std::nullopt) : std::vector<int64_t>{1, 1};
  const bool ceil_mode = c.bool_arg("ceil_mode");
  if (sizes.size() < 3 || w.kernel[0] * w.kernel[1] > 64) refuse();  // one load per element would not pay
  w.out.resize(2);
  for (size_t i = 0; i < 2; ++i) {
    const int64_t k = w.kernel[i], s = w.stride[i], p = w.padding[i], d = w.dilation[i];
    const int64_t in = sizes[sizes.size() - 2 + i];
    if (k < 1 || s < 1 || d < 1 || p < 0 || p > k / 2) refuse();
    const int64_t span = in + 2 * p - d * (k - 1) - 1;
    if (span < 0) refuse();
    w.out[i] = (span + (ceil_mode ? s - 1 : 0)) / s + 1;
    if (ceil_mode && (w.out[i] - 1) * s >= in + p) --w.out[i];
  }
  return w;
}

// The k*k strided slices of `x` padded with `pad_value`, one per window offset, each of the output's
// sizes, in torch's window order (rows, then columns).
std::vector<ValueId> window_slices(Rewriter& rw, ValueId x, const PoolWindows& w, double pad_value) {
  const std::vector<int64_t> sizes = const_sizes(rw.type(x));
  ValueId padded = x;
  for (size_t i = 0; i < 2; ++i) {
    const int64_t dim = static_cast<int64_t>(sizes.size() - 2 + i), in = sizes[static_cast<size_t>(dim)];
    const int64_t extent = (w.out[i] - 1) * w.stride[i] + w.dilation[i] * (w.kernel[i] - 1) + 1;  // what windows read
    padded = pad(rw, padded, dim, w.padding[i], std::max<int64_t>(extent - in - w.padding[i], 0), pad_value);
  }
  std::vector<ValueId> windows;
  for (int64_t a = 0; a < w.kernel[0]; ++a) {
    for (int64_t b = 0; b < w.kernel[1]; ++b) {
      ValueId window = padded;
      const int64_t offsets[2] = {a * w.dilation[0], b * w.dilation[1]};
      for (size_t i = 0; i < 2; ++i) {
        const int64_t dim = static_cast<int64_t>(sizes.size() - 2 + i);
        window = slice(rw, window, dim, offsets[i], offsets[i] + (w.out[i] - 1) * w.stride[i] + 1, w.stride[i]);
      }
      windows.push_back(window);
    }
  }
  return windows;
}

// max_pool2d without indices (the inference form; a training graph takes aten's max_pool2d_with_indices,
// whose indices its backward reads, so a result that requires grad is refused): the input padded with
// -inf (torch's windows skip the padding, and a window always holds an input element), then the
// elementwise maximum of the window slices. `maximum` propagates NaN as torch's kernel does. Lowering
// makes it one pointwise kernel reading the window (the pad a select), where torch's CPU kernel over
// NCHW is scalar. Windows of more than 64 elements stay aten's.
void max_pool2d(Ctx& c) {
  ValueId x = c.tensor("input");
  const ir::TensorType& r = c.result_type();
  // A result that requires grad is a training graph's, before its joint: maximum's gradient would split
  // between tied values (ReLU's zeros) where the pool's goes to the first one.
  if (c.bool_arg("return_indices") || r.requires_grad) refuse();
  if (!is_floating(r.dtype) || r.dtype != c.rw.type(x).dtype) refuse();
  const PoolWindows w = pool_windows(c, const_sizes(c.rw.type(x)), true);
  std::optional<ValueId> result;
  for (ValueId window : window_slices(c.rw, x, w, -std::numeric_limits<double>::infinity()))
    result = result ? binary(c.rw, Op::Maximum, *result, V(window)) : window;
  c.finish(*result);
}

// A float vector of `values` on `device`: runs of equal values as `full` blocks joined by cat (lowering
// selects between them by index).
ValueId constant_vector(Rewriter& rw, const std::vector<int64_t>& values, DType dt, const ir::Device& device) {
  std::vector<ValueId> runs;
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    while (j < values.size() && values[j] == values[i]) ++j;
    runs.push_back(full(rw, {static_cast<int64_t>(j - i)}, static_cast<double>(values[i]), dt, device));
    i = j;
  }
  return runs.size() == 1 ? runs[0] : cat(rw, runs, 0, make_type(dt, {sym::Expr(static_cast<int64_t>(values.size()))}, device, false));
}

// avg_pool2d (inference form, as max_pool2d's; the training graph keeps aten's, whose backward is one
// kernel): the sum of the window slices of the input padded with zeros, in opmath and in torch's window
// order, divided by torch's divide factor: divisor_override, else the window's size counting the padding
// (count_include_pad, a window clipped at the padded input's end) or not. The factor is a constant where
// every window has the same; else a [..., out_h, 1] * [..., 1, out_w] product of per-dim counts (the border rows
// and columns differ: PoolFormer's 3x3 pools with count_include_pad=False).
void avg_pool2d(Ctx& c) {
  ValueId x = c.tensor("input");
  const ir::TensorType& r = c.result_type();
  if (r.requires_grad || !is_floating(r.dtype) || r.dtype != c.rw.type(x).dtype) refuse();
  const std::vector<int64_t> sizes = const_sizes(c.rw.type(x));
  const PoolWindows w = pool_windows(c, sizes, false);
  Rewriter& rw = c.rw;
  const DType dt = opmath(r.dtype);
  std::optional<ValueId> sum;
  for (ValueId window : window_slices(rw, convert(rw, x, dt), w, 0.0))
    sum = sum ? binary(rw, Op::Add, *sum, V(window)) : window;
  ValueId pooled = *sum;
  if (!c.none("divisor_override")) {
    const int64_t divisor = c.int_arg("divisor_override");
    if (divisor == 0) refuse();  // torch's own error then comes from the eager call
    pooled = binary(rw, Op::Div, pooled, scalar(static_cast<double>(divisor), dt));
  } else {
    const bool include_pad = c.bool_arg("count_include_pad");
    std::vector<int64_t> counts[2];
    for (size_t i = 0; i < 2; ++i) {
      const int64_t in = sizes[sizes.size() - 2 + i], k = w.kernel[i], s = w.stride[i], p = w.padding[i];
      for (int64_t o = 0; o < w.out[i]; ++o) {
        const int64_t start = o * s - p, end = std::min(start + k, in + p);
        counts[i].push_back(include_pad ? end - start : std::min(end, in) - std::max<int64_t>(start, 0));
      }
    }
    auto uniform = [](const std::vector<int64_t>& v) { return std::all_of(v.begin(), v.end(), [&](int64_t e) { return e == v[0]; }); };
    if (uniform(counts[0]) && uniform(counts[1])) {
      pooled = binary(rw, Op::Div, pooled, scalar(static_cast<double>(counts[0][0] * counts[1][0]), dt));
    } else {
      // Of the input's rank, so the division's layout rule sees no operand of lower rank (channels-last inputs).
      std::vector<int64_t> row_sizes(sizes.size(), 1), col_sizes(sizes.size(), 1);
      row_sizes[sizes.size() - 2] = w.out[0];
      col_sizes[sizes.size() - 1] = w.out[1];
      ValueId rows = reshape(rw, constant_vector(rw, counts[0], dt, r.device), row_sizes);
      ValueId cols = reshape(rw, constant_vector(rw, counts[1], dt, r.device), col_sizes);
      pooled = binary(rw, Op::Div, pooled, V(binary(rw, Op::Mul, rows, V(cols))));
    }
  }
  c.finish(convert(rw, pooled, r.dtype));
}

// conv2d with a 1x1 kernel, one input and one output channel per group (a depthwise 1x1 convolution:
// RepViT's and MobileOne's re-parameterizable branches), stride 1 and no padding: a per-channel multiply
// and bias, in opmath and rounded once as torch's kernels round. torch's CPU kernel runs one small
// convolution per channel (THNN's grouped path: ~20,000 calls a RepViT forward). Other convolutions stay
// aten's.
void depthwise_conv1x1(Ctx& c) {
  ValueId x = c.tensor("input"), w = c.tensor("weight");
  auto b = optional_tensor(c, "bias");
  Rewriter& rw = c.rw;
  const std::vector<int64_t> sizes = const_sizes(rw.type(x));
  const DType r = c.result_type().dtype;
  if (sizes.size() != 4 || !is_floating(r) || rw.type(x).dtype != r || rw.type(w).dtype != r) refuse();
  const int64_t channels = sizes[1];
  if (const_sizes(rw.type(w)) != std::vector<int64_t>{channels, 1, 1, 1} || c.int_arg("groups") != channels) refuse();
  auto all = [&](std::string_view name, int64_t value) {
    auto v = int_list(c.arg(name), true);
    return v && !v->empty() && std::all_of(v->begin(), v->end(), [value](int64_t e) { return e == value; });
  };
  if (!all("stride", 1) || !all("padding", 0) || !int_list(c.arg("dilation"), true)) refuse();
  const DType dt = opmath(r);
  ValueId y = binary(rw, Op::Mul, convert(rw, x, dt), V(reshape(rw, convert(rw, w, dt), {1, channels, 1, 1})));
  if (b) y = binary(rw, Op::Add, y, V(channel_param(rw, *b, channels, 4, dt)));
  c.finish(convert(rw, y, r));
}

void add_reduction_rules(RuleMap& rules) {
  rules["torch.sum"] = sum;
  rules["torch._weight_norm"] = weight_norm;
  rules["torch._C._linalg.linalg_vector_norm"] = [](Ctx& c) { norm_rule(c, "ord", true); };
  rules["torch.norm"] = [](Ctx& c) { norm_rule(c, "p", true); };
  rules["torch.Tensor.norm"] = [](Ctx& c) { norm_rule(c, "p", false); };
  rules["torch.mean"] = mean;
  rules["torch.amax"] = [](Ctx& c) { amax_amin(c, Op::Amax); };
  rules["torch.amin"] = [](Ctx& c) { amax_amin(c, Op::Amin); };
  rules["torch.var"] = [](Ctx& c) { variance(c, false, false); };
  rules["torch.std"] = rules["torch.Tensor.std"] = [](Ctx& c) { variance(c, true, false); };
  rules["torch.var_mean"] = [](Ctx& c) { variance(c, false, true); };
  rules["torch.std_mean"] = [](Ctx& c) { variance(c, true, true); };
  rules["torch.logsumexp"] = rules["torch.Tensor.logsumexp"] = logsumexp;
  rules["torch.softmax"] = rules["torch.nn.functional.softmax"] = [](Ctx& c) { softmax(c, false); };
  rules["torch.log_softmax"] = rules["torch.nn.functional.log_softmax"] = [](Ctx& c) { softmax(c, true); };
  rules["torch.nn.functional.layer_norm"] = layer_norm;
  rules["torch.nn.functional.rms_norm"] = rms_norm;
  rules["torch.nn.functional.normalize"] = functional_normalize;
  rules["torch.nn.functional.group_norm"] = group_norm;
  rules["torch.nn.functional.adaptive_avg_pool2d"] = [](Ctx& c) { adaptive_avg_pool(c, 2); };
  rules["torch.adaptive_avg_pool1d"] = [](Ctx& c) { adaptive_avg_pool(c, 1); };
  rules["torch.nn.functional.max_pool2d"] = max_pool2d;
  rules["torch.nn.functional.avg_pool2d"] = avg_pool2d;
  rules["torch.conv2d"] = depthwise_conv1x1;
  rules["torch.nn.functional.batch_norm"] = batch_norm;
  rules["torch.nn.functional.cross_entropy"] = cross_entropy;
  rules["torch.nn.functional.nll_loss"] = nll_loss;
}

}  // namespace ember::passes::decomp
