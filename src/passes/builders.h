// Node builders: emit primitives (docs/decompositions.md) into a Rewriter's graph with their
// result types computed here, so a rewriting pass writes `binary(rw, Op::Mul, x, V(y))` instead of
// spelling types. Used by decompose (its rules) and by autograd (derivative rules emit the same
// primitives, so the backward needs no decomposition of its own).
//
// Guarantees: every builder emits nodes in the primitive graph's canonical form (the contract with
// lowering), types contiguous unless the op's shape rule gives strides; a builder that meets a form
// it cannot build exactly throws Refuse (the caller rolls back).
#pragma once

#include <utility>
#include <vector>

#include "passes/rewriter.h"

namespace ember::passes::build {

using ir::Arg;
using ir::DType;
using ir::Op;
using ir::ValueId;

inline Arg V(ValueId v) { return Arg::of_value(v); }
// A scalar literal of the Python kind that matches `dt` (Refuse for a non-integer into an int).
Arg scalar(double value, DType dt);
// Normalizes a literal operand to the Python kind of `dt`.
Arg scalar_for(const Arg& literal, DType dt);
ValueId convert(Rewriter& rw, ValueId x, DType dt);
// A pointwise node over `operands` (tensors broadcast; literals scalars) with result dtype `dt`.
ValueId pointwise(Rewriter& rw, Op op, std::vector<Arg> operands, DType dt);
ValueId unary(Rewriter& rw, Op op, ValueId x);
// Binary op on a tensor and a tensor or literal of the same computation dtype (the tensor's).
ValueId binary(Rewriter& rw, Op op, ValueId a, Arg b);
ValueId binary_s(Rewriter& rw, Op op, ValueId a, double b);  // b becomes a literal of a's kind
ValueId reduce(Rewriter& rw, Op op, ValueId x, std::vector<int64_t> dims, bool keepdim);
// ||x||_p over `dims` (kept unless `keepdim` is false), in x's dtype: sqrt(sum(x*x)) for p = 2, sum(|x|) for 1,
// amax(|x|) for inf; any other p refuses.
ValueId vector_norm(Rewriter& rw, ValueId x, const std::vector<int64_t>& dims, double p, bool keepdim = true);
// var_mean: {var, mean}.
std::pair<ValueId, ValueId> var_mean(Rewriter& rw, ValueId x, std::vector<int64_t> dims, int64_t correction, bool keepdim);
// A reshape; `x` itself when the sizes do not change, unless `always` (a view must be a new
// tensor object, as torch's is).
// Symbolic sizes are written as symbolic int literals; element counts must be equal structurally
// (Refuse otherwise).
ValueId reshape(Rewriter& rw, ValueId x, const std::vector<int64_t>& sizes, bool always = false);
ValueId reshape_symbolic(Rewriter& rw, ValueId x, const std::vector<sym::Expr>& sizes, bool always = false);
// a @ b by `op` (Matmul, Mm, Bmm): a's leading sizes and b's last, contiguous, a's dtype.
ValueId matmul(Rewriter& rw, Op op, ValueId a, ValueId b);
ValueId permute(Rewriter& rw, ValueId x, const std::vector<int64_t>& perm);
ValueId expand(Rewriter& rw, ValueId x, const std::vector<int64_t>& sizes);
ValueId expand_symbolic(Rewriter& rw, ValueId x, const std::vector<sym::Expr>& sizes);
// x / count for a floating x: a float literal when the count is constant, else the symbolic int
// itself as the divisor (lowering converts it to x's dtype, as torch converts an element count).
ValueId div_count(Rewriter& rw, ValueId x, const sym::Expr& count);
// x[start:end:step] along `dim`, bounds in the primitive's canonical form (0 <= start <= end <= size, step >= 1;
// for symbolic bounds, for every value of the symbols: the caller proves it, sym/relation.h).
ValueId slice(Rewriter& rw, ValueId x, int64_t dim, int64_t start, int64_t end, int64_t step);
ValueId slice_symbolic(Rewriter& rw, ValueId x, int64_t dim, const sym::Expr& start, const sym::Expr& end, int64_t step);
ValueId select(Rewriter& rw, ValueId x, int64_t dim, int64_t index);
// cat along `dim`; the result takes `like`'s dtype, device and requires_grad.
ValueId cat(Rewriter& rw, const std::vector<ValueId>& xs, int64_t dim, const ir::TensorType& like);
ValueId full(Rewriter& rw, const std::vector<sym::Expr>& sizes, double value, DType dt, const ir::Device& device);
// `v` copied into `want`'s strides when they are a dense layout (a permutation of contiguous strides):
// a contiguous copy, or a permute into want's stride order, a contiguous copy and the inverse permute
// (a channels-last copy). `v` itself for any other layout, and where the two differ only in the
// strides of size-1 dims, which address nothing.
ValueId relayout(Rewriter& rw, ValueId v, const ir::TensorType& want);
// `x` padded along `dim` with `before` and `after` elements of `value` (widths >= 0; Refuse otherwise):
// `full` blocks joined on by cat, which lowering turns into a select per element.
ValueId pad(Rewriter& rw, ValueId x, int64_t dim, int64_t before, int64_t after, double value);

// Dims helpers.
int64_t norm_dim(int64_t d, int64_t rank);  // Refuse when out of range
std::vector<int64_t> all_dims(int64_t rank);
// Reduction dims of an argument (int, list, None or empty list = all), normalized and sorted.
std::vector<int64_t> reduction_dims(const Arg& a, int64_t rank, bool empty_means_all);
// The float32 computation dtype of composite ops (float16/bfloat16 compute in float32).
DType opmath(DType dt);

}  // namespace ember::passes::build
