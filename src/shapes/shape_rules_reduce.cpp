// Shape rules of reductions (sum, mean, amax, amin, var, var_mean; std and std_mean through the
// torch-call table), softmax and log_softmax, layer_norm,
// and the matmul family (mm, bmm, addmm, linear, matmul).
//
// Reductions give default strides whatever their input's layout (permuted, channels-last, sliced,
// expanded: checked against torch over every permutation of 3-d and 4-d inputs, keepdim or not),
// unless the input is empty. softmax and layer_norm allocate contiguous results, whose size-1 dims may keep odd
// strides of the input (like_has_default_strides). The matmuls allocate contiguous results
// whatever their inputs' layout, except matmul of a 1-D or 2-D tensor by a batched one, which
// torch computes transposed, and batch-broadcast matmuls with one result row or column: nullopt.
//
// Dtypes: sum promotes integers and bool to int64; mean, var, softmax and layer_norm need
// floating inputs (var of complex is real); matmuls need operands of one floating or complex
// dtype. Integer matmuls and mixed-precision layer_norm are left to the meta kernels.
#include <algorithm>

#include "shapes/shape_rules_internal.h"

namespace ember::shapes::rules {

namespace {

// Which dims a reduction over a tensor of `ndim` dims reduces. `dim` absent or None reduces
// all; so does an empty list (for sum, mean, amax, amin and var alike). nullopt for dims out
// of range or repeated.
std::optional<std::vector<bool>> reduced_dims(const Operand* dim, int64_t ndim) {
  std::vector<bool> reduced(static_cast<size_t>(ndim), false);
  if (is_none(dim)) {
    std::fill(reduced.begin(), reduced.end(), true);
    return reduced;
  }
  auto dims = as_int_or_list(dim);
  if (!dims) return std::nullopt;
  if (dims->empty()) {
    std::fill(reduced.begin(), reduced.end(), true);
    return reduced;
  }
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(ndim, 1)), false);
  for (int64_t d : *dims) {
    auto w = wrap_dim(d, ndim);
    if (!w || seen[static_cast<size_t>(*w)]) return std::nullopt;
    seen[static_cast<size_t>(*w)] = true;
    if (ndim > 0) reduced[static_cast<size_t>(*w)] = true;
  }
  return reduced;
}

