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

}  // namespace ember::frontend
