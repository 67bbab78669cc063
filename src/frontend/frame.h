// What the frontend sees of a Python frame that is about to run: a borrowed, read-only view
// filled by the eval-frame hook from the version-specific shim (src/frontend/cpython/).
//
// At hook time the frame has not started: its argument slots hold the call's arguments (cells
// for arguments are not made yet, so they are raw values), every other local is NULL, and free
// variables are read from the function's closure tuple, not from localsplus.
#pragma once

#include <Python.h>

namespace ember::frontend {

struct FrameView {
  PyCodeObject* code = nullptr;       // borrowed
  PyObject* func = nullptr;           // borrowed PyFunctionObject
  PyObject* globals = nullptr;        // borrowed
  PyObject* builtins = nullptr;       // borrowed
  PyObject* const* localsplus = nullptr;  // borrowed; argument slots first
  int nlocalsplus = 0;

  // The function's closure tuple (free-variable cells), or nullptr.
  PyObject* closure() const;
  // Number of argument slots: positional + keyword-only + *args + **kwargs.
  int argument_count() const;
};

}  // namespace ember::frontend
