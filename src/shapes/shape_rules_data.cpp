// Shape rules of the data-movement ops that allocate their result: cat, stack, gather,
// index_select, embedding, tril, triu, dropout, and the factory arange.
//
// These give contiguous results, with three exceptions torch makes: cat and stack follow their
// inputs' suggested memory format (channels-last inputs give a channels-last result), so 4-D and
// 5-D results are served only when no input's strides suggest channels-last; tril and triu keep odd strides
// of size-1 dims (like_has_default_strides); and dropout multiplies, so its result takes
// TensorIterator's layout, or is its input itself when it drops nothing.
#include <algorithm>
#include <cstdlib>

#include "shapes/shape_rules_internal.h"
#include "sym/relation.h"

namespace ember::shapes::rules {

namespace {

bool is_index_dtype(ir::DType dt) { return dt == ir::DType::Int64 || dt == ir::DType::Int32; }

// An index into a dim of size 0 is out of range whatever its values: a call with a non-empty
// index there fails when run, so no rule vouches for it.
bool can_index(int64_t dim_size, const Sizes& index_sizes) {
  auto n = numel(index_sizes);
  return n && (dim_size > 0 || *n == 0);
}

}  // namespace

// torch's suggest_memory_format() is channels-last: c10's is_channels_last_strides_2d/3d, which
// walk the dims from channels to batch and need each stride at least the span of the previous.
bool suggests_channels_last(const Dense& t) {
  static const std::vector<size_t> kOrder4{1, 3, 2, 0}, kOrder5{1, 4, 3, 2, 0};
  if (t.dim() != 4 && t.dim() != 5) return false;
  if (t.strides[1] == 0) return false;
  int64_t min = 0;
  for (size_t d : t.dim() == 4 ? kOrder4 : kOrder5) {
    if (t.strides[d] < min) return false;
    if (d == 0 && min == t.strides[1]) return false;  // N111 and N11W: c10 calls these contiguous
    min = t.strides[d];
    if (t.sizes[d] > 1) min *= t.sizes[d];
  }
  return true;
}

Result infer_cat_stack(const Call& call) {
  bool is_cat = call.op == ir::Op::Cat;
  auto b = bind(call, {"tensors", "dim"});
  if (!b || !(*b)[0] || (*b)[0]->kind != Operand::Kind::Sequence || (*b)[0]->items.empty()) return std::nullopt;
  auto dim = (*b)[1] ? as_int((*b)[1]) : std::optional<int64_t>(0);
  if (!dim) return std::nullopt;
  std::vector<Dense> tensors;
  Promotion promotion(call.default_dtype);
  bool all_channels_last = true, all_default = true, empty = false;
  for (const Operand& item : (*b)[0]->items) {
    auto t = as_dense(&item);
    if (!t) return std::nullopt;
    promotion.add(*t);
    all_channels_last = all_channels_last && suggests_channels_last(*t);
    empty = empty || std::count(t->sizes.begin(), t->sizes.end(), 0) > 0;
    all_default = all_default && has_default_strides(*t);
    tensors.push_back(std::move(*t));
  }
  auto dt = promotion.result();
  if (!dt) return std::nullopt;
  const Dense& first = tensors[0];
  // cat skips 1-D empty tensors in its shape checks (a legacy rule): only equal ranks here.
  for (const Dense& t : tensors) {
    if (t.dim() != first.dim()) return std::nullopt;
  }
  Sizes out = first.sizes;
  if (is_cat) {
    if (first.dim() == 0) return std::nullopt;
    auto w = wrap_dim(*dim, first.dim());
    if (!w) return std::nullopt;
    size_t d = static_cast<size_t>(*w);
    out[d] = 0;
    for (const Dense& t : tensors) {
      for (size_t i = 0; i < out.size(); ++i)
        if (i != d && t.sizes[i] != first.sizes[i]) return std::nullopt;
      out[d] += t.sizes[d];
    }
  } else {
    auto w = wrap_dim(*dim, first.dim() + 1);
    if (!w) return std::nullopt;
    for (const Dense& t : tensors)
      if (t.sizes != first.sizes) return std::nullopt;
    out.insert(out.begin() + *w, static_cast<int64_t>(tensors.size()));
  }
  // A 4-D or 5-D result takes its inputs' common suggested memory format: contiguous unless every input
  // suggests channels-last, channels-last when all do (served for 4-D inputs without empty dims; 5-D's
  // channels_last_3d is not modeled). stack cats its inputs unsqueezed, whose suggestion this does not
  // compute: it is served for default strides.
  bool channels_last = false;
  if (out.size() == 4 || out.size() == 5) {
    if (is_cat ? all_channels_last && (out.size() == 5 || empty) : !all_default)
      return std::nullopt;
    channels_last = is_cat && all_channels_last;
  }
  auto device = result_device(call, false);
  if (!device) return std::nullopt;
  bool rg = false;
  for (const Dense& t : tensors) rg = rg || computed_requires_grad(call, *dt, {&t});
  return std::vector<ir::TensorType>{
      make_type(*dt, out, channels_last ? ir::channels_last_strides(out) : contiguous_strides(out), rg, *device)};
}

Result infer_gather(const Call& call) {
  auto b = bind(call, {"input", "dim", "index", "*sparse_grad"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto dim = as_int((*b)[1]);
  auto index = as_dense((*b)[2]);
  if (!x || !dim || !index || !is_index_dtype(index->dtype)) return std::nullopt;
  if ((*b)[3] && !as_bool((*b)[3])) return std::nullopt;
  if (x->dim() == 0 || index->dim() != x->dim() || !has_default_strides(*index)) return std::nullopt;
  auto w = wrap_dim(*dim, x->dim());
  if (!w) return std::nullopt;
  for (size_t d = 0; d < x->sizes.size(); ++d)
    if (d != static_cast<size_t>(*w) && index->sizes[d] > x->sizes[d]) return std::nullopt;
  if (!can_index(x->sizes[static_cast<size_t>(*w)], index->sizes)) return std::nullopt;
  return computed(call, x->dtype, index->sizes, {&*x});
}

Result infer_index_select(const Call& call) {
  auto b = bind(call, {"input", "dim", "index"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto dim = as_int((*b)[1]);
  auto index = as_dense((*b)[2]);
  if (!x || !dim || !index || x->dim() == 0 || index->dim() > 1 || !is_index_dtype(index->dtype)) return std::nullopt;
  auto w = wrap_dim(*dim, x->dim());
  if (!w) return std::nullopt;
  if (!can_index(x->sizes[static_cast<size_t>(*w)], index->sizes)) return std::nullopt;
  Sizes out = x->sizes;
  out[static_cast<size_t>(*w)] = index->dim() == 0 ? 1 : index->sizes[0];
  return computed(call, x->dtype, out, {&*x});
}

// x.clone() with the source added in: x's sizes; contiguous when x is (else torch keeps x's strides:
// left to the meta kernel). index_add: a 1-D index as long as the source's dim, the source's other
// sizes x's; scatter_add: index, src and x of one rank, the index no larger than src anywhere nor
// than x outside dim. The source has x's dtype.
Result infer_accumulate(const Call& call) {
  const bool scatter = call.op == ir::Op::ScatterAdd;
  auto b = bind(call, {"input", "dim", "index", scatter ? "src" : "source"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto dim = as_int((*b)[1]);
  auto index = as_dense((*b)[2]);
  auto source = as_dense((*b)[3]);
  if (!x || !dim || !index || !source || x->dim() == 0 || !is_index_dtype(index->dtype) || source->dtype != x->dtype ||
      !has_default_strides(*x) || source->dim() != x->dim())
    return std::nullopt;
  auto w = wrap_dim(*dim, x->dim());
  if (!w) return std::nullopt;
  const size_t d = static_cast<size_t>(*w);
  if (scatter) {
    if (index->dim() != x->dim()) return std::nullopt;
    for (size_t k = 0; k < x->sizes.size(); ++k)
      if (index->sizes[k] > source->sizes[k] || (k != d && index->sizes[k] > x->sizes[k])) return std::nullopt;
  } else {
    if (index->dim() != 1 || index->sizes[0] != source->sizes[d]) return std::nullopt;
    for (size_t k = 0; k < x->sizes.size(); ++k)
      if (k != d && source->sizes[k] != x->sizes[k]) return std::nullopt;
  }
  return computed(call, x->dtype, x->sizes, {&*x, &*source});
}

// x.clone() with src in the slice's place: x's sizes, contiguous when x is (else left to the meta
// kernel); src of x's dtype and the slice's sizes (bounds clamped as slicing clamps them).
Result infer_slice_scatter(const Call& call) {
  auto b = bind(call, {"input", "src", "dim", "start", "end", "step"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto src = as_dense((*b)[1]);
  if (!x || !src || x->dim() == 0 || src->dtype != x->dtype || src->dim() != x->dim() || !has_default_strides(*x))
    return std::nullopt;
  auto dim = (*b)[2] ? as_int((*b)[2]) : std::optional<int64_t>(0);
  auto step = (*b)[5] ? as_int((*b)[5]) : std::optional<int64_t>(1);
  auto w = dim ? wrap_dim(*dim, x->dim()) : std::nullopt;
  if (!w || !step || *step < 1) return std::nullopt;
  const size_t d = static_cast<size_t>(*w);
  auto start = as_int((*b)[3]), end = as_int((*b)[4]);
  if ((!start && !is_none((*b)[3])) || (!end && !is_none((*b)[4]))) return std::nullopt;
  Sizes want = x->sizes;
  want[d] = slice_extent(start, end, *step, x->sizes[d]);
  if (src->sizes != want) return std::nullopt;
  return computed(call, x->dtype, x->sizes, {&*x, &*src});
}

Result infer_embedding(const Call& call) {
  auto b = bind(call, {"input", "weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse"});
  if (!b) return std::nullopt;
  auto index = as_dense((*b)[0]);
  auto weight = as_dense((*b)[1]);
  if (!index || !weight || !is_index_dtype(index->dtype) || weight->dim() != 2 || is_float8(weight->dtype))
    return std::nullopt;
  // max_norm renormalizes rows of the weight in place: left to the meta kernel.
  if (!is_none((*b)[3])) return std::nullopt;
  if (!is_none((*b)[2])) {
    auto pad = as_int((*b)[2]);
    int64_t rows = weight->sizes[0];
    if (!pad || *pad < -rows || *pad >= rows) return std::nullopt;
  }
  if (!can_index(weight->sizes[0], index->sizes)) return std::nullopt;
  if ((*b)[4] && !as_real((*b)[4])) return std::nullopt;
  for (int i : {5, 6})
    if ((*b)[i] && !as_bool((*b)[i])) return std::nullopt;
  Sizes out = index->sizes;
  out.push_back(weight->sizes[1]);
  return computed(call, weight->dtype, out, {&*weight});
}

Result infer_tril_triu(const Call& call) {
  auto b = bind(call, {"input", "diagonal"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  if (!x || x->dim() < 2 || is_float8(x->dtype) || !like_has_default_strides(*x)) return std::nullopt;
  if ((*b)[1] && !as_int((*b)[1])) return std::nullopt;
  return computed(call, x->dtype, x->sizes, {&*x});
}

Result infer_dropout(const Call& call) {
  auto b = bind(call, {"input", "p", "training", "inplace"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto p = (*b)[1] ? as_real((*b)[1]) : std::optional<double>(0.5);
  auto training = (*b)[2] ? as_bool((*b)[2]) : std::optional<bool>(true);
  auto inplace = (*b)[3] ? as_bool((*b)[3]) : std::optional<bool>(false);
  if (!x || !p || !training || !inplace || *inplace || !(*p >= 0.0 && *p <= 1.0)) return std::nullopt;
  auto count = numel(x->sizes);
  if (!count) return std::nullopt;
  // Nothing to drop: torch returns the input itself.
  if (*p == 0.0 || !*training || *count == 0) return std::vector<ir::TensorType>{*(*b)[0]->tensor};
  if (!is_floating(x->dtype)) return std::nullopt;
  auto strides = pointwise_strides(x->sizes, {&*x}, x->dtype);
  auto device = result_device(call, false);
  if (!strides || !device) return std::nullopt;
  return std::vector<ir::TensorType>{
      make_type(x->dtype, x->sizes, *strides, computed_requires_grad(call, x->dtype, {&*x}), *device)};
}

// philox_rand(seed, offset, sizes): a contiguous float32 tensor on the 0-d int64 seed's device.
// Symbolic sizes have no answer here (the op is built by random_ops_for_training, never traced).
Result infer_philox_rand(const Call& call) {
  auto b = bind(call, {"seed", "offset", "sizes"});
  if (!b) return std::nullopt;
  auto seed = as_dense((*b)[0]);
  auto offset = as_int((*b)[1]);
  auto sizes = as_int_list((*b)[2]);
  if (!seed || seed->dim() != 0 || seed->dtype != ir::DType::Int64 || !offset || !sizes) return std::nullopt;
  return std::vector<ir::TensorType>{make_type(ir::DType::Float32, *sizes, contiguous_strides(*sizes), false, *seed->device)};
}

// arange(end) / arange(start, end[, step]) of ints, constant or symbolic (a float bound stays with the
// meta kernel, whose rounding this does not model): ceil((end - start) / step) elements, int64 unless
// `dtype` says, contiguous, on the `device` given (the trace resolves the default device itself). Bounds
// whose order torch refuses for the step's sign, or a symbolic extent the facts do not place at >= 0, go
// to the meta kernel too (it raises, or the trace guards). Why a rule at all: torch's meta arange is
// Python that imports sympy on its first call, seconds of a fresh process's first compile.
Result infer_arange(const Call& call) {
  std::vector<sym::Expr> bounds;
  for (const Operand& a : call.args) {
    if (a.kind != Operand::Kind::Literal || std::holds_alternative<bool>(a.literal)) return std::nullopt;
    if (const int64_t* v = std::get_if<int64_t>(&a.literal)) {
      bounds.emplace_back(*v);
    } else if (const sym::Expr* e = std::get_if<sym::Expr>(&a.literal)) {
      bounds.push_back(*e);
    } else {
      return std::nullopt;
    }
  }
  if (bounds.empty() || bounds.size() > 3) return std::nullopt;
  ir::DType dtype = ir::DType::Int64;
  bool requires_grad = false;
  ir::Device device;
  for (const auto& [name, operand] : call.kwargs) {
    if (name == "dtype" && !is_none(&operand)) {
      std::optional<ir::DType> dt = as_dtype(&operand);
      if (!dt || !(is_integral(*dt) || is_floating(*dt)) || *dt == ir::DType::Bool) return std::nullopt;
      dtype = *dt;
    } else if (name == "requires_grad") {
      std::optional<bool> b = as_bool(&operand);
      if (!b) return std::nullopt;
      requires_grad = *b;
    } else if (name == "device") {  // a torch.device or its string ("cuda:0")
      const ir::Device* d = operand.kind == Operand::Kind::Literal ? std::get_if<ir::Device>(&operand.literal) : nullptr;
      const std::string* text = operand.kind == Operand::Kind::Literal ? std::get_if<std::string>(&operand.literal) : nullptr;
      std::optional<ir::Device> parsed = text ? ir::device_from_string(*text) : std::nullopt;
      if (d) device = *d;
      else if (parsed) device = *parsed;
      else if (!is_none(&operand)) return std::nullopt;
    } else if (!(name == "dtype" || ((name == "layout" || name == "pin_memory") && is_none(&operand)))) {
      return std::nullopt;  // start=/end=/step=, out=, a layout
    }
  }
  if (requires_grad && !is_floating(dtype)) return std::nullopt;  // torch raises
  const sym::Expr start = bounds.size() == 1 ? sym::Expr(0) : bounds[0], end = bounds.size() == 1 ? bounds[0] : bounds[1];
  const sym::Expr step = bounds.size() == 3 ? bounds[2] : sym::Expr(1);
  if (!step.is_constant() || step.constant() == 0) return std::nullopt;
  const int64_t k = step.constant();
  // The extent ceil((end - start) / k), >= 0 for every value of the symbols.
  const sym::Expr span = k > 0 ? end - start : start - end;
  const sym::Expr extent = floordiv(span + sym::Expr(std::abs(k) - 1), sym::Expr(std::abs(k)));
  if (!sym::provable(sym::Rel{0, sym::RelOp::Le, span}, call.symbols())) return std::nullopt;
  ir::TensorType t;
  t.dtype = dtype;
  t.sizes = {extent};
  t.strides = {1};
  t.device = device;
  t.requires_grad = requires_grad;
  return std::vector<ir::TensorType>{t};
}

}  // namespace ember::shapes::rules
