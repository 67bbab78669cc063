// Small helpers over the CPython API shared by the interpreter and the compiler.
#pragma once

#include <Python.h>

#include <string>

#include "pybridge/errors.h"
#include "pybridge/pyref.h"

namespace ember::frontend {

// The interpreter and the compiler name pybridge's error helpers without their layer.
using pybridge::PythonError;
using pybridge::take_error_message;

// The UTF-8 text of a str object; throws PythonError when it cannot be read.
inline std::string str_of(PyObject* s) {
  Py_ssize_t n = 0;
  const char* c = PyUnicode_AsUTF8AndSize(s, &n);
  if (!c) throw PythonError();
  return std::string(c, n);
}

// str(o) as UTF-8; throws PythonError when it fails.
inline std::string object_str(PyObject* o) {
  PyRef s = PyRef::steal(PyObject_Str(o));
  if (!s) throw PythonError();
  return str_of(s.get());
}

// Adds "File <filename>, line <line>, in <name>" to the traceback of the pending Python error, as
// a frame of that name would have when raising there. Code that runs without a Python frame of
// its own (a compiled graph) uses it to point the traceback at the user's source. Leaves the
// pending error as it was when it cannot make the entry.
void add_traceback_entry(PyObject* filename, const std::string& name, int line, PyObject* globals);

// `name` in the type's own namespace (not its bases), borrowed, or nullptr. Reads through
// `type.__dict__`: a static builtin type has no tp_dict of its own on CPython 3.12+.
PyObject* own_class_attribute(PyObject* type, PyObject* name);
// The method object.__getattribute__ (borrowed).
PyObject* object_getattribute();

}  // namespace ember::frontend
