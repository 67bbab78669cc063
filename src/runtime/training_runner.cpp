// TrainingRunner and the Python callables over executables (training_runner.h).
#include "runtime/training_runner.h"

#include <string>

namespace ember::runtime {

namespace {

constexpr const char* kCapsuleName = "ember.runtime.GraphRunner";

void free_runner(PyObject* capsule) {
  delete static_cast<std::shared_ptr<const GraphRunner>*>(PyCapsule_GetPointer(capsule, kCapsuleName));
}

// f(inputs): runs the executable held by the capsule `self` on a tuple of tensors, or on a list, which
// it empties (python_callable).
PyObject* run_runner(PyObject* self, PyObject* arg) {
  auto* runner = static_cast<std::shared_ptr<const GraphRunner>*>(PyCapsule_GetPointer(self, kCapsuleName));
  if (!runner) return nullptr;
  std::vector<PyRef> outputs;
  if (PyList_Check(arg)) {
    std::vector<PyRef> inputs;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(arg); ++i) inputs.push_back(PyRef::borrow(PyList_GET_ITEM(arg, i)));
    if (PyList_SetSlice(arg, 0, PyList_GET_SIZE(arg), nullptr) != 0) return nullptr;
    if (!(*runner)->run_owned(std::move(inputs), &outputs)) return nullptr;
  } else {
    PyRef seq = PyRef::steal(PySequence_Fast(arg, "an executable takes a list or tuple of tensors"));
    if (!seq) return nullptr;
    if (!(*runner)->run(PySequence_Fast_ITEMS(seq.get()), &outputs)) return nullptr;
  }
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(outputs.size()));
  if (!list) return nullptr;
  for (size_t i = 0; i < outputs.size(); ++i) PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), outputs[i].release());
  return list;
}

PyMethodDef kRunDef = {"run", run_runner, METH_O, "Runs a compiled executable on a tuple of tensors, or on a list, which it empties."};

}  // namespace

PyRef python_callable(std::shared_ptr<const GraphRunner> runner) {
  auto* held = new std::shared_ptr<const GraphRunner>(std::move(runner));
  PyRef capsule = PyRef::steal(PyCapsule_New(held, kCapsuleName, free_runner));
  if (!capsule) {
    delete held;
    return PyRef();
  }
  return PyRef::steal(PyCFunction_New(&kRunDef, capsule.get()));
}

bool TrainingRunner::run(PyObject* const* inputs, std::vector<PyRef>* outputs) const {
  std::vector<PyObject*> args(this->inputs + 1);
  args[0] = graph_.get();
  for (size_t i = 0; i < this->inputs; ++i) args[i + 1] = inputs[i];
  auto set_mode = [this](bool enabled) {
    return static_cast<bool>(PyRef::steal(PyObject_CallOneArg(set_grad_enabled.get(), enabled ? Py_True : Py_False)));
  };
  if (grad_mode_at_end && !set_mode(true)) return false;
  PyRef result = PyRef::steal(PyObject_Vectorcall(apply_.get(), args.data(), args.size(), nullptr));
  if (!result) return false;  // the compiled frame restores the mode it started with
  if (grad_mode_at_end && !set_mode(*grad_mode_at_end)) return false;
  size_t returned = 0;
  for (int input : output_is_input) returned += input < 0;
  if (!PyTuple_Check(result.get()) || static_cast<size_t>(PyTuple_GET_SIZE(result.get())) != returned) {
    PyErr_Format(PyExc_RuntimeError, "ember: the compiled training function returned %R, expected %zu outputs",
                 result.get(), returned);
    return false;
  }
  outputs->clear();
  Py_ssize_t next = 0;
  for (int input : output_is_input)
    outputs->push_back(PyRef::borrow(input >= 0 ? inputs[input] : PyTuple_GET_ITEM(result.get(), next++)));
  return true;
}

}  // namespace ember::runtime
