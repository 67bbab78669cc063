// Attribute reads and writes in the symbolic interpreter.
//
// Reads follow Python's lookup order without running code Ember cannot see: data descriptors
// of the type (Python properties are inlined), the instance __dict__, nn.Module's
// _parameters/_buffers/_modules, then class attributes (functions become bound methods).
// Classes with a Python __getattribute__/__getattr__ have that code traced.
#include "frontend/interp/interpreter.h"
#include "frontend/interp/object_model.h"
#include "frontend/pyutil.h"

namespace ember::frontend {

using namespace object_model;

// ---------------------------------------------------------------------------------------------
// Attributes

VarRef Interpreter::get_attr(const VarRef& obj, const std::string& name) {
  switch (obj->kind) {
    case VarKind::SymInt:
    case VarKind::Slice:
      return get_attr(trace_.specialize(obj), name);
    case VarKind::Tensor:
      return tensor_attr(obj, name);
    case VarKind::Super:
      return super_attr(obj->as<SuperVar>(), name);
    case VarKind::Record:
      return record_attr(obj, name);
    case VarKind::Object: {
      PyObject* o = obj->as<ObjectVar>().obj.get();
      if (obj->as<ObjectVar>().opaque) unsupported("attribute '" + name + "' of " + describe(*obj) + ", read from an object guarded by its type only");
      if (is_keyed_view(*obj)) return dict_view_attr(obj, name);
      if (obj->as<ObjectVar>().made_attrs) return instance_attr(obj, name);
      if (VarRef v = trace_.effects.attr(o, name)) return v;
      if (PyObject_IsInstance(o, trace_.table.module_type.get()) == 1) return module_attr(obj, name);
      if (PyModule_Check(o)) {
        PyRef v = PyRef::steal(PyObject_GetAttrString(o, name.c_str()));
        if (!v) {
          PyRef e = take_exception();
          raise_taken(std::move(e), "attribute '" + name + "' of module '" + str_of(PyModule_GetNameObject(o)) + "'");
        }
        // torch's and the standard library's modules are treated as immutable: no guards.
        const CallableKind& kind = trace_.table.classify(o);
        if (obj->source && kind.kind != CallableKind::Pure) return trace_.wrap(v.get(), Source::attr(obj->source, name));
        return trace_.constant(std::move(v));
      }
      return object_attr(obj, o, name);
    }
    case VarKind::Tuple:
    case VarKind::List: {
      auto& seq = obj->as<SequenceVar>();
      if (seq.named_type) {
        // namedtuples name their fields in _fields; structseqs (torch.return_types) in __match_args__.
        PyRef fields = PyRef::steal(PyObject_GetAttrString(seq.named_type.get(), "_fields"));
        if (!fields) {
          PyErr_Clear();
          fields = PyRef::steal(PyObject_GetAttrString(seq.named_type.get(), "__match_args__"));
          if (!fields) PyErr_Clear();
        }
        if (fields && PyTuple_Check(fields.get())) {
          for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields.get()); ++i)
            if (str_of(PyTuple_GET_ITEM(fields.get(), i)) == name && static_cast<size_t>(i) < seq.items.size())
              return seq.items[i];
        }
      }
      raise(PyExc_AttributeError, "'" + std::string(obj->kind == VarKind::List ? "list" : "tuple") +
                                      "' object has no attribute '" + name + "'");
    }
    case VarKind::Function: {
      auto& f = obj->as<FunctionVar>();
      if (name == "__name__") return trace_.constant(f.name);
      if (name == "__qualname__") return trace_.constant(f.qualname);
      unsupported("attribute '" + name + "' of a function made during the trace");
    }
    default:
      unsupported("attribute '" + name + "' of " + describe(*obj));
  }
}

