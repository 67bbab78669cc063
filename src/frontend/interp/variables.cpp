// Var constructors and descriptions.
#include "frontend/interp/variables.h"

namespace ember::frontend {

VarRef make_object(PyRef obj, SourceRef source) {
  auto v = std::make_shared<ObjectVar>(std::move(obj));
  v->source = std::move(source);
  return v;
}

VarRef make_tuple(std::vector<VarRef> items) { return std::make_shared<SequenceVar>(VarKind::Tuple, std::move(items)); }

VarRef make_list(std::vector<VarRef> items) { return std::make_shared<SequenceVar>(VarKind::List, std::move(items)); }

int DictVar::find(PyObject* key) const {
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].get() == key) return static_cast<int>(i);
    int r = PyObject_RichCompareBool(keys[i].get(), key, Py_EQ);
    if (r < 0) {
      PyErr_Clear();
      continue;
    }
    if (r) return static_cast<int>(i);
  }
  return -1;
}

void DictVar::put(PyObject* key, const VarRef& value) {
  int at = find(key);
  if (at >= 0) {
    values[at] = value;
  } else {
    keys.push_back(PyRef::borrow(key));
    values.push_back(value);
  }
}

std::string describe(const Var& v) {
  switch (v.kind) {
    case VarKind::Null:
      return "NULL";
    case VarKind::Object: {
      PyObject* o = static_cast<const ObjectVar&>(v).obj.get();
      std::string s = std::string(Py_TYPE(o)->tp_name);
      PyObject* r = PyObject_Repr(o);
      if (r) {
        const char* c = PyUnicode_AsUTF8(r);
        if (c && std::string(c).size() <= 60) s += " " + std::string(c);
        Py_DECREF(r);
      }
      PyErr_Clear();
      return s;
    }
    case VarKind::Tensor:
      return "tensor " + static_cast<const TensorVar&>(v).type.str();
    case VarKind::Tuple:
      return "tuple[" + std::to_string(static_cast<const SequenceVar&>(v).items.size()) + "]";
    case VarKind::List:
      if (v.unread()) return "list";  // describing it reads nothing
      return "list[" + std::to_string(static_cast<const SequenceVar&>(v).items.size()) + "]";
    case VarKind::Dict:
      if (v.unread()) return "dict";
      return "dict[" + std::to_string(static_cast<const DictVar&>(v).keys.size()) + "]";
    case VarKind::Function:
      return "function made in the trace";
    case VarKind::BoundMethod:
      return "bound method";
    case VarKind::Cell:
      return "cell";
    case VarKind::Iterator:
      return "iterator";
    case VarKind::Super:
      return "super()";
    case VarKind::Slice:
      return "slice with symbolic bounds";
    case VarKind::Record:
      return std::string("model output ") + reinterpret_cast<PyTypeObject*>(static_cast<const RecordVar&>(v).cls.get())->tp_name;
    case VarKind::GradMode:
      if (static_cast<const GradModeVar&>(v).autocast) return "torch.autocast context";
      return static_cast<const GradModeVar&>(v).null ? "nullcontext()" : "grad-mode context";
    case VarKind::GradModeExit:
      return static_cast<const GradModeExitVar&>(v).autocast ? "autocast exit" : "grad-mode exit";
    case VarKind::SymInt:
      return "int";
  }
  return "value";
}

std::optional<sym::Expr> size_expr(const VarRef& v) {
  if (is_size_int(v)) return *v->as<SymIntVar>().size;
  if (v->kind != VarKind::Object) return std::nullopt;
  PyObject* o = v->as<ObjectVar>().obj.get();
  if (!PyLong_CheckExact(o)) return std::nullopt;
  int overflow = 0;
  long long value = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow || (value == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return std::nullopt;
  }
  return sym::Expr(static_cast<int64_t>(value));
}

}  // namespace ember::frontend
