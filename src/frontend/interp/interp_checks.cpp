// torch._assert and torch._check (and _check_index, _check_value, _check_type,
// _check_not_implemented, and _check_with, whose first argument is the exception class): traced, not run. Model code asserts on shapes and flags
// (`torch._assert(x.shape[1] == self.dim, "...")`), which the guards fix: such a condition is
// checked at trace time, and a false one raises what eager raises at that point of the program
// (the frame is split there and CPython raises it again, docs/interpreter.md "Exceptions"). A
// tensor condition of torch._assert becomes a graph node that checks it when the graph runs.
// torch._check's tensor form is a TypeError in eager too; torch._check_tensor_all stays a break.
#include "frontend/interp/interpreter.h"
#include "frontend/pyutil.h"

#include <algorithm>

namespace ember::frontend {

namespace {

// torch._check_with's text for a false condition without a message.
constexpr const char* kDefaultCheckMessage =
    "Expected cond to be True, but got False. (Could this error message be improved? If so, please report an "
    "enhancement request to PyTorch.)";

}  // namespace

VarRef Interpreter::call_check(const CallableKind& kind, PyObject* fn, std::vector<VarRef>& args, Kwargs& kwargs) {
  bool is_assert = kind.kind == CallableKind::Assert;
  const std::string name = trace_.table.name_of(fn);
  PyObject* error_type = kind.constant.get();
  if (error_type == Py_None) {
    // torch._check_with(error_type, cond, message): the class comes first.
    VarRef type;
    if (!args.empty()) {
      type = args.front();
      args.erase(args.begin());
    } else if (auto it = std::find_if(kwargs.begin(), kwargs.end(), [](auto& kv) { return kv.first == "error_type"; });
               it != kwargs.end()) {
      type = it->second;
      kwargs.erase(it);
    }
    error_type = type ? Trace::as_constant(*type) : nullptr;
    if (!error_type || !PyType_Check(error_type) || !PyType_IsSubtype((PyTypeObject*)error_type,
                                                                        (PyTypeObject*)PyExc_Exception)) {
      unsupported(name + "() without an exception class known at trace time");
    }
  }
  const char* names[2] = {is_assert ? "condition" : "cond", "message"};
  VarRef bound[2];
  if (args.size() > 2) unsupported(name + "() with more than two arguments");
  for (size_t i = 0; i < args.size(); ++i) bound[i] = args[i];
  for (auto& [k, v] : kwargs) {
    int i = k == names[0] ? 0 : k == names[1] ? 1 : -1;
    if (i < 0 || bound[i]) unsupported(name + "() with argument '" + k + "'");
    bound[i] = v;
  }
  if (!bound[0] || (is_assert && !bound[1])) unsupported(name + "() with a missing argument");
  VarRef cond = bound[0];
  VarRef message = bound[1] ? bound[1] : trace_.none();

  if (is_assert) {
    if (cond->kind == VarKind::Tensor) {
      // Eager's `if not condition` reads the tensor's value: the graph checks it (the node
      // calls torch._assert on the real tensor, which raises AssertionError(message)).
      trace_.record_check(fn, cond, message);
      return trace_.none();
    }
    if (truthy(cond)) return trace_.none();
    raise_var(make_exception(PyExc_AssertionError, {message}, {}));
  }

  // torch._check_with: `cond` must be a bool; the message, a callable, is called only when it
  // is false.
  cond = trace_.specialize(cond);
  PyObject* c = Trace::as_constant(*cond);
  if (c == Py_True) return trace_.none();
  if (c != Py_False) {
    // Not a bool: the real function raises its TypeError before it reads anything else.
    PyRef real;
    if (cond->kind == VarKind::Tensor) {
      real = PyRef::borrow(trace_.meta_of(cond->as<TensorVar>()));
    } else if (c && pinned(*cond)) {
      real = PyRef::borrow(c);
    } else {
      unsupported(name + "() with a condition that is not known at trace time (" + describe(*cond) + ")");
    }
    PyRef r = PyRef::steal(PyObject_CallOneArg(fn, real.get()));
    if (r) unsupported(name + "() accepted a condition that is not a bool");
    raise_taken(take_exception(), name + "()");
  }
  PyRef text;
  if (PyObject* m = Trace::as_constant(*message); m == Py_None) {
    text = PyRef::steal(PyUnicode_FromString(kDefaultCheckMessage));
  } else if (m && !PyCallable_Check(m)) {
    raise(PyExc_TypeError, "message must be a callable");
  } else {
    VarRef made = trace_.specialize(call(message, {}, {}));
    PyObject* v = Trace::as_constant(*made);
    if (!v || !pinned(*made)) unsupported("the message of " + name + "() is not known at trace time");
    text = PyRef::steal(PyObject_Str(v));
  }
  if (!text) throw PythonError();
  raise_var(make_exception(error_type, {trace_.constant(std::move(text))}, {}));
}

}  // namespace ember::frontend
