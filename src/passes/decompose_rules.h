// Internal to decompose: the rule table's types and the node builders the rule families share
// (decompose.cpp, decompose_pointwise.cpp, decompose_reduce.cpp, decompose_views.cpp).
//
// A rule rewrites one source node into primitives (docs/decompositions.md): it reads the node
// through its bound arguments, emits new nodes through the builders, and binds every result of
// the node with finish(). When the node is not in a form the rule rewrites exactly, or nothing
// needs to change, the rule throws Refuse and the node is copied as it was.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "passes/rewriter.h"
#include "passes/signatures.h"

namespace ember::passes::decomp {

using ir::Arg;
using ir::DType;
using ir::Op;
using ir::ValueId;

struct Ctx {
  Rewriter& rw;
  const ir::Node& node;
  std::optional<Bound> bound;  // when the callable has a signature and the call binds
  Rewriter::Mark mark;

  // The bound argument of a parameter (Refuse if the call did not bind).
  const Arg& arg(std::string_view name) const;
  // The new-graph value of a tensor argument (Refuse if it is not a tensor).
  ValueId tensor(const Arg& a) const;
  ValueId tensor(std::string_view name) const { return tensor(arg(name)); }
  bool none(std::string_view name) const { return is_none(arg(name)); }
  int64_t int_arg(std::string_view name) const;
  double number_arg(std::string_view name) const;
  bool bool_arg(std::string_view name) const;
  const ir::TensorType& result_type(size_t i = 0) const;
  // Binds result i of the node to `v`; a value emitted by this rule takes the recorded type.
  void finish(ValueId v, size_t i = 0);
};

using Rule = std::function<void(Ctx&)>;
using RuleMap = std::map<std::string, Rule, std::less<>>;

void add_pointwise_rules(RuleMap& rules);
void add_reduction_rules(RuleMap& rules);  // reductions, softmax family, norms, losses
void add_view_rules(RuleMap& rules);       // views, data movement, conversions, factories, linear

// --- Builders: values of the new graph -----------------------------------------------------

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
// var_mean: {var, mean}.
std::pair<ValueId, ValueId> var_mean(Rewriter& rw, ValueId x, std::vector<int64_t> dims, int64_t correction, bool keepdim);
// A reshape; `x` itself when the sizes do not change, unless `always` (a view must be a new
// tensor object, as torch's is).
ValueId reshape(Rewriter& rw, ValueId x, const std::vector<int64_t>& sizes, bool always = false);
ValueId permute(Rewriter& rw, ValueId x, const std::vector<int64_t>& perm);
ValueId expand(Rewriter& rw, ValueId x, const std::vector<int64_t>& sizes);
ValueId slice(Rewriter& rw, ValueId x, int64_t dim, int64_t start, int64_t end, int64_t step);
ValueId select(Rewriter& rw, ValueId x, int64_t dim, int64_t index);
ValueId full(Rewriter& rw, const std::vector<int64_t>& sizes, double value, DType dt, const ir::Device& device);

// Dims helpers.
int64_t norm_dim(int64_t d, int64_t rank);  // Refuse when out of range
std::vector<int64_t> all_dims(int64_t rank);
// Reduction dims of an argument (int, list, None or empty list = all), normalized and sorted.
std::vector<int64_t> reduction_dims(const Arg& a, int64_t rank, bool empty_means_all);
// The float32 computation dtype of composite ops (float16/bfloat16 compute in float32).
DType opmath(DType dt);

}  // namespace ember::passes::decomp
