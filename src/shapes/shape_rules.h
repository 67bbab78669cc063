// Shape rules: the result types (dtype, sizes, strides, device, requires_grad) of Ember's core
// ops and of some torch calls, computed in C++ so that capture does not run torch's meta kernels
// (Python, and most of capture time) for the ops that models use most, and so that the passes
// and the verifier can ask what type a node should have.
//
// Needs: the operands as IR arguments (ir::Arg: values, whose types the caller looks up, and
// literals), with no Python dependency — this folder compiles into ember_core. The trace
// converts its Python constants into ir::Literal with the same conversion that builds nodes'
// arguments; the passes and the verifier read a node's arguments (operands_of).
//
// Guarantees: a rule answers only when it is sure: every case it returns a type for has been
// compared with torch's meta tensors (tests/shapes/), and any argument form, dtype or layout it
// does not model exactly gives std::nullopt, so the caller runs the meta kernel as before. A call
// that torch would reject (bad shapes, unsupported dtypes, out-of-range dims) is also
// std::nullopt: the meta kernel then raises torch's own error. docs/shape-rules.md lists what is
// covered.
//
// Symbolic sizes: the pointwise, reduction, normalization and matmul families, embedding,
// tril/triu and the torch-call rules answer by constant stand-ins (shape_rules_symbolic.cpp); the
// view family, contiguous and cat are written over sym::Expr (shape_rules_symbolic_views.cpp);
// everything else answers std::nullopt for a symbolic size (never a guess). Symbolic int arguments
// are `sym::Expr` literals. docs/shape-rules.md has the details.
#pragma once

#include <complex>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "sym/relation.h"

namespace ember::shapes {

// One operand of a call as the rules see it: an ir::Arg with its value's type looked up.
// `Complex` is a Python complex scalar, which ir::Literal cannot hold (the trace never records
// one: torch runs such calls); only the test bindings pass it. `Opaque` is a constant no
// literal spells (the rules decline wherever they would read it).
struct Operand {
  enum class Kind : uint8_t { Tensor, Literal, Sequence, Complex, Opaque };
  Kind kind = Kind::Opaque;
  const ir::TensorType* tensor = nullptr;  // Tensor: borrowed, outlives the call
  ir::Literal literal;                     // Literal
  std::vector<Operand> items;              // Sequence
  bool tuple = false;                      // Sequence: a tuple (else a list)
  std::complex<double> complex;            // Complex