void Interpreter::load_method(const VarRef& obj, const std::string& name) {
  auto push_plain = [&](VarRef v) {
    bool null_after = bytecode::version_traits().null_after_callable;
    if (!null_after) push(make_null());
    push(std::move(v));
    if (null_after) push(make_null());
  };
  if (is_torch_size(obj) && !PyObject_HasAttrString(reinterpret_cast<PyObject*>(&PyTuple_Type), name.c_str())) {
    // torch.Size's own methods (numel): on the sizes' values, guarded.
    trace_.specialize_sizes(*obj);
    PyRef items = Trace::materialize(*obj);
    PyRef size = items ? PyRef::steal(PyObject_CallOneArg(trace_.table.size_type.get(), items.get())) : PyRef();
    if (!size) throw PythonError();
    return load_method(trace_.constant(std::move(size)), name);
  }
  if (obj->kind == VarKind::Tuple || obj->kind == VarKind::List || obj->kind == VarKind::Dict) {
    PyTypeObject* type = obj->kind == VarKind::Tuple ? &PyTuple_Type : obj->kind == VarKind::List ? &PyList_Type : &PyDict_Type;
    PyRef method = PyRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), name.c_str()));
    if (!method) {
      PyErr_Clear();
      unsupported(describe(*obj) + " has no method '" + name + "'");
    }
    push(trace_.constant(std::move(method)));
    push(obj);
    return;
  }
  VarRef v = get_attr(obj, name);
  if (v->kind == VarKind::BoundMethod) {
    auto& bm = v->as<BoundMethodVar>();
    push(bm.func);
    push(bm.self);
    return;
  }
  push_plain(std::move(v));
}

VarRef Interpreter::tensor_attr(const VarRef& t, const std::string& name) {
  auto& tv = t->as<TensorVar>();
  const ir::TensorType& type = tv.type;
  if (name == "shape") return trace_.size_tuple(type.sizes, true);
  if (name == "ndim") return trace_.constant(PyRef::steal(PyLong_FromSsize_t(type.sizes.size())));
  if (name == "dtype") return trace_.constant(PyRef::borrow(trace_.table.dtype_object(type.dtype)));
  if (name == "device") {
    std::string d = type.device.str();
    PyRef s = PyRef::steal(PyUnicode_FromString(d.c_str()));
    PyRef dev = PyRef::steal(PyObject_CallOneArg(trace_.table.device_type.get(), s.get()));
    if (!dev) throw PythonError();
    return trace_.constant(std::move(dev));
  }
  if (name == "is_cuda") return trace_.constant(PyRef::borrow(type.device.type == "cuda" ? Py_True : Py_False));
  if (name == "is_cpu") return trace_.constant(PyRef::borrow(type.device.type == "cpu" ? Py_True : Py_False));
  if (name == "is_meta") return trace_.constant(PyRef::borrow(type.device.type == "meta" ? Py_True : Py_False));
  if (name == "requires_grad") return trace_.constant(PyRef::borrow(type.requires_grad ? Py_True : Py_False));
  if (name == "T" || name == "mT" || name == "H" || name == "mH" || name == "real" || name == "imag" ||
      name == "is_complex" || name == "is_floating_point") {
    // Attributes computed by torch from metadata alone: get the descriptor and apply it as a node
    // (tensor results) or a constant (metadata results) through call_torch.
    PyRef descr = PyRef::steal(PyObject_GetAttrString(trace_.table.tensor_type.get(), name.c_str()));
    if (!descr) throw PythonError();
    if (!PyCallable_Check(descr.get()) || name == "T" || name == "mT" || name == "H" || name == "mH" ||
        name == "real" || name == "imag") {
      // A getset descriptor: `operator.attrgetter(name)` applies it the same way at run time.
      PyRef getter = PyRef::steal(PyObject_CallMethod(operator_module(), "attrgetter", "s", name.c_str()));
      if (!getter) throw PythonError();
      return trace_.call_torch(getter.get(), {t}, {});
    }
    return std::make_shared<BoundMethodVar>(t, trace_.constant(std::move(descr)));
  }
  if (name == "is_nested" || name == "is_sparse" || name == "is_quantized" || name == "is_mkldnn" ||
      name == "is_sparse_csr") {
    // Every tensor of a trace is dense and strided: read_tensor_meta refuses other inputs, and a
    // result of another layout fails to be described (its metadata read raises).
    return trace_.constant(PyRef::borrow(Py_False));
  }
  if (name == "layout") {
    // read_tensor_meta accepts strided tensors only.
    PyRef strided = PyRef::steal(PyObject_GetAttrString(trace_.table.torch.get(), "strided"));
    if (!strided) throw PythonError();
    return trace_.constant(std::move(strided));
  }
  if (name == "is_leaf" && !type.requires_grad) return trace_.constant(PyRef::borrow(Py_True));
  if (name == "is_leaf" && !tv.source && tv.meta && !tv.meta_is_proxy) {
    // An intermediate whose meta tensor went through the same autograd recording.
    PyRef leaf = PyRef::steal(PyObject_GetAttrString(tv.meta.get(), "is_leaf"));
    if (!leaf) throw PythonError();
    return trace_.constant(std::move(leaf));
  }
  if (name == "grad" || name == "data" || name == "grad_fn" || name == "_version" || name == "is_leaf")
    unsupported("tensor attribute '" + name + "' (autograd state) inside compiled code");
  PyRef attr = PyRef::steal(PyObject_GetAttrString(trace_.table.tensor_type.get(), name.c_str()));
  if (!attr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw PythonError();
    PyErr_Clear();
    raise(PyExc_AttributeError, "'Tensor' object has no attribute '" + name + "'");
  }
  if (!PyCallable_Check(attr.get())) unsupported("tensor attribute '" + name + "'");
  return std::make_shared<BoundMethodVar>(t, trace_.constant(std::move(attr)));
}

