// What the frame hook's bindings (bind_eval_frame.cpp) and their test fixtures
// (bind_eval_frame_testing.cpp) share: turning the C-API conventions of src/frontend/eval_frame.h
// into nanobind's.
#pragma once

#include <nanobind/nanobind.h>

namespace ember::python {

// A new reference as an object, or the Python error that a null result left set, raised.
inline nanobind::object steal_or_throw(PyObject* result) {
  if (result == nullptr) throw nanobind::python_error();
  return nanobind::steal(result);
}

// None as "no keyword arguments" (nullptr), else the dict.
inline PyObject* optional_dict(nanobind::handle kwargs) { return kwargs.is_none() ? nullptr : kwargs.ptr(); }

}  // namespace ember::python
