// Python errors as C++ sees them. Code under pybridge calls the CPython API, which reports failure
// by setting the thread's error indicator; PythonError carries "an error is set" up through C++
// frames to the boundary that returns it to Python (a binding, the eval-frame hook).
//
// Needs: the GIL. Guarantees: PythonError never owns the error (it stays set in the interpreter
// until someone fetches or clears it); take_error_message leaves no error set.
#pragma once

#include <Python.h>

#include <exception>
#include <string>

namespace ember::pybridge {

// Thrown when a Python error is set in a way that is not the user's program failing (a bug or an
// environment problem): whoever catches it returns to Python with that error.
struct PythonError : std::exception {
  const char* what() const noexcept override { return "python error"; }
};

// "TypeName: message" of the pending Python error (at most ~300 characters), which is cleared.
std::string take_error_message();

}  // namespace ember::pybridge
