// Calls in the symbolic interpreter: argument binding and inlining of Python functions and
// nn.Module forwards, torch callables as graph nodes, builtins, and constant folding.
#include <algorithm>
#include <functional>

#include "frontend/interp/interpreter.h"
#include "frontend/pyutil.h"

namespace ember::frontend {

namespace {

PyObject* pyname(const std::string& s) {
  PyObject* o = PyUnicode_FromStringAndSize(s.data(), s.size());
  if (!o) throw PythonError();
  return o;
}

bool has_tensor(const VarRef& v) {
  switch (v->kind) {
    case VarKind::Tensor:
      return true;
    case VarKind::Tuple:
    case VarKind::List:
      for (auto& x : v->as<SequenceVar>().items)
        if (has_tensor(x)) return true;
      return false;
    case VarKind::Dict:
      for (auto& x : v->as<DictVar>().values)
        if (has_tensor(x)) return true;
      return false;
    default:
      return false;
  }
}

// `fn`'s __qualname__ (else its type's name), for messages.
std::string callable_name(PyObject* fn) {
  PyRef name = PyRef::steal(PyObject_GetAttrString(fn, "__qualname__"));
  if (name && PyUnicode_Check(name.get())) return PyUnicode_AsUTF8(name.get());
  PyErr_Clear();
  return Py_TYPE(fn)->tp_name;
}

}  // namespace

void Interpreter::call_from_stack(int argc, PyObject* kwnames) {
  std::vector<VarRef> args = pop_n(argc);
  VarRef b = pop();
  VarRef a = pop();
  VarRef fn;
  if (a->kind == VarKind::Null) {
    fn = b;
  } else if (b->kind == VarKind::Null) {
    fn = a;
  } else {
    fn = a;
    args.insert(args.begin(), b);
  }
  Kwargs kwargs;
  if (kwnames) {
    Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
    size_t first = args.size() - n;
    for (Py_ssize_t i = 0; i < n; ++i) kwargs.emplace_back(str_of(PyTuple_GET_ITEM(kwnames, i)), args[first + i]);
    args.resize(first);
  }
  push(call(fn, std::move(args), std::move(kwargs)));
}

void Interpreter::step_call_function_ex(const bytecode::Instruction& ins) {
  // [callable, self or NULL, positional iterable, (kwargs dict if arg & 1)], in either NULL order.
  VarRef kw = (ins.arg & 1) ? pop() : nullptr;
  VarRef posargs = pop();
  VarRef b = pop();
  VarRef a = pop();
  VarRef fn = a->kind == VarKind::Null ? b : a;
  std::vector<VarRef> args;
  if (a->kind != VarKind::Null && b->kind != VarKind::Null) args.push_back(b);
  for (auto& x : iterate(posargs)) args.push_back(x);
  Kwargs kwargs;
  if (kw) {
    if (kw->kind != VarKind::Dict) unsupported("**kwargs that is not a dict known at trace time");
    auto& d = kw->as<DictVar>();
    for (size_t i = 0; i < d.keys.size(); ++i) {
      if (!PyUnicode_Check(d.keys[i].get())) unsupported("**kwargs with a non-string key");
      kwargs.emplace_back(str_of(d.keys[i].get()), d.values[i]);
    }
  }
  push(call(fn, std::move(args), std::move(kwargs)));
}

VarRef Interpreter::call(const VarRef& fn, std::vector<VarRef> args, Kwargs kwargs) {
  switch (fn->kind) {
    case VarKind::Function: {
      auto& f = fn->as<FunctionVar>();
      return inline_function(f.code.get(), Globals{f.globals.get(), f.globals_source}, f.defaults,
                             f.kwdefaults.get(), f.closure, std::move(args), std::move(kwargs),
                             "function " + str_of(f.qualname.get()));
    }
    case VarKind::BoundMethod: {
      auto& bm = fn->as<BoundMethodVar>();
      args.insert(args.begin(), bm.self);
      return call(bm.func, std::move(args), std::move(kwargs));
    }
    case VarKind::GradModeExit:
      if (fn->as<GradModeExitVar>().autocast) trace_.autocast_exit(*fn->as<GradModeExitVar>().autocast);
      if (fn->as<GradModeExitVar>().restores_mode) trace_.set_grad_enabled(fn->as<GradModeExitVar>().previous);
      return trace_.none();
    case VarKind::Object:
      if (!args.empty() && args[0]->kind == VarKind::Record && PyUnicode_Check(fn->as<ObjectVar>().obj.get())) {
        VarRef rec = args[0];
        args.erase(args.begin());
        return record_method(rec, str_of(fn->as<ObjectVar>().obj.get()), args, kwargs);
      }
      return call_object(fn, fn->as<ObjectVar>().obj.get(), args, kwargs);
    case VarKind::List: {
      // A slice of an nn.Sequential (see subscript): its modules applied in order.
      auto& seq = fn->as<SequenceVar>();
      if (!seq.named_type || PyObject_IsSubclass(seq.named_type.get(), trace_.table.sequential_type.get()) != 1 ||
          args.size() != 1 || !kwargs.empty())
        unsupported("calling " + describe(*fn));
      VarRef x = args[0];
      for (auto& m : seq.items) x = call(m, {x}, {});
      return x;
    }
    default:
      unsupported("calling " + describe(*fn));
  }
}

VarRef Interpreter::call_object(const VarRef& fn, PyObject* obj, std::vector<VarRef>& args, Kwargs& kwargs) {
  const TorchTable& table = trace_.table;
  if (fn->as<ObjectVar>().opaque) unsupported("call to " + describe(*fn) + ", read from an object guarded by its type only");
  if (PyMethod_Check(obj)) {
    PyObject* self = PyMethod_GET_SELF(obj);
    SourceRef self_src = fn->source ? Source::attr(fn->source, "__self__") : nullptr;
    args.insert(args.begin(), self_src ? trace_.wrap(self, self_src) : trace_.constant(PyRef::borrow(self)));
    VarRef func = trace_.constant(PyRef::borrow(PyMethod_GET_FUNCTION(obj)));
    return call(func, std::move(args), std::move(kwargs));
  }
  if (PyObject_IsInstance(obj, table.module_type.get()) == 1) return call_module(fn, std::move(args), std::move(kwargs));
  static PyObject* partial_type = [] {
    PyRef functools = PyRef::steal(PyImport_ImportModule("functools"));
    PyObject* t = functools ? PyObject_GetAttrString(functools.get(), "partial") : nullptr;
    if (!t) PyErr_Clear();
    return t;
  }();
  if (reinterpret_cast<PyObject*>(Py_TYPE(obj)) == partial_type) return call_partial(fn, std::move(args), std::move(kwargs));
  static PyObject* object_init = _PyType_Lookup(&PyBaseObject_Type, PyUnicode_InternFromString("__init__"));
  if (obj == object_init && args.size() == 1 && kwargs.empty() && args[0]->kind == VarKind::Object &&
      args[0]->as<ObjectVar>().made_attrs)
    return trace_.none();  // `super().__init__()` reaching object in a constructed instance's __init__
  static PyObject* object_setattr = _PyType_Lookup(&PyBaseObject_Type, PyUnicode_InternFromString("__setattr__"));
  if (obj == object_setattr && args.size() == 3 && kwargs.empty() && args[0]->kind == VarKind::Object &&
      args[0]->as<ObjectVar>().made_attrs) {
    // `object.__setattr__(self, name, v)` (a dataclass's __post_init__) on a constructed instance,
    // whose class keeps object's own __setattr__: the same store as `self.name = v`.
    PyObject* n = Trace::as_constant(*args[1]);
    if (!n || !PyUnicode_Check(n)) unsupported("object.__setattr__ with a non-constant name");
    store_instance_attr(args[0], str_of(n), args[2]);
    return trace_.none();
  }
  if (obj == object_getattribute() && args.size() == 2 && kwargs.empty() && args[0]->kind == VarKind::Object) {
    PyObject* n = Trace::as_constant(*args[1]);
    if (!n || !PyUnicode_Check(n)) unsupported("object.__getattribute__ with a non-constant name");
    return generic_attr(args[0], args[0]->as<ObjectVar>().obj.get(), str_of(n), false);
  }
  if ((Py_IS_TYPE(obj, &PyMethodDescr_Type) || Py_IS_TYPE(obj, &PyWrapperDescr_Type)) && !args.empty() &&
      args[0]->kind == VarKind::Object &&
      (is_keyed_view(*args[0]) ||
       (PyDict_Check(args[0]->as<ObjectVar>().obj.get()) && PyDescr_TYPE(obj) == &PyDict_Type &&
        (str_of(reinterpret_cast<PyDescrObject*>(obj)->d_name) == "get" ||
         str_of(reinterpret_cast<PyDescrObject*>(obj)->d_name) == "__getitem__" ||
         str_of(reinterpret_cast<PyDescrObject*>(obj)->d_name) == "__contains__")))) {
    VarRef view = args[0];
    args.erase(args.begin());
    return dict_view_method(view, str_of(reinterpret_cast<PyDescrObject*>(obj)->d_name), args, kwargs);
  }
  // Methods of the containers the trace models: list.append(xs, v), xs.append(v), d.items(), ...
  if ((Py_IS_TYPE(obj, &PyMethodDescr_Type) || Py_IS_TYPE(obj, &PyWrapperDescr_Type)) && !args.empty() &&
      (args[0]->kind == VarKind::List || args[0]->kind == VarKind::Tuple || args[0]->kind == VarKind::Dict)) {
    VarRef self = args[0];
    args.erase(args.begin());
    if (trace_.has_size_ints() && self->kind == VarKind::Tuple) trace_.specialize_sizes(*self);  // torch.Size methods
    return call_container_method(self, str_of(reinterpret_cast<PyDescrObject*>(obj)->d_name), args,
                                 kwargs);
  }

  const CallableKind& kind = table.classify(obj);
  if (trace_.has_size_ints() && kind.kind != CallableKind::CoreOp && kind.kind != CallableKind::TorchOp &&
      kind.kind != CallableKind::Query && kind.kind != CallableKind::Factory && kind.kind != CallableKind::Inline &&
      kind.kind != CallableKind::LruCache && !keeps_sizes(kind)) {
    // Sizes reach torch ops as sym(...) arguments and Python functions as SymInts; any other
    // callable gets their values, guarded (the guard names it: "an argument of range()").
    std::string use = "an argument of " + callable_name(obj) + "()";
    auto fix = [&](VarRef& a) {
      a = trace_.specialize(a, use);
      trace_.specialize_sizes(*a, use);
    };
    for (VarRef& a : args) fix(a);
    for (auto& kv : kwargs) fix(kv.second);
  }
  if (is_model_output_class(obj)) return make_record(obj, args, kwargs);
  if (is_exception_class_var(*fn)) return make_exception(obj, args, kwargs);
  bool tensors = std::any_of(args.begin(), args.end(), has_tensor) ||
                 std::any_of(kwargs.begin(), kwargs.end(), [](const auto& kv) { return has_tensor(kv.second); });
  // A factory asked for requires_grad=True makes a leaf that accumulates .grad; a graph's results are
  // never leaves, so the call runs eagerly (a graph break).
  if (kind.makes_tensors())
    for (const auto& [name, value] : kwargs)
      if (name == "requires_grad" && Trace::as_constant(*value) == Py_True)
        unsupported(table.name_of(obj) + "(requires_grad=True): a leaf tensor that accumulates gradients");
  switch (kind.kind) {
    case CallableKind::CoreOp:
    case CallableKind::TorchOp:
    case CallableKind::Query:
      if (!tensors && !kind.makes_tensors()) {
        // operator.getitem is the tensor subscript's core op; on containers (x.shape) it is `[]`.
        if (args.size() == 2 && kwargs.empty() && table.name_of(obj) == "operator.getitem")
          return subscript(args[0], args[1]);
        if (VarRef folded = constant_call(obj, args, kwargs)) return folded;
        unsupported("call to " + table.name_of(obj) + " without tensor arguments");
      }
      return trace_.call_torch(obj, args, kwargs);
    case CallableKind::Factory:
      return trace_.call_torch(obj, args, kwargs);
    case CallableKind::Pure:
      if (tensors) return trace_.call_torch(obj, args, kwargs);
      if (VarRef folded = constant_call(obj, args, kwargs)) return folded;
      unsupported("call to " + table.name_of(obj) + " with arguments that are not constants");
    case CallableKind::Builtin:
    case CallableKind::Operator:
      return call_builtin(obj, args, kwargs);
    case CallableKind::Inline: {
      if (PyFunction_Check(obj)) return inline_real_function(obj, fn->source, std::move(args), std::move(kwargs));
      // A callable object whose type's __call__ is Python code.
      static PyObject* dunder_call = PyUnicode_InternFromString("__call__");
      PyObject* call_fn = _PyType_Lookup(Py_TYPE(obj), dunder_call);
      if (!call_fn || !PyFunction_Check(call_fn)) unsupported("call to " + table.name_of(obj));
      args.insert(args.begin(), fn);
      return inline_real_function(call_fn, nullptr, std::move(args), std::move(kwargs));
    }
    case CallableKind::GradMode: {
      bool enabled = obj != table.no_grad_type.get();
      if (obj == table.set_grad_enabled_type.get()) {
        if (args.size() != 1 || !kwargs.empty()) unsupported("set_grad_enabled() with unexpected arguments");
        PyObject* c = Trace::as_constant(*args[0]);
        if (!c || !PyBool_Check(c)) unsupported("set_grad_enabled() with a non-constant mode");
        enabled = c == Py_True;
        // As a plain call (not a with-block) the mode changes at once; as a context manager,
        // BEFORE_WITH applies the same mode again, which is harmless, and the exit restores the
        // mode from before this call.
        auto ctx = std::make_shared<GradModeVar>(enabled);
        ctx->restores = trace_.grad_enabled ? 1 : 0;
        trace_.set_grad_enabled(enabled);
        return ctx;
      } else if (!args.empty() || !kwargs.empty()) {
        unsupported("grad-mode context with arguments");
      }
      return std::make_shared<GradModeVar>(enabled);
    }
    case CallableKind::Autocast:
      return autocast_context(obj, args, kwargs);
    case CallableKind::AutocastQuery:
      return autocast_query(kind.detail, args, kwargs);
    case CallableKind::Construct:
      return construct(obj, std::move(args), std::move(kwargs));
    case CallableKind::NullContext: {
      if (args.size() + kwargs.size() > 1 || (!kwargs.empty() && kwargs[0].first != "enter_result"))
        unsupported("contextlib.nullcontext() with unexpected arguments");
      auto ctx = std::make_shared<GradModeVar>(trace_.grad_enabled);
      ctx->null = true;
      if (!args.empty()) ctx->enter_result = args[0];
      if (!kwargs.empty()) ctx->enter_result = kwargs[0].second;
      return ctx;
    }
    case CallableKind::IsGradEnabled:
      return trace_.constant(PyRef::borrow(trace_.grad_enabled ? Py_True : Py_False));
    case CallableKind::Constant:
      return trace_.constant(kind.constant);
    case CallableKind::ModuleMethod:
      return module_method(kind.detail, args, kwargs);
    case CallableKind::Signature:
      return signature_of(obj, args, kwargs);
    case CallableKind::Assert:
    case CallableKind::Check:
      return call_check(kind, obj, args, kwargs);
    case CallableKind::AutogradFunctionApply:
      return autograd_function_apply(args, kwargs);
    case CallableKind::LruCache:
      return call_lru_cache(fn, obj, args, kwargs);
    case CallableKind::DataclassFields:
      return dataclass_fields(obj, args, kwargs);
    case CallableKind::StatelessModule:
      return construct_stateless_module(obj, args, kwargs);
    case CallableKind::Unsupported:
      unsupported(kind.detail);
  }
  unsupported("call to " + table.name_of(obj));
}

VarRef Interpreter::module_method(const std::string& name, std::vector<VarRef>& args, Kwargs& kwargs) {
  if (args.empty() || args[0]->kind != VarKind::Object || !args[0]->source)
    unsupported("Module." + name + "() of a module that is not reachable from the frame");
  std::string prefix;
  bool recurse = true;
  for (size_t i = 1; i < args.size() + kwargs.size(); ++i) {
    const std::string& k = i < args.size() ? (name.rfind("named_", 0) == 0 ? "prefix" : "recurse")
                                            : kwargs[i - args.size()].first;
    const VarRef& v = i < args.size() ? args[i] : kwargs[i - args.size()].second;
    PyObject* c = Trace::as_constant(*v);
    if (k == "prefix" && c && PyUnicode_Check(c)) {
      prefix = str_of(c);
    } else if (k == "recurse" && c && PyBool_Check(c)) {
      recurse = c == Py_True;
    } else {
      unsupported("Module." + name + "() with argument '" + k + "'");
    }
  }
  bool named = name.rfind("named_", 0) == 0;
  std::string what = named ? name.substr(6) : name;
  // Walk the module tree as nn.Module does: preorder, each module once (by identity).
  struct Node {
    VarRef var;
    PyObject* obj;
    std::string path;
  };
  std::vector<Node> modules;
  std::vector<PyObject*> seen;
  std::function<void(const VarRef&, const std::string&, bool)> walk = [&](const VarRef& m, const std::string& path,
                                                                          bool deep) {
    PyObject* o = m->as<ObjectVar>().obj.get();
    if (std::find(seen.begin(), seen.end(), o) != seen.end()) return;
    seen.push_back(o);
    modules.push_back({m, o, path});
    if (!deep) return;
    for (auto& c : module_children(m, "_modules")) {
      if (c.var->kind != VarKind::Object) continue;  // a None entry
      walk(c.var, path.empty() ? str_of(c.key.get()) : path + "." + str_of(c.key.get()), true);
    }
  };
  std::vector<VarRef> out;
  auto emit = [&](const std::string& path, VarRef v) {
    out.push_back(named ? make_tuple({trace_.constant(PyRef::steal(PyUnicode_FromString(path.c_str()))), v}) : v);
  };
  if (what == "children") {
    for (auto& c : module_children(args[0], "_modules")) {
      if (c.var->kind != VarKind::Object) continue;
      if (std::find(seen.begin(), seen.end(), c.obj.get()) != seen.end()) continue;
      seen.push_back(c.obj.get());
      emit(str_of(c.key.get()), c.var);
    }
    return std::make_shared<IteratorVar>(std::move(out));
  }
  walk(args[0], prefix, what == "modules" || recurse);
  if (what == "modules") {
    for (auto& n : modules) emit(n.path, n.var);
    return std::make_shared<IteratorVar>(std::move(out));
  }
  const char* members = what == "parameters" ? "_parameters" : "_buffers";
  std::vector<PyObject*> seen_tensors;  // tied weights are listed once, as nn.Module does
  for (auto& n : modules) {
    for (auto& c : module_children(n.var, members)) {
      if (c.var->kind != VarKind::Tensor) continue;  // None entries
      if (std::find(seen_tensors.begin(), seen_tensors.end(), c.obj.get()) != seen_tensors.end()) continue;
      seen_tensors.push_back(c.obj.get());
      emit(n.path.empty() ? str_of(c.key.get()) : n.path + "." + str_of(c.key.get()), c.var);
    }
  }
  return std::make_shared<IteratorVar>(std::move(out));
}

VarRef Interpreter::signature_of(PyObject* signature, std::vector<VarRef>& args, Kwargs& kwargs) {
  if (args.size() != 1 || !kwargs.empty()) unsupported("inspect.signature() with arguments other than one callable");
  // A signature is computed from the function alone (code, defaults, annotations, __wrapped__),
  // which the guards pin wherever the trace may call it: a function read by identity, or a
  // method whose function is its class's. A bound method's receiver only drops the first
  // parameter, so any receiver stands in for it.
  PyRef target;
  const VarRef& f = args[0];
  if (f->kind == VarKind::BoundMethod) {
    PyObject* func = Trace::as_constant(*f->as<BoundMethodVar>().func);
    if (func && PyFunction_Check(func)) target = PyRef::steal(PyMethod_New(func, Py_None));
  } else if (f->kind == VarKind::Object && pinned(*f)) {
    target = f->as<ObjectVar>().obj;
  }
  if (!target) unsupported("inspect.signature() of " + describe(*f) + ", which the guards do not pin");
  PyObject* r = PyObject_CallOneArg(signature, target.get());
  if (!r) {
    std::string why = take_error_message();
    unsupported("inspect.signature() raised " + why);
  }
  return trace_.constant(PyRef::steal(r));
}

bool Interpreter::pinned(const Var& v) const {
  switch (v.kind) {
    case VarKind::Object:
      return !v.as<ObjectVar>().opaque && !v.as<ObjectVar>().made_attrs &&
             (!v.source || trace_.guarded_by_value(v.as<ObjectVar>().obj.get()));
    case VarKind::Tuple:
    case VarKind::List:
      for (const VarRef& item : v.as<SequenceVar>().items)
        if (!pinned(*item)) return false;
      return true;
    case VarKind::Dict:
      for (const VarRef& value : v.as<DictVar>().values)
        if (!pinned(*value)) return false;
      return true;
    default:
      return true;
  }
}

VarRef Interpreter::constant_call(PyObject* fn, const std::vector<VarRef>& args, const Kwargs& kwargs) {
  // A call on an object the guards pin by type alone (a generator, an ndarray, a user object)
  // may read state that differs on the next call: it is not folded.
  for (const VarRef& a : args)
    if (!pinned(*a)) return nullptr;
  for (const auto& kv : kwargs)
    if (!pinned(*kv.second)) return nullptr;
  return call_on_values(fn, args, kwargs);
}

VarRef Interpreter::call_on_values(PyObject* fn, const std::vector<VarRef>& args, const Kwargs& kwargs) {
  PyRef t = PyRef::steal(PyTuple_New(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    PyRef c = Trace::materialize(*args[i]);
    if (!c) return nullptr;
    PyTuple_SET_ITEM(t.get(), i, c.release());
  }
  PyRef kw;
  if (!kwargs.empty()) {
    kw = PyRef::steal(PyDict_New());
    for (auto& [k, v] : kwargs) {
      PyRef c = Trace::materialize(*v);
      if (!c) return nullptr;
      if (PyDict_SetItemString(kw.get(), k.c_str(), c.get()) < 0) throw PythonError();
    }
  }
  PyObject* r = PyObject_Call(fn, t.get(), kw.get());
  if (!r) {
    PyRef e = take_exception();
    raise_taken(std::move(e), "constant call to " + trace_.table.name_of(fn));
  }
  return trace_.constant(PyRef::steal(r));
}

VarRef Interpreter::call_partial(const VarRef& partial, std::vector<VarRef> args, Kwargs kwargs) {
  // A partial's func, args and keywords are read-only attributes, so reading them through the
  // partial's source guards what the call uses: the function by identity, the tuple and the
  // keyword dict by the contents read. (A subclass may override __call__: not this path.)
  PyObject* p = partial->as<ObjectVar>().obj.get();
  auto part = [&](const char* name) {
    PyRef v = PyRef::steal(PyObject_GetAttrString(p, name));
    if (!v) throw PythonError();
    return partial->source ? trace_.wrap(v.get(), Source::attr(partial->source, name)) : trace_.constant(std::move(v));
  };
  VarRef func = part("func");
  std::vector<VarRef> all = iterate(part("args"));
  all.insert(all.end(), std::make_move_iterator(args.begin()), std::make_move_iterator(args.end()));
  // {**keywords, **kwargs}: a keyword given again keeps its place with the call's value.
  Kwargs merged;
  auto add = [&](const std::string& key, const VarRef& value) {
    auto given = std::find_if(kwargs.begin(), kwargs.end(), [&](const auto& kv) { return kv.first == key; });
    merged.emplace_back(key, given == kwargs.end() ? value : given->second);
  };
  VarRef keywords = part("keywords");
  if (keywords->kind == VarKind::Dict) {
    const DictVar& d = keywords->as<DictVar>();
    for (size_t i = 0; i < d.keys.size(); ++i) add(str_of(d.keys[i].get()), d.values[i]);
  } else {  // a partial the guards pin: its dict is a constant
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(keywords->as<ObjectVar>().obj.get(), &pos, &k, &v)) add(str_of(k), trace_.constant(PyRef::borrow(v)));
  }
  for (auto& kv : kwargs)
    if (std::none_of(merged.begin(), merged.end(), [&](const auto& m) { return m.first == kv.first; }))
      merged.push_back(std::move(kv));
  return call(func, std::move(all), std::move(merged));
}

VarRef Interpreter::autograd_function_apply(std::vector<VarRef>& args, Kwargs& kwargs) {
  // Function.apply(*args) runs cls.forward(ctx, *args) with grad mode off, and records a backward
  // node only when grad mode is on and a tensor argument requires grad. Where it records none, the
  // forward is all that happens to the values: inlined, on a ctx whose methods only keep what they
  // are given (FunctionCtx's save_for_backward, mark_dirty, ...) and whose needs_input_grad is all
  // False, as eager's is then. Where it would record one, the backward is not traced: unsupported.
  PyObject* cls = args.empty() ? nullptr : Trace::as_constant(*args[0]);
  if (!cls || !PyType_Check(cls)) unsupported("autograd.Function.apply of a class not known at trace time");
  std::string what = reinterpret_cast<PyTypeObject*>(cls)->tp_name + std::string(".apply");
  if (!kwargs.empty()) unsupported(what + " with keyword arguments");
  args.erase(args.begin());
  bool records = trace_.grad_enabled && std::any_of(args.begin(), args.end(), [](const VarRef& v) {
                   return v->kind == VarKind::Tensor && v->as<TensorVar>().type.requires_grad;
                 });
  if (records) unsupported(what + " on a tensor that requires grad (its backward is not traced)");
  auto resolve = [&](const char* path) {
    PyRef r = PyRef::steal(PyObject_CallFunction(trace_.table.resolve.get(), "s", path));
    if (!r) throw PythonError();
    return r;
  };
  PyRef setup = PyRef::steal(PyObject_GetAttrString(cls, "setup_context"));
  PyRef forward = PyRef::steal(PyObject_GetAttrString(cls, "forward"));
  if (!setup || !forward) throw PythonError();
  if (setup.get() != resolve("torch.autograd.Function.setup_context").get())
    unsupported(what + " of a Function with its own setup_context");  // forward(*args) then setup_context(ctx, ...)
  if (!PyFunction_Check(forward.get())) unsupported(what + " whose forward is not a Python function");

  std::shared_ptr<ObjectVar> ctx = new_instance(resolve("torch.autograd.function.FunctionCtx").get());
  ctx->made_attrs->emplace_back("needs_input_grad",
                                make_tuple(std::vector<VarRef>(args.size(), trace_.constant(PyRef::borrow(Py_False)))));
  args.insert(args.begin(), ctx);
  bool was_enabled = trace_.grad_enabled;
  if (was_enabled) trace_.set_grad_enabled(false);
  VarRef out;
  try {
    out = inline_real_function(forward.get(), nullptr, std::move(args), {});
  } catch (TracedException&) {
    if (was_enabled) trace_.set_grad_enabled(true);  // eager's apply restores the mode as the exception leaves
    throw;
  }
  if (was_enabled) trace_.set_grad_enabled(true);
  return out;
}

VarRef Interpreter::call_module(const VarRef& module, std::vector<VarRef> args, Kwargs kwargs) {
  PyObject* m = module->as<ObjectVar>().obj.get();
  static const char* kHookDicts[] = {"_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"};
  for (const char* name : kHookDicts) {
    PyRef d = PyRef::steal(PyObject_GetAttrString(m, name));
    if (!d) {
      PyErr_Clear();
      continue;
    }
    if (PyDict_Check(d.get()) && PyDict_GET_SIZE(d.get()) > 0) unsupported("call of a module with hooks");
  }
  const bool built = std::any_of(trace_.built_modules.begin(), trace_.built_modules.end(),
                                 [&](const PyRef& b) { return b.get() == m; });
  if (!module->source && !built) unsupported("call of a module that is not reachable from the frame");
  if (module->source) trace_.guards.no_hooks(module->source);
  // Python's lookup: an instance attribute named forward wins over the class's method.
  PyObject* dict = PyObject_GenericGetDict(m, nullptr);
  PyRef keep = PyRef::steal(dict);
  if (dict) {
    if (PyObject* f = PyDict_GetItemString(dict, "forward")) {
      VarRef fv = module->source ? trace_.wrap(f, Source::attr(module->source, "forward")) : trace_.constant(PyRef::borrow(f));
      return call(fv, std::move(args), std::move(kwargs));
    }
  } else {
    PyErr_Clear();
  }
  static PyObject* forward_name = PyUnicode_InternFromString("forward");
  PyObject* forward = _PyType_Lookup(Py_TYPE(m), forward_name);
  if (!forward || !PyFunction_Check(forward)) unsupported("module without a Python forward()");
  args.insert(args.begin(), module);
  return inline_real_function(forward, nullptr, std::move(args), std::move(kwargs));
}

VarRef Interpreter::inline_real_function(PyObject* func, const SourceRef& func_source, std::vector<VarRef> args,
                                         Kwargs kwargs) {
  PyObject* code = PyFunction_GET_CODE(func);
  PyObject* globals = PyFunction_GET_GLOBALS(func);
  std::vector<VarRef> defaults;
  if (PyObject* d = PyFunction_GET_DEFAULTS(func)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(d); ++i) {
      PyObject* item = PyTuple_GET_ITEM(d, i);
      defaults.push_back(func_source ? trace_.wrap(item, Source::item(Source::attr(func_source, "__defaults__"), i))
                                     : trace_.constant(PyRef::borrow(item)));
    }
  }
  std::shared_ptr<DictVar> kwdefaults;
  if (PyObject* kd = PyFunction_GET_KW_DEFAULTS(func)) {
    kwdefaults = std::make_shared<DictVar>();
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kd, &pos, &k, &v)) {
      kwdefaults->keys.push_back(PyRef::borrow(k));
      kwdefaults->values.push_back(
          func_source ? trace_.wrap(v, Source::dict_item(Source::attr(func_source, "__kwdefaults__"), str_of(k)))
                      : trace_.constant(PyRef::borrow(v)));
    }
  }
  std::vector<VarRef> closure;
  if (PyObject* cells = PyFunction_GET_CLOSURE(func)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(cells); ++i) {
      PyObject* real = PyTuple_GET_ITEM(cells, i);
      if (func_source) {
        // One CellVar per cell object: the same cell may also be a local of the frame (a resume
        // function's cell variable, captured by a closure made before the break).
        closure.push_back(trace_.wrap(real, Source::item(Source::attr(func_source, "__closure__"), i)));
        continue;
      }
      closure.push_back(trace_.cell_of(real));
    }
  }
  SourceRef globals_base;
  if (globals != trace_.frame.globals && func_source) globals_base = Source::attr(func_source, "__globals__");
  return inline_function(code, Globals{globals, globals_base}, defaults, kwdefaults.get(), std::move(closure),
                         std::move(args), std::move(kwargs), "function " + trace_.table.name_of(func));
}

