// Shape rules of the view ops (view, reshape, permute, transpose, expand, unsqueeze, squeeze,
// flatten, getitem with basic indices, split, chunk) and of contiguous.
//
// A view shares its input's storage, so its strides are computed exactly from the input's; it
// requires grad exactly when its input does (in either grad mode). reshape and flatten are views
// when the new shape can be expressed over the old strides and contiguous copies otherwise;
// contiguous() returns its input itself when torch considers it contiguous already.
#include <algorithm>

#include "shapes/shape_rules_internal.h"

namespace ember::shapes::rules {

namespace {

Result one(ir::TensorType t) { return std::vector<ir::TensorType>{std::move(t)}; }

// The input returned as the result: its type unchanged.
Result alias(const Operand& input) { return one(*input.tensor); }

// `shape` with its one -1 resolved against `count` elements; nullopt when torch would refuse it.
std::optional<Sizes> infer_shape(Sizes shape, int64_t count) {
  int64_t known = 1;
  std::optional<size_t> unknown;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (unknown) return std::nullopt;
      unknown = i;
    } else if (shape[i] < 0 || __builtin_mul_overflow(known, shape[i], &known)) {
      return std::nullopt;
    }
  }
  if (unknown) {
    if (known == 0 || count % known != 0) return std::nullopt;
    shape[*unknown] = count / known;
  } else if (known != count) {
    return std::nullopt;
  }
  return shape;
}

// The strides of `x` viewed as `shape` (same element count), or nullopt when the view would
// need a copy.
//
// The old layout splits into chunks: runs of dims each stepping over the next one exactly
// (size-1 dims join any run, since their strides never matter), with the innermost dim's stride
// as the chunk's base. A new shape is a view when its dims, taken from the innermost, split at
// the same element counts; within a chunk a new dim's stride is the base times the elements
// inside it. New size-1 dims at a chunk boundary go with the inner chunk.
std::optional<Sizes> view_strides(const Dense& x, const Sizes& shape) {
  if (x.dim() == 0) return Sizes(shape.size(), 1);
  auto count = numel(x.sizes);
  if (!count) return std::nullopt;
  if (*count == 0) return shape == x.sizes ? x.strides : contiguous_strides(shape);

  struct Chunk {
    int64_t count;
    int64_t base;
  };
  std::vector<Chunk> chunks;  // innermost first
  Chunk current{1, x.strides.back()};
  for (size_t d = x.sizes.size(); d-- > 0;) {
    current.count *= x.sizes[d];
    bool last = d == 0 || (x.sizes[d - 1] != 1 && x.strides[d - 1] != current.count * current.base);
    if (!last) continue;
    chunks.push_back(current);
    if (d > 0) current = Chunk{1, x.strides[d - 1]};
  }

  Sizes strides(shape.size());
  size_t remaining = shape.size();  // new dims [0, remaining) are not placed yet
  for (const Chunk& chunk : chunks) {
    int64_t inside = 1;
    while (remaining > 0 && (inside < chunk.count || shape[remaining - 1] == 1)) {
      --remaining;
      if (__builtin_mul_overflow(inside, chunk.base, &strides[remaining])) return std::nullopt;
      inside *= shape[remaining];
    }
    if (inside != chunk.count) return std::nullopt;
  }
  if (remaining != 0) return std::nullopt;
  return strides;
}

// x reshaped to `shape` (already resolved): a view when possible; for reshape (`may_copy`) a
// contiguous copy otherwise.
Result reshaped(const Call& call, const Dense& x, const Sizes& shape, bool may_copy) {
  if (auto strides = view_strides(x, shape)) return one(view_of(x, shape, *strides));
  if (!may_copy) return std::nullopt;
  return computed(call, x.dtype, shape, {&x});
}

}  // namespace

Result infer_view_reshape(const Call& call) {
  auto x = as_dense(call.args.empty() ? nullptr : &call.args[0]);
  if (!x) return std::nullopt;
  // view(dtype) reinterprets the elements: no rule.
  auto sizes = sizes_operand(call, call.op == ir::Op::View ? "size" : "shape");
  auto count = numel(x->sizes);
  if (!sizes || !count) return std::nullopt;
  auto shape = infer_shape(std::move(*sizes), *count);
  if (!shape) return std::nullopt;
  return reshaped(call, *x, *shape, call.op == ir::Op::Reshape);
}

