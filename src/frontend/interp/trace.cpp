// Trace: wrapping frame values (guards, graph inputs), torch calls as graph nodes with metadata
// from meta tensors, grad-mode changes and the plan of the return value (side effects are
// recorded in trace_effects.cpp).
#include "frontend/interp/trace.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "frontend/eval_frame.h"
#include "shapes/shape_rules.h"
#include "frontend/pyutil.h"

namespace ember::frontend {

namespace {

std::string py_str(PyObject* o) {
  PyRef s = PyRef::steal(PyObject_Str(o));
  if (!s) throw PythonError();
  const char* c = PyUnicode_AsUTF8(s.get());
  if (!c) throw PythonError();
  return c;
}

bool is_plain_constant(PyObject* o) {
  return o == Py_None || PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyUnicode_CheckExact(o) ||
         PyBytes_CheckExact(o) || PyComplex_CheckExact(o);
}

// Reads dtype, sizes, strides and requires_grad of a (meta) tensor through attributes.
ir::TensorType meta_type(PyObject* t) {
  ir::TensorType type;
  PyRef dtype = PyRef::steal(PyObject_GetAttrString(t, "dtype"));
  PyRef shape = PyRef::steal(PyObject_GetAttrString(t, "shape"));
  PyRef stride = PyRef::steal(PyObject_CallMethod(t, "stride", nullptr));
  PyRef rg = PyRef::steal(PyObject_GetAttrString(t, "requires_grad"));
  if (!dtype || !shape || !stride || !rg) throw PythonError();
  std::string name = py_str(dtype.get());
  auto dt = ir::dtype_from_torch_name(name.rfind("torch.", 0) == 0 ? name.substr(6) : name);
  if (!dt) throw Unsupported("tensor of dtype " + name);
  type.dtype = *dt;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shape.get()); ++i)
    type.sizes.push_back(static_cast<int64_t>(PyLong_AsLongLong(PyTuple_GET_ITEM(shape.get(), i))));
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(stride.get()); ++i)
    type.strides.push_back(static_cast<int64_t>(PyLong_AsLongLong(PyTuple_GET_ITEM(stride.get(), i))));
  type.requires_grad = rg.get() == Py_True;
  return type;
}

// Runs a meta computation under the trace's grad mode. Restoring the mode keeps a pending
// Python error (from the meta computation) aside: no Python API may run with one set.
class GradModeScope {
 public:
  GradModeScope(const TorchTable& table, bool enabled) : table_(table) {
    previous_ = GlobalState::current().grad_enabled;
    changed_ = previous_ != enabled;
    if (changed_) set(enabled);
  }
  ~GradModeScope() {
    if (!changed_) return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    set(previous_);
    PyErr_Restore(type, value, tb);
  }

 private:
  void set(bool enabled) {
    PyObject* r = PyObject_CallOneArg(table_.set_grad_enabled_fn.get(), enabled ? Py_True : Py_False);
    if (!r) PyErr_Clear();
    Py_XDECREF(r);
  }
  const TorchTable& table_;
  bool previous_;
  bool changed_;
};

}  // namespace

Trace::Trace(const TorchTable& t, const FrameView& f, const CompileOptions& o) : table(t), frame(f), options(o) {
  GlobalState state = GlobalState::current();
  grad_enabled = state.grad_enabled;
  default_dtype_ = state.default_dtype;
  autocast = initial_autocast_ = state.autocast_state;
}

VarRef Trace::constant(PyRef obj) { return make_object(std::move(obj)); }

VarRef Trace::none() { return make_object(PyRef::borrow(Py_None)); }

PyObject* Trace::as_constant(const Var& v) {
  if (v.kind != VarKind::Object || v.as<ObjectVar>().opaque || v.as<ObjectVar>().made_attrs) return nullptr;
  return v.as<ObjectVar>().obj.get();
}

PyRef Trace::materialize(const Var& v) {
  switch (v.kind) {
    case VarKind::Object:
      if (v.as<ObjectVar>().opaque || v.as<ObjectVar>().made_attrs) return PyRef();
      return v.as<ObjectVar>().obj;
    case VarKind::Tuple:
    case VarKind::List: {
      auto& items = static_cast<const SequenceVar&>(v).items;
      PyRef out = PyRef::steal(v.kind == VarKind::Tuple ? PyTuple_New(items.size()) : PyList_New(items.size()));
      for (size_t i = 0; i < items.size(); ++i) {
        PyRef x = materialize(*items[i]);
        if (!x) return PyRef();
        if (v.kind == VarKind::Tuple) {
          PyTuple_SET_ITEM(out.get(), i, x.release());
        } else {
          PyList_SET_ITEM(out.get(), i, x.release());
        }
      }
      return out;
    }
    case VarKind::Dict: {
      auto& d = static_cast<const DictVar&>(v);
      PyRef out = PyRef::steal(PyDict_New());
      for (size_t i = 0; i < d.keys.size(); ++i) {
        PyRef x = materialize(*d.values[i]);
        if (!x || PyDict_SetItem(out.get(), d.keys[i].get(), x.get()) < 0) return PyRef();
      }
      return out;
    }
    default:
      return PyRef();
  }
}

bool Trace::is_tensor_type(PyObject* type) const {
  return PyType_Check(type) && PyObject_IsSubclass(type, table.tensor_type.get()) == 1;
}

bool Trace::is_equality_guarded(PyObject* obj) const {
  return PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(table.size_type.get())) ||
         PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(table.device_type.get()));
}