VarRef Interpreter::property_value(PyObject* property, const VarRef& self, const std::string& name) {
  PyRef fget = PyRef::steal(PyObject_GetAttrString(property, "fget"));
  if (!fget || !PyFunction_Check(fget.get())) unsupported("property '" + name + "' without a Python getter");
  return inline_real_function(fget.get(), nullptr, {self}, {});
}

VarRef Interpreter::module_attr(const VarRef& module, const std::string& name) {
  PyObject* m = module->as<ObjectVar>().obj.get();
  const SourceRef& src = module->source;
  if (name == "__class__") return trace_.constant(PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(m))));
  PyRef key = PyRef::steal(PyUnicode_FromString(name.c_str()));
  PyObject* descr = _PyType_Lookup(Py_TYPE(m), key.get());
  if (descr && Py_TYPE(descr)->tp_descr_set) {
    if (PyObject_TypeCheck(descr, &PyProperty_Type)) return property_value(descr, module, name);
    unsupported("module attribute '" + name + "' is a data descriptor Ember cannot read");
  }
  PyRef dict = PyRef::steal(PyObject_GenericGetDict(m, nullptr));
  if (!dict) throw PythonError();
  if (PyObject* v = PyDict_GetItemWithError(dict.get(), key.get()))
    return src ? trace_.wrap(v, Source::attr(src, name)) : trace_.constant(PyRef::borrow(v));
  for (const char* container : {"_parameters", "_buffers", "_modules"}) {
    PyObject* d = PyDict_GetItemString(dict.get(), container);
    if (!d || !PyDict_Check(d)) continue;
    if (PyObject* v = PyDict_GetItemWithError(d, key.get())) {
      // A None member (an unset optional weight) of a module the trace built: nothing to read.
      if (!src && v == Py_None) return trace_.none();
      if (!src) unsupported("module member '" + name + "' of a module that is not reachable from the frame");
      return trace_.wrap(v, Source::module_member(src, name));
    }
  }
  if (PyErr_Occurred()) throw PythonError();
  if (descr) return class_attr_value(reinterpret_cast<PyObject*>(Py_TYPE(m)), descr, module, nullptr);
  // Missing: nn.Module.__getattr__ raises. The answer holds while the names in the module's
  // __dict__ and member dicts stay the same.
  if (src) {
    trace_.guards.dict_keys(Source::attr(src, "__dict__"), PyRef::steal(PySequence_Tuple(dict.get())).get());
    for (const char* container : {"_parameters", "_buffers", "_modules"}) {
      PyObject* d = PyDict_GetItemString(dict.get(), container);
      if (d && PyDict_Check(d)) trace_.guards.dict_keys(Source::attr(src, container), PyRef::steal(PySequence_Tuple(d)).get());
    }
  }
  raise(PyExc_AttributeError, "'" + std::string(Py_TYPE(m)->tp_name) + "' object has no attribute '" + name + "'");
}

