// PyRef: an owned reference to a Python object (RAII), the one way the layers above pybridge
// (frontend, runtime, driver, bindings) hold Python objects. Borrowed pointers stay raw
// `PyObject*` and are named as borrowed.
#pragma once

#include <Python.h>

#include <utility>

namespace ember::pybridge {

class PyRef {
 public:
  PyRef() = default;
  static PyRef steal(PyObject* obj) { return PyRef(obj); }  // takes a new reference
  static PyRef borrow(PyObject* obj) {
    Py_XINCREF(obj);
    return PyRef(obj);
  }
  PyRef(const PyRef& o) : obj_(o.obj_) { Py_XINCREF(obj_); }
  PyRef(PyRef&& o) noexcept : obj_(std::exchange(o.obj_, nullptr)) {}
  PyRef& operator=(PyRef o) noexcept {
    std::swap(obj_, o.obj_);
    return *this;
  }
  ~PyRef() { Py_XDECREF(obj_); }

  PyObject* get() const { return obj_; }
  PyObject* release() { return std::exchange(obj_, nullptr); }
  explicit operator bool() const { return obj_ != nullptr; }

 private:
  explicit PyRef(PyObject* obj) : obj_(obj) {}
  PyObject* obj_ = nullptr;
};

}  // namespace ember::pybridge

namespace ember {
// Every layer above pybridge holds Python objects through PyRef: it is Ember's vocabulary type for
// an owned reference, so it is named without its layer.
using pybridge::PyRef;
}  // namespace ember