bool Trace::is_identity_guarded(PyObject* obj) const {
  return PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(table.dtype_type.get())) || PyModule_Check(obj) ||
         PyFunction_Check(obj) || PyCFunction_Check(obj) || PyType_Check(obj) ||
         PyObject_IsInstance(obj, table.module_type.get()) == 1;
}

bool Trace::guarded_by_value(PyObject* obj) const {
  return is_plain_constant(obj) || is_equality_guarded(obj) || is_identity_guarded(obj);
}

void Trace::register_container(PyObject* obj, const VarRef& v, const SourceRef& source) {
  int index = static_cast<int>(containers_.size());
  containers_.push_back(Container{PyRef::borrow(obj), v, false});
  container_index_[obj] = index;
  container_of_[v.get()] = index;
  container_sources_.emplace_back(source, index);
  v->source = source;
  by_source_[source->str()] = v;
}

VarRef Trace::wrap(PyObject* obj, const SourceRef& source) {
  std::string key = source->str();
  auto it = by_source_.find(key);
  if (it != by_source_.end()) return it->second;
  if (PyCell_Check(obj)) return by_source_[key] = wrap_cell(obj, source);
  if (PyList_CheckExact(obj) || PyDict_CheckExact(obj)) {
    auto found = container_index_.find(obj);
    if (found != container_index_.end()) {
      // Vars stay acyclic: the walks over them (plans, folding, lowering) assume so.
      if (std::find(wrapping_.begin(), wrapping_.end(), obj) != wrapping_.end())
        throw Unsupported("a list or dict that contains itself, read from the frame at " + key);
      // A list or dict already read through another source (`f(xs, xs)`, `self.a is self.b`):
      // the same Var, so a mutation through one name is seen through the other; `aliases`
      // requires both sources to reach one object on later calls.
      container_sources_.emplace_back(source, found->second);
      VarRef v = containers_[found->second].var;
      by_source_[key] = v;
      return v;
    }
  }
  VarRef v;
  PyTypeObject* type = Py_TYPE(obj);
  if (is_tensor_type(reinterpret_cast<PyObject*>(type))) {
    v = wrap_tensor(obj, source);
  } else if (PyLong_CheckExact(obj) && (source->kind == Source::Kind::Attr || source->kind == Source::Kind::Global ||
                                         source->kind == Source::Kind::Closure)) {
    v = sym_int(obj, source);
  } else if (is_plain_constant(obj)) {
    guards.equals(source, obj);
    v = make_object(PyRef::borrow(obj), source);
  } else if (is_equality_guarded(obj)) {
    guards.equals(source, obj);
    v = make_object(PyRef::borrow(obj), source);
  } else if (reinterpret_cast<PyObject*>(type) == table.autocast_exit_type.get()) {
    // An autocast block's exit passed to the code after a graph break: the block again.
    guards.type_match(source, type);
    v = std::make_shared<GradModeExitVar>(read_autocast_exit(obj, source));
  } else if (reinterpret_cast<PyObject*>(type) == table.grad_mode_exit_type.get()) {
    // A grad-mode block's exit passed to the code after a graph break: the block again.
    guards.type_match(source, type);
    PyRef previous = PyRef::steal(PyObject_GetAttrString(obj, "previous"));
    if (!previous) throw PythonError();
    guards.equals(Source::attr(source, "previous"), previous.get());
    v = std::make_shared<GradModeExitVar>(previous.get() == Py_True, previous.get() != Py_None);
  } else if (PyTuple_Check(obj) || PyList_CheckExact(obj)) {
    bool is_tuple = PyTuple_Check(obj);
    guards.type_match(source, type);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    guards.length(source, n);
    auto seq = std::make_shared<SequenceVar>(is_tuple ? VarKind::Tuple : VarKind::List, std::vector<VarRef>{});
    if (is_tuple && !PyTuple_CheckExact(obj)) seq->named_type = PyRef::borrow(reinterpret_cast<PyObject*>(type));
    v = seq;
    if (!is_tuple) register_container(obj, v, source);
    wrapping_.push_back(obj);
    for (Py_ssize_t i = 0; i < n; ++i) seq->items.push_back(wrap(PySequence_Fast_GET_ITEM(obj, i), Source::item(source, i)));
    wrapping_.pop_back();
  } else if (PyDict_CheckExact(obj)) {
    guards.type_match(source, type);
    PyRef keys = PyRef::steal(PyDict_Keys(obj));
    PyRef keys_tuple = PyRef::steal(PyList_AsTuple(keys.get()));
    guards.dict_keys(source, keys_tuple.get());
    auto d = std::make_shared<DictVar>();
    v = d;
    register_container(obj, v, source);
    wrapping_.push_back(obj);
    PyObject *k, *val;
    Py_ssize_t pos = 0;
    while (PyDict_Next(obj, &pos, &k, &val)) {
      if (!PyUnicode_Check(k)) throw Unsupported("dict with a non-string key read from the frame at " + key);
      d->keys.push_back(PyRef::borrow(k));
      d->values.push_back(wrap(val, Source::dict_item(source, PyUnicode_AsUTF8(k))));
    }
    wrapping_.pop_back();
  } else if (PyMethod_Check(obj)) {
    // A bound method is a new object at each attribute read: its function is what must match;
    // its `self` is read through the source when the method is called.
    guards.type_match(source, type);
    guards.id_match(Source::attr(source, "__func__"), PyMethod_GET_FUNCTION(obj));
    v = make_object(PyRef::borrow(obj), source);
  } else if (PyFunction_Check(obj) && PyFunction_GET_CLOSURE(obj)) {
    guard_closure(obj, source);
    v = make_object(PyRef::borrow(obj), source);
  } else if (is_identity_guarded(obj)) {
    guards.id_match(source, obj);
    v = make_object(PyRef::borrow(obj), source);
  } else {
    // Any other object: its type is guarded here, and every attribute the trace reads from it
    // gets its own guard through its source.
    guards.type_match(source, type);
    v = make_object(PyRef::borrow(obj), source);
  }
  v->source = source;
  by_source_[key] = v;
  // An object read after the trace mutated a dict of the caller that is its __dict__.
  if (v->kind == VarKind::Object && mutated_dicts_ > 0)
    for (const Container& c : containers_)
      if (c.mutated && c.var->kind == VarKind::Dict) refuse_instance_dict(c, *v);
  return v;
}