VarRef Interpreter::object_attr(const VarRef& obj, PyObject* o, const std::string& name) {
  const SourceRef& src = obj->source;
  if (PyType_Check(o)) {
    // A class: its own attribute lookup (metaclass descriptors are C code for ordinary classes).
    PyRef key = PyRef::steal(PyUnicode_FromString(name.c_str()));
    PyObject* raw = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(o), key.get());
    if (raw && (PyObject_TypeCheck(raw, &PyStaticMethod_Type) || PyObject_TypeCheck(raw, &PyClassMethod_Type) ||
                PyFunction_Check(raw))) {
      PyRef v = PyRef::steal(PyObject_GetAttrString(o, name.c_str()));
      if (!v) throw PythonError();
      return trace_.constant(std::move(v));
    }
    PyRef v = PyRef::steal(PyObject_GetAttrString(o, name.c_str()));
    if (!v) raise_taken(take_exception(), "attribute '" + name + "' of class " + reinterpret_cast<PyTypeObject*>(o)->tp_name);
    return src ? trace_.wrap(v.get(), Source::attr(src, name)) : trace_.constant(std::move(v));
  }
  if (is_builtin_instance(o)) {
    // Builtin objects (numbers, strings, tuples, torch.dtype, ...): their attributes are C code.
    PyRef v = PyRef::steal(PyObject_GetAttrString(o, name.c_str()));
    if (!v) raise_taken(take_exception(), "attribute '" + name + "' of a " + Py_TYPE(o)->tp_name + " object");
    // An object read from the frame and guarded by its type alone (a generator, an ndarray, a
    // set) may carry other state on the next call: its attribute is read again through its source.
    if (src && !trace_.guarded_by_value(o)) {
      if (trace_.guarded_by_value(v.get()) && !PyCFunction_Check(v.get()) && !PyMethod_Check(v.get()))
        return trace_.wrap(v.get(), Source::attr(src, name));
      auto opaque = std::make_shared<ObjectVar>(std::move(v));
      opaque->source = Source::attr(src, name);
      opaque->opaque = true;
      return opaque;
    }
    return trace_.constant(std::move(v));
  }
  if (name == "__class__") return trace_.constant(PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))));
  if (Py_TYPE(o)->tp_getattro != PyObject_GenericGetAttr) {
    // A class with Python __getattribute__ / __getattr__ (configuration objects often have
    // them): trace that code; object.__getattribute__ inside it is the generic lookup below.
    static PyObject* getattribute = PyUnicode_InternFromString("__getattribute__");
    static PyObject* getattr = PyUnicode_InternFromString("__getattr__");
    PyObject* custom = _PyType_Lookup(Py_TYPE(o), getattribute);
    PyRef name_obj = PyRef::steal(PyUnicode_FromString(name.c_str()));
    if (custom && PyFunction_Check(custom))
      return inline_real_function(custom, nullptr, {obj, trace_.constant(name_obj)}, {});
    PyObject* fallback = _PyType_Lookup(Py_TYPE(o), getattr);
    if (!fallback || !PyFunction_Check(fallback) ||
        (custom && custom != object_getattribute()))
      unsupported("attribute '" + name + "' of a " + Py_TYPE(o)->tp_name + " object, whose class customizes attribute lookup");
    if (VarRef v = generic_attr(obj, o, name, /*missing_ok=*/true)) return v;
    return inline_real_function(fallback, nullptr, {obj, trace_.constant(name_obj)}, {});
  }
  return generic_attr(obj, o, name, false);
}

