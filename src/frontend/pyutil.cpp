#include "frontend/pyutil.h"

#include "pybridge/pyref.h"

namespace ember::frontend {

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