VarRef Trace::wrap_tensor(PyObject* obj, const SourceRef& source) {
  TensorMeta meta;
  if (!read_tensor_meta(obj, &meta)) throw Unsupported("tensor at " + source->str() + " that Ember cannot describe (sparse, nested or an unknown dtype)");
  guards.tensor_match(source, meta);
  guards.capture(source);
  ir::TensorType type;
  type.dtype = meta.dtype;
  for (int64_t s : meta.sizes) type.sizes.push_back(s);
  for (int64_t s : meta.strides) type.strides.push_back(s);
  type.device = meta.device;
  type.requires_grad = meta.requires_grad;
  ir::ValueId value = graph.add_input(type, source->str());
  auto t = std::make_shared<TensorVar>();
  t->value = value;
  t->type = std::move(type);
  t->py_type = PyRef::borrow(reinterpret_cast<PyObject*>(meta.type));
  meta_of(*t);
  t->meta_is_proxy = false;  // an input's meta tensor is a leaf, as the input is taken to be
  return t;
}

PyObject* Trace::meta_of(TensorVar& t) {
  if (t.meta) return t.meta.get();
  const ir::TensorType& type = t.type;
  PyRef sizes = PyRef::steal(PyTuple_New(type.sizes.size()));
  PyRef strides = PyRef::steal(PyTuple_New(type.strides.size()));
  for (size_t i = 0; i < type.sizes.size(); ++i) {
    if (!type.sizes[i].is_constant() || !type.strides[i].is_constant()) throw Unsupported("symbolic sizes are not supported yet");
    PyTuple_SET_ITEM(sizes.get(), i, PyLong_FromLongLong(type.sizes[i].constant()));
    PyTuple_SET_ITEM(strides.get(), i, PyLong_FromLongLong(type.strides[i].constant()));
  }
  t.meta = PyRef::steal(PyObject_CallFunctionObjArgs(table.make_meta.get(), sizes.get(), strides.get(),
                                                     table.dtype_object(type.dtype),
                                                     type.requires_grad ? Py_True : Py_False, nullptr));
  if (!t.meta) throw PythonError();
  t.meta_is_proxy = true;
  return t.meta.get();
}

std::optional<ir::Literal> builtin_literal(PyObject* o) {
  if (o == Py_None) return ir::NoneLiteral{};
  if (PyBool_Check(o)) return o == Py_True;
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) return std::nullopt;
    return static_cast<int64_t>(v);
  }
  if (PyFloat_CheckExact(o)) return PyFloat_AS_DOUBLE(o);
  if (PyUnicode_CheckExact(o)) return std::string(PyUnicode_AsUTF8(o));
  if (o == Py_Ellipsis) return ir::Ellipsis{};
  if (PySlice_Check(o)) {
    auto* s = reinterpret_cast<PySliceObject*>(o);
    ir::Slice slice;
    std::optional<int64_t>* parts[] = {&slice.start, &slice.stop, &slice.step};
    PyObject* objs[] = {s->start, s->stop, s->step};
    for (int i = 0; i < 3; ++i) {
      if (objs[i] == Py_None) continue;
      if (!PyLong_CheckExact(objs[i])) return std::nullopt;
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(objs[i], &overflow);
      if (overflow) return std::nullopt;
      *parts[i] = v;
    }
    return slice;
  }
  return std::nullopt;
}

std::optional<ir::Literal> Trace::literal_of(PyObject* o) const {
  if (auto lit = builtin_literal(o)) return lit;
  if (PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(table.dtype_type.get()))) {
    std::string name = py_str(o);
    auto dt = ir::dtype_from_torch_name(name.rfind("torch.", 0) == 0 ? name.substr(6) : name);
    if (!dt) return std::nullopt;
    return *dt;
  }
  if (PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(table.device_type.get()))) {
    auto d = ir::device_from_string(py_str(o));
    if (!d) return std::nullopt;
    return *d;
  }
  return std::nullopt;
}

