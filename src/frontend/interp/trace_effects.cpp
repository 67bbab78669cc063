// Trace: recording side effects on the caller's state — attribute, global and cell writes, and
// mutations of the caller's lists and dicts — to replay after the graph in program order
// (SideEffect, trace.h). A mutation is refused where the replay could not be exact: a container
// that holds itself, the globals or builtins dict, an instance __dict__ (its object's attributes
// would not follow), a stored value that cannot be rebuilt.
#include <algorithm>
#include <vector>

#include "frontend/interp/trace.h"

namespace ember::frontend {

void Trace::record_setattr(const VarRef& obj, const std::string& name, const VarRef& value) {
  SideEffect e;
  e.kind = SideEffect::Kind::SetAttr;
  e.target = obj->source;
  e.name = name;
  e.value = value;
  side_effects.push_back(std::move(e));
  attr_overlay_[{obj->as<ObjectVar>().obj.get(), name}] = value;
}

void Trace::record_setglobal(PyObject* globals, const std::string& name, const VarRef& value) {
  SideEffect e;
  e.kind = SideEffect::Kind::SetGlobal;
  e.globals = PyRef::borrow(globals);
  e.name = name;
  e.value = value;
  side_effects.push_back(std::move(e));
  global_overlay_[{globals, name}] = value;
}

void Trace::record_setcell(int closure_index, const VarRef& value) {
  SideEffect e;
  e.kind = SideEffect::Kind::SetCell;
  e.cell = closure_index;
  e.value = value;
  side_effects.push_back(std::move(e));
}

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
  SideEffect e;
  e.kind = SideEffect::Kind::Contents;
  e.target = container->source;
  e.value = container;
  side_effects.push_back(std::move(e));
}

}  // namespace ember::frontend
