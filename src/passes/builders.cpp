// The node builders (builders.h).
#include "passes/builders.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "passes/signatures.h"

namespace ember::passes::build {

Arg scalar(double value, DType dt) {
  if (dt == DType::Bool) return Arg::of_literal(value != 0.0);
  if (is_integral(dt)) {
    if (static_cast<double>(static_cast<int64_t>(value)) != value) refuse();
    return Arg::of_literal(static_cast<int64_t>(value));
  }
  if (!is_floating_point(dt)) refuse();
  return Arg::of_literal(value);
}

Arg scalar_for(const Arg& literal, DType dt) {
  if (literal.kind != Arg::Kind::Literal) refuse();
  if (auto i = int_literal(literal)) {
    if (is_floating_point(dt)) return Arg::of_literal(static_cast<double>(*i));
    if (dt == DType::Bool) refuse();
    return literal;
  }
  if (auto b = bool_literal(literal)) {
    if (dt == DType::Bool) return literal;
    return scalar(*b ? 1.0 : 0.0, dt);
  }
  if (std::holds_alternative<double>(literal.literal)) {
    if (!is_floating_point(dt)) refuse();
    return literal;
  }
  refuse();
}

namespace {

// Whether the elements of `t` tile its storage exactly, in some order of dims (torch's
// is_non_overlapping_and_dense), with constant sizes and strides.
bool dense_layout(const ir::TensorType& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims of size > 1
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    if (!t.sizes[d].is_constant() || !t.strides[d].is_constant()) return false;
    if (t.sizes[d].constant() != 1) dims.emplace_back(t.strides[d].constant(), t.sizes[d].constant());
  }
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (auto [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

}  // namespace

ValueId convert(Rewriter& rw, ValueId x, DType dt) {
  const ir::TensorType& t = rw.type(x);
  if (t.dtype == dt) return x;
  ir::TensorType rt = make_type(dt, t.sizes, t.device, t.requires_grad);
  // torch's .to(dtype) allocates like its input (preserve_format): a dense input's strides exactly,
  // size-1 dims included, which the shape rule does not always answer for.
  if (dense_layout(t)) rt.strides = t.strides;
  return rw.emit(Op::Convert, {V(x), Arg::of_literal(dt)}, {}, std::move(rt));
}

ValueId pointwise(Rewriter& rw, Op op, std::vector<Arg> operands, DType dt) {
  std::vector<sym::Expr> sizes;
  const ir::TensorType* first = nullptr;
  bool grad = false;
  for (const Arg& a : operands) {
    if (a.kind != Arg::Kind::Value) continue;
    const ir::TensorType& t = rw.type(a.value);
    sizes = first ? broadcast(sizes, t.sizes) : t.sizes;
    if (!first) first = &t;
    grad = grad || t.requires_grad;
  }
  if (!first) throw std::logic_error("pointwise builder: no tensor operand");
  ir::Device device = first->device;
  return rw.emit(op, std::move(operands), {}, make_type(dt, std::move(sizes), device, grad));
}

ValueId unary(Rewriter& rw, Op op, ValueId x) { return pointwise(rw, op, {V(x)}, rw.type(x).dtype); }

namespace {
bool is_comparison(Op op) {
  return op == Op::Eq || op == Op::Ne || op == Op::Lt || op == Op::Le || op == Op::Gt || op == Op::Ge;
}
}  // namespace

ValueId binary(Rewriter& rw, Op op, ValueId a, Arg b) {
  DType dt = rw.type(a).dtype;
  if (b.kind == Arg::Kind::Value && rw.type(b.value).dtype != dt)
    throw std::logic_error("binary builder: operands of different dtypes");
  if (b.kind == Arg::Kind::Literal) b = scalar_for(b, dt);
  return pointwise(rw, op, {V(a), std::move(b)}, is_comparison(op) ? DType::Bool : dt);
}

ValueId binary_s(Rewriter& rw, Op op, ValueId a, double b) { return binary(rw, op, a, scalar(b, rw.type(a).dtype)); }

namespace {
Arg int_list_arg(const std::vector<int64_t>& xs) {
  std::vector<Arg> items;
  for (int64_t x : xs) items.push_back(Arg::of_literal(x));
  return Arg::list(std::move(items));
}

std::vector<sym::Expr> reduced_sizes(const ir::TensorType& t, const std::vector<int64_t>& dims, bool keepdim) {
  std::vector<sym::Expr> sizes;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
    if (!reduced) {
      sizes.push_back(t.sizes[d]);
    } else if (keepdim) {
      sizes.push_back(1);
    }
  }
  return sizes;
}
}  // namespace

ValueId reduce(Rewriter& rw, Op op, ValueId x, std::vector<int64_t> dims, bool keepdim) {
  const ir::TensorType& t = rw.type(x);
  // A reduction over no dims is one only of a 0-dim tensor (its value); the op keeps the form torch
  // gives it (`sum(x, [])`, which lowering runs as an extern call).
  if (dims.empty() && !t.sizes.empty()) throw std::logic_error("reduce builder: no dims of a tensor of rank > 0");
  ir::TensorType rt = make_type(t.dtype, reduced_sizes(t, dims, keepdim), t.device, t.requires_grad);
  return rw.emit(op, {V(x), int_list_arg(dims), Arg::of_literal(keepdim)}, {}, std::move(rt));
}

ValueId vector_norm(Rewriter& rw, ValueId x, const std::vector<int64_t>& dims, double p, bool keepdim) {
  if (p == 2.0) return unary(rw, Op::Sqrt, reduce(rw, Op::Sum, binary(rw, Op::Mul, x, V(x)), dims, keepdim));
  if (p == 1.0) return reduce(rw, Op::Sum, unary(rw, Op::Abs, x), dims, keepdim);
  if (std::isinf(p) && p > 0) return reduce(rw, Op::Amax, unary(rw, Op::Abs, x), dims, keepdim);
  refuse();
}

std::pair<ValueId, ValueId> var_mean(Rewriter& rw, ValueId x, std::vector<int64_t> dims, int64_t correction,
                                     bool keepdim) {
  const ir::TensorType& t = rw.type(x);
  ir::TensorType rt = make_type(t.dtype, reduced_sizes(t, dims, keepdim), t.device, t.requires_grad);
  std::vector<ValueId> r = rw.emit_tuple(
      Op::VarMean, {V(x), int_list_arg(dims)},
      {{"correction", Arg::of_literal(correction)}, {"keepdim", Arg::of_literal(keepdim)}}, {rt, rt});
  return {r[0], r[1]};
}

namespace {
Arg size_list_arg(const std::vector<sym::Expr>& xs) {
  std::vector<Arg> items;
  for (const sym::Expr& x : xs) items.push_back(Arg::of_size(x));
  return Arg::list(std::move(items));
}

}  // namespace

ValueId reshape_symbolic(Rewriter& rw, ValueId x, const std::vector<sym::Expr>& sizes, bool always) {
  const ir::TensorType& t = rw.type(x);
  // Symbolic counts compare structurally: one that might be equal but is not spelled so refuses.
  if (sym::product(t.sizes) != sym::product(sizes)) {
    auto constant = [](const sym::Expr& e) { return e.is_constant(); };
    if (std::all_of(t.sizes.begin(), t.sizes.end(), constant) && std::all_of(sizes.begin(), sizes.end(), constant))
      throw std::logic_error("reshape builder: element counts differ");
    refuse();
  }
  if (t.sizes == sizes && !always) return x;
  ir::TensorType rt = make_type(t.dtype, sizes, t.device, t.requires_grad);
  return rw.emit(Op::Reshape, {V(x), size_list_arg(sizes)}, {}, std::move(rt));
}

ValueId reshape(Rewriter& rw, ValueId x, const std::vector<int64_t>& sizes, bool always) {
  return reshape_symbolic(rw, x, to_exprs(sizes), always);
}

ValueId matmul(Rewriter& rw, Op op, ValueId a, ValueId b) {
  const ir::TensorType& ta = rw.type(a);
  const ir::TensorType& tb = rw.type(b);
  std::vector<sym::Expr> sizes(ta.sizes.begin(), ta.sizes.end() - 1);
  sizes.push_back(tb.sizes.back());
  return rw.emit(op, {V(a), V(b)}, {}, make_type(ta.dtype, std::move(sizes), ta.device, ta.requires_grad || tb.requires_grad));
}

ValueId permute(Rewriter& rw, ValueId x, const std::vector<int64_t>& perm) {
  const ir::TensorType& t = rw.type(x);
  ir::TensorType rt = t;
  for (size_t i = 0; i < perm.size(); ++i) {
    rt.sizes[i] = t.sizes.at(perm[i]);
    rt.strides[i] = t.strides.at(perm[i]);
  }
  return rw.emit(Op::Permute, {V(x), int_list_arg(perm)}, {}, std::move(rt));
}

ValueId expand_symbolic(Rewriter& rw, ValueId x, const std::vector<sym::Expr>& sizes) {
  std::vector<sym::Expr> in = rw.type(x).sizes;
  if (in.size() < sizes.size()) {
    std::vector<sym::Expr> padded(sizes.size() - in.size(), 1);
    padded.insert(padded.end(), in.begin(), in.end());
    x = reshape_symbolic(rw, x, padded);
  }
  const ir::TensorType& t = rw.type(x);
  ir::TensorType rt = t;
  for (size_t i = 0; i < sizes.size(); ++i) {
    rt.sizes[i] = sizes[i];
    if (sizes[i] != t.sizes[i]) rt.strides[i] = 0;
  }
  return rw.emit(Op::Expand, {V(x), size_list_arg(sizes)}, {}, std::move(rt));
}

ValueId expand(Rewriter& rw, ValueId x, const std::vector<int64_t>& sizes) { return expand_symbolic(rw, x, to_exprs(sizes)); }

ValueId div_count(Rewriter& rw, ValueId x, const sym::Expr& count) {
  if (count.is_constant()) return binary_s(rw, Op::Div, x, static_cast<double>(count.constant()));
  if (!is_floating_point(rw.type(x).dtype)) refuse();
  return pointwise(rw, Op::Div, {V(x), Arg::of_size(count)}, rw.type(x).dtype);
}

ValueId slice(Rewriter& rw, ValueId x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return slice_symbolic(rw, x, dim, start, std::max(start, end), step);
}

ValueId slice_symbolic(Rewriter& rw, ValueId x, int64_t dim, const sym::Expr& start, const sym::Expr& end, int64_t step) {
  const ir::TensorType& t = rw.type(x);
  ir::TensorType rt = t;
  rt.sizes.at(dim) = floordiv(end - start + sym::Expr(step - 1), sym::Expr(step));
  rt.strides.at(dim) = t.strides[dim] * sym::Expr(step);
  return rw.emit(Op::Slice, {V(x), Arg::of_literal(dim), Arg::of_size(start), Arg::of_size(end), Arg::of_literal(step)},
                 {}, std::move(rt));
}

ValueId select(Rewriter& rw, ValueId x, int64_t dim, int64_t index) {
  const ir::TensorType& t = rw.type(x);
  ir::TensorType rt = t;
  rt.sizes.erase(rt.sizes.begin() + dim);
  rt.strides.erase(rt.strides.begin() + dim);
  return rw.emit(Op::Select, {V(x), Arg::of_literal(dim), Arg::of_literal(index)}, {}, std::move(rt));
}

ValueId full(Rewriter& rw, const std::vector<sym::Expr>& sizes, double value, DType dt, const ir::Device& device) {
  return rw.emit(Op::Full, {size_list_arg(sizes), scalar(value, dt)},
                 {{"dtype", Arg::of_literal(dt)}, {"device", Arg::of_literal(device)}},
                 make_type(dt, sizes, device, false));
}

ValueId cat(Rewriter& rw, const std::vector<ValueId>& xs, int64_t dim, const ir::TensorType& like) {
  std::vector<Arg> items;
  sym::Expr total = 0;
  for (ValueId x : xs) {
    items.push_back(V(x));
    total = total + rw.type(x).sizes.at(dim);
  }
  std::vector<sym::Expr> sizes = rw.type(xs[0]).sizes;
  sizes[dim] = total;
  return rw.emit(Op::Cat, {Arg::list(std::move(items)), Arg::of_literal(dim)}, {},
                 make_type(like.dtype, std::move(sizes), like.device, like.requires_grad));
}

ValueId pad(Rewriter& rw, ValueId x, int64_t dim, int64_t before, int64_t after, double value) {
  if (before < 0 || after < 0) refuse();
  if (before == 0 && after == 0) return x;
  const ir::TensorType type = rw.type(x);
  std::vector<ValueId> parts;
  for (int64_t width : {before, int64_t{-1}, after}) {
    if (width == 0) continue;
    if (width < 0) {
      parts.push_back(x);
      continue;
    }
    std::vector<sym::Expr> sizes = type.sizes;
    sizes.at(static_cast<size_t>(dim)) = width;
    parts.push_back(full(rw, sizes, value, type.dtype, type.device));
  }
  return cat(rw, parts, dim, type);
}

ValueId relayout(Rewriter& rw, ValueId v, const ir::TensorType& want) {
  const ir::TensorType& got = rw.type(v);
  bool moves = false;
  for (size_t d = 0; d < want.sizes.size(); ++d)
    moves = moves || (!(want.sizes[d].is_constant() && want.sizes[d].constant() == 1) && got.strides[d] != want.strides[d]);
  if (!moves) return v;
  if (want.strides == ir::contiguous_strides(want.sizes))
    return rw.emit(ir::Op::Contiguous, {ir::Arg::of_value(v)}, {}, want);
  std::vector<int64_t> sizes, strides;
  for (size_t d = 0; d < want.sizes.size(); ++d) {
    if (!want.sizes[d].is_constant() || !want.strides[d].is_constant()) return v;
    sizes.push_back(want.sizes[d].constant());
    strides.push_back(want.strides[d].constant());
  }
  std::vector<int64_t> order(sizes.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = static_cast<int64_t>(d);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  std::vector<int64_t> inverse(order.size());
  for (size_t d = 0; d < order.size(); ++d) inverse[order[d]] = static_cast<int64_t>(d);
  int64_t expected = 1;  // dense: want's strides are the contiguous strides of the sizes in that order
  for (auto d = order.rbegin(); d != order.rend(); ++d) {
    if (sizes[*d] != 1 && strides[*d] != expected) return v;
    expected *= sizes[*d];
  }
  ValueId permuted = permute(rw, v, order);
  ir::TensorType contiguous = rw.type(permuted);
  contiguous.strides = ir::contiguous_strides(contiguous.sizes);
  return permute(rw, rw.emit(ir::Op::Contiguous, {ir::Arg::of_value(permuted)}, {}, contiguous), inverse);
}

int64_t norm_dim(int64_t d, int64_t rank) {
  int64_t wrap = std::max<int64_t>(rank, 1);
  if (d < -wrap || d >= wrap) refuse();
  return d < 0 ? d + wrap : d;
}

std::vector<int64_t> all_dims(int64_t rank) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  return dims;
}

std::vector<int64_t> reduction_dims(const Arg& a, int64_t rank, bool empty_means_all) {
  if (is_none(a)) return all_dims(rank);
  auto ds = int_list(a, true);
  if (!ds) refuse();
  if (ds->empty()) {
    if (!empty_means_all) refuse();
    return all_dims(rank);
  }
  for (int64_t& d : *ds) d = norm_dim(d, rank);
  std::sort(ds->begin(), ds->end());
  if (std::adjacent_find(ds->begin(), ds->end()) != ds->end()) refuse();
  if (rank == 0) refuse();  // a rank-0 reduction is its input: left to torch
  return *ds;
}

DType opmath(DType dt) { return dt == DType::Float16 || dt == DType::BFloat16 ? DType::Float32 : dt; }

}  // namespace ember::passes::build