  static Operand of_tensor(const ir::TensorType* t);
  static Operand of_literal(ir::Literal lit);
  static Operand sequence(std::vector<Operand> items, bool tuple);
  static Operand of_complex(std::complex<double> z);
  static Operand opaque();
};

// torch.result_type over tensors and scalars (bool, int and float literals, complex operands):
// dimensioned tensors outrank 0-d tensors, which outrank scalars, each only within a category;
// a float scalar stands for `default_dtype`. nullopt for any other operand, for no operand, or
// where promotion refuses (float8 with another dtype). Sizes may be symbolic.
std::optional<ir::DType> result_type(const std::vector<Operand>& operands, ir::DType default_dtype);

// A node's arguments as operands, with the types of `graph`'s values (or those `type_of` gives: a
// graph being built, such as decompose's rewriter). The operands point into those types.
using TypeOf = std::function<const ir::TensorType&(ir::ValueId)>;
std::vector<Operand> operands_of(const std::vector<ir::Arg>& args, const TypeOf& type_of);
std::vector<std::pair<std::string, Operand>> operands_of(const std::vector<std::pair<std::string, ir::Arg>>& kwargs,
                                                         const TypeOf& type_of);
std::vector<Operand> operands_of(const std::vector<ir::Arg>& args, const ir::Graph& graph);
std::vector<std::pair<std::string, Operand>> operands_of(const std::vector<std::pair<std::string, ir::Arg>>& kwargs,
                                                         const ir::Graph& graph);

// Result types of `op` applied to `args`/`kwargs`, or std::nullopt when the rule does not know this case exactly
// (the caller then runs torch's meta kernel). Never a guess: nullopt unless sure. `grad_enabled` is the trace's grad
// mode (results require grad when grad is enabled, an input requires grad, and the op is differentiable for the
// output dtype: floating/complex outputs only). `default_dtype` is torch.get_default_dtype().
//
// Two refinements of the requires_grad rule, both torch's behavior: a view (view, reshape that
// needs no copy, permute, transpose, expand, squeeze, unsqueeze, flatten, getitem, split, chunk)
// requires grad exactly when its input does, in either grad mode; and a call that returns its
// input itself (contiguous() of a contiguous tensor, flatten(x, d, d), dropout that is a no-op)
// returns the input's type unchanged.
//
// Operands are passed as the callable received them (self first for Tensor methods); a shape or
// a tuple index is a Sequence of literals, cat's tensors a Sequence of tensors. Forms only a
// Tensor method accepts are read as that method's: several ints after the tensor
// (x.reshape(2, 3), x.permute(1, 0)) are the sizes, although torch.reshape / torch.permute would
// refuse them with a TypeError.
//
// `facts`: the symbols' ranges where the caller knows them (the trace's, narrowed by its guards), for
// the questions a rule asks about symbolic strides and sizes; without them a symbol is taken as >= 2
// (>= 1 for the size formulas' relations).
std::optional<std::vector<ir::TensorType>> infer_result_types(ir::Op op, const std::vector<Operand>& args,
    const std::vector<std::pair<std::string, Operand>>& kwargs, bool grad_enabled, ir::DType default_dtype,
    const sym::Symbols* facts = nullptr);

// The same for a call of a torch callable that is not a core op (a `torch` node), named by its
// qualified name as python/ember/ops.py's qualname() gives it ("torch.nn.functional.rms_norm",
// "torch.conv2d", "torch.Tensor.float"). Same contract as infer_result_types; callables without
// a rule give std::nullopt. docs/shape-rules.md lists them.
std::optional<std::vector<ir::TensorType>> infer_torch_call_types(
    std::string_view qualified_name, const std::vector<Operand>& args,
    const std::vector<std::pair<std::string, Operand>>& kwargs, bool grad_enabled, ir::DType default_dtype,
    const sym::Symbols* facts = nullptr);
// A relation among symbolic sizes that a formula's answer holds under and that the symbols' facts
// alone do not decide (the rules see no ranges: each symbol is taken as >= 1): conv's kernel within its
// padded input, its input's channels equal to its weight's, a list index within a symbolic dim. `why`
// says what needs it ("needs its input's channels static"), for the guard's reason; empty: the
// relation's own text serves.
struct Assumption {
  sym::Rel rel;
  std::string why;
};
using Assumptions = std::vector<Assumption>;

// The result sizes of torch calls whose sizes are arithmetic on their operands' sizes (torch.conv1d and
// torch.conv2d: floor divisions, which the stand-ins of the symbolic rules cannot read back), or whose
// result form only torch's kernel gives (torch.max / torch.min and their Tensor methods' reduction
// forms: a named tuple; operator.getitem with advanced indices: int tensors and lists of ints, beside
// full slices and one Ellipsis), over constant or symbolic sizes: one size list per result (one list
// where every result has those sizes). Sizes only: the caller takes dtypes, layouts and the result form
// from the meta kernel at the traced sizes and must check that those agree (the trace specializes where
// they do not: a layout that is not the contiguous one over these sizes), and must make each relation
// appended to `assumed` hold (a guard) or drop the answer. nullopt: no formula for this call.
std::optional<std::vector<std::vector<sym::Expr>>> infer_result_sizes(
    std::string_view qualified_name, const std::vector<Operand>& args,
    const std::vector<std::pair<std::string, Operand>>& kwargs, Assumptions& assumed,
    const sym::Symbols* facts = nullptr);

// Whether infer_torch_call_types has a rule for the callable (so callers skip building operands
// for the others), and the names that have one, in order.
// A slice's [start, end) over a dim of `size` as torch normalizes it: a negative bound counts from the end, both
// are clamped into [0, size], and end is at least start (None: 0 and size).
std::pair<int64_t, int64_t> slice_range(std::optional<int64_t> start, std::optional<int64_t> stop, int64_t size);

bool has_torch_call_rule(std::string_view qualified_name);
std::vector<std::string> torch_call_rule_names();
}  // namespace ember::shapes
