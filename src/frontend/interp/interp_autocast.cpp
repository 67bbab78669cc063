// torch.autocast in traced code: constructing a block (its arguments bound by
// python/ember/autocast.py against the trace's autocast state, which gives the defaults), and the
// queries of that state. Entering and exiting a block are BEFORE_WITH and the exit's call
// (interpreter.cpp, interp_calls.cpp), which change the state through Trace::autocast_enter/exit.
#include "frontend/interp/interpreter.h"
#include "frontend/pyutil.h"

namespace ember::frontend {

namespace {

// The constant a Var stands for (tuples and lists of constants included), or a null PyRef.
PyRef constant_value(const Var& v) {
  if (v.kind == VarKind::Object && Trace::as_constant(v) == nullptr) return PyRef();
  return Trace::materialize(v);
}

}  // namespace

VarRef Interpreter::autocast_context(PyObject* cls, const std::vector<VarRef>& args, const Kwargs& kwargs) {
  const TorchTable& table = trace_.table;
  PyRef py_args = PyRef::steal(PyTuple_New(args.size()));
  PyRef py_kwargs = PyRef::steal(PyDict_New());
  if (!py_args || !py_kwargs) throw PythonError();
  for (size_t i = 0; i < args.size(); ++i) {
    PyRef c = constant_value(*args[i]);
    if (!c) unsupported("torch.autocast() with a non-constant argument (" + describe(*args[i]) + ")");
    PyTuple_SET_ITEM(py_args.get(), i, c.release());
  }
  for (const auto& [name, value] : kwargs) {
    PyRef c = constant_value(*value);
    if (!c) unsupported("torch.autocast() with a non-constant " + name + "= (" + describe(*value) + ")");
    if (PyDict_SetItemString(py_kwargs.get(), name.c_str(), c.get()) < 0) throw PythonError();
  }
  // The defaults (dtype, cache_enabled) come from the state at this point of the trace.
  trace_.depend_on_autocast();
  const AutocastState& s = trace_.autocast;
  PyRef state = PyRef::steal(Py_BuildValue("((OO)(OO)O)", s.cpu.enabled ? Py_True : Py_False,
                                           table.dtype_object(s.cpu.dtype), s.cuda.enabled ? Py_True : Py_False,
                                           table.dtype_object(s.cuda.dtype), s.cache ? Py_True : Py_False));
  if (!state) throw PythonError();
  PyRef bound = PyRef::steal(
      PyObject_CallFunctionObjArgs(table.autocast_arguments.get(), cls, py_args.get(), py_kwargs.get(), state.get(), nullptr));
  if (!bound) unsupported(take_error_message());
  AutocastMode mode;
  mode.device = PyUnicode_AsUTF8(PyTuple_GET_ITEM(bound.get(), 0));
  mode.enabled = PyTuple_GET_ITEM(bound.get(), 1) == Py_True;
  PyObject* dtype = PyTuple_GET_ITEM(bound.get(), 2);
  bool found = false;
  for (int i = 0; i <= static_cast<int>(ir::DType::Float8E5M2); ++i) {
    if (table.dtype_object(static_cast<ir::DType>(i)) == dtype) {
      mode.dtype = static_cast<ir::DType>(i);
      found = true;
    }
  }
  if (!found) unsupported("torch.autocast() with a dtype Ember does not model");
  mode.cache = PyTuple_GET_ITEM(bound.get(), 3) == Py_True;
  auto ctx = std::make_shared<GradModeVar>(trace_.grad_enabled);
  ctx->autocast = mode;
  return ctx;
}

VarRef Interpreter::autocast_query(const std::string& name, const std::vector<VarRef>& args, const Kwargs& kwargs) {
  if (name == "is_autocast_cache_enabled") {
    if (!args.empty() || !kwargs.empty()) unsupported("torch.is_autocast_cache_enabled() with arguments");
    trace_.depend_on_autocast();
    return trace_.constant(PyRef::borrow(trace_.autocast.cache ? Py_True : Py_False));
  }
  // torch.is_autocast_enabled() without a device type asks about cuda.
  std::string device = "cuda";
  if (args.size() + kwargs.size() > 1 || (!kwargs.empty() && kwargs[0].first != "device_type"))
    unsupported("torch." + name + "() with unexpected arguments");
  const VarRef* given = !args.empty() ? &args[0] : !kwargs.empty() ? &kwargs[0].second : nullptr;
  if (given) {
    PyObject* c = Trace::as_constant(**given);
    if (!c || !PyUnicode_Check(c)) unsupported("torch." + name + "() with a device type that is not a constant str");
    device = PyUnicode_AsUTF8(c);
  } else if (name != "is_autocast_enabled") {
    unsupported("torch." + name + "() without a device type");
  }
  const AutocastState::Device* state = trace_.autocast.device(device);
  if (!state) unsupported("torch." + name + "('" + device + "') (Ember traces autocast for cpu and cuda)");
  trace_.depend_on_autocast();
  if (name == "is_autocast_enabled") return trace_.constant(PyRef::borrow(state->enabled ? Py_True : Py_False));
  return trace_.constant(PyRef::borrow(trace_.table.dtype_object(state->dtype)));
}

}  // namespace ember::frontend