VarRef Interpreter::generic_attr(const VarRef& obj, PyObject* o, const std::string& name, bool missing_ok) {
  const SourceRef& src = obj->source;
  if (name == "__dict__" && src && !PyType_Check(o)) return instance_dict(obj, o);
  PyRef key = PyRef::steal(PyUnicode_FromString(name.c_str()));
  PyObject* descr = _PyType_Lookup(Py_TYPE(o), key.get());
  if (descr && Py_TYPE(descr)->tp_descr_set) {
    if (PyObject_TypeCheck(descr, &PyProperty_Type)) return property_value(descr, obj, name);
    if (!is_builtin_instance(descr)) unsupported("attribute '" + name + "' is a Python data descriptor");
    PyRef v = PyRef::steal(PyObject_GetAttrString(o, name.c_str()));
    if (!v) throw PythonError();
    return src ? trace_.wrap(v.get(), Source::attr(src, name)) : trace_.constant(std::move(v));
  }
  PyRef dict = PyRef::steal(PyObject_GenericGetDict(o, nullptr));
  if (!dict) PyErr_Clear();
  if (dict) {
    if (PyObject* v = PyDict_GetItemWithError(dict.get(), key.get()))
      return src ? trace_.wrap(v, Source::attr(src, name)) : trace_.constant(PyRef::borrow(v));
  }
  if (descr) return class_attr_value(reinterpret_cast<PyObject*>(Py_TYPE(o)), descr, obj, src ? Source::attr(src, name) : nullptr);
  // Missing (the type is guarded): the answer holds while the instance's attribute names stay
  // the same.
  if (src && dict) trace_.guards.dict_keys(Source::attr(src, "__dict__"), PyRef::steal(PySequence_Tuple(dict.get())).get());
  if (missing_ok) return nullptr;
  raise(PyExc_AttributeError, "'" + std::string(Py_TYPE(o)->tp_name) + "' object has no attribute '" + name + "'");
}

VarRef Interpreter::class_attr_value(PyObject* owner, PyObject* attr, const VarRef& self, const SourceRef& source) {
  // A method under functools.lru_cache binds as a function does (the wrapper's __get__ makes a
  // bound method of it); the call goes to call_lru_cache.
  if (PyFunction_Check(attr) || type_named(attr, "functools", "functools._lru_cache_wrapper"))
    return std::make_shared<BoundMethodVar>(self, trace_.constant(PyRef::borrow(attr)));
  if (PyObject_TypeCheck(attr, &PyStaticMethod_Type)) {
    PyRef f = PyRef::steal(PyObject_GetAttrString(attr, "__func__"));
    if (!f) throw PythonError();
    return trace_.constant(std::move(f));
  }
  if (PyObject_TypeCheck(attr, &PyClassMethod_Type)) {
    PyRef f = PyRef::steal(PyObject_GetAttrString(attr, "__func__"));
    if (!f) throw PythonError();
    return std::make_shared<BoundMethodVar>(trace_.constant(PyRef::borrow(owner)), trace_.constant(std::move(f)));
  }
  if (Py_TYPE(attr)->tp_descr_get) {
    if (!is_builtin_instance(attr)) unsupported("class attribute of type " + std::string(Py_TYPE(attr)->tp_name) + " (a Python descriptor)");
    // A C method of a builtin base class: bind it to self as a method.
    return std::make_shared<BoundMethodVar>(self, trace_.constant(PyRef::borrow(attr)));
  }
  return source ? trace_.wrap(attr, source) : trace_.constant(PyRef::borrow(attr));
}