Result infer_permute(const Call& call) {
  auto x = as_dense(call.args.empty() ? nullptr : &call.args[0]);
  auto dims = sizes_operand(call, "dims");
  if (!x || !dims || static_cast<int64_t>(dims->size()) != x->dim()) return std::nullopt;
  Sizes sizes, strides;
  std::vector<bool> used(dims->size(), false);
  for (int64_t d : *dims) {
    if (d < -x->dim() || d >= x->dim()) return std::nullopt;
    size_t w = static_cast<size_t>(d < 0 ? d + x->dim() : d);
    if (used[w]) return std::nullopt;
    used[w] = true;
    sizes.push_back(x->sizes[w]);
    strides.push_back(x->strides[w]);
  }
  return one(view_of(*x, sizes, strides));
}

Result infer_transpose(const Call& call) {
  auto b = bind(call, {"input", "dim0", "dim1"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto d0 = as_int((*b)[1]);
  auto d1 = as_int((*b)[2]);
  if (!x || !d0 || !d1) return std::nullopt;
  auto w0 = wrap_dim(*d0, x->dim());
  auto w1 = wrap_dim(*d1, x->dim());
  if (!w0 || !w1) return std::nullopt;
  Sizes sizes = x->sizes, strides = x->strides;
  if (x->dim() > 0) {
    std::swap(sizes[static_cast<size_t>(*w0)], sizes[static_cast<size_t>(*w1)]);
    std::swap(strides[static_cast<size_t>(*w0)], strides[static_cast<size_t>(*w1)]);
  }
  return one(view_of(*x, sizes, strides));
}

Result infer_expand(const Call& call) {
  auto x = as_dense(call.args.empty() ? nullptr : &call.args[0]);
  const Operand* implicit = nullptr;
  auto target = sizes_operand(call, "size", "implicit", &implicit);
  if (!x || !target || (implicit && !as_bool(implicit))) return std::nullopt;
  size_t n = target->size();
  size_t old = x->sizes.size();
  if (n < old) return std::nullopt;
  Sizes sizes(n), strides(n);
  // From the innermost dim: a new leading dim is broadcast (stride 0) unless it has size 1,
  // when it takes the stride an unsqueeze would give it (0 where no dim follows: a 0-d input).
  for (size_t i = n; i-- > 0;) {
    int64_t want = (*target)[i];
    if (i < n - old) {
      if (want < 0) return std::nullopt;
      sizes[i] = want;
      strides[i] = want == 1 && i + 1 < n ? sizes[i + 1] * strides[i + 1] : 0;
      continue;
    }
    size_t d = i - (n - old);
    int64_t have = x->sizes[d];
    if (want == -1 || want == have) {
      sizes[i] = have;
      strides[i] = x->strides[d];
    } else if (have == 1 && want >= 0) {
      sizes[i] = want;
      strides[i] = 0;
    } else {
      return std::nullopt;
    }
  }
  return one(view_of(*x, sizes, strides));
}

Result infer_unsqueeze(const Call& call) {
  auto b = bind(call, {"input", "dim"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto dim = as_int((*b)[1]);
  if (!x || !dim) return std::nullopt;
  auto w = wrap_dim(*dim, x->dim() + 1);
  if (!w) return std::nullopt;
  size_t d = static_cast<size_t>(*w);
  Sizes sizes = x->sizes, strides = x->strides;
  int64_t stride = d < sizes.size() ? sizes[d] * strides[d] : 1;
  sizes.insert(sizes.begin() + static_cast<std::ptrdiff_t>(d), 1);
  strides.insert(strides.begin() + static_cast<std::ptrdiff_t>(d), stride);
  return one(view_of(*x, sizes, strides));
}

Result infer_squeeze(const Call& call) {
  auto b = bind(call, {"input", "dim"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  if (!x) return std::nullopt;
  std::vector<bool> drop(x->sizes.size(), false);
  if (!(*b)[1]) {  // squeeze(x, None) is a TypeError: only an absent dim squeezes all
    for (size_t i = 0; i < drop.size(); ++i) drop[i] = x->sizes[i] == 1;
  } else {
    auto dims = as_int_or_list((*b)[1]);
    if (!dims) return std::nullopt;
    std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(x->dim(), 1)), false);
    for (int64_t d : *dims) {
      auto w = wrap_dim(d, x->dim());
      if (!w || seen[static_cast<size_t>(*w)]) return std::nullopt;
      seen[static_cast<size_t>(*w)] = true;
      if (x->dim() > 0) drop[static_cast<size_t>(*w)] = x->sizes[static_cast<size_t>(*w)] == 1;
    }
  }
  Sizes sizes, strides;
  for (size_t i = 0; i < drop.size(); ++i) {
    if (drop[i]) continue;
    sizes.push_back(x->sizes[i]);
    strides.push_back(x->strides[i]);
  }
  return one(view_of(*x, sizes, strides));
}

Result infer_flatten(const Call& call) {
  auto b = bind(call, {"input", "start_dim", "end_dim"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto start = (*b)[1] ? as_int((*b)[1]) : std::optional<int64_t>(0);
  auto end = (*b)[2] ? as_int((*b)[2]) : std::optional<int64_t>(-1);
  if (!x || !start || !end) return std::nullopt;
  auto s = wrap_dim(*start, x->dim());
  auto e = wrap_dim(*end, x->dim());
  if (!s || !e || *s > *e) return std::nullopt;
  if (x->dim() == 0) return reshaped(call, *x, {1}, true);
  if (*s == *e) return alias(*(*b)[0]);
  Sizes shape(x->sizes.begin(), x->sizes.begin() + *s);
  auto merged = numel(Sizes(x->sizes.begin() + *s, x->sizes.begin() + *e + 1));
  if (!merged) return std::nullopt;
  shape.push_back(*merged);
  shape.insert(shape.end(), x->sizes.begin() + *e + 1, x->sizes.end());
  return reshaped(call, *x, shape, true);
}

// ---- getitem ----------------------------------------------------------------------------------

int64_t slice_extent(std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step, int64_t size) {
  const auto [from, to] = slice_range(start, stop, size);
  return (to - from + step - 1) / step;
}

// Basic indexing: ints, slices with positive steps, None and one Ellipsis, alone or in a tuple.
// Indices are applied left to right as torch does (select, slice, unsqueeze), so a None takes
// the stride an unsqueeze gives before the input dim it precedes.
Result infer_getitem(const Call& call) {
  if (call.args.size() != 2 || !call.kwargs.empty()) return std::nullopt;
  auto x = as_dense(&call.args[0]);
  const Operand& index = call.args[1];
  if (!x) return std::nullopt;
  std::vector<const ir::Literal*> items;
  if (index.kind == Operand::Kind::Sequence && index.tuple) {
    for (const Operand& item : index.items) {
      if (item.kind != Operand::Kind::Literal) return std::nullopt;  // tensors, lists: advanced indexing
      items.push_back(&item.literal);
    }
  } else if (index.kind == Operand::Kind::Literal) {
    items.push_back(&index.literal);
  } else {
    return std::nullopt;
  }
  int64_t consumed = 0, ellipses = 0;
  for (const ir::Literal* item : items) {
    if (std::holds_alternative<ir::Ellipsis>(*item)) {
      ++ellipses;
    } else if (std::holds_alternative<ir::Slice>(*item) || std::holds_alternative<int64_t>(*item)) {
      ++consumed;
    } else if (!std::holds_alternative<ir::NoneLiteral>(*item)) {
      return std::nullopt;  // bools: advanced indexing
    }
  }
  if (ellipses > 1 || consumed > x->dim()) return std::nullopt;

  Sizes sizes, strides;
  size_t pos = 0;  // the next input dim
  for (const ir::Literal* item : items) {
    if (std::holds_alternative<ir::NoneLiteral>(*item)) {
      sizes.push_back(1);
      strides.push_back(pos < x->sizes.size() ? x->sizes[pos] * x->strides[pos] : 1);
    } else if (std::holds_alternative<ir::Ellipsis>(*item)) {
      for (int64_t k = 0; k < x->dim() - consumed; ++k, ++pos) {
        sizes.push_back(x->sizes[pos]);
        strides.push_back(x->strides[pos]);
      }
    } else if (const int64_t* v = std::get_if<int64_t>(item)) {
      int64_t size = x->sizes[pos];
      if (*v < -size || *v >= size) return std::nullopt;
      ++pos;
    } else {
      const ir::Slice& slice = std::get<ir::Slice>(*item);
      std::optional<int64_t> start = slice.start, stop = slice.stop, step = slice.step;
      if (step && *step <= 0) return std::nullopt;
      int64_t by = step.value_or(1);
      sizes.push_back(slice_extent(start, stop, by, x->sizes[pos]));
      int64_t stride;
      if (__builtin_mul_overflow(x->strides[pos], by, &stride)) return std::nullopt;
      strides.push_back(stride);
      ++pos;
    }
  }
  for (; pos < x->sizes.size(); ++pos) {
    sizes.push_back(x->sizes[pos]);
    strides.push_back(x->strides[pos]);
  }
  return one(view_of(*x, sizes, strides));
}

// The primitives decompose emits for basic indexing: aten's slice(input, dim, start, end, step) (bounds
// wrapped and clamped as getitem's, a positive step) and select(input, dim, index).
Result infer_slice_select(const Call& call) {
  const bool is_slice = call.op == ir::Op::Slice;
  auto b = is_slice ? bind(call, {"input|self", "dim", "start", "end", "step"}) : bind(call, {"input|self", "dim", "index"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto dim = (*b)[1] ? as_int((*b)[1]) : std::optional<int64_t>(0);
  if (!x || !dim || x->dim() == 0) return std::nullopt;
  auto w = wrap_dim(*dim, x->dim());
  if (!w) return std::nullopt;
  const size_t d = static_cast<size_t>(*w);
  Sizes sizes = x->sizes, strides = x->strides;
  if (!is_slice) {
    auto index = as_int((*b)[2]);
    if (!index || *index < -sizes[d] || *index >= sizes[d]) return std::nullopt;
    sizes.erase(sizes.begin() + *w);
    strides.erase(strides.begin() + *w);
    return one(view_of(*x, sizes, strides));
  }
  auto start = as_int((*b)[2]), end = as_int((*b)[3]);
  auto step = (*b)[4] ? as_int((*b)[4]) : std::optional<int64_t>(1);
  if ((!start && !is_none((*b)[2])) || (!end && !is_none((*b)[3])) || !step || *step < 1) return std::nullopt;
  sizes[d] = slice_extent(start, end, *step, sizes[d]);
  if (__builtin_mul_overflow(strides[d], *step, &strides[d])) return std::nullopt;
  return one(view_of(*x, sizes, strides));
}

// ---- split, chunk, contiguous -----------------------------------------------------------------

// More pieces than this are left to the meta kernel rather than built here.
constexpr int64_t kMaxPieces = 1 << 16;

Result infer_split_chunk(const Call& call) {
  bool is_split = call.op == ir::Op::Split;
  auto b = is_split ? bind(call, {"input|tensor", "split_size|split_size_or_sections", "dim"})
                    : bind(call, {"input", "chunks", "dim"});
  if (!b) return std::nullopt;
  auto x = as_dense((*b)[0]);
  auto dim = (*b)[2] ? as_int((*b)[2]) : std::optional<int64_t>(0);
  if (!x || !dim || x->dim() == 0) return std::nullopt;
  auto w = wrap_dim(*dim, x->dim());
  if (!w) return std::nullopt;
  int64_t size = x->sizes[static_cast<size_t>(*w)];
  Sizes pieces;
  auto piece_size = as_int((*b)[1]);
  if (!is_split) {
    if (!piece_size || *piece_size <= 0 || *piece_size > kMaxPieces) return std::nullopt;
    int64_t chunks = *piece_size;
    piece_size = (size + chunks - 1) / chunks;
    // An empty dim splits into `chunks` empty pieces (split would give one).
    if (size == 0) pieces.assign(static_cast<size_t>(chunks), 0);
  }
  if (pieces.empty() && piece_size) {
    int64_t step = *piece_size;
    if (step < 0 || (step == 0 && size != 0)) return std::nullopt;
    if (size == 0) {
      pieces.push_back(0);
    } else {
      if ((size + step - 1) / step > kMaxPieces) return std::nullopt;
      for (int64_t at = 0; at < size; at += step) pieces.push_back(std::min(step, size - at));
    }
  } else if (pieces.empty()) {
    auto sections = as_int_list((*b)[1]);
    if (!sections) return std::nullopt;
    int64_t total = 0;
    for (int64_t s : *sections) {
      if (s < 0) return std::nullopt;
      total += s;
    }
    if (total != size) return std::nullopt;
    pieces = *sections;
  }
  if (static_cast<int64_t>(pieces.size()) > kMaxPieces) return std::nullopt;
  std::vector<ir::TensorType> out;
  for (int64_t p : pieces) {
    Sizes sizes = x->sizes;
    sizes[static_cast<size_t>(*w)] = p;
    out.push_back(view_of(*x, sizes, x->strides));
  }
  return out;
}

Result infer_contiguous(const Call& call) {
  auto b = bind(call, {"input", "*memory_format"});
  if (!b || (*b)[1]) return std::nullopt;
  auto x = as_dense((*b)[0]);
  if (!x) return std::nullopt;
  if (is_contiguous(*x)) return alias(*(*b)[0]);
  return computed(call, x->dtype, x->sizes, {&*x});
}

}  // namespace ember::shapes::rules

namespace ember::shapes {

std::pair<int64_t, int64_t> slice_range(std::optional<int64_t> start, std::optional<int64_t> stop, int64_t size) {
  auto clamp_bound = [size](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + size : v, 0, size); };
  const int64_t from = start ? clamp_bound(*start) : 0;
  return {from, std::max(stop ? clamp_bound(*stop) : size, from)};
}

}  // namespace ember::shapes
