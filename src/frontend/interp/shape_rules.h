// Shape rules: the result types (dtype, sizes, strides, device, requires_grad) of Ember's core
// ops, computed in C++ so that capture does not run torch's meta kernels (Python, and most of
// capture time) for the ops that models use most.
//
// A rule answers only when it is sure: every case it returns a type for has been compared with
// torch's meta tensors (tests/shapes/), and any argument form, dtype or layout it does not model
// exactly gives std::nullopt, so the caller runs the meta kernel as before. A call that torch
// would reject (bad shapes, unsupported dtypes, out-of-range dims) is also std::nullopt: the meta
// kernel then raises torch's own error. docs/shape-rules.md lists what is covered.
//
// Sizes and strides are read as constants; a symbolic size makes the rule answer std::nullopt.
#pragma once

#include <Python.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace ember::frontend {

// One operand of a core-op call as the rules see it: a tensor's type, or a Python scalar/constant.
struct RuleOperand {
  const ir::TensorType* tensor = nullptr;  // non-null for tensors
  PyObject* value = nullptr;               // borrowed: the constant (int, float, bool, None, tuple/list of ints, dtype, ...)
  const std::vector<RuleOperand>* list = nullptr; // for list/tuple operands that contain tensors (cat/stack)
};

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
// Operands are passed as the callable received them (self first for Tensor methods). A constant
// sequence (a shape, a tuple index) must be a real tuple/list in `value`; a sequence holding
// tensors goes in `list`. Forms only a Tensor method accepts are read as that method's: several
// ints after the tensor (x.reshape(2, 3), x.permute(1, 0)) are the sizes, although
// torch.reshape / torch.permute would refuse them with a TypeError.
//
// Must be called with the GIL held (constants are read through the C API; nothing is called).
std::optional<std::vector<ir::TensorType>> infer_result_types(ir::Op op, const std::vector<RuleOperand>& args,
    const std::vector<std::pair<std::string, RuleOperand>>& kwargs, bool grad_enabled, ir::DType default_dtype);

// The same for a call of a torch callable that is not a core op (a `torch` node), named by its
// qualified name as python/ember/ops.py's qualname() gives it ("torch.nn.functional.rms_norm",
// "torch.conv2d", "torch.Tensor.float"). Same contract as infer_result_types; callables without
// a rule give std::nullopt. docs/shape-rules.md lists them.
std::optional<std::vector<ir::TensorType>> infer_torch_call_types(
    std::string_view qualified_name, const std::vector<RuleOperand>& args,
    const std::vector<std::pair<std::string, RuleOperand>>& kwargs, bool grad_enabled, ir::DType default_dtype);
// Whether infer_torch_call_types has a rule for the callable (so callers skip building operands
// for the others), and the names that have one, in order.
bool has_torch_call_rule(std::string_view qualified_name);
std::vector<std::string> torch_call_rule_names();
}  // namespace ember::frontend
