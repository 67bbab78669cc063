// TorchTable: the torch objects and tables the interpreter consults, read once from
// python/ember/ops.py (the Python side owns the table of torch callables; C++ owns the logic).
#pragma once

#include <Python.h>

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "pybridge/pyref.h"
#include "ir/graph.h"

namespace ember::frontend {

// How the interpreter treats a call to a given callable; decided by python/ember/ops.py.
struct CallableKind {
  enum Kind : uint8_t {
    CoreOp,         // a graph node of core op `op`
    TorchOp,        // a graph node naming the callable (generic capture)
    Query,          // a tensor method answered from metadata (size, dim, ...): a constant, no node
    Factory,        // a graph node even without tensor arguments (torch.zeros, torch.arange, ...)
    Pure,           // evaluated at trace time when every argument is a constant (math.sqrt, ...)
    Builtin,        // a Python builtin the interpreter implements (`detail` is its name)
    Operator,       // a function of the operator module (`detail` is its name)
    Inline,         // Python code the interpreter inlines
    GradMode,       // torch.no_grad / enable_grad / set_grad_enabled
    Autocast,       // torch.autocast (torch.amp.autocast, torch.cpu/cuda.amp.autocast)
    AutocastQuery,  // torch.is_autocast_enabled / get_autocast_dtype / is_autocast_cache_enabled (`detail`)
    NullContext,    // contextlib.nullcontext: a with-block that changes nothing
    Construct,      // a plain Python class: the trace builds the instance (interp_objects.cpp)
    IsGradEnabled,  // torch.is_grad_enabled(): the trace's grad mode
    Constant,       // always returns `constant` (torch.compiler.is_compiling() -> True)
    ModuleMethod,   // nn.Module.children/modules/parameters/buffers and their named_ forms
    Signature,      // inspect.signature: folded for a function the guards pin
    Assert,         // torch._assert: checked at trace time, or a runtime check of a tensor (interp_checks.cpp)
    Check,          // torch._check and its kin: `constant` is the exception class a false condition raises
    AutogradFunctionApply,  // torch.autograd.Function.apply: the forward inlined where no gradient is recorded
    StatelessModule,  // a torch.nn layer class: built at trace time where it holds no parameters, buffers or children (interp_instances.cpp)
    DataclassFields,  // dataclasses.fields(x): folded from x's class (interp_records.cpp)
    LruCache,       // a functools.lru_cache wrapper of Python code: its cached value folded, or its __wrapped__ inlined (interp_lru_cache.cpp)
    Unsupported,    // `detail` says why
  };
  Kind kind = Unsupported;
  ir::Op op = ir::Op::TorchCall;
  std::string detail;
  PyRef constant;
  // Makes tensors from Python values (torch.zeros, torch.arange, ...): a graph node even without
  // tensor arguments.
  bool makes_tensors() const {
    return kind == Factory || (kind == CoreOp && ir::op_info(op).family == ir::OpFamily::Factory);
  }
};

struct TorchTable {
  PyRef torch;             // the torch module
  PyRef tensor_type;       // torch.Tensor
  PyRef module_type;       // torch.nn.Module
  PyRef sequential_type;
  PyRef size_type, dtype_type, device_type;
  PyRef no_grad_type, set_grad_enabled_type;
  PyRef set_grad_enabled_fn;  // torch._C._set_grad_enabled, run by the graph at a mode change
  PyRef grad_mode_exit_type;  // ember.ops.GradModeExit: a grad-mode block's exit across a graph break
  PyRef tensor_to;            // torch.Tensor.to: the casts autocast's policy adds
  PyRef tensor_items;         // ember.ops.tensor_items(fn, keep): fn's tuple result without its Nones
  // python/ember/autocast.py: policy(fn, device_type) -> (policy, detail); arguments(cls, args,
  // kwargs, state) -> (device_type, enabled, dtype, cache); AutocastExit (an autocast block's exit
  // across a graph break); replay(events), suspend(), resume(token) (see driver/compiled_frame.cpp)
  PyRef autocast_policy_fn, autocast_arguments, autocast_exit_type, autocast_replay, autocast_suspend,
      autocast_resume;
  PyRef environ;           // os.environ: read by key, each variable guarded (interp_attrs.cpp)
  PyRef core_ops;          // dict: callable -> core op name (ops.def)
  PyRef inplace_callables; // set: callables (besides names ending in '_') that mutate their first argument
  PyRef qualname;          // function(callable) -> qualified name
  PyRef classify_fn;       // function(callable) -> (kind, detail), see CallableKind
  PyRef make_meta;         // function(sizes, strides, dtype, requires_grad, leaf) -> meta tensor
  PyRef resolve;           // function(qualified name) -> the callable (extern calls of compiled graphs)
  std::vector<PyRef> op_callables;  // per ir::Op: the callable the eager executor applies

  // Reads every field from the Python table object; throws std::runtime_error naming a missing one.
  static TorchTable from_python(PyObject* table);

  PyObject* dtype_object(ir::DType dt) const;  // borrowed torch.float32 etc.
  // The Python object a graph-IR literal stands for (None, int, float, str, torch.float32,
  // torch.device("cpu"), slice, Ellipsis): what executors pass to torch. Throws PythonError.
  PyRef literal_object(const ir::Literal& literal) const;
  // Classifies a callable (memoized; keeps the callable alive). Throws PythonError on failure.
  const CallableKind& classify(PyObject* fn) const;
  // The qualified name of a callable (memoized).
  const std::string& name_of(PyObject* fn) const;

  // What torch.autocast does to a call of `fn` on tensors of device type "cpu" or "cuda"
  // (memoized). Throws PythonError on failure.
  struct AutocastPolicy {
    enum Kind : uint8_t { Lower, Fp32, Promote, Fp32OptDType, None, Unknown };
    Kind kind = Unknown;
    std::string detail;  // Unknown: why
  };
  const AutocastPolicy& autocast_policy(PyObject* fn, const std::string& device_type) const;

 private:
  std::vector<PyRef> dtype_objects_;
  mutable std::unordered_map<PyObject*, std::pair<PyRef, CallableKind>> kinds_;
  mutable std::unordered_map<PyObject*, std::pair<PyRef, std::string>> names_;
  mutable std::map<std::pair<PyObject*, std::string>, std::pair<PyRef, AutocastPolicy>> autocast_policies_;
};

}  // namespace ember::frontend