ir::Arg Trace::lower_arg(const VarRef& v, PyRef* meta_value) {
  switch (v->kind) {
    case VarKind::Tensor:
      if (meta_value) *meta_value = PyRef::borrow(meta_of(v->as<TensorVar>()));
      return ir::Arg::of_value(v->as<TensorVar>().value);
    case VarKind::Object: {
      PyObject* o = v->as<ObjectVar>().obj.get();
      if (meta_value) *meta_value = PyRef::borrow(o);
      if (auto lit = literal_of(o)) return ir::Arg::of_literal(*lit);
      if (PyTuple_Check(o) || PyList_Check(o)) {
        // A constant tuple (or torch.Size): lowered item by item.
        std::vector<ir::Arg> items;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i) {
          VarRef item = make_object(PyRef::borrow(PySequence_Fast_GET_ITEM(o, i)));
          items.push_back(lower_arg(item, nullptr));
        }
        return PyList_Check(o) ? ir::Arg::list(std::move(items)) : ir::Arg::tuple(std::move(items));
      }
      throw Unsupported(std::string("an argument of type ") + Py_TYPE(o)->tp_name + " cannot be passed to a graph op");
    }
    case VarKind::Tuple:
    case VarKind::List: {
      auto& items = v->as<SequenceVar>().items;
      bool is_tuple = v->kind == VarKind::Tuple;
      PyRef metas = PyRef::steal(is_tuple ? PyTuple_New(items.size()) : PyList_New(items.size()));
      std::vector<ir::Arg> args;
      for (size_t i = 0; i < items.size(); ++i) {
        PyRef m;
        args.push_back(lower_arg(items[i], meta_value ? &m : nullptr));
        if (!meta_value) continue;
        if (is_tuple) {
          PyTuple_SET_ITEM(metas.get(), i, m.release());
        } else {
          PyList_SET_ITEM(metas.get(), i, m.release());
        }
      }
      if (meta_value) *meta_value = std::move(metas);
      return is_tuple ? ir::Arg::tuple(std::move(args)) : ir::Arg::list(std::move(args));
    }
    default:
      throw Unsupported(describe(*v) + " cannot be passed to a graph op");
  }
}

ir::Device Trace::infer_device(PyObject* callable, const std::vector<VarRef>& args,
                               const std::vector<std::pair<std::string, VarRef>>& kwargs) const {
  auto device_of_const = [&](PyObject* o) -> std::optional<ir::Device> {
    if (PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(table.device_type.get())) || PyUnicode_Check(o))
      return ir::device_from_string(py_str(o));
    return std::nullopt;
  };
  for (auto& [k, v] : kwargs) {
    if (k != "device") continue;
    PyObject* c = as_constant(*v);
    if (c && PyLong_Check(c)) return ir::Device{"cuda", static_cast<int>(PyLong_AsLong(c))};
    if (c && c != Py_None)
      if (auto d = device_of_const(c)) return *d;
  }
  const std::string& name = table.name_of(callable);
  auto ends_with = [&](const char* suffix) {
    std::string s(suffix);
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (ends_with(".cpu")) return ir::Device{"cpu", -1};
  if (ends_with(".cuda")) {
    PyObject* c = args.size() > 1 ? as_constant(*args[1]) : nullptr;
    return ir::Device{"cuda", c && PyLong_Check(c) ? static_cast<int>(PyLong_AsLong(c)) : 0};
  }
  if (ends_with(".to")) {
    for (size_t i = 1; i < args.size(); ++i) {
      if (args[i]->kind == VarKind::Tensor) return args[i]->as<TensorVar>().type.device;
      PyObject* c = as_constant(*args[i]);
      if (c && !PyObject_TypeCheck(c, reinterpret_cast<PyTypeObject*>(table.dtype_type.get())))
        if (auto d = device_of_const(c)) return *d;
    }
  }
  // Otherwise the device of the tensor operands: a non-CPU operand wins (CPU scalars mix in).
  const ir::Device* first = nullptr;
  std::function<const ir::Device*(const VarRef&)> scan = [&](const VarRef& v) -> const ir::Device* {
    if (v->kind == VarKind::Tensor) {
      const ir::Device& d = v->as<TensorVar>().type.device;
      if (!first) first = &d;
      return d.type != "cpu" ? &d : nullptr;
    }
    if (v->kind == VarKind::Tuple || v->kind == VarKind::List)
      for (auto& x : v->as<SequenceVar>().items)
        if (auto* d = scan(x)) return d;
    return nullptr;
  };
  for (auto& a : args)
    if (auto* d = scan(a)) return *d;
  for (auto& [k, v] : kwargs)
    if (auto* d = scan(v)) return *d;
  if (first) return *first;
  // No tensor operand and no device argument: torch's default device (torch.set_default_device).
  PyRef dev = PyRef::steal(PyObject_CallMethod(table.torch.get(), "get_default_device", nullptr));
  if (!dev) {
    PyErr_Clear();
    return ir::Device{"cpu", -1};
  }
  return ir::device_from_string(py_str(dev.get())).value_or(ir::Device{"cpu", -1});
}

std::optional<std::vector<ir::TensorType>> Trace::rule_types(ir::Op op, const std::string& name,
                                                             const std::vector<VarRef>& args,
                                                             const std::vector<std::pair<std::string, VarRef>>& kwargs) {
  // Operands as the rules see them: constants converted as nodes' literal arguments are.
  std::function<shapes::Operand(PyObject*)> constant = [&](PyObject* o) {
    if (auto lit = literal_of(o)) return shapes::Operand::of_literal(std::move(*lit));
    if (!PyTuple_Check(o) && !PyList_Check(o)) return shapes::Operand::opaque();
    std::vector<shapes::Operand> items;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i) items.push_back(constant(PySequence_Fast_GET_ITEM(o, i)));
    return shapes::Operand::sequence(std::move(items), !PyList_Check(o));
  };
  std::function<std::optional<shapes::Operand>(const VarRef&)> operand = [&](const VarRef& v) -> std::optional<shapes::Operand> {
    if (v->kind == VarKind::Tensor) return shapes::Operand::of_tensor(&v->as<TensorVar>().type);
    if (v->kind == VarKind::Tuple || v->kind == VarKind::List) {
      bool tensors = false;
      for (auto& x : v->as<SequenceVar>().items) tensors = tensors || x->kind == VarKind::Tensor;
      if (tensors) {
        std::vector<shapes::Operand> items;
        for (auto& x : v->as<SequenceVar>().items) {
          auto item = operand(x);
          if (!item) return std::nullopt;
          items.push_back(std::move(*item));
        }
        return shapes::Operand::sequence(std::move(items), v->kind == VarKind::Tuple);
      }
    }
    PyRef c = materialize(*v);
    if (!c) return std::nullopt;
    return constant(c.get());
  };
  std::vector<shapes::Operand> rule_args;
  std::vector<std::pair<std::string, shapes::Operand>> rule_kwargs;
  for (auto& a : args) {
    auto r = operand(a);
    if (!r) return std::nullopt;
    rule_args.push_back(std::move(*r));
  }
  for (auto& [k, v] : kwargs) {
    auto r = operand(v);
    if (!r) return std::nullopt;
    rule_kwargs.emplace_back(k, std::move(*r));
  }
  if (op == ir::Op::TorchCall) return shapes::infer_torch_call_types(name, rule_args, rule_kwargs, grad_enabled, default_dtype_);
  return shapes::infer_result_types(op, rule_args, rule_kwargs, grad_enabled, default_dtype_);
}

