// Iteration over user objects through the Python code of their class: __iter__ / __next__ and
// the old sequence protocol (__getitem__ with 0, 1, 2, ... until IndexError).
//
// Like an inlined generator (interp_calls.cpp), the iteration runs to its end where the loop
// starts and the loop then walks the items: nothing in a trace observes the interleaving (side
// effects are replayed after the graph). An exception other than the one that ends the
// iteration would surface at the wrong point of the program that way, so it stops the trace.
#include "frontend/interp/interpreter.h"
#include "frontend/interp/object_model.h"
#include "frontend/pyutil.h"

namespace ember::frontend {

namespace {

// Iterations one protocol loop may take before the trace gives up (an endless iterator).
constexpr size_t kMaxItems = 10000;

}  // namespace

bool Interpreter::has_python_method(const Var& v, const char* name) const {
  if (v.kind != VarKind::Object || v.as<ObjectVar>().opaque || v.as<ObjectVar>().dict_owner) return false;
  PyObject* o = v.as<ObjectVar>().obj.get();
  if (object_model::is_builtin_instance(o) || PyType_Check(o) || PyModule_Check(o) ||
      PyObject_IsInstance(o, trace_.table.module_type.get()) == 1)
    return false;
  PyRef key = PyRef::steal(PyUnicode_InternFromString(name));
  PyObject* m = _PyType_Lookup(Py_TYPE(o), key.get());
  return m && PyFunction_Check(m);
}

VarRef Interpreter::next_python(const VarRef& it) {
  try {
    return call_python_dunder(it, "__next__");
  } catch (TracedException& e) {
    if (is_exception(*e.value, PyExc_StopIteration)) return nullptr;
    throw;
  }
}

std::optional<std::vector<VarRef>> Interpreter::iterate_python(const VarRef& v) {
  auto ahead = [&](const TracedException& e, const char* how) -> Unsupported {
    Unsupported u = uncaught(e);
    u.reason = std::string("iterating ") + describe(*v) + " through its " + how + " raised during the trace: " + u.reason;
    return u;
  };
  std::vector<VarRef> items;
  if (has_python_method(*v, "__iter__")) {
    VarRef it;
    try {
      it = call_python_dunder(v, "__iter__");
    } catch (TracedException& e) {
      throw ahead(e, "__iter__");
    }
    if (it->kind == VarKind::Iterator) return iterate(it);  // a generator, or iter() of a container
    if (!has_python_method(*it, "__next__"))
      unsupported("__iter__ of " + describe(*v) + " returned " + describe(*it) + ", which has no Python __next__");
    while (true) {
      VarRef x;
      try {
        x = next_python(it);
      } catch (TracedException& e) {
        throw ahead(e, "__next__");
      }
      if (!x) return items;
      items.push_back(std::move(x));
      if (items.size() > kMaxItems) unsupported("iterating " + describe(*v) + ": more than 10000 items (an endless iterator?)");
    }
  }
  if (!has_python_method(*v, "__getitem__")) return std::nullopt;
  for (long i = 0;; ++i) {
    VarRef index = trace_.constant(PyRef::steal(PyLong_FromLong(i)));
    try {
      items.push_back(call_python_dunder(v, "__getitem__", index));
    } catch (TracedException& e) {
      if (is_exception(*e.value, PyExc_IndexError) || is_exception(*e.value, PyExc_StopIteration)) return items;
      throw ahead(e, "__getitem__");
    }
    if (items.size() > kMaxItems) unsupported("iterating " + describe(*v) + ": more than 10000 items (an endless sequence?)");
  }
}

}  // namespace ember::frontend
