#include "frontend/pyutil.h"

namespace ember::frontend {

std::string take_error_message() {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  std::string msg = type ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "error";
  if (value) {
    if (PyObject* s = PyObject_Str(value)) {
      if (const char* c = PyUnicode_AsUTF8(s)) msg += ": " + std::string(c);
      Py_DECREF(s);
    }
  }
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  if (msg.size() > 300) msg = msg.substr(0, 300) + "...";
  return msg;
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
