// Sources: construction, text form and resolution against a frame (see source.h).
//
// The text form is for people and logs (`L['self'].layers.0.weight`); it quotes names the way
// Python's repr quotes a str without escapes, so it is deterministic. ModuleMember prints like an
// attribute, which matches the dotted names of nn.Module.named_parameters().
#include "frontend/source.h"

#include <stdexcept>
#include <utility>

#include "frontend/guards/access.h"

namespace ember::frontend {

namespace {

SourceRef make(Source::Kind kind, SourceRef base, std::string name, int64_t index) {
  auto s = std::make_shared<Source>();
  s->kind = kind;
  s->base = std::move(base);
  s->name = std::move(name);
  s->index = index;
  return s;
}

SourceRef require_base(SourceRef base, const char* what) {
  if (!base) throw std::invalid_argument(std::string("Source::") + what + ": base source is null");
  return base;
}

void append_quoted(std::string& out, const std::string& text) {
  out += '\'';
  for (char c : text) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  out += '\'';
}

// PyErr_Format's %s takes UTF-8; names come from Python so they are valid UTF-8.
PyObject* set_error(PyObject* type, const char* format, PyObject* name) {
  PyErr_Format(type, format, name);
  return nullptr;
}

}  // namespace

SourceRef Source::local(int slot, std::string name) {
  if (slot < 0) throw std::invalid_argument("Source::local: negative slot for '" + name + "'");
  return make(Kind::Local, nullptr, std::move(name), slot);
}
SourceRef Source::global(std::string name) { return make(Kind::Global, nullptr, std::move(name), 0); }
SourceRef Source::builtin(std::string name) { return make(Kind::Builtin, nullptr, std::move(name), 0); }
SourceRef Source::closure(int index, std::string name) {
  if (index < 0) throw std::invalid_argument("Source::closure: negative index for '" + name + "'");
  return make(Kind::Closure, nullptr, std::move(name), index);
}
SourceRef Source::attr(SourceRef base, std::string name) {
  return make(Kind::Attr, require_base(std::move(base), "attr"), std::move(name), 0);
}
SourceRef Source::module_member(SourceRef base, std::string name) {
  return make(Kind::ModuleMember, require_base(std::move(base), "module_member"), std::move(name), 0);
}
SourceRef Source::item(SourceRef base, int64_t index) {
  if (index < 0) throw std::invalid_argument("Source::item: negative index " + std::to_string(index));
  return make(Kind::Item, require_base(std::move(base), "item"), std::string(), index);
}
SourceRef Source::dict_item(SourceRef base, std::string key) {
  return make(Kind::DictItem, require_base(std::move(base), "dict_item"), std::move(key), 0);
}
SourceRef Source::module(std::string name) { return make(Kind::Module, nullptr, std::move(name), 0); }

std::string Source::str() const {
  std::string out;
  switch (kind) {
    case Kind::Local: out = "L["; append_quoted(out, name); out += ']'; return out;
    case Kind::Global: out = "G["; append_quoted(out, name); out += ']'; return out;
    case Kind::Builtin: out = "B["; append_quoted(out, name); out += ']'; return out;
    case Kind::Closure: out = "C["; append_quoted(out, name); out += ']'; return out;
    case Kind::Module: out = "M["; append_quoted(out, name); out += ']'; return out;
    case Kind::Attr:
    case Kind::ModuleMember: return base->str() + "." + name;
    case Kind::Item: return base->str() + "[" + std::to_string(index) + "]";
    case Kind::DictItem: out = base->str() + "["; append_quoted(out, name); out += ']'; return out;
  }
  return out;
}

PyObject* resolve(const Source& source, const FrameView& frame) {
  PyObject* name = PyUnicode_FromStringAndSize(source.name.data(), static_cast<Py_ssize_t>(source.name.size()));
  if (name == nullptr) return nullptr;
  PyObject* value = nullptr;
  if (source.base == nullptr) {
    value = guards::read_root(source.kind, name, source.index, frame);
  } else {
    PyObject* base = resolve(*source.base, frame);
    if (base != nullptr) {
      value = guards::read_step(source.kind, base, name, source.index);
      Py_DECREF(base);
    }
  }
  Py_DECREF(name);
  return value;
}

namespace guards {

const InternedNames& interned_names() {
  // Process-lifetime strings, built once under the GIL.
  static const InternedNames names = {
      PyUnicode_InternFromString("_parameters"),    PyUnicode_InternFromString("_buffers"),
      PyUnicode_InternFromString("_modules"),       PyUnicode_InternFromString("_forward_hooks"),
      PyUnicode_InternFromString("_forward_pre_hooks"), PyUnicode_InternFromString("_backward_hooks"),
      PyUnicode_InternFromString("_backward_pre_hooks"),
  };
  return names;
}

PyObject* instance_dict(PyObject* obj) { return PyObject_GenericGetDict(obj, nullptr); }

namespace {

PyObject* dict_lookup(PyObject* dict, PyObject* key) {
  PyObject* value = PyDict_GetItemWithError(dict, key);  // borrowed
  Py_XINCREF(value);
  return value;
}

PyObject* module_member(PyObject* module, PyObject* name) {
  PyObject* dict = instance_dict(module);
  if (dict == nullptr) return nullptr;
  PyObject* value = dict_lookup(dict, name);
  if (value == nullptr && !PyErr_Occurred()) {
    const InternedNames& n = interned_names();
    for (PyObject* table_name : {n.parameters, n.buffers, n.modules}) {
      PyObject* table = PyDict_GetItemWithError(dict, table_name);  // borrowed
      if (table == nullptr) {
        if (PyErr_Occurred()) break;
        continue;
      }
      if (!PyDict_Check(table)) continue;
      value = dict_lookup(table, name);
      if (value != nullptr || PyErr_Occurred()) break;
    }
  }
  Py_DECREF(dict);
  if (value == nullptr && !PyErr_Occurred()) {
    PyErr_Format(PyExc_AttributeError, "'%s' object has no attribute '%U'", Py_TYPE(module)->tp_name, name);
  }
  return value;
}

PyObject* sequence_item(PyObject* base, int64_t index) {
  if (PyList_CheckExact(base)) {
    if (index >= PyList_GET_SIZE(base)) {
      PyErr_Format(PyExc_IndexError, "list index %lld out of range", static_cast<long long>(index));
      return nullptr;
    }
    return Py_NewRef(PyList_GET_ITEM(base, index));
  }
  if (PyTuple_CheckExact(base)) {
    if (index >= PyTuple_GET_SIZE(base)) {
      PyErr_Format(PyExc_IndexError, "tuple index %lld out of range", static_cast<long long>(index));
      return nullptr;
    }
    return Py_NewRef(PyTuple_GET_ITEM(base, index));
  }
  // Subclasses may override __getitem__; go through the type's slot.
  return PySequence_GetItem(base, static_cast<Py_ssize_t>(index));
}

PyObject* mapping_item(PyObject* base, PyObject* key) {
  if (PyDict_CheckExact(base)) {
    PyObject* value = dict_lookup(base, key);
    if (value == nullptr && !PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
    return value;
  }
  return PyObject_GetItem(base, key);
}

PyObject* dict_of(PyObject* namespace_obj, const char* what) {
  if (PyDict_Check(namespace_obj)) return namespace_obj;
  if (PyModule_Check(namespace_obj)) return PyModule_GetDict(namespace_obj);
  PyErr_Format(PyExc_TypeError, "frame %s is a %s, not a dict or module", what, Py_TYPE(namespace_obj)->tp_name);
  return nullptr;
}

}  // namespace

PyObject* read_root(Source::Kind kind, PyObject* name, int64_t index, const FrameView& frame) {
  switch (kind) {
    case Source::Kind::Local: {
      if (index >= frame.nlocalsplus || frame.localsplus == nullptr) {
        PyErr_Format(PyExc_RuntimeError, "frame has no local slot %lld (for '%U')", static_cast<long long>(index), name);
        return nullptr;
      }
      PyObject* value = frame.localsplus[index];
      if (value == nullptr) return set_error(PyExc_UnboundLocalError, "local '%U' has no value", name);
      return Py_NewRef(value);
    }
    case Source::Kind::Global:
    case Source::Kind::Builtin: {
      bool global = kind == Source::Kind::Global;
      PyObject* scope = global ? frame.globals : frame.builtins;
      if (scope == nullptr) return set_error(PyExc_RuntimeError, "frame has no namespace to read '%U' from", name);
      PyObject* dict = dict_of(scope, global ? "globals" : "builtins");
      if (dict == nullptr) return nullptr;
      PyObject* value = dict_lookup(dict, name);
      if (value == nullptr && !PyErr_Occurred()) {
        return set_error(PyExc_NameError, global ? "global '%U' is not defined" : "builtin '%U' is not defined", name);
      }
      return value;
    }
    case Source::Kind::Closure: {
      PyObject* cells = frame.closure();
      if (cells == nullptr || !PyTuple_Check(cells) || index >= PyTuple_GET_SIZE(cells)) {
        return set_error(PyExc_RuntimeError, "function has no closure cell for free variable '%U'", name);
      }
      PyObject* cell = PyTuple_GET_ITEM(cells, index);
      if (!PyCell_Check(cell)) return set_error(PyExc_TypeError, "closure item for '%U' is not a cell", name);
      PyObject* value = PyCell_GET(cell);
      if (value == nullptr) return set_error(PyExc_NameError, "free variable '%U' has no value (empty cell)", name);
      return Py_NewRef(value);
    }
    case Source::Kind::Module: {
      // A module removed from sys.modules (or replaced) is a different namespace: the guard fails.
      PyObject* module = PyImport_GetModule(name);
      if (module == nullptr && !PyErr_Occurred()) return set_error(PyExc_KeyError, "module '%U' is not loaded", name);
      return module;
    }
    case Source::Kind::Attr:
    case Source::Kind::ModuleMember:
    case Source::Kind::Item:
    case Source::Kind::DictItem:
      break;
  }
  PyErr_SetString(PyExc_RuntimeError, "source step read as a frame root");
  return nullptr;
}

PyObject* read_step(Source::Kind kind, PyObject* base, PyObject* name, int64_t index) {
  switch (kind) {
    case Source::Kind::Attr: return PyObject_GetAttr(base, name);
    case Source::Kind::ModuleMember: return module_member(base, name);
    case Source::Kind::Item: return sequence_item(base, index);
    case Source::Kind::DictItem: return mapping_item(base, name);
    case Source::Kind::Local:
    case Source::Kind::Global:
    case Source::Kind::Builtin:
    case Source::Kind::Closure:
    case Source::Kind::Module:
      break;
  }
  PyErr_SetString(PyExc_RuntimeError, "frame root read as a source step");
  return nullptr;
}

}  // namespace guards
}  // namespace ember::frontend
