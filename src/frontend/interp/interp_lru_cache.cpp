// functools.lru_cache wrappers of Python code in the symbolic interpreter.
//
// An eager call of such a wrapper returns the stored value where its arguments' key is in the cache
// and otherwise runs the wrapped function, storing its value. Libraries keep process-wide answers
// this way (transformers' `logger.warning_once`, tables built once). A call is traced one of two ways:
// - Folded: an unbounded cache (maxsize=None: an entry stays until cache_clear()) called with
//   arguments the guards pin (constants, or objects hashed by identity and guarded by identity) is
//   called for real at trace time and its value becomes a constant. A miss runs the body then, once,
//   where eager's first call runs it; every later call of the compiled code is a hit, as eager's
//   would be. A value the guards could not pin (a tensor, a list) is refused after the call: the
//   frame splits there and CPython makes the call, now a hit.
// - Bypassed: any other call (a bounded cache evicts; tensors or unpinned arguments) inlines
//   __wrapped__, so the body runs on every call of the compiled code, as torch.compile does (it
//   warns that the cache is bypassed).
// Neither is silent: each is a trace note (EMBER_LOGS=graph_breaks, ember.explain's `notes`).
// A wrapper its library marks constant (`_dynamo_marked_constant`) is classified "pure" instead
// (python_table.py) and folded by constant_call.
#include "frontend/interp/interpreter.h"
#include "frontend/pyutil.h"

namespace ember::frontend {

namespace {

// An object read from the frame that a cache key compares by identity (its type's hash and equality
// are object's own): an identity guard pins the key's part for it.
bool identity_keyed(const Var& v) {
  if (v.kind != VarKind::Object || !v.source) return false;
  const ObjectVar& o = v.as<ObjectVar>();
  PyTypeObject* t = Py_TYPE(o.obj.get());
  return !o.opaque && !o.made_attrs && t->tp_hash == PyBaseObject_Type.tp_hash &&
         t->tp_richcompare == PyBaseObject_Type.tp_richcompare;
}

// A value the compiled code may keep for every later call: immutable all the way down.
bool keepable(const Trace& trace, PyObject* v) {
  if (trace.guarded_by_value(v)) return true;
  if (!PyTuple_CheckExact(v)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v); ++i)
    if (!keepable(trace, PyTuple_GET_ITEM(v, i))) return false;
  return true;
}

}  // namespace

VarRef Interpreter::call_lru_cache(const VarRef& fn, PyObject* wrapper, std::vector<VarRef>& args, Kwargs& kwargs) {
  const std::string name = trace_.table.name_of(wrapper);
  // The wrapper itself, where it was read from the frame (a global, an attribute), is pinned:
  // the cache consulted is this one.
  if (fn->source) trace_.guards.id_match(fn->source, wrapper);
  PyRef info = PyRef::steal(PyObject_CallMethod(wrapper, "cache_info", nullptr));
  PyRef maxsize = info ? PyRef::steal(PyObject_GetAttrString(info.get(), "maxsize")) : PyRef();
  if (!maxsize) throw PythonError();
  // Every argument is a value the key can be rebuilt from on the next call, with the same answer.
  auto keyable = [&](const Var& v) { return Trace::materialize(v) && (pinned(v) || identity_keyed(v)); };
  bool fold = maxsize.get() == Py_None;
  for (const VarRef& a : args) fold = fold && keyable(*a);
  for (const auto& kv : kwargs) fold = fold && keyable(*kv.second);
  if (!fold) {
    trace_.note("lru_cache bypassed: " + name + "() traced through __wrapped__, so its body runs on every call " +
                (maxsize.get() == Py_None ? "(arguments the guards cannot pin)" : "(a bounded cache)"));
    PyRef wrapped = PyRef::steal(PyObject_GetAttrString(wrapper, "__wrapped__"));
    if (!wrapped) throw PythonError();
    if (!PyFunction_Check(wrapped.get())) unsupported("call to " + name + ", an lru_cache over " + trace_.table.name_of(wrapped.get()));
    return inline_real_function(wrapped.get(), fn->source ? Source::attr(fn->source, "__wrapped__") : nullptr,
                                std::move(args), std::move(kwargs));
  }
  auto pin = [&](const VarRef& v) {
    if (!pinned(*v)) trace_.guards.id_match(v->source, v->as<ObjectVar>().obj.get());
  };
  for (const VarRef& a : args) pin(a);
  for (const auto& kv : kwargs) pin(kv.second);
  PyRef hits = PyRef::steal(PyObject_GetAttrString(info.get(), "hits"));
  VarRef value = call_on_values(wrapper, args, kwargs);
  PyRef after = PyRef::steal(PyObject_CallMethod(wrapper, "cache_info", nullptr));
  PyRef hits_after = after ? PyRef::steal(PyObject_GetAttrString(after.get(), "hits")) : PyRef();
  if (!hits || !hits_after) throw PythonError();
  const bool hit = PyObject_RichCompareBool(hits.get(), hits_after.get(), Py_NE) == 1;
  trace_.note("lru_cache folded: " + name + "() called at trace time (" +
              (hit ? "a hit" : "a miss: its body ran now, as eager's first call runs it") +
              "); the compiled code uses its value and does not call it again (a later cache_clear() is not seen)");
  PyObject* v = Trace::as_constant(*value);
  if (!v || !keepable(trace_, v))
    unsupported("the value of " + name + "(), a " + std::string(v ? Py_TYPE(v)->tp_name : "value") +
                ", is not a constant the compiled code can keep (the call, now a cache hit, runs in Python)");
  return value;
}

}  // namespace ember::frontend
