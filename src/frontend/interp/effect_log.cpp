// The effect log of a trace (see effect_log.h).
#include "frontend/interp/effect_log.h"

namespace ember::frontend {

// SideEffect's fields in order: kind, target, globals, name, cell, value (plan: after finish()).
void EffectLog::set_attr(const VarRef& obj, const std::string& name, const VarRef& value) {
  entries_.push_back(SideEffect{SideEffect::Kind::SetAttr, obj->source, {}, name, -1, value, {}});
  attr_overlay_[{obj->as<ObjectVar>().obj.get(), name}] = value;
}

void EffectLog::set_global(PyObject* globals, const std::string& name, const VarRef& value) {
  entries_.push_back(SideEffect{SideEffect::Kind::SetGlobal, nullptr, PyRef::borrow(globals), name, -1, value, {}});
  global_overlay_[{globals, name}] = value;
}

void EffectLog::set_cell(int closure_index, const VarRef& value) {
  entries_.push_back(SideEffect{SideEffect::Kind::SetCell, nullptr, {}, "", closure_index, value, {}});
}

void EffectLog::set_cell_contents(const SourceRef& cell, const VarRef& value) {
  // A cell object's cell_contents is writable.
  entries_.push_back(SideEffect{SideEffect::Kind::SetAttr, cell, {}, "cell_contents", -1, value, {}});
}

void EffectLog::set_contents(const SourceRef& target, const VarRef& container) {
  entries_.push_back(SideEffect{SideEffect::Kind::Contents, target, {}, "", -1, container, {}});
}

VarRef EffectLog::attr(PyObject* obj, const std::string& name) const {
  auto it = attr_overlay_.find({obj, name});
  return it == attr_overlay_.end() ? nullptr : it->second;
}

VarRef EffectLog::global(PyObject* globals, const std::string& name) const {
  auto it = global_overlay_.find({globals, name});
  return it == global_overlay_.end() ? nullptr : it->second;
}

}  // namespace ember::frontend