VarRef Interpreter::super_attr(const SuperVar& sup, const std::string& name) {
  PyObject* type = nullptr;
  if (sup.self->kind == VarKind::Object) type = reinterpret_cast<PyObject*>(Py_TYPE(sup.self->as<ObjectVar>().obj.get()));
  if (sup.self->kind == VarKind::Tensor) type = sup.self->as<TensorVar>().py_type.get();
  if (!type) unsupported("super() of " + describe(*sup.self));
  PyObject* mro = reinterpret_cast<PyTypeObject*>(type)->tp_mro;
  PyRef key = PyRef::steal(PyUnicode_FromString(name.c_str()));
  bool after = false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    PyObject* cls = PyTuple_GET_ITEM(mro, i);
    if (!after) {
      after = cls == sup.cls.get();
      continue;
    }
    if (PyObject* attr = own_class_attribute(cls, key.get())) {
      if (PyObject_TypeCheck(attr, &PyProperty_Type)) {
        PyRef fget = PyRef::steal(PyObject_GetAttrString(attr, "fget"));
        if (!fget || !PyFunction_Check(fget.get())) unsupported("super() property without a Python getter");
        return inline_real_function(fget.get(), nullptr, {sup.self}, {});
      }
      return class_attr_value(cls, attr, sup.self, nullptr);
    }
  }
  raise(PyExc_AttributeError, "'super' object has no attribute '" + name + "'");
}

void Interpreter::step_load_super_attr(const bytecode::Instruction& ins) {
  // `super().name` in one instruction (3.12+): the stack holds the global `super`, the class, self.
  VarRef self = pop();
  VarRef cls = pop();
  pop();  // the global `super`
  PyObject* c = Trace::as_constant(*cls);
  if (!c || !PyType_Check(c)) unsupported("super() with a class that is not known at trace time");
  SuperVar sup(PyRef::borrow(c), self);
  VarRef attr = super_attr(sup, str_of(name_at(ins.arg)));
  bool method = ins.arg2 & 1;
  if (method && attr->kind == VarKind::BoundMethod) {
    auto& bm = attr->as<BoundMethodVar>();
    push(bm.func);
    push(bm.self);
  } else if (method) {
    bool null_after = bytecode::version_traits().null_after_callable;
    if (!null_after) push(make_null());
    push(attr);
    if (null_after) push(make_null());
  } else {
    push(attr);
  }
}

VarRef Interpreter::instance_dict(const VarRef& obj, PyObject* o) {
  PyRef dict = PyRef::steal(PyObject_GenericGetDict(o, nullptr));
  if (!dict || !PyDict_CheckExact(dict.get())) {
    PyErr_Clear();
    unsupported("'" + std::string(Py_TYPE(o)->tp_name) + "' object has no plain __dict__");
  }
  SourceRef src = Source::attr(obj->source, "__dict__");
  trace_.guards.type_match(src, &PyDict_Type);
  VarRef view = make_object(std::move(dict), src);
  view->as<ObjectVar>().dict_owner = PyRef::borrow(o);
  return view;
}

bool Interpreter::is_keyed_view(const Var& v) const {
  return v.kind == VarKind::Object &&
         (v.as<ObjectVar>().dict_owner || v.as<ObjectVar>().obj.get() == trace_.table.environ.get());
}