VarRef Interpreter::inline_function(PyObject* code, Globals globals, const std::vector<VarRef>& defaults,
                                    const DictVar* kwdefaults, std::vector<VarRef> closure,
                                    std::vector<VarRef> args, Kwargs kwargs, const std::string& what) {
  if (depth_ + 1 > trace_.options.inline_depth_limit) unsupported("inlining depth limit reached (recursion?) at " + what);
  auto* co = reinterpret_cast<PyCodeObject*>(code);
  if (co->co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE))
    unsupported("call to a coroutine or async generator (" + what + ")");
  // A generator runs to completion at once and becomes an iterator over what it yielded: the
  // same values in the same order, since nothing in a trace observes the interleaving (side
  // effects are replayed after the graph).
  bool generator = co->co_flags & CO_GENERATOR;
  const CodeInfo& info = codes_.get(co);
  std::vector<VarRef> locals(info.localsplus_names.size());
  int npos = info.argcount;
  // Positional arguments, then *args.
  std::vector<VarRef> extra;
  for (size_t i = 0; i < args.size(); ++i) {
    if (static_cast<int>(i) < npos) {
      locals[i] = args[i];
    } else {
      extra.push_back(args[i]);
    }
  }
  if (!extra.empty() && !info.varargs) unsupported(what + " takes " + std::to_string(npos) + " positional arguments");
  int nkwonly = info.kwonlyargcount;
  int slot_varargs = npos + nkwonly;
  int slot_varkw = slot_varargs + (info.varargs ? 1 : 0);
  if (info.varargs) locals[slot_varargs] = make_tuple(extra);
  std::shared_ptr<DictVar> varkw;
  if (info.varkeywords) {
    varkw = std::make_shared<DictVar>();
    locals[slot_varkw] = varkw;
  }
  for (auto& [name, value] : kwargs) {
    int slot = -1;
    for (int i = info.posonlyargcount; i < npos + nkwonly; ++i)
      if (info.localsplus_names[i] == name) slot = i;
    if (slot >= 0) {
      if (locals[slot]) unsupported(what + " got multiple values for argument '" + name + "'");
      locals[slot] = value;
    } else if (varkw) {
      varkw->keys.push_back(PyRef::steal(pyname(name)));
      varkw->values.push_back(value);
    } else {
      unsupported(what + " got an unexpected keyword argument '" + name + "'");
    }
  }
  // Defaults fill the last positional parameters; keyword-only ones come from kwdefaults.
  int first_default = npos - static_cast<int>(defaults.size());
  for (int i = 0; i < npos; ++i) {
    if (locals[i]) continue;
    if (i >= first_default) {
      locals[i] = defaults[i - first_default];
    } else {
      unsupported(what + " missing required argument '" + info.localsplus_names[i] + "'");
    }
  }
  for (int i = npos; i < npos + nkwonly; ++i) {
    if (locals[i]) continue;
    int at = -1;
    if (kwdefaults) {
      PyRef key = PyRef::steal(pyname(info.localsplus_names[i]));
      at = kwdefaults->find(key.get());
    }
    if (at < 0) unsupported(what + " missing required keyword argument '" + info.localsplus_names[i] + "'");
    locals[i] = kwdefaults->values[at];
  }
  Interpreter child(trace_, codes_, info, std::move(globals), std::move(locals), std::move(closure), depth_ + 1);
  if (!generator) return child.run();
  std::vector<VarRef> yielded;
  child.yields_ = &yielded;
  try {
    child.run();
  } catch (Unsupported& u) {
    // Keep the inner location (the line that failed) and say that the generator ran here.
    u.reason = "generator " + what + " cannot be run to completion at trace time: " + u.reason;
    throw;
  } catch (TracedException& e) {
    // Run ahead of its consumer, the generator would raise where it is made instead of where
    // the consumer reaches that item: the consumer's own handlers could not see it in order.
    Unsupported u = uncaught(e);
    u.reason = "generator " + what + " raised during the trace: " + u.reason;
    throw u;
  }
  return std::make_shared<IteratorVar>(std::move(yielded));
}

}  // namespace ember::frontend