VarRef Trace::record_call(PyObject* callable, const std::vector<VarRef>& args,
                          const std::vector<std::pair<std::string, VarRef>>& kwargs) {
  const CallableKind& kind = table.classify(callable);
  const std::string& name = table.name_of(callable);
  std::optional<std::vector<ir::TensorType>> ruled;
  bool core_rule = kind.kind == CallableKind::CoreOp && !kind.makes_tensors() && core_op_applies(kind.op, args, kwargs);
  bool torch_rule = kind.kind == CallableKind::TorchOp && shapes::has_torch_call_rule(name);
  if (core_rule || torch_rule) {
    // Ember's own shape rules first: no meta kernel when they know the answer (under
    // verify_shape_rules, the meta kernel runs too and must agree). Some meta kernels are
    // Python that imports torch._dynamo: seconds in a fresh process.
    ir::Op rule_op = core_rule ? kind.op : ir::Op::TorchCall;
    ruled = rule_types(rule_op, name, args, kwargs);
    if (auto& types = ruled; types && !options.verify_shape_rules) {
      std::vector<ir::Arg> ir_args;
      for (auto& a : args) ir_args.push_back(lower_arg(a, nullptr));
      std::vector<std::pair<std::string, ir::Arg>> ir_kwargs;
      for (auto& [k, v] : kwargs) ir_kwargs.emplace_back(k, lower_arg(v, nullptr));
      ir::Device device = infer_device(callable, args, kwargs);
      for (auto& t : *types) t.device = device;
      auto form = types->size() == 1 && rule_op != ir::Op::Split && rule_op != ir::Op::Chunk ? ir::Node::ResultForm::Single
                                                                                              : ir::Node::ResultForm::Tuple;
      ir::NodeId node = graph.add_node(rule_op, rule_op == ir::Op::TorchCall ? name : std::string(), std::move(ir_args),
                                       std::move(ir_kwargs), *types, form);
      callables.push_back(PyRef::borrow(callable));
      const ir::Node& n = graph.node(node);
      std::vector<VarRef> out;
      for (size_t i = 0; i < types->size(); ++i) {
        auto t = std::make_shared<TensorVar>();
        t->value = n.results[i];
        t->type = (*types)[i];
        t->py_type = table.tensor_type;
        out.push_back(t);
      }
      if (form == ir::Node::ResultForm::Single) return out[0];
      return make_tuple(std::move(out));
    }
  }
  PyRef meta_args = PyRef::steal(PyTuple_New(args.size()));
  std::vector<ir::Arg> ir_args;
  for (size_t i = 0; i < args.size(); ++i) {
    PyRef m;
    ir_args.push_back(lower_arg(args[i], &m));
    PyTuple_SET_ITEM(meta_args.get(), i, m.release());
  }
  PyRef meta_kwargs;
  std::vector<std::pair<std::string, ir::Arg>> ir_kwargs;
  if (!kwargs.empty()) meta_kwargs = PyRef::steal(PyDict_New());
  for (auto& [k, v] : kwargs) {
    PyRef m;
    ir_kwargs.emplace_back(k, lower_arg(v, &m));
    if (PyDict_SetItemString(meta_kwargs.get(), k.c_str(), m.get()) < 0) throw PythonError();
  }

  // Metadata comes from running the callable on meta tensors: every device it is asked for
  // becomes "meta" (the real device is inferred separately), and a device move is a copy.
  PyObject* meta_callable = callable;
  PyRef meta_device = PyRef::steal(PyUnicode_FromString("meta"));
  if (kind.makes_tensors() && !meta_kwargs) meta_kwargs = PyRef::steal(PyDict_New());
  if (meta_kwargs && (kind.makes_tensors() || PyDict_GetItemString(meta_kwargs.get(), "device")))
    PyDict_SetItemString(meta_kwargs.get(), "device", meta_device.get());
  auto ends_with = [&](const char* suffix) {
    size_t n = std::strlen(suffix);
    return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
  };
  if (ends_with(".cpu") || ends_with(".cuda")) {
    static PyObject* clone_name = PyUnicode_InternFromString("clone");
    meta_callable = PyObject_GetAttr(table.tensor_type.get(), clone_name);
    Py_DECREF(meta_callable);  // the type keeps it alive
    meta_args = PyRef::steal(PyTuple_GetSlice(meta_args.get(), 0, 1));
    meta_kwargs = PyRef();
  } else if (ends_with(".to")) {
    for (Py_ssize_t i = 1; i < PyTuple_GET_SIZE(meta_args.get()); ++i) {
      PyObject* a = PyTuple_GET_ITEM(meta_args.get(), i);
      if (PyUnicode_Check(a) || PyObject_TypeCheck(a, reinterpret_cast<PyTypeObject*>(table.device_type.get()))) {
        Py_INCREF(meta_device.get());
        PyTuple_SetItem(meta_args.get(), i, meta_device.get());
      }
    }
  }
  PyRef result;
  {
    RegionPause pause;
    GradModeScope mode(table, grad_enabled);
    result = PyRef::steal(PyObject_Call(meta_callable, meta_args.get(), meta_kwargs.get()));
  }
  if (!result) throw Unsupported(name + " failed on meta tensors (" + take_error_message() + ")");

  PyObject* r = result.get();
  std::vector<PyObject*> metas;
  ir::Node::ResultForm form = ir::Node::ResultForm::Single;
  PyRef named_type;
  if (is_tensor_type(reinterpret_cast<PyObject*>(Py_TYPE(r)))) {
    metas.push_back(r);
  } else if (r == Py_None && kind.kind != CallableKind::Query) {
    form = ir::Node::ResultForm::None;
  } else if ((PyTuple_Check(r) || PyList_CheckExact(r)) && PySequence_Fast_GET_SIZE(r) > 0 &&
             kind.kind != CallableKind::Query) {
    form = PyTuple_Check(r) ? ir::Node::ResultForm::Tuple : ir::Node::ResultForm::List;
    if (PyTuple_Check(r) && !PyTuple_CheckExact(r)) named_type = PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(r)));
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(r); ++i) {
      PyObject* item = PySequence_Fast_GET_ITEM(r, i);
      if (!is_tensor_type(reinterpret_cast<PyObject*>(Py_TYPE(item))))
        throw Unsupported(name + " returns a sequence holding a " + Py_TYPE(item)->tp_name);
      metas.push_back(item);
    }
  } else if (kind.kind == CallableKind::Query) {
    return constant(std::move(result));
  } else {
    throw Unsupported(name + " returns a " + std::string(Py_TYPE(r)->tp_name) + ", not a tensor (data-dependent value)");
  }

  ir::Device device = infer_device(callable, args, kwargs);
  std::vector<ir::TensorType> types;
  for (PyObject* m : metas) {
    ir::TensorType t = meta_type(m);
    t.device = device;
    types.push_back(std::move(t));
  }
  if (ruled) {
    bool same = ruled->size() == types.size();
    for (size_t i = 0; same && i < types.size(); ++i) {
      (*ruled)[i].device = device;
      same = (*ruled)[i] == types[i];
    }
    if (!same)
      throw Unsupported("internal error: Ember's shape rule for " + name + " disagrees with torch's meta kernel: rule " +
                        ((*ruled).empty() ? std::string("()") : (*ruled)[0].str()) + ", torch " +
                        (types.empty() ? std::string("()") : types[0].str()));
  }
  ir::Op op = kind.kind == CallableKind::CoreOp && core_op_applies(kind.op, args, kwargs) ? kind.op : ir::Op::TorchCall;
  ir::NodeId node = graph.add_node(op, op == ir::Op::TorchCall ? name : std::string(), std::move(ir_args),
                                   std::move(ir_kwargs), types, form);
  callables.push_back(PyRef::borrow(callable));
  const ir::Node& n = graph.node(node);

  bool inplace = n.mutates_first_arg() || PySet_Contains(table.inplace_callables.get(), callable) == 1;
  if (form == ir::Node::ResultForm::None) return none();
  std::vector<VarRef> out;
  for (size_t i = 0; i < metas.size(); ++i) {
    if (i == 0 && inplace && !args.empty() && args[0]->kind == VarKind::Tensor && metas[0] == args[0]->as<TensorVar>().meta.get()) {
      // An in-place op returns its first argument: move that Var (and every alias of it) to the
      // new value, so later reads see the mutation.
      auto& t = args[0]->as<TensorVar>();
      t.value = n.results[0];
      t.type = types[0];
      out.push_back(args[0]);
      continue;
    }
    auto t = std::make_shared<TensorVar>();
    t->value = n.results[i];
    t->type = types[i];
    t->meta = PyRef::borrow(metas[i]);
    t->py_type = table.tensor_type;
    out.push_back(t);
  }
  if (form == ir::Node::ResultForm::Single) return out[0];
  auto seq = std::make_shared<SequenceVar>(form == ir::Node::ResultForm::List ? VarKind::List : VarKind::Tuple, std::move(out));
  seq->named_type = named_type;
  return seq;
}

