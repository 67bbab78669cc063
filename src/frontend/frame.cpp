// FrameView's derived facts, read through public API only (no frame internals): the closure from
// the function object, the argument count from the code object's counts and flags.
#include "frontend/frame.h"

namespace ember::frontend {

PyObject* FrameView::closure() const {
  if (func == nullptr) return nullptr;
  PyObject* cells = PyFunction_GetClosure(func);  // borrowed; NULL when the function has none
  return cells == Py_None ? nullptr : cells;
}

int FrameView::argument_count() const {
  if (code == nullptr) return 0;
  int count = code->co_argcount + code->co_kwonlyargcount;
  if (code->co_flags & CO_VARARGS) ++count;
  if (code->co_flags & CO_VARKEYWORDS) ++count;
  return count;
}

}  // namespace ember::frontend
