// One step of a source path, on Python objects: the shared core of Source::resolve (source.cpp)
// and the guard tree's walk (guards.cpp), which keeps each step's key as an interned str so the
// per-call path allocates nothing.
//
// Every function returns a new reference, or nullptr with a Python error set. Callers hold the
// GIL. ModuleMember reads what nn.Module.__getattr__ would find (the instance __dict__, then
// `_parameters`, `_buffers`, `_modules`) without running Python code.
#pragma once

#include <Python.h>

#include <cstdint>

#include "frontend/frame.h"
#include "frontend/source.h"

namespace ember::frontend::guards {

// Interned names read on hot paths; created on first use (under the GIL) and kept for the life
// of the process.
struct InternedNames {
  PyObject* parameters;  // "_parameters"
  PyObject* buffers;
  PyObject* modules;
  PyObject* forward_hooks;  // "_forward_hooks"
  PyObject* forward_pre_hooks;
  PyObject* backward_hooks;
  PyObject* backward_pre_hooks;
};
const InternedNames& interned_names();

// Local, Global, Builtin, Closure: `name` is the variable's name (a str, used for lookups and
// error messages), `index` the slot or closure position.
PyObject* read_root(Source::Kind kind, PyObject* name, int64_t index, const FrameView& frame);
// Attr, ModuleMember, Item, DictItem applied to `base` (borrowed).
PyObject* read_step(Source::Kind kind, PyObject* base, PyObject* name, int64_t index);

// The instance __dict__ of `obj` (new reference), or nullptr with an error set.
PyObject* instance_dict(PyObject* obj);

}  // namespace ember::frontend::guards