bool Trace::core_op_applies(ir::Op op, const std::vector<VarRef>& args,
                            const std::vector<std::pair<std::string, VarRef>>& kwargs) {
  // A core op's first operand is a tensor (or a list of them): other overloads, such as
  // torch.pow(2, x), stay generic torch nodes.
  int arity = ir::op_info(op).arity;
  bool first_ok = arity == 0 || (!args.empty() && (arity < 0 ? (args[0]->kind == VarKind::List || args[0]->kind == VarKind::Tuple)
                                                           : args[0]->kind == VarKind::Tensor));
  return first_ok && args.size() + kwargs.size() >= static_cast<size_t>(std::max(arity, 0));
}

void Trace::set_grad_enabled(bool enabled) {
  if (enabled == grad_enabled) return;
  graph.add_node(ir::Op::TorchCall, table.name_of(table.set_grad_enabled_fn.get()), {ir::Arg::of_literal(enabled)}, {},
                 {}, ir::Node::ResultForm::None);
  callables.push_back(table.set_grad_enabled_fn);
  grad_enabled = enabled;
}

bool Trace::plannable(const Var& v) const {
  // Containers are walked once each (a list may hold itself).
  std::vector<const Var*> seen;
  std::function<bool(const Var&)> walk = [&](const Var& x) -> bool {
    switch (x.kind) {
      case VarKind::Object: {
        const auto& attrs = x.as<ObjectVar>().made_attrs;
        if (!attrs || std::find(seen.begin(), seen.end(), &x) != seen.end()) return true;
        seen.push_back(&x);
        for (const auto& kv : *attrs)
          if (!walk(*kv.second)) return false;
        return true;
      }
      case VarKind::BoundMethod: {
        PyObject* f = as_constant(*x.as<BoundMethodVar>().func);
        return f && PyFunction_Check(f) && walk(*x.as<BoundMethodVar>().self);
      }
      case VarKind::Tensor:
      case VarKind::SymInt:
      case VarKind::GradModeExit:
        return true;
      case VarKind::Tuple:
      case VarKind::List:
      case VarKind::Dict: {
        if (x.source) return true;  // rebuilt from its source (the caller's own object)
        if (std::find(seen.begin(), seen.end(), &x) != seen.end()) return true;
        seen.push_back(&x);
        const std::vector<VarRef>& items = x.kind == VarKind::Dict ? x.as<DictVar>().values : x.as<SequenceVar>().items;
        if (x.kind == VarKind::List && x.as<SequenceVar>().named_type) return false;
        for (const VarRef& item : items)
          if (!walk(*item)) return false;
        return true;
      }
      case VarKind::Function: {
        if (std::find(seen.begin(), seen.end(), &x) != seen.end()) return true;
        seen.push_back(&x);
        const auto& f = x.as<FunctionVar>();
        for (const VarRef& d : f.defaults)
          if (!walk(*d)) return false;
        for (const VarRef& c : f.closure)
          if (!walk(*c)) return false;
        return (!f.kwdefaults || walk(*f.kwdefaults)) && (!f.annotations || walk(*f.annotations));
      }
      case VarKind::Cell: {
        const auto& c = x.as<CellVar>();
        if (c.real || std::find(seen.begin(), seen.end(), &x) != seen.end()) return true;
        seen.push_back(&x);
        return !c.contents || walk(*c.contents);
      }
      case VarKind::Null:
      case VarKind::Iterator:
      case VarKind::Super:
      case VarKind::GradMode:
      case VarKind::Record:
        return false;
    }
    return false;
  };
  return walk(v);
}

