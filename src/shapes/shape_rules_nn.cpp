// Shape rules of neural-network layers that are torch calls, not core ops: conv1d/conv2d,
// batch_norm, group_norm, rms_norm, scaled_dot_product_attention, nll_loss and cross_entropy.
// shape_rules_torch.cpp maps their qualified names here.
//
// All of them allocate contiguous results, but torch carries the input's memory format over
// (a channels-last input gives a channels-last convolution, batch norm or group norm on CPU, and the
// meta kernels of attention, convolution and group norm disagree with the CPU kernels on such
// layouts): the rules answer for inputs with torch's default strides only, except attention, whose
// meta kernel gives default strides for any layout of query, key and value, and a 2-d convolution
// or a group norm on the CPU of a dense channels-last input, whose result is channels-last as the
// CPU kernels (mkldnn and thnn alike) make it: meta's contiguous answer made the runtime copy every
// such convolution result into the recorded layout (ConvNeXt's LayerNorm2d permutes, so eager runs it
// channels-last: 17 copies a call), and a group norm's contiguous result sent PoolFormer's pooling
// and 1x1 convolutions down torch's slower contiguous paths (6x on avg_pool2d).
//
// Dtypes: floating inputs; weights and biases of the input's dtype (batch_norm also takes
// float32 parameters for float16/bfloat16 inputs). Empty tensors, float8, complex and the
// argument forms listed in docs/shape-rules.md are declined.
#include <algorithm>

#include "shapes/shape_rules_internal.h"