// The result of reducing `x` over `reduced`, of dtype `dt`.
Result reduction_result(const Call& call, const Dense& x, const std::vector<bool>& reduced, bool keepdim,
                        ir::DType dt) {
  // An empty input gives the result odd strides (seen on meta tensors): left to the meta kernel.
  if (std::find(x.sizes.begin(), x.sizes.end(), 0) != x.sizes.end()) return std::nullopt;
  Sizes out;
  for (size_t i = 0; i < x.sizes.size(); ++i) {
    if (!reduced[i]) {
      out.push_back(x.sizes[i]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return computed(call, dt, out, {&x});
}

std::optional<bool> keepdim_of(const Operand* p) {
  if (!p) return false;
  return as_bool(p);
}

}  // namespace

Result infer_sum_mean(const Call& call) {
  auto b = bind(call, {"input", "dim", "keepdim", "*dtype"});
  // keepdim belongs to the overload with a dim (None allowed): sum(x, keepdim=True) is a TypeError.
  if (!b || ((*b)[2] && !(*b)[1])) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto keepdim = keepdim_of((*b)[2]);
  if (!x || !keepdim || is_float8(x->dtype)) return std::nullopt;
  auto reduced = reduced_dims((*b)[1], x->dim());
  if (!reduced) return std::nullopt;
  std::optional<ir::DType> out;
  if (!is_none((*b)[3])) {
    // An explicit dtype the input converts to without narrowing.
    auto dt = as_dtype((*b)[3]);
    if (!dt || is_float8(*dt) || promote_types(x->dtype, *dt) != *dt) return std::nullopt;
    out = dt;
  } else if (call.op == ir::Op::Sum) {
    out = is_floating(x->dtype) || is_complex(x->dtype) ? x->dtype : ir::DType::Int64;
  } else {
    out = x->dtype;
  }
  if (call.op == ir::Op::Mean && !(is_floating(*out) || is_complex(*out))) return std::nullopt;
  return reduction_result(call, *x, *reduced, *keepdim, *out);
}

// torch.max(x) (one 0-d value) and torch.max(x, dim, keepdim=False) (values and indices, both of x's
// sizes without dim, or with it 1); the elementwise form (a tensor `other`) is maximum's rule.
std::optional<SizeLists> extreme_reduction_sizes(const Call& call) {
  auto b = bind(call, {"input|self", "dim", "keepdim"});
  if (!b || !(*b)[0] || !(*b)[0]->tensor) return std::nullopt;
  const ir::TensorType& x = *(*b)[0]->tensor;
  if (!(*b)[1]) {
    if ((*b)[2]) return std::nullopt;
    return SizeLists{{}};
  }
  auto dim = as_int((*b)[1]);
  auto w = dim && !x.sizes.empty() ? wrap_dim(*dim, static_cast<int64_t>(x.sizes.size())) : std::nullopt;
  auto keep = (*b)[2] ? as_bool((*b)[2]) : std::optional<bool>(false);
  if (!w || !keep) return std::nullopt;
  std::vector<sym::Expr> out;
  for (size_t d = 0; d < x.sizes.size(); ++d) {
    if (d != static_cast<size_t>(*w)) {
      out.push_back(x.sizes[d]);
    } else if (*keep) {
      out.push_back(1);
    }
  }
  return SizeLists{std::move(out)};
}

Result infer_amax_amin(const Call& call) {
  auto b = bind(call, {"input", "dim", "keepdim"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto keepdim = keepdim_of((*b)[2]);
  if (!x || !keepdim || is_float8(x->dtype) || is_complex(x->dtype)) return std::nullopt;
  auto reduced = reduced_dims((*b)[1], x->dim());
  if (!reduced) return std::nullopt;
  // No identity: reducing a dimension of size 0 is an error.
  for (size_t i = 0; i < reduced->size(); ++i)
    if ((*reduced)[i] && x->sizes[i] == 0) return std::nullopt;
  return reduction_result(call, *x, *reduced, *keepdim, x->dtype);
}

Result infer_var(const Call& call) {
  std::optional<Bound> b;
  // var(x, True): the overload whose second parameter is `unbiased`.
  if (call.args.size() >= 2 && as_bool(&call.args[1])) {
    if (call.args.size() > 2 || !call.kwargs.empty()) return std::nullopt;
    b = Bound{};
    b->slot[0] = &call.args[0];
    b->slot[2] = &call.args[1];
  } else {
    b = bind(call, {"input", "dim", "unbiased", "keepdim", "*correction"});
    if (!b) return std::nullopt;
  }
  auto x = as_dense((*b)[0]);
  auto keepdim = keepdim_of((*b)[3]);
  if (!x || !keepdim) return std::nullopt;
  const Operand* unbiased = (*b)[2];
  const Operand* correction = (*b)[4];
  if (unbiased && !as_bool(unbiased)) return std::nullopt;
  if (correction && !is_none(correction) && !as_real(correction)) return std::nullopt;
  if (unbiased && correction) return std::nullopt;
  auto reduced = reduced_dims((*b)[1], x->dim());
  if (!reduced) return std::nullopt;
  std::optional<ir::DType> out;
  if (is_floating(x->dtype)) out = x->dtype;
  if (is_complex(x->dtype)) out = real_of(x->dtype);
  if (!out) return std::nullopt;
  auto deviation = reduction_result(call, *x, *reduced, *keepdim, *out);
  if (!deviation || call.op != ir::Op::VarMean) return deviation;
  // var_mean and std_mean: the mean keeps the input's dtype (complex stays complex).
  auto mean = reduction_result(call, *x, *reduced, *keepdim, x->dtype);
  if (!mean) return std::nullopt;
  deviation->push_back(std::move((*mean)[0]));
  return deviation;
}

Result infer_softmax(const Call& call) {
  auto b = bind(call, {"input", "dim", "dtype"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto dim = as_int((*b)[1]);
  if (!x || !dim || !wrap_dim(*dim, x->dim())) return std::nullopt;
  std::optional<ir::DType> out;
  if (is_none((*b)[2])) {
    out = x->dtype;
  } else {
    out = as_dtype((*b)[2]);
    if (!out || is_complex(x->dtype) || is_float8(x->dtype)) return std::nullopt;
  }
  if (!is_floating(*out) || !like_has_default_strides(*x)) return std::nullopt;
  return computed(call, *out, x->sizes, {&*x});
}

Result infer_layer_norm(const Call& call) {
  auto b = bind(call, {"input", "normalized_shape", "weight", "bias", "eps"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto shape = as_int_list((*b)[1]);  // a bare int is a TypeError
  if (!x || !shape || shape->empty() || !is_floating(x->dtype) || !like_has_default_strides(*x)) return std::nullopt;
  if ((*b)[4] && !as_real((*b)[4])) return std::nullopt;  // eps=None is a TypeError
  if (static_cast<int64_t>(shape->size()) > x->dim()) return std::nullopt;
  if (!std::equal(shape->begin(), shape->end(), x->sizes.end() - static_cast<int64_t>(shape->size())))
    return std::nullopt;
  std::optional<Dense> affine[2];
  for (int i = 0; i < 2; ++i) {
    const Operand* p = (*b)[2 + i];
    if (is_none(p)) continue;
    affine[i] = as_dense(p);
    if (!affine[i] || affine[i]->dtype != x->dtype || affine[i]->sizes != *shape) return std::nullopt;
  }
  return computed(call, x->dtype, x->sizes,
                  {&*x, affine[0] ? &*affine[0] : nullptr, affine[1] ? &*affine[1] : nullptr});
}

// ---- Matmuls ----------------------------------------------------------------------------------

namespace {

// The common dtype of matmul operands: one floating or complex dtype for all.
std::optional<ir::DType> matmul_dtype(std::initializer_list<const Dense*> operands) {
  std::optional<ir::DType> dt;
  for (const Dense* d : operands) {
    if (!d) continue;
    if (dt && *dt != d->dtype) return std::nullopt;
    dt = d->dtype;
  }
  if (!dt || !(is_floating(*dt) || is_complex(*dt))) return std::nullopt;
  return dt;
}

// addmm's beta and alpha: numbers the result dtype can hold.
bool scale_ok(const Operand* p, ir::DType dt) {
  if (!p) return true;
  auto kind = scalar_kind(p);
  if (!kind || *kind == ScalarKind::Bool) return false;
  return *kind != ScalarKind::Complex || is_complex(dt);
}

}  // namespace

Result infer_mm(const Call& call) {
  auto b = bind(call, {"input", "mat2"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto y = as_dense((*b)[1]);
  if (!x || !y || x->dim() != 2 || y->dim() != 2 || x->sizes[1] != y->sizes[0]) return std::nullopt;
  auto dt = matmul_dtype({&*x, &*y});
  if (!dt) return std::nullopt;
  return computed(call, *dt, {x->sizes[0], y->sizes[1]}, {&*x, &*y});
}

Result infer_bmm(const Call& call) {
  auto b = bind(call, {"input", "mat2"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto y = as_dense((*b)[1]);
  if (!x || !y || x->dim() != 3 || y->dim() != 3 || x->sizes[0] != y->sizes[0] || x->sizes[2] != y->sizes[1])
    return std::nullopt;
  auto dt = matmul_dtype({&*x, &*y});
  if (!dt) return std::nullopt;
  return computed(call, *dt, {x->sizes[0], x->sizes[1], y->sizes[2]}, {&*x, &*y});
}

Result infer_addmm(const Call& call) { return add_matmul(call, false); }

// addmm (2-d) and baddbmm (3-d: `alibi.baddbmm(batch1=q, batch2=k)`, BLOOM): the product's sizes, the
// input broadcast to them, a contiguous result whatever the operands' layouts (checked against meta).
Result add_matmul(const Call& call, bool batched) {
  // beta and alpha are keyword-only; more positionals is a deprecated overload.
  auto b = batched ? bind(call, {"input|self", "batch1", "batch2", "*beta", "*alpha"})
                   : bind(call, {"input", "mat1", "mat2", "*beta", "*alpha"});
  if (!b) return std::nullopt;
  auto bias = as_dense((*b)[0]);
  auto x = as_dense((*b)[1]);
  auto y = as_dense((*b)[2]);
  int64_t rank = batched ? 3 : 2;
  if (!bias || !x || !y || x->dim() != rank || y->dim() != rank || x->sizes[rank - 1] != y->sizes[rank - 2] ||
      bias->dim() > rank || (batched && x->sizes[0] != y->sizes[0]))
    return std::nullopt;
  Sizes out{x->sizes[rank - 2], y->sizes[rank - 1]};
  if (batched) out.insert(out.begin(), x->sizes[0]);
  if (broadcast(bias->sizes, out) != out) return std::nullopt;
  auto dt = matmul_dtype({&*bias, &*x, &*y});
  if (!dt || !scale_ok((*b)[3], *dt) || !scale_ok((*b)[4], *dt)) return std::nullopt;
  return computed(call, *dt, out, {&*bias, &*x, &*y});
}

Result infer_linear(const Call& call) {
  auto b = bind(call, {"input", "weight", "bias"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto w = as_dense((*b)[1]);
  if (!x || !w || x->dim() < 1 || w->dim() != 2 || x->sizes.back() != w->sizes[1]) return std::nullopt;
  std::optional<Dense> bias;
  if (!is_none((*b)[2])) {
    bias = as_dense((*b)[2]);
    if (!bias || bias->dim() != 1 || bias->sizes[0] != w->sizes[0]) return std::nullopt;
  }
  auto dt = matmul_dtype({&*x, &*w, bias ? &*bias : nullptr});
  if (!dt) return std::nullopt;
  Sizes out(x->sizes.begin(), x->sizes.end() - 1);
  out.push_back(w->sizes[0]);
  return computed(call, *dt, out, {&*x, &*w, bias ? &*bias : nullptr});
}

Result infer_matmul(const Call& call) {
  auto b = bind(call, {"input", "other"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto y = as_dense((*b)[1]);
  if (!x || !y || x->dim() == 0 || y->dim() == 0) return std::nullopt;
  auto dt = matmul_dtype({&*x, &*y});
  if (!dt) return std::nullopt;
  int64_t dx = x->dim(), dy = y->dim();
  // The contracted sizes: x's last dim against y's only dim (1-D) or second to last.
  int64_t kx = x->sizes.back();
  int64_t ky = dy == 1 ? y->sizes[0] : y->sizes[static_cast<size_t>(dy - 2)];
  if (kx != ky) return std::nullopt;
  Sizes out;
  if (dy <= 2) {
    // x's leading dims (its rows included) times y's columns, if y has them.
    out.assign(x->sizes.begin(), x->sizes.end() - 1);
    if (dy == 2) out.push_back(y->sizes[1]);
  } else if (dx >= 3) {
    Sizes bx(x->sizes.begin(), x->sizes.end() - 2), by(y->sizes.begin(), y->sizes.end() - 2);
    auto batch = broadcast(bx, by);
    if (!batch) return std::nullopt;
    int64_t n = x->sizes[static_cast<size_t>(dx - 2)], p = y->sizes.back();
    // With a batch broadcast, a result with one row or one column gets an odd stride on that
    // size-1 dim (torch's choice, seen on meta tensors): left to the meta kernel.
    if (bx != by && (n == 1 || p == 1)) return std::nullopt;
    out = std::move(*batch);
    out.push_back(n);
    out.push_back(p);
  } else {
    return std::nullopt;  // a matrix or vector times a batch: torch computes it transposed
  }
  return computed(call, *dt, out, {&*x, &*y});
}

}  // namespace ember::shapes::rules