VarRef Interpreter::dict_view_lookup(const VarRef& view, PyObject* key) {
  auto& v = view->as<ObjectVar>();
  PyObject* d = v.obj.get();
  if (!key) unsupported("a lookup in a dict object with a key that is not a constant");
  if (d == trace_.table.environ.get()) {
    // The process environment changes between calls (os.environ[k] = v, putenv by libraries):
    // each variable read is guarded on its own, set to this value or unset.
    if (!PyUnicode_CheckExact(key)) unsupported("an os.environ lookup with a key that is not a str");
    try {
      trace_.guards.environ_entry(d, key);
    } catch (const std::runtime_error& e) {
      unsupported(std::string("an os.environ lookup: ") + e.what());
    }
    PyObject* value = PyObject_GetItem(d, key);
    if (value) return trace_.constant(PyRef::steal(value));
    if (!PyErr_ExceptionMatches(PyExc_KeyError)) throw PythonError();
    PyErr_Clear();
    return nullptr;
  }
  if (!view->source) {
    // A dict object the trace holds as a constant (the globals of inlined library code): read it.
    PyObject* value = PyDict_GetItemWithError(d, key);
    if (!value && PyErr_Occurred()) throw PythonError();
    return value ? trace_.constant(PyRef::borrow(value)) : nullptr;
  }
  if (!PyUnicode_Check(key)) unsupported("a lookup in a dict object of the caller with a key that is not a string");
  static PyObject* getitem = PyUnicode_InternFromString("__getitem__");
  if (!PyDict_CheckExact(d) && _PyType_Lookup(Py_TYPE(d), getitem) != _PyType_Lookup(&PyDict_Type, getitem))
    unsupported("a lookup in a " + std::string(Py_TYPE(d)->tp_name) + " object (its __getitem__ is Python code)");
  std::string name = str_of(key);
  // The trace's own attribute writes land in the instance dict when they are replayed.
  if (v.dict_owner)
    if (VarRef written = trace_.effects.attr(v.dict_owner.get(), name)) return written;
  if (PyObject* value = PyDict_GetItemWithError(d, key)) return trace_.wrap(value, Source::dict_item(view->source, name));
  if (PyErr_Occurred()) throw PythonError();
  PyRef keys = PyRef::steal(PyDict_Keys(d));
  PyRef keys_tuple = keys ? PyRef::steal(PyList_AsTuple(keys.get())) : PyRef();
  if (!keys_tuple) throw PythonError();
  trace_.guards.dict_keys(view->source, keys_tuple.get());
  return nullptr;
}

VarRef Interpreter::dict_view_attr(const VarRef& view, const std::string& name) {
  if (name != "get" && name != "__getitem__" && name != "__contains__") {
    const char* what = view->as<ObjectVar>().dict_owner ? "an instance __dict__" : "os.environ";
    unsupported("attribute '" + name + "' of " + what + " (only get, [] and `in` are traced)");
  }
  PyRef descr = PyRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyDict_Type), name.c_str()));
  if (!descr) throw PythonError();
  return std::make_shared<BoundMethodVar>(view, trace_.constant(std::move(descr)));
}

VarRef Interpreter::dict_view_method(const VarRef& view, const std::string& name, std::vector<VarRef>& args,
                                     Kwargs& kwargs) {
  if (!kwargs.empty() || args.empty() || args.size() > (name == "get" ? 2u : 1u))
    unsupported("dict." + name + "() with unexpected arguments on a dict object");
  VarRef found = dict_view_lookup(view, Trace::as_constant(*args[0]));
  if (name == "__contains__") return trace_.constant(PyRef::borrow(found ? Py_True : Py_False));
  if (found) return found;
  if (name == "get") return args.size() == 2 ? args[1] : trace_.none();
  raise_key_error(Trace::as_constant(*args[0]));
}

void Interpreter::store_attr(const VarRef& obj, const std::string& name, const VarRef& value) {
  if (obj->kind == VarKind::Object && obj->as<ObjectVar>().made_attrs) return store_instance_attr(obj, name, value);
  if (obj->kind == VarKind::Record) return record_store(obj, name, value);
  if (obj->kind != VarKind::Object || !obj->source)
    unsupported("assignment to attribute '" + name + "' of " + describe(*obj));
  PyObject* o = obj->as<ObjectVar>().obj.get();
  if (PyObject_IsInstance(o, trace_.table.module_type.get()) == 1) {
    PyRef dict = PyRef::steal(PyObject_GenericGetDict(o, nullptr));
    PyObject* params = dict ? PyDict_GetItemString(dict.get(), "_parameters") : nullptr;
    if (params && PyDict_GetItemString(params, name.c_str()))
      unsupported("assignment to parameter '" + name + "' of a module");
  }
  trace_.effects.set_attr(obj, name, value);
}

}  // namespace ember::frontend
