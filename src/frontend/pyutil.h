// Small helpers over the CPython API shared by the interpreter and the compiler.
#pragma once

#include <Python.h>

#include <string>

#include "frontend/interp/trace.h"

namespace ember::frontend {

// The UTF-8 text of a str object; throws PythonError when it cannot be read.
inline std::string str_of(PyObject* s) {
  Py_ssize_t n = 0;
  const char* c = PyUnicode_AsUTF8AndSize(s, &n);
  if (!c) throw PythonError();
  return std::string(c, n);
}

// "TypeName: message" of the pending Python error, which is cleared.
std::string take_error_message();

// `name` in the type's own namespace (not its bases), borrowed, or nullptr. Reads through
// `type.__dict__`: a static builtin type has no tp_dict of its own on CPython 3.12+.
PyObject* own_class_attribute(PyObject* type, PyObject* name);
// The method object.__getattribute__ (borrowed).
PyObject* object_getattribute();

}  // namespace ember::frontend
