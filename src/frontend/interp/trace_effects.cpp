// Trace: deciding whether a mutation of the caller's lists and dicts can be replayed after the
// graph, and logging it (EffectLog, effect_log.h). A mutation is refused where the replay could
// not be exact: a container that holds itself, the globals or builtins dict, an instance __dict__
// (its object's attributes would not follow), a stored value that cannot be rebuilt.
#include <algorithm>
#include <vector>

#include "frontend/interp/trace.h"

namespace ember::frontend {

// The instance __dict__ of `obj` when it has one (borrowed), else nullptr. Materializes a
// lazily made one: only called at trace time.
static PyObject* instance_dict_of(PyObject* obj) {
  if (PyType_Check(obj)) return nullptr;  // a class's __dict__ is a mappingproxy
  PyObject** slot = _PyObject_GetDictPtr(obj);
  return slot ? *slot : nullptr;
}

void Trace::refuse_instance_dict(const Container& c, const Var& owner) const {
  if (!owner.source || owner.kind != VarKind::Object || c.object.get() != instance_dict_of(owner.as<ObjectVar>().obj.get()))
    return;
  throw Unsupported("mutating " + c.var->source->str() + ", which is the __dict__ of " + owner.source->str() +
                    " (its attributes would not follow)");
}

// Whether `target` is `from` or held by it, through lists, tuples and dicts.
static bool reaches(const Var& from, const Var* target, std::vector<const Var*>& seen) {
  if (&from == target) return true;
  if (from.kind != VarKind::Tuple && from.kind != VarKind::List && from.kind != VarKind::Dict) return false;
  if (std::find(seen.begin(), seen.end(), &from) != seen.end()) return false;
  seen.push_back(&from);
  const std::vector<VarRef>& items = from.kind == VarKind::Dict ? from.as<DictVar>().values : from.as<SequenceVar>().items;
  for (const VarRef& item : items)
    if (reaches(*item, target, seen)) return true;
  return false;
}

void Trace::record_mutation(const VarRef& container, const std::vector<VarRef>& stored) {
  std::vector<const Var*> seen;
  for (const VarRef& v : stored)
    if (reaches(*v, container.get(), seen))
      throw Unsupported("storing " + describe(*container) + " into itself (a list or dict that contains itself)");
  if (!container->source) return;  // built by the trace: its plan builds the final contents
  auto found = container_of_.find(container.get());
  if (found == container_of_.end() || (container->kind != VarKind::List && container->kind != VarKind::Dict))
    throw Unsupported("mutating " + describe(*container) + " read from " + container->source->str() +
                      ", an object of the caller that Ember does not track");
  Container& c = containers_[found->second];
  if (c.object.get() == frame.globals || c.object.get() == frame.builtins)
    throw Unsupported("mutating " + container->source->str() + ", the globals or builtins dict itself");
  for (const VarRef& v : stored)
    if (!plannable(*v))
      throw Unsupported("storing " + describe(*v) + " into " + container->source->str() +
                        ", an object of the caller (the value cannot be rebuilt after the graph)");
  if (c.mutated) return;
  if (container->kind == VarKind::Dict) {
    for (auto& [key, owner] : by_source_) refuse_instance_dict(c, *owner);
    ++mutated_dicts_;
  }
  c.mutated = true;
  effects.set_contents(container->source, container);
}

}  // namespace ember::frontend