ValuePlan Trace::plan_contents(const VarRef& container) {
  ValuePlan p;
  if (container->kind == VarKind::Dict) {
    plan_dict_items(container->as<DictVar>(), p);
    return p;
  }
  p.kind = ValuePlan::Kind::List;
  for (auto& x : container->as<SequenceVar>().items) p.items.push_back(plan_value(x));
  return p;
}

void Trace::plan_dict_items(const DictVar& d, ValuePlan& p) {
  p.kind = ValuePlan::Kind::Dict;
  p.constant = PyRef::steal(PyTuple_New(d.keys.size()));
  for (size_t i = 0; i < d.keys.size(); ++i) {
    PyTuple_SET_ITEM(p.constant.get(), i, PyRef(d.keys[i]).release());
    p.items.push_back(plan_value(d.values[i]));
  }
}

VarRef Trace::sym_int(PyObject* value, const SourceRef& source) {
  guards.type_match(source, Py_TYPE(value));
  auto s = std::make_shared<SymIntVar>();
  s->value = PyRef::borrow(value);
  auto expr = std::make_shared<ValuePlan>();
  expr->kind = ValuePlan::Kind::FromSource;
  expr->source = source;
  s->expr = std::move(expr);
  s->leaves.emplace_back(source, PyRef::borrow(value));
  return s;
}

VarRef Trace::sym_int_arith(PyObject* op, const VarRef& a, const VarRef& b) {
  auto operand = [](const VarRef& v, ValuePlan* plan) -> PyObject* {
    if (v->kind == VarKind::SymInt) {
      *plan = *v->as<SymIntVar>().expr;
      return v->as<SymIntVar>().value.get();
    }
    PyObject* c = as_constant(*v);
    if (!c || !PyLong_CheckExact(c)) return nullptr;
    plan->kind = ValuePlan::Kind::Const;
    plan->constant = PyRef::borrow(c);
    return c;
  };
  ValuePlan pa, pb;
  PyObject* x = operand(a, &pa);
  PyObject* y = operand(b, &pb);
  if (!x || !y) return nullptr;
  PyRef r = PyRef::steal(PyObject_CallFunctionObjArgs(op, x, y, nullptr));
  if (!r || !PyLong_CheckExact(r.get())) {
    PyErr_Clear();
    return nullptr;
  }
  auto s = std::make_shared<SymIntVar>();
  s->value = std::move(r);
  auto expr = std::make_shared<ValuePlan>();
  expr->kind = ValuePlan::Kind::Call;
  expr->constant = PyRef::borrow(op);
  expr->items = {std::move(pa), std::move(pb)};
  s->expr = std::move(expr);
  for (const VarRef* v : {&a, &b})
    if ((*v)->kind == VarKind::SymInt)
      for (auto& leaf : (*v)->as<SymIntVar>().leaves) s->leaves.push_back(leaf);
  return s;
}

VarRef Trace::specialize(const VarRef& v) {
  if (v->kind != VarKind::SymInt) return v;
  auto& s = v->as<SymIntVar>();
  for (auto& [source, value] : s.leaves) guards.equals(source, value.get());
  return make_object(s.value);
}

