#include "pybridge/errors.h"

namespace ember::pybridge {

bool interrupt_pending() {
  PyObject* type = PyErr_Occurred();
  return type != nullptr && !PyErr_GivenExceptionMatches(type, PyExc_Exception);
}

std::string take_error_message() {
  if (interrupt_pending()) throw PythonError();
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

}  // namespace ember::pybridge
