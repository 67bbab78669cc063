// Trace: wrapping frame values (guards, graph inputs), grad-mode changes, symbolic integers and
// the plan of the return value. Torch calls become graph nodes in trace_calls.cpp; side effects
// are recorded in effect_log.cpp and trace_effects.cpp.
#include "frontend/interp/trace.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "frontend/eval_frame.h"
#include "frontend/pyutil.h"

namespace ember::frontend {

namespace {

bool is_plain_constant(PyObject* o) {
  return o == Py_None || PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyUnicode_CheckExact(o) ||
         PyBytes_CheckExact(o) || PyComplex_CheckExact(o);
}

}  // namespace

Trace::Trace(const TorchTable& t, const FrameView& f, const CompileOptions& o, const GlobalState& state)
    : table(t), frame(f), options(o) {
  guards.global_state(state);
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
      auto& items = v.as<SequenceVar>().items;
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
      const PyRef& named = v.as<SequenceVar>().named_type;
      if (v.kind != VarKind::Tuple || !named) return out;
      // As a plan rebuilds one (compiled_frame.cpp): namedtuples through _make, torch.Size and
      // structseqs from the tuple.
      PyRef make = PyRef::steal(PyObject_GetAttrString(named.get(), "_make"));
      if (!make) PyErr_Clear();
      PyRef rebuilt = PyRef::steal(PyObject_CallOneArg(make ? make.get() : named.get(), out.get()));
      if (!rebuilt) PyErr_Clear();
      return rebuilt;
    }
    case VarKind::Dict: {
      auto& d = v.as<DictVar>();
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
  PyTypeObject* type = Py_TYPE(obj);
  const bool tensor = is_tensor_type(reinterpret_cast<PyObject*>(type));
  if (tensor || PyList_CheckExact(obj) || PyDict_CheckExact(obj)) {
    auto found = container_index_.find(obj);
    if (found != container_index_.end()) {
      // Vars stay acyclic: the walks over them (plans, folding, lowering) assume so.
      if (std::find(wrapping_.begin(), wrapping_.end(), obj) != wrapping_.end())
        throw Unsupported("a list or dict that contains itself, read from the frame at " + key);
      // A tensor, list or dict already read through another source (`f(x, x)`, `self.a is
      // self.b`, tied weights, the locals a graph break passes on that name one tensor): the same
      // Var (one graph input), so a mutation through one name is seen through the other;
      // `aliases` requires both sources to reach one object on later calls.
      container_sources_.emplace_back(source, found->second);
      VarRef v = containers_[found->second].var;
      by_source_[key] = v;
      return v;
    }
  }
  VarRef v;
  if (tensor) {
    v = wrap_tensor(obj, source);
    register_container(obj, v, source);
  } else if (PyLong_CheckExact(obj) && dynamic_int(obj, source)) {
    v = int_symbol(obj, source);
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
  } else if (PyTuple_Check(obj) || PyList_CheckExact(obj) || PyDict_CheckExact(obj)) {
    guards.type_match(source, type);
    if (PyDict_CheckExact(obj)) {
      v = std::make_shared<DictVar>();
    } else {
      auto seq = std::make_shared<SequenceVar>(PyTuple_Check(obj) ? VarKind::Tuple : VarKind::List, std::vector<VarRef>{});
      if (PyTuple_Check(obj) && !PyTuple_CheckExact(obj)) seq->named_type = PyRef::borrow(reinterpret_cast<PyObject*>(type));
      v = seq;
    }
    if (v->kind == VarKind::Tuple) {
      read_contents(obj, *v, source);
    } else {
      register_container(obj, v, source);
      // A global's or an attribute's list or dict (a log, a cache, a counter of calls) is
      // often only added to: its contents are read, and guarded, when the trace first needs
      // them (Var::read_contents), so appending does not make the next call miss.
      bool lazy = source->kind == Source::Kind::Global || source->kind == Source::Kind::Attr ||
                  source->kind == Source::Kind::ModuleMember;
      if (lazy) {
        PyRef keep = PyRef::borrow(obj);
        Var* var = v.get();  // the Var owns the function: `var` outlives every call of it
        v->read_contents = [this, keep, var, source] { read_contents(keep.get(), *var, source); };
      } else {
        read_contents(obj, *v, source);
      }
    }
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
  ir::TensorType type;
  type.dtype = meta.dtype;
  for (int64_t s : meta.sizes) type.sizes.push_back(s);
  for (int64_t s : meta.strides) type.strides.push_back(s);
  std::vector<int> size_slots, stride_slots;
  symbolize_input(source, meta, dynamic_dims(obj, source, meta), &type, &size_slots, &stride_slots);
  if (size_slots.empty()) {
    guards.tensor_match(source, meta);
  } else {
    guards.tensor_match(source, meta, size_slots, stride_slots);
  }
  guards.capture(source);
  type.device = meta.device;
  type.requires_grad = meta.requires_grad;
  ir::ValueId value = graph.add_input(type, source->str());
  auto t = std::make_shared<TensorVar>();
  t->value = value;
  t->type = std::move(type);
  t->py_type = PyRef::borrow(reinterpret_cast<PyObject*>(meta.type));
  meta_of(*t, /*leaf=*/true);
  t->meta_is_proxy = false;  // an input's meta tensor is a leaf, as the input is taken to be
  return t;
}

PyObject* Trace::meta_of(TensorVar& t, bool leaf) {
  if (t.meta) return t.meta.get();
  const ir::TensorType& type = t.type;
  PyRef sizes = PyRef::steal(PyTuple_New(type.sizes.size()));
  PyRef strides = PyRef::steal(PyTuple_New(type.strides.size()));
  for (size_t i = 0; i < type.sizes.size(); ++i) {
    // Symbolic sizes take their values on the traced call: a meta computation answers for these.
    PyTuple_SET_ITEM(sizes.get(), i, PyLong_FromLongLong(shapes.hint(type.sizes[i])));
    PyTuple_SET_ITEM(strides.get(), i, PyLong_FromLongLong(shapes.hint(type.strides[i])));
  }
  t.meta = PyRef::steal(PyObject_CallFunctionObjArgs(table.make_meta.get(), sizes.get(), strides.get(),
                                                     table.dtype_object(type.dtype),
                                                     type.requires_grad ? Py_True : Py_False,
                                                     leaf ? Py_True : Py_False, nullptr));
  if (!t.meta) throw PythonError();
  t.meta_is_proxy = true;
  return t.meta.get();
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
      case VarKind::Slice:
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

void Trace::read_contents(PyObject* obj, Var& v, const SourceRef& source) {
  wrapping_.push_back(obj);
  if (v.kind == VarKind::Dict) {
    auto& d = static_cast<DictVar&>(v);
    PyRef keys = PyRef::steal(PyDict_Keys(obj));
    PyRef keys_tuple = PyRef::steal(PyList_AsTuple(keys.get()));
    if (!keys_tuple) throw PythonError();
    guards.dict_keys(source, keys_tuple.get());
    PyObject *k, *val;
    Py_ssize_t pos = 0;
    while (PyDict_Next(obj, &pos, &k, &val)) {
      if (!PyUnicode_Check(k)) throw Unsupported("dict with a non-string key read from the frame at " + source->str());
      d.keys.push_back(PyRef::borrow(k));
      d.values.push_back(wrap(val, Source::dict_item(source, PyUnicode_AsUTF8(k))));
    }
    if (d.added) {
      // The stores the trace made while the contents were unread, in order.
      auto& added = d.added->as<DictVar>();
      for (size_t i = 0; i < added.keys.size(); ++i) d.put(added.keys[i].get(), added.values[i]);
      d.added = nullptr;
    }
  } else {
    auto& seq = static_cast<SequenceVar&>(v);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    guards.length(source, n);
    for (Py_ssize_t i = 0; i < n; ++i) seq.items.push_back(wrap(PySequence_Fast_GET_ITEM(obj, i), Source::item(source, i)));
    if (seq.added) {
      for (auto& x : seq.added->as<SequenceVar>().items) seq.items.push_back(x);
      seq.added = nullptr;
    }
  }
  wrapping_.pop_back();
}

bool Trace::store_unread(const VarRef& container, PyObject* key, const VarRef& value) {
  if (!container->unread() || (container->kind == VarKind::Dict) != (key != nullptr)) return false;
  if (key && !PyUnicode_CheckExact(key)) return false;
  record_mutation(container, {value});
  if (container->kind == VarKind::List) {
    auto& seq = static_cast<SequenceVar&>(*container);
    if (!seq.added) seq.added = std::make_shared<SequenceVar>(VarKind::List, std::vector<VarRef>{});
    seq.added->as<SequenceVar>().items.push_back(value);
    return true;
  }
  auto& d = static_cast<DictVar&>(*container);
  if (!d.added) d.added = std::make_shared<DictVar>();
  d.added->as<DictVar>().put(key, value);
  return true;
}

ValuePlan Trace::plan_contents(const VarRef& container) {
  ValuePlan p;
  if (container->unread()) {
    // Only added to: the caller's contents at the call's start, then what the trace added
    // (`old + [new]`, `old | {new}`: a stored key keeps its place, as `d[k] = v` does).
    PyObject* type = reinterpret_cast<PyObject*>(container->kind == VarKind::Dict ? &PyDict_Type : &PyList_Type);
    p.kind = ValuePlan::Kind::Call;
    p.constant = PyRef::steal(PyObject_GetAttrString(type, container->kind == VarKind::Dict ? "__or__" : "__add__"));
    if (!p.constant) throw PythonError();
    ValuePlan old;
    old.kind = ValuePlan::Kind::FromSource;
    old.source = container->source;
    p.items.push_back(std::move(old));
    const VarRef& added = container->kind == VarKind::Dict ? static_cast<DictVar&>(*container).added
                                                           : static_cast<SequenceVar&>(*container).added;
    p.items.push_back(plan_value(added));
    return p;
  }
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

namespace {

// The plan of an int operand of SymInt arithmetic and its value: a SymInt's own plan, or an int
// constant; null when `v` has none (a size SymInt of tensor sizes, anything else).
PyObject* int_operand(const VarRef& v, ValuePlan* plan) {
  if (v->kind == VarKind::SymInt) {
    if (!v->as<SymIntVar>().expr) return nullptr;
    *plan = *v->as<SymIntVar>().expr;
    return v->as<SymIntVar>().value.get();
  }
  PyObject* c = Trace::as_constant(*v);
  if (!c || !PyLong_CheckExact(c)) return nullptr;
  plan->kind = ValuePlan::Kind::Const;
  plan->constant = PyRef::borrow(c);
  return c;
}

// `s`'s plan := op(a's plan, b's plan), and its leaves theirs.
void set_int_plan(SymIntVar& s, PyObject* op, ValuePlan pa, ValuePlan pb, const VarRef& a, const VarRef& b) {
  auto expr = std::make_shared<ValuePlan>();
  expr->kind = ValuePlan::Kind::Call;
  expr->constant = PyRef::borrow(op);
  expr->items = {std::move(pa), std::move(pb)};
  s.expr = std::move(expr);
  for (const VarRef* v : {&a, &b})
    if ((*v)->kind == VarKind::SymInt)
      for (auto& leaf : (*v)->as<SymIntVar>().leaves) s.leaves.push_back(leaf);
}

}  // namespace

VarRef Trace::sym_int_arith(PyObject* op, const VarRef& a, const VarRef& b) {
  if (is_size_int(a) || is_size_int(b)) return nullptr;  // sizes are expressions, not plans (Interpreter::binary_op)
  ValuePlan pa, pb;
  PyObject* x = int_operand(a, &pa);
  PyObject* y = int_operand(b, &pb);
  if (!x || !y) return nullptr;
  PyRef r = PyRef::steal(PyObject_CallFunctionObjArgs(op, x, y, nullptr));
  if (!r || !PyLong_CheckExact(r.get())) {
    PyErr_Clear();
    return nullptr;
  }
  auto s = std::make_shared<SymIntVar>();
  s->value = std::move(r);
  set_int_plan(*s, op, std::move(pa), std::move(pb), a, b);
  return s;
}

VarRef Trace::with_int_plan(VarRef result, PyObject* op, const VarRef& a, const VarRef& b) {
  if (!is_size_int(result)) return result;
  ValuePlan pa, pb;
  if (int_operand(a, &pa) && int_operand(b, &pb)) set_int_plan(result->as<SymIntVar>(), op, std::move(pa), std::move(pb), a, b);
  return result;
}

VarRef Trace::specialize(const VarRef& v, const std::string& use) {
  if (v->kind == VarKind::Slice) {
    const auto& slice = v->as<SliceVar>();
    std::string bound_use = use.empty() ? std::string("a slice bound outside a tensor subscript") : use;
    VarRef bounds[3] = {specialize(slice.start, bound_use), specialize(slice.stop, bound_use), specialize(slice.step, bound_use)};
    PyObject* start = as_constant(*bounds[0]);
    PyObject* stop = as_constant(*bounds[1]);
    PyObject* step = as_constant(*bounds[2]);
    if (!start || !stop || !step) throw std::logic_error("a slice bound that is neither a constant nor a size");
    return constant(PyRef::steal(PySlice_New(start, stop, step)));
  }
  if (v->kind != VarKind::SymInt) return v;
  auto& s = v->as<SymIntVar>();
  if (s.is_size()) {
    shapes.specialize(*s.size, (use.empty() ? std::string("an int of symbolic sizes used where Ember keeps no symbols") : use) + where());
    return make_object(s.value);
  }
  for (auto& [source, value] : s.leaves) guards.equals(source, value.get());
  return make_object(s.value);
}

ValuePlan Trace::plan_value(const VarRef& v) {
  ValuePlan p;
  switch (v->kind) {
    case VarKind::SymInt:
      // A dynamic int is recomputed from the frame; another size leaving the graph specializes.
      if (v->as<SymIntVar>().expr) return *v->as<SymIntVar>().expr;
      return plan_value(specialize(v));
    case VarKind::Slice:
      return plan_value(specialize(v));
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
  // (A tensor is guarded only where two sources reach it: the runtime checks that a written input
  // shares no memory with another input, runtime/aliased_inputs.h.)
  for (auto& [source, index] : container_sources_)
    if ((any_mutated && containers_[index].var->kind != VarKind::Tensor) || sources_per[index] > 1)
      aliases.entries.push_back(AliasGuard::Entry{source, index, containers_[index].mutated});
  alias_cells(static_cast<int>(containers_.size()));
  return plan;
}

}  // namespace ember::frontend