ValuePlan Trace::plan_value(const VarRef& v) {
  ValuePlan p;
  switch (v->kind) {
    case VarKind::SymInt:
      return *v->as<SymIntVar>().expr;
    case VarKind::Tensor: {
      ir::ValueId id = v->as<TensorVar>().value;
      auto it = output_index_.find(id);
      if (it == output_index_.end()) {
        it = output_index_.emplace(id, static_cast<int>(outputs_.size())).first;
        outputs_.push_back(id);
      }
      p.kind = ValuePlan::Kind::GraphOutput;
      p.output = it->second;
      return p;
    }
    case VarKind::Object: {
      PyObject* o = v->as<ObjectVar>().obj.get();
      if (const auto& attrs = v->as<ObjectVar>().made_attrs) {
        p.kind = ValuePlan::Kind::Object;
        p.identity = identities_.emplace(v.get(), static_cast<int>(identities_.size())).first->second;
        PyRef names = PyRef::steal(PyTuple_New(attrs->size()));
        for (size_t i = 0; i < attrs->size(); ++i) {
          PyObject* name = PyUnicode_FromString((*attrs)[i].first.c_str());
          if (!name) throw PythonError();
          PyTuple_SET_ITEM(names.get(), i, name);
        }
        p.constant = PyRef::steal(PyTuple_Pack(2, reinterpret_cast<PyObject*>(Py_TYPE(o)), names.get()));
        if (!p.constant) throw PythonError();
        // An attribute that leads back to the object (a parent pointer) plans no attributes: the
        // builder registers the object before building its attributes and returns it there.
        if (!planning_.insert(v.get()).second) return p;
        for (const auto& kv : *attrs) p.items.push_back(plan_value(kv.second));
        planning_.erase(v.get());
        return p;
      }
      if (v->source && !is_plain_constant(o)) {
        p.kind = ValuePlan::Kind::FromSource;
        p.source = v->source;
      } else {
        p.kind = ValuePlan::Kind::Const;
        p.constant = v->as<ObjectVar>().obj;
      }
      return p;
    }
    case VarKind::Tuple:
    case VarKind::List:
    case VarKind::Dict: {
      if (v->source) {
        // Read from the frame: the caller's object (a mutation of it is a Contents side effect,
        // replayed in place, so the object rebuilt here ends up with the final contents).
        p.kind = ValuePlan::Kind::FromSource;
        p.source = v->source;
        return p;
      }
      if (v->kind != VarKind::Tuple) p.identity = identities_.emplace(v.get(), static_cast<int>(identities_.size())).first->second;
      if (v->kind == VarKind::Dict) {
        plan_dict_items(v->as<DictVar>(), p);
        return p;
      }
      auto& s = v->as<SequenceVar>();
      if (v->kind == VarKind::List && s.named_type) throw Unsupported("returning a slice of an nn.Sequential");
      p.kind = s.named_type ? ValuePlan::Kind::Named : v->kind == VarKind::Tuple ? ValuePlan::Kind::Tuple : ValuePlan::Kind::List;
      p.constant = s.named_type;
      for (auto& x : s.items) p.items.push_back(plan_value(x));
      return p;
    }
    case VarKind::BoundMethod: {
      // A Python function bound to a value: types.MethodType(function, self) after the graph.
      auto& bm = v->as<BoundMethodVar>();
      PyObject* f = as_constant(*bm.func);
      if (!f || !PyFunction_Check(f)) throw Unsupported("returning or storing a bound method of " + describe(*bm.func) + " from compiled code");
      p.kind = ValuePlan::Kind::Call;
      p.constant = PyRef::borrow(reinterpret_cast<PyObject*>(&PyMethod_Type));
      p.items.push_back(plan_value(bm.func));
      p.items.push_back(plan_value(bm.self));
      return p;
    }
    case VarKind::Function:
      return plan_function(v);
    case VarKind::Cell:
      return plan_cell(v);
    case VarKind::GradModeExit: {
      p.kind = ValuePlan::Kind::Const;
      auto& exit = v->as<GradModeExitVar>();
      if (exit.autocast) {
        p.constant = autocast_exit_object(table, *exit.autocast);
        return p;
      }
      PyObject* previous = !exit.restores_mode ? Py_None : exit.previous ? Py_True : Py_False;
      p.constant = PyRef::steal(PyObject_CallOneArg(table.grad_mode_exit_type.get(), previous));
      if (!p.constant) throw PythonError();
      return p;
    }
    default:
      throw Unsupported("returning or storing " + describe(*v) + " from compiled code");
  }
}

ValuePlan Trace::finish(const VarRef& result) {
  ValuePlan plan = plan_value(result);
  for (auto& e : effects.entries()) e.plan = e.kind == SideEffect::Kind::Contents ? plan_contents(e.value) : plan_value(e.value);
  graph.set_outputs(outputs_);
  // Every source of an object reached twice, and every container source once one was mutated.
  std::vector<int> sources_per(containers_.size(), 0);
  bool any_mutated = false;
  for (auto& [source, index] : container_sources_) ++sources_per[index];
  for (auto& c : containers_) any_mutated = any_mutated || c.mutated;
  aliases.entries.clear();
  for (auto& [source, index] : container_sources_)
    if (any_mutated || sources_per[index] > 1)
      aliases.entries.push_back(AliasGuard::Entry{source, index, containers_[index].mutated});
  alias_cells(static_cast<int>(containers_.size()));
  return plan;
}

}  // namespace ember::frontend
