// Trace: a torch call as a graph node. Its arguments become IR arguments (literals, values, lists),
// its device is inferred, and its result types come from the shape rules (src/shapes) or, where no
// rule answers, from torch's meta kernels run under the trace's grad mode.
#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>

#include "frontend/interp/trace.h"
#include "frontend/pyutil.h"
#include "frontend/region.h"
#include "pybridge/torch_bridge.h"
#include "shapes/shape_rules.h"

namespace ember::frontend {

namespace {

// Reads dtype, sizes, strides and requires_grad of a (meta) tensor through attributes.
ir::TensorType meta_type(PyObject* t) {
  ir::TensorType type;
  PyRef dtype = PyRef::steal(PyObject_GetAttrString(t, "dtype"));
  PyRef shape = PyRef::steal(PyObject_GetAttrString(t, "shape"));
  PyRef stride = PyRef::steal(PyObject_CallMethod(t, "stride", nullptr));
  PyRef rg = PyRef::steal(PyObject_GetAttrString(t, "requires_grad"));
  if (!dtype || !shape || !stride || !rg) throw PythonError();
  std::string name = object_str(dtype.get());
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
    if (!pybridge::read_grad_enabled(&previous_)) throw PythonError();  // grad mode only: once per meta op
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
    std::string name = object_str(o);
    auto dt = ir::dtype_from_torch_name(name.rfind("torch.", 0) == 0 ? name.substr(6) : name);
    if (!dt) return std::nullopt;
    return *dt;
  }
  if (PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(table.device_type.get()))) {
    auto d = ir::device_from_string(object_str(o));
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
    case VarKind::SymInt: {
      // A size: a sym(...) argument over the shape symbols (a constant once specialized).
      if (!v->as<SymIntVar>().is_size()) throw Unsupported(describe(*v) + " cannot be passed to a graph op");
      sym::Expr e = shapes.resolve(*v->as<SymIntVar>().size);
      if (meta_value) *meta_value = PyRef::steal(PyLong_FromLongLong(shapes.hint(e)));
      if (e.is_constant()) return ir::Arg::of_literal(e.constant());
      return ir::Arg::of_literal(e);
    }
    default:
      throw Unsupported(describe(*v) + " cannot be passed to a graph op");
  }
}

ir::Device Trace::infer_device(PyObject* callable, const std::vector<VarRef>& args,
                               const std::vector<std::pair<std::string, VarRef>>& kwargs) const {
  auto device_of_const = [&](PyObject* o) -> std::optional<ir::Device> {
    if (PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(table.device_type.get())) || PyUnicode_Check(o))
      return ir::device_from_string(object_str(o));
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
  return ir::device_from_string(object_str(dev.get())).value_or(ir::Device{"cpu", -1});
}

