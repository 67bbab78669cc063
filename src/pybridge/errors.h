// Python errors as C++ sees them. Code under pybridge calls the CPython API, which reports failure
// by setting the thread's error indicator; PythonError carries "an error is set" up through C++
// frames to the boundary that returns it to Python (a binding, the eval-frame hook).
//
// Needs: the GIL. Guarantees: PythonError never owns the error (it stays set in the interpreter
// until someone fetches or clears it); take_error_message leaves no error set, except an interrupt,
// which it leaves set and throws PythonError for.
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

// Whether the pending Python error is an interrupt: a BaseException that is not an Exception
// (KeyboardInterrupt from Ctrl-C or a signal handler, SystemExit). Such an error is the user's, not
// the traced program's or Ember's: it must reach the caller, never become a fallback reason.
bool interrupt_pending();

// "TypeName: message" of the pending Python error (at most ~300 characters), which is cleared.
// An interrupt is not taken: it stays set and PythonError is thrown, so a Ctrl-C that lands in a
// meta kernel or another Python call made while compiling aborts the call instead of being lost
// as the reason for a graph break.
std::string take_error_message();

}  // namespace ember::pybridge
