#include "frontend/pyutil.h"

#include <frameobject.h>

#include "pybridge/pyref.h"

namespace ember::frontend {

void add_traceback_entry(PyObject* filename, const std::string& name, int line, PyObject* globals) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  const char* file = PyUnicode_AsUTF8(filename);
  // An empty code object whose first line is `line`: a frame of it that never ran reports that line.
  PyCodeObject* code = file ? PyCode_NewEmpty(file, name.c_str(), line) : nullptr;
  PyFrameObject* frame = code ? PyFrame_New(PyThreadState_Get(), code, globals, nullptr) : nullptr;
  Py_XDECREF(code);
  if (!frame) PyErr_Clear();
  PyErr_Restore(type, value, tb);
  if (!frame) return;
  PyTraceBack_Here(frame);  // fails only when out of memory, with that error set
  Py_DECREF(frame);
}

PyObject* own_class_attribute(PyObject* type, PyObject* name) {
  PyRef dict = PyRef::steal(PyObject_GetAttrString(type, "__dict__"));
  if (!dict) throw PythonError();
  PyObject* v = PyObject_GetItem(dict.get(), name);
  if (!v) {
    if (!PyErr_ExceptionMatches(PyExc_KeyError)) throw PythonError();
    PyErr_Clear();
    return nullptr;
  }
  Py_DECREF(v);  // the class's namespace keeps it alive
  return v;
}

PyObject* object_getattribute() {
  static PyObject* name = PyUnicode_InternFromString("__getattribute__");
  return _PyType_Lookup(&PyBaseObject_Type, name);
}

}  // namespace ember::frontend