std::optional<Trace::RuleOperands> Trace::rule_operands(const std::vector<VarRef>& args,
                                                        const std::vector<std::pair<std::string, VarRef>>& kwargs,
                                                        const sym::Replacements& pins, std::deque<ir::TensorType>& pinned) {
  auto pin = [&](const sym::Expr& e) { return pins.empty() ? e : sym::substitute(e, pins); };
  // Operands as the rules see them: constants converted as nodes' literal arguments are.
  std::function<shapes::Operand(PyObject*)> constant = [&](PyObject* o) {
    if (auto lit = literal_of(o)) return shapes::Operand::of_literal(std::move(*lit));
    if (!PyTuple_Check(o) && !PyList_Check(o)) return shapes::Operand::opaque();
    std::vector<shapes::Operand> items;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i) items.push_back(constant(PySequence_Fast_GET_ITEM(o, i)));
    return shapes::Operand::sequence(std::move(items), !PyList_Check(o));
  };
  std::function<std::optional<shapes::Operand>(const VarRef&)> operand = [&](const VarRef& v) -> std::optional<shapes::Operand> {
    if (v->kind == VarKind::Tensor) {
      // Types keep a specialized symbol until the trace ends (apply_specializations): the rules see its
      // value, as the size ints do (an operand typed before `s2 == 7` against one typed after).
      if (pins.empty() && this->shapes.replacements().empty()) return shapes::Operand::of_tensor(&v->as<TensorVar>().type);
      ir::TensorType& t = pinned.emplace_back(v->as<TensorVar>().type);
      for (auto* xs : {&t.sizes, &t.strides})
        for (sym::Expr& e : *xs) e = pin(this->shapes.resolve(e));
      return shapes::Operand::of_tensor(&t);
    }
    if (is_size_int(v)) {
      sym::Expr e = pin(this->shapes.resolve(*v->as<SymIntVar>().size));
      return shapes::Operand::of_literal(e.is_constant() ? ir::Literal(e.constant()) : ir::Literal(e));
    }
    if (v->kind == VarKind::Tuple || v->kind == VarKind::List) {
      bool tensors = false;
      for (auto& x : v->as<SequenceVar>().items) tensors = tensors || x->kind == VarKind::Tensor || is_size_int(x);
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
  RuleOperands out;
  for (auto& a : args) {
    auto r = operand(a);
    if (!r) return std::nullopt;
    out.args.push_back(std::move(*r));
  }
  for (auto& [k, v] : kwargs) {
    auto r = operand(v);
    if (!r) return std::nullopt;
    out.kwargs.emplace_back(k, std::move(*r));
  }
  return out;
}

std::optional<std::vector<ir::TensorType>> Trace::rule_types(ir::Op op, const std::string& name,
                                                             const std::vector<VarRef>& args,
                                                             const std::vector<std::pair<std::string, VarRef>>& kwargs,
                                                             const sym::Replacements& pins) {
  std::deque<ir::TensorType> pinned;  // operand types with `pins` substituted, alive for the rule's run
  std::optional<RuleOperands> o = rule_operands(args, kwargs, pins, pinned);
  if (!o) return std::nullopt;
  // The rules ask about symbolic strides with the symbols' ranges, narrowed by the trace's guards.
  const sym::Symbols& facts = this->shapes.all_symbols();
  if (op == ir::Op::TorchCall)
    return shapes::infer_torch_call_types(name, o->args, o->kwargs, grad_enabled, default_dtype_, &facts);
  return shapes::infer_result_types(op, o->args, o->kwargs, grad_enabled, default_dtype_, &facts);
}

std::optional<std::vector<ir::TensorType>> Trace::symbolic_result_shapes(
    const std::string& name, const std::vector<VarRef>& args, const std::vector<std::pair<std::string, VarRef>>& kwargs,
    bool formulas, bool factories) {
  std::deque<ir::TensorType> resolved;
  shapes::Assumptions assumed;
  std::optional<std::vector<std::vector<sym::Expr>>> sizes;
  if (formulas)
    if (std::optional<RuleOperands> o = rule_operands(args, kwargs, {}, resolved))
      sizes = shapes::infer_result_sizes(name, o->args, o->kwargs, assumed, &shapes.all_symbols());
  if (!sizes) {
    std::optional<ir::TensorType> t = factories ? symbolic_factory_shape(name, args, kwargs) : std::nullopt;
    if (!t) return std::nullopt;
    return std::vector<ir::TensorType>{std::move(*t)};
  }
  for (const shapes::Assumption& a : assumed)
    if (!shapes.evaluate(a.rel, (a.why.empty() ? a.rel.str() : name + " " + a.why) + where())) return std::nullopt;  // torch refuses
  std::vector<ir::TensorType> out;
  for (std::vector<sym::Expr>& xs : *sizes) {
    ir::TensorType t;
    t.strides = ir::contiguous_strides(xs);
    t.sizes = std::move(xs);
    out.push_back(std::move(t));
  }
  return out;
}

VarRef Trace::record_typed(ir::Op op, const std::string& name, PyObject* callable, const std::vector<VarRef>& args,
                           const std::vector<std::pair<std::string, VarRef>>& kwargs, std::vector<ir::TensorType> types) {
  std::vector<ir::Arg> ir_args;
  for (auto& a : args) ir_args.push_back(lower_arg(a, nullptr));
  std::vector<std::pair<std::string, ir::Arg>> ir_kwargs;
  for (auto& [k, v] : kwargs) ir_kwargs.emplace_back(k, lower_arg(v, nullptr));
  auto form = types.size() == 1 && op != ir::Op::Split && op != ir::Op::Chunk ? ir::Node::ResultForm::Single
                                                                              : ir::Node::ResultForm::Tuple;
  ir::NodeId node = graph.add_node(op, op == ir::Op::TorchCall ? name : std::string(), std::move(ir_args),
                                   std::move(ir_kwargs), types, form);
  callables.push_back(PyRef::borrow(callable));
  note_op_line();
  const ir::Node& n = graph.node(node);
  bool inplace = n.mutates_first_arg() || PySet_Contains(table.inplace_callables.get(), callable) == 1;
  std::vector<VarRef> out;
  for (size_t i = 0; i < types.size(); ++i) {
    if (i == 0 && inplace && !args.empty() && args[0]->kind == VarKind::Tensor) {
      // An in-place op returns its first argument (as in record_call): that Var moves to the new value;
      // its meta tensor is remade from the new type when needed (requires_grad may have turned on).
      auto& t = args[0]->as<TensorVar>();
      t.value = n.results[0];
      t.type = types[0];
      t.meta = PyRef();
      out.push_back(args[0]);
      continue;
    }
    auto t = std::make_shared<TensorVar>();
    t->value = n.results[i];
    t->type = types[i];
    t->py_type = table.tensor_type;
    out.push_back(t);
  }
  if (form == ir::Node::ResultForm::Single) return out[0];
  return make_tuple(std::move(out));
}

VarRef Trace::record_call(PyObject* callable, const std::vector<VarRef>& args,
                          const std::vector<std::pair<std::string, VarRef>>& kwargs) {
  const CallableKind& kind = table.classify(callable);
  const std::string& name = table.name_of(callable);
  bool symbolic_args = has_symbols(args, kwargs);
  if (symbolic_args && kind.kind == CallableKind::Query && !args.empty() && args[0]->kind == VarKind::Tensor)
    if (VarRef answer = size_query(kind.detail, args, kwargs)) return answer;
  std::optional<std::vector<ir::TensorType>> ruled;
  // A factory's meta kernel gives its dtype and layout; its sizes are its arguments'.
  std::optional<std::vector<ir::TensorType>> factory_shape;
  bool formulas_tried = false;
  // Factories ask their rule too: arange's answers its dtype (its meta kernel imports sympy, seconds of
  // a fresh process's first compile); the others have none, and the meta kernel, which knows their
  // default dtype and device, answers unless a size is symbolic (then only a shape rule does).
  bool core_rule = kind.kind == CallableKind::CoreOp && core_op_applies(kind.op, args, kwargs);
  // Generic captures, and operator-module functions the interpreter records as torch nodes (`1.0 - x`).
  bool torch_rule = (kind.kind == CallableKind::TorchOp || kind.kind == CallableKind::Operator) &&
                    shapes::has_torch_call_rule(name);
  if (core_rule || torch_rule) {
    // Ember's own shape rules first: no meta kernel when they know the answer (under
    // verify_shape_rules, the meta kernel runs too and must agree). Some meta kernels are
    // Python that imports torch._dynamo: seconds in a fresh process.
    ir::Op rule_op = core_rule ? kind.op : ir::Op::TorchCall;
    ruled = rule_types(rule_op, name, args, kwargs);
    // A size formula (conv's floor divisions, which the rules' stand-ins cannot read back) keeps the sizes
    // symbolic where pinning would make them static; the factories come after pinning, as before.
    if (!ruled && symbolic_args) {
      formulas_tried = true;
      factory_shape = symbolic_result_shapes(name, args, kwargs, true, false);
    }
    if (!ruled && symbolic_args && !factory_shape)
      ruled = rule_types_pinning_fewest(rule_op, name, args, kwargs,
                                        name + "'s shape rule needs these sizes static" + where());
    if (auto& types = ruled; types && !options.verify_shape_rules) {
      ir::Device device = infer_device(callable, args, kwargs);
      for (auto& t : *types) t.device = device;
      return record_typed(rule_op, name, callable, args, kwargs, std::move(*types));
    }
  }
  if (symbolic_args && !ruled && !factory_shape) factory_shape = symbolic_result_shapes(name, args, kwargs, !formulas_tried, true);
  if (symbolic_args && !ruled && !factory_shape && kind.kind != CallableKind::Query) {
    // Only Ember's shape rules answer with symbolic sizes; the meta kernel answers for the traced
    // values alone. So the symbols this call sees become static (guarded) first.
    specialize_symbols(args, kwargs, name + " has no shape rule for these symbolic sizes" + where());
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
  std::vector<bool> none_at;  // a tuple result's items that are None (not graph values)
  std::string target = name;
  if (is_tensor_type(reinterpret_cast<PyObject*>(Py_TYPE(r)))) {
    metas.push_back(r);
  } else if (r == Py_None && kind.kind != CallableKind::Query) {
    form = ir::Node::ResultForm::None;
  } else if ((PyTuple_Check(r) || PyList_CheckExact(r)) && PySequence_Fast_GET_SIZE(r) > 0 &&
             kind.kind != CallableKind::Query) {
    form = PyTuple_Check(r) ? ir::Node::ResultForm::Tuple : ir::Node::ResultForm::List;
    if (PyTuple_Check(r) && !PyTuple_CheckExact(r)) named_type = PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(r)));
    PyRef keep = PyRef::steal(PyList_New(0));
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(r); ++i) {
      PyObject* item = PySequence_Fast_GET_ITEM(r, i);
      none_at.push_back(item == Py_None && form == ir::Node::ResultForm::Tuple);
      if (none_at.back()) continue;
      if (!is_tensor_type(reinterpret_cast<PyObject*>(Py_TYPE(item))))
        throw Unsupported(name + " returns a sequence holding a " + Py_TYPE(item)->tp_name);
      metas.push_back(item);
      PyRef index = PyRef::steal(PyLong_FromSsize_t(i));
      if (!index || PyList_Append(keep.get(), index.get()) < 0) throw PythonError();
    }
    if (metas.empty()) throw Unsupported(name + " returns a tuple of None");
    if (metas.size() < none_at.size()) {
      // `(out, None)`: the node returns the tensors only, through ember.ops.tensor_items, and
      // the trace rebuilds the tuple with its Nones.
      PyRef keep_tuple = PyRef::steal(PyList_AsTuple(keep.get()));
      PyObject* wrapper = keep_tuple ? PyObject_CallFunctionObjArgs(table.tensor_items.get(), callable, keep_tuple.get(), nullptr) : nullptr;
      if (!wrapper) throw PythonError();
      callable = wrapper;
      Py_DECREF(wrapper);  // ember.ops keeps one per (callable, items)
      target = name + "[tensors " + object_str(keep_tuple.get()) + "]";
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
  if (factory_shape) {
    // Every result takes the symbolic sizes (torch.max(x, dim)'s values and indices share them).
    std::vector<ir::TensorType> symbolic;
    bool agree = !types.empty() && (factory_shape->size() == 1 || factory_shape->size() == types.size());
    for (size_t i = 0; agree && i < types.size(); ++i) {
      const ir::TensorType& hinted = types[i];
      const ir::TensorType& shape = (*factory_shape)[factory_shape->size() == 1 ? 0 : i];
      ir::TensorType t = hinted;
      t.sizes = shape.sizes;
      t.strides = shape.strides;
      // A size-1 dim's stride is never stepped over; torch gives a copy's size-1 dims stride 1
      // where the input had another (`x[..., None].float()`).
      for (size_t d = 0; d < t.sizes.size() && t.sizes.size() == hinted.strides.size(); ++d)
        if (t.sizes[d] == sym::Expr(1) && hinted.strides[d] == sym::Expr(1)) t.strides[d] = 1;
      agree = agree && at_hints(t) == hinted;
      symbolic.push_back(std::move(t));
    }
    if (agree) {
      types = std::move(symbolic);
    } else {
      specialize_symbols(args, kwargs, name + "'s symbolic sizes differ from its meta kernel's" + where());
    }
  }
  if (ruled) {
    // (Under verify_shape_rules.) With symbols, the rule's answer at the traced values must be
    // the meta kernel's, and the rule's symbolic types are the results'.
    bool same = ruled->size() == types.size();
    for (size_t i = 0; same && i < types.size(); ++i) {
      (*ruled)[i].device = device;
      same = at_hints((*ruled)[i]) == types[i];
    }
    if (same && symbolic_args) types = *ruled;
    if (!same)
      throw Unsupported("internal error: Ember's shape rule for " + name + " disagrees with torch's meta kernel: rule " +
                        ((*ruled).empty() ? std::string("()") : (*ruled)[0].str()) + ", torch " +
                        (types.empty() ? std::string("()") : types[0].str()));
  }
  bool drops_nones = metas.size() < none_at.size();  // the node calls ember.ops.tensor_items
  ir::Op op = kind.kind == CallableKind::CoreOp && !drops_nones && core_op_applies(kind.op, args, kwargs) ? kind.op
                                                                                                      : ir::Op::TorchCall;
  ir::NodeId node = graph.add_node(op, op == ir::Op::TorchCall ? target : std::string(), std::move(ir_args),
                                   std::move(ir_kwargs), types, form);
  callables.push_back(PyRef::borrow(callable));
  note_op_line();
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
  for (size_t i = 0; i < none_at.size(); ++i)
    if (none_at[i]) out.insert(out.begin() + static_cast<std::ptrdiff_t>(i), none());
  auto seq = std::make_shared<SequenceVar>(form == ir::Node::ResultForm::List ? VarKind::List : VarKind::Tuple, std::move(out));
  seq->named_type = named_type;
  return seq;
}

void Trace::record_check(PyObject* callable, const VarRef& condition, const VarRef& message) {
  std::vector<ir::Arg> args{lower_arg(condition, nullptr), lower_arg(message, nullptr)};
  graph.add_node(ir::Op::TorchCall, table.name_of(callable), std::move(args), {}, {}, ir::Node::ResultForm::None);
  callables.push_back(PyRef::borrow(callable));
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

}  // namespace ember::frontend