namespace ember::shapes::rules {

namespace {

bool has_zero(const Sizes& sizes) { return std::find(sizes.begin(), sizes.end(), 0) != sizes.end(); }

// An optional parameter tensor: absent/None, or a 1-D tensor of `n` elements. nullopt inside
// the outer optional means "given but not such a tensor".
std::optional<std::optional<Dense>> vector_param(const Operand* p, int64_t n) {
  if (is_none(p)) return std::optional<Dense>{};
  auto d = as_dense(p);
  if (!d || d->dim() != 1 || d->sizes[0] != n) return std::nullopt;
  return std::optional<Dense>{std::move(*d)};
}

const Dense* ptr(const std::optional<Dense>& d) { return d ? &*d : nullptr; }

using ir::channels_last_strides;

// A dense channels-last 4-d tensor.
bool dense_channels_last(const Dense& x) {
  return x.dim() == 4 && suggests_channels_last(x) && x.strides == channels_last_strides(x.sizes);
}

// Inputs whose kernels hand back a channels-last result where the meta kernels say contiguous: on the
// CPU, group norm's for a dense channels-last input, and convolution's for any 4-d input whose strides
// suggest channels-last, dense or not (a channel slice of a channels-last tensor: the kernels copy the
// input to its suggested memory format); on CUDA, convolution's through cuDNN likewise
// (cudnn_conv_suggest_memory_format: for any floating dtype but float64, which cuDNN's layout choice
// leaves contiguous).
bool cpu_keeps_channels_last(const Dense& x) { return x.device && x.device->type == "cpu" && dense_channels_last(x); }
bool conv_keeps_channels_last(const Dense& x) {
  if (x.dim() != 4 || !suggests_channels_last(x) || !x.device) return false;
  return x.device->type == "cpu" || (x.device->type == "cuda" && x.dtype != ir::DType::Float64);
}

// `r`'s one result, of `sizes`, laid out channels-last when `channels_last` (the kernels' layout, above).
Result channels_last_if(Result r, const Sizes& sizes, bool channels_last) {
  if (r && channels_last) {
    ir::TensorType& t = r->front();
    t = make_type(t.dtype, sizes, channels_last_strides(sizes), t.requires_grad, t.device);
  }
  return r;
}

// An int or a sequence of `n` ints (a sequence of one is also expanded by torch, but only the
// two common forms are modeled), each at least `min`.
std::optional<Sizes> conv_param(const Operand* p, size_t n, int64_t fallback, int64_t min) {
  Sizes out;
  if (!p) {
    out.assign(n, fallback);
  } else if (auto v = as_int(p)) {
    out.assign(n, *v);
  } else if (auto l = as_int_list(p); l && l->size() == n) {
    out = *l;
  } else {
    return std::nullopt;
  }
  for (int64_t v : out)
    if (v < min) return std::nullopt;
  return out;
}

}  // namespace

namespace {

// conv's arguments after input and weight: stride, dilation and groups; padding as ints, or "valid"
// (none) or "same" (the output keeps the input's size; stride 1 only).
struct ConvParams {
  Sizes stride, padding, dilation;
  int64_t groups = 1;
  bool same = false;
};

std::optional<ConvParams> conv_params(const Bound& b, size_t n) {
  ConvParams p;
  auto stride = conv_param(b[3], n, 1, 1);
  auto dilation = conv_param(b[5], n, 1, 1);
  auto groups = b[6] ? as_int(b[6]) : std::optional<int64_t>(1);
  if (!stride || !dilation || !groups || *groups < 1) return std::nullopt;
  p.stride = *stride;
  p.dilation = *dilation;
  p.groups = *groups;
  p.same = is_string(b[4], "same");
  if (p.same) {
    if (std::any_of(p.stride.begin(), p.stride.end(), [](int64_t s) { return s != 1; })) return std::nullopt;
    p.padding = Sizes(n, 0);
  } else if (is_string(b[4], "valid")) {
    p.padding = Sizes(n, 0);
  } else {
    auto padding = conv_param(b[4], n, 0, 0);
    if (!padding) return std::nullopt;
    p.padding = *padding;
  }
  return p;
}

}  // namespace

// The sizes: (batch,) out_channels, then each spatial size `(in + 2*padding - extent) // stride + 1`
// where `extent <= in + 2*padding` (torch refuses a kernel larger than its padded input), extent
// being the kernel's reach `dilation*(k - 1) + 1`. The input's channels must be the weight's times the
// groups. Over symbolic input sizes those two are relations (assumed, for the caller to guard: the
// channels' one pins a symbolic channel count); the weight's sizes must be constants.
std::optional<SizeLists> conv_sizes(const Call& call, int spatial_dims, Assumptions* assumed) {
  auto b = bind(call, {"input", "weight", "bias", "stride", "padding", "dilation", "groups"});
  if (!b || !(*b)[0] || !(*b)[0]->tensor) return std::nullopt;
  const ir::TensorType& x = *(*b)[0]->tensor;
  auto w = as_dense((*b)[1]);
  size_t n = static_cast<size_t>(spatial_dims);
  if (!w || w->dim() != spatial_dims + 2 || (x.sizes.size() != n + 2 && x.sizes.size() != n + 1)) return std::nullopt;
  auto p = conv_params(*b, n);
  if (!p) return std::nullopt;
  size_t first_spatial = x.sizes.size() - n;
  int64_t out_channels = w->sizes[0];
  if (out_channels % p->groups != 0 ||
      !holds_or_assumed(sym::Rel{x.sizes[first_spatial - 1], sym::RelOp::Eq, sym::Expr(w->sizes[1] * p->groups)}, assumed, call.facts,
                        "needs its input's channels static"))
    return std::nullopt;
  std::vector<sym::Expr> out;
  if (x.sizes.size() == n + 2) out.push_back(x.sizes[0]);
  out.push_back(out_channels);
  for (size_t i = 0; i < n; ++i) {
    const sym::Expr& in = x.sizes[first_spatial + i];
    if (p->same) {
      out.push_back(in);
      continue;
    }
    sym::Expr extent(p->dilation[i] * (w->sizes[2 + i] - 1) + 1), padded = in + 2 * p->padding[i];
    if (!holds_or_assumed(sym::Rel{extent, sym::RelOp::Le, padded}, assumed, call.facts)) return std::nullopt;
    out.push_back(floordiv(padded - extent, sym::Expr(p->stride[i])) + 1);
  }
  return SizeLists{std::move(out)};
}

Result infer_conv(const Call& call, int spatial_dims) {
  auto b = bind(call, {"input", "weight", "bias", "stride", "padding", "dilation", "groups"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto w = as_dense((*b)[1]);
  if (!x || !w || !is_floating(x->dtype) || w->dtype != x->dtype) return std::nullopt;
  // A channels-last weight is read as such only beside a channels-last input.
  const bool channels_last = spatial_dims == 2 && conv_keeps_channels_last(*x);
  const bool weight_ok = has_default_strides(*w) || (channels_last && dense_channels_last(*w));
  if ((!has_default_strides(*x) && !channels_last) || !weight_ok || has_zero(x->sizes) || has_zero(w->sizes))
    return std::nullopt;
  std::optional<SizeLists> sizes = conv_sizes(call, spatial_dims, nullptr);
  if (!sizes) return std::nullopt;
  Sizes out;
  for (const sym::Expr& e : sizes->front()) out.push_back(e.constant());
  auto bias = vector_param((*b)[2], w->sizes[0]);
  if (!bias || (*bias && (*bias)->dtype != x->dtype)) return std::nullopt;
  return channels_last_if(computed(call, x->dtype, out, {&*x, &*w, ptr(*bias)}), out, channels_last);
}

Result infer_batch_norm(const Call& call) {
  auto b = bind(call, {"input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  if (!x || x->dim() < 2 || !is_floating(x->dtype) || !has_default_strides(*x) || has_zero(x->sizes))
    return std::nullopt;
  int64_t channels = x->sizes[1];
  auto training = (*b)[5] ? as_bool((*b)[5]) : std::optional<bool>(false);
  if (!training) return std::nullopt;
  if ((*b)[6] && !as_real((*b)[6])) return std::nullopt;  // momentum=None is a TypeError
  if ((*b)[7] && !as_real((*b)[7])) return std::nullopt;
  std::optional<Dense> params[4];
  for (int i = 0; i < 4; ++i) {
    auto p = vector_param((*b)[1 + i], channels);
    if (!p) return std::nullopt;
    params[i] = std::move(*p);
  }
  const std::optional<Dense>& mean = params[0];
  const std::optional<Dense>& var = params[1];
  // Evaluation needs both running statistics; training takes both or neither. Statistics that
  // require grad cannot be updated in place: left to torch's error.
  if (!mean != !var || (!*training && !mean)) return std::nullopt;
  if (mean && (mean->requires_grad || var->requires_grad)) return std::nullopt;
  // Parameters share one dtype: the input's, or float32 under a float16/bfloat16 input.
  std::optional<ir::DType> param_dtype;
  for (auto& p : params) {
    if (!p) continue;
    if (param_dtype && *param_dtype != p->dtype) return std::nullopt;
    param_dtype = p->dtype;
  }
  bool low_precision = x->dtype == ir::DType::Float16 || x->dtype == ir::DType::BFloat16;
  if (param_dtype && *param_dtype != x->dtype && !(low_precision && *param_dtype == ir::DType::Float32))
    return std::nullopt;
  // Training normalizes with batch statistics: one value per channel is an error.
  if (*training && *numel(x->sizes) / channels == 1) return std::nullopt;
  return computed(call, x->dtype, x->sizes, {&*x, ptr(params[2]), ptr(params[3])});
}

Result infer_group_norm(const Call& call) {
  auto b = bind(call, {"input", "num_groups", "weight", "bias", "eps"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto groups = as_int((*b)[1]);
  if (!x || !groups || x->dim() < 2 || *groups < 1 || !is_floating(x->dtype) || has_zero(x->sizes)) return std::nullopt;
  const bool channels_last = cpu_keeps_channels_last(*x);
  if (!has_default_strides(*x) && !channels_last) return std::nullopt;
  if ((*b)[4] && !as_real((*b)[4])) return std::nullopt;
  int64_t channels = x->sizes[1];
  if (channels % *groups != 0) return std::nullopt;
  // F.group_norm refuses one value per group and spatial position ((N * C / G) * spatial == 1),
  // as batch norm in training does.
  if (*numel(x->sizes) / *groups == 1) return std::nullopt;
  std::optional<Dense> affine[2];
  for (int i = 0; i < 2; ++i) {
    auto p = vector_param((*b)[2 + i], channels);
    if (!p || (*p && (*p)->dtype != x->dtype)) return std::nullopt;
    affine[i] = std::move(*p);
  }
  return channels_last_if(computed(call, x->dtype, x->sizes, {&*x, ptr(affine[0]), ptr(affine[1])}), x->sizes,
                          channels_last);
}

Result infer_rms_norm(const Call& call) {
  auto b = bind(call, {"input", "normalized_shape", "weight", "eps"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto shape = as_int_list((*b)[1]);
  if (!x || !shape || shape->empty() || !is_floating(x->dtype) || !has_default_strides(*x) || has_zero(x->sizes))
    return std::nullopt;
  if (!is_none((*b)[3]) && !as_real((*b)[3])) return std::nullopt;
  if (static_cast<int64_t>(shape->size()) > x->dim() ||
      !std::equal(shape->begin(), shape->end(), x->sizes.end() - static_cast<int64_t>(shape->size())))
    return std::nullopt;
  std::optional<Dense> weight;
  if (!is_none((*b)[2])) {
    weight = as_dense((*b)[2]);
    if (!weight || weight->dtype != x->dtype || weight->sizes != *shape) return std::nullopt;
  }
  return computed(call, x->dtype, x->sizes, {&*x, ptr(weight)});
}

Result infer_sdpa(const Call& call) {
  auto b = bind(call, {"query", "key", "value", "attn_mask", "dropout_p", "is_causal", "*scale", "*enable_gqa"});
  if (!b) return std::nullopt;
  auto q = as_dense((*b)[0]);
  auto k = as_dense((*b)[1]);
  auto v = as_dense((*b)[2]);
  if (!q || !k || !v || !is_floating(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype) return std::nullopt;
  int64_t nd = q->dim();
  if (nd < 2 || k->dim() != nd || v->dim() != nd || has_zero(q->sizes) || has_zero(k->sizes) || has_zero(v->sizes))
    return std::nullopt;
  // (batch..., L, E) x (batch..., S, E) x (batch..., S, Ev): the three batch shapes broadcast (a key and
  // value of one head against the query's heads: Falcon's multi-query attention).
  size_t batch = static_cast<size_t>(nd - 2);
  auto batch_of = [&](const Dense& t) { return Sizes(t.sizes.begin(), t.sizes.begin() + static_cast<int64_t>(batch)); };
  auto qk = broadcast(batch_of(*q), batch_of(*k));
  auto batches = qk ? broadcast(*qk, batch_of(*v)) : std::nullopt;
  if (!batches) return std::nullopt;
  int64_t E = q->sizes[batch + 1], S = k->sizes[batch], Ev = v->sizes[batch + 1];
  if (k->sizes[batch + 1] != E || v->sizes[batch] != S) return std::nullopt;
  auto dropout = (*b)[4] ? as_real((*b)[4]) : std::optional<double>(0.0);
  auto causal = (*b)[5] ? as_bool((*b)[5]) : std::optional<bool>(false);
  auto gqa = (*b)[7] ? as_bool((*b)[7]) : std::optional<bool>(false);
  if (!dropout || !(*dropout >= 0.0 && *dropout < 1.0) || !causal || !gqa || *gqa) return std::nullopt;
  if (!is_none((*b)[6]) && !as_real((*b)[6])) return std::nullopt;
  std::optional<Dense> mask;
  if (!is_none((*b)[3])) {
    // A boolean mask or an additive one of the query's dtype, broadcasting to the scores'
    // shape without widening it; never together with is_causal.
    mask = as_dense((*b)[3]);
    if (!mask || *causal || (mask->dtype != ir::DType::Bool && mask->dtype != q->dtype)) return std::nullopt;
    Sizes scores = *batches;
    scores.push_back(q->sizes[batch]);
    scores.push_back(S);
    if (mask->dim() > nd || broadcast(mask->sizes, scores) != scores) return std::nullopt;
  }
  Sizes out = *batches;
  out.push_back(q->sizes[batch]);
  out.push_back(Ev);
  return computed(call, q->dtype, out, {&*q, &*k, &*v, mask && is_floating(mask->dtype) ? &*mask : nullptr});
}

Result infer_nll_loss(const Call& call, bool cross_entropy) {
  std::optional<Bound> b;
  if (cross_entropy) {
    b = bind(call, {"input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction",
                    "label_smoothing"});
  } else {
    b = bind(call, {"input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction"});
  }
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto target = as_dense((*b)[1]);
  if (!x || !target || x->dim() < 1 || !is_floating(x->dtype) || target->dtype != ir::DType::Int64) return std::nullopt;
  if (!has_default_strides(*x) || !has_default_strides(*target) || has_zero(x->sizes)) return std::nullopt;
  // The legacy size_average/reduce arguments are declined; reduction is one of three strings.
  if (!is_none((*b)[3]) || !is_none((*b)[5])) return std::nullopt;
  if ((*b)[4] && !as_int((*b)[4])) return std::nullopt;
  bool none = is_string((*b)[6], "none");
  if ((*b)[6] && !none && !is_string((*b)[6], "mean") && !is_string((*b)[6], "sum")) return std::nullopt;
  if (cross_entropy && (*b)[7]) {
    auto smoothing = as_real((*b)[7]);
    if (!smoothing || !(*smoothing >= 0.0 && *smoothing <= 1.0)) return std::nullopt;
  }
  // Class indices: the target is the input's shape without the class dim (dim 1, or dim 0 of
  // an unbatched 1-D input).
  int64_t class_dim = x->dim() == 1 ? 0 : 1;
  Sizes expected = x->sizes;
  expected.erase(expected.begin() + class_dim);
  if (target->sizes != expected) return std::nullopt;
  auto weight = vector_param((*b)[2], x->sizes[static_cast<size_t>(class_dim)]);
  if (!weight || (*weight && (*weight)->dtype != x->dtype)) return std::nullopt;
  return computed(call, x->dtype, none ? target->sizes : Sizes{}, {&*x, ptr(*weight)});
}

}  // namespace ember::shapes::rules
