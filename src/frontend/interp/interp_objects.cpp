// Attributes, items, iteration, truthiness and operators over Vars.
//
// Attribute reads follow Python's lookup order without running code Ember cannot see: data
// descriptors of the type (Python properties are inlined), the instance __dict__, nn.Module's
// _parameters/_buffers/_modules, then class attributes (functions become bound methods).
// Operators on tensors become graph nodes; on constants they are computed for real.
#include <algorithm>
#include <cstring>

#include "frontend/interp/interpreter.h"
#include "frontend/pyutil.h"

namespace ember::frontend {

namespace {

PyObject* operator_module() {
  static PyObject* m = PyImport_ImportModule("operator");
  return m;
}

// operator-module names of binary operators by NB_* number; in-place forms are NB_* + 13.
constexpr const char* kBinary[] = {"add", "and_", "floordiv", "lshift", "matmul", "mul", "mod",
                                   "or_", "pow", "rshift", "sub", "truediv", "xor"};
constexpr const char* kInplace[] = {"iadd", "iand", "ifloordiv", "ilshift", "imatmul", "imul", "imod",
                                    "ior", "ipow", "irshift", "isub", "itruediv", "ixor"};
constexpr const char* kCompare[] = {"lt", "le", "eq", "ne", "gt", "ge"};

// Core ops for `tensor <op> other`, by NB_* number (TorchCall where Python's operator differs).
constexpr ir::Op kBinaryCore[] = {ir::Op::Add,       ir::Op::BitwiseAnd, ir::Op::FloorDivide, ir::Op::TorchCall,
                                  ir::Op::Matmul,    ir::Op::Mul,        ir::Op::Remainder,   ir::Op::BitwiseOr,
                                  ir::Op::Pow,       ir::Op::TorchCall,  ir::Op::Sub,         ir::Op::Div,
                                  ir::Op::BitwiseXor};
constexpr ir::Op kCompareCore[] = {ir::Op::Lt, ir::Op::Le, ir::Op::Eq, ir::Op::Ne, ir::Op::Gt, ir::Op::Ge};

PyObject* operator_fn(const char* name) {
  PyObject* f = PyObject_GetAttrString(operator_module(), name);
  if (!f) throw PythonError();
  Py_DECREF(f);  // the module keeps it alive
  return f;
}

// An object of a type implemented in C, whose attributes and iteration run no Python code.
// Static types are; so are the heap types of the standard library's C modules (itertools and
// friends became heap types in CPython 3.12).
bool is_builtin_instance(PyObject* o) {
  PyTypeObject* t = Py_TYPE(o);
  if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE)) return true;
  static const char* kCModules[] = {"itertools", "_collections", "collections", "functools", "_functools", "operator"};
  PyRef module = PyRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(t), "__module__"));
  if (!module || !PyUnicode_Check(module.get())) {
    PyErr_Clear();
    return false;
  }
  const char* name = PyUnicode_AsUTF8(module.get());
  for (const char* m : kCModules)
    if (name && std::strcmp(name, m) == 0 && t->tp_dictoffset == 0) return true;
  return false;
}

bool type_named(PyObject* o, const char* module, const char* qualname) {
  PyObject* mro = Py_TYPE(o)->tp_mro;
  for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); ++i) {
    auto* t = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    PyRef mod = PyRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(t), "__module__"));
    if (!mod) PyErr_Clear();
    const char* m = mod && PyUnicode_Check(mod.get()) ? PyUnicode_AsUTF8(mod.get()) : nullptr;
    if (m && std::string(m) == module && std::string(t->tp_name) == qualname) return true;
  }
  return false;
}

// The member dict a torch.nn container keeps its children in, or nullptr for other modules.
const char* module_container_kind(PyObject* o) {
  if (type_named(o, "torch.nn.modules.container", "ModuleList") ||
      type_named(o, "torch.nn.modules.container", "Sequential") ||
      type_named(o, "torch.nn.modules.container", "ModuleDict"))
    return "_modules";
  if (type_named(o, "torch.nn.modules.container", "ParameterList") ||
      type_named(o, "torch.nn.modules.container", "ParameterDict"))
    return "_parameters";
  return nullptr;
}

bool is_dict_container(PyObject* o) {
  return type_named(o, "torch.nn.modules.container", "ModuleDict") ||
         type_named(o, "torch.nn.modules.container", "ParameterDict");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Attributes

VarRef Interpreter::get_attr(const VarRef& obj, const std::string& name) {
  switch (obj->kind) {
    case VarKind::SymInt:
      return get_attr(trace_.specialize(obj), name);
    case VarKind::Tensor:
      return tensor_attr(obj, name);
    case VarKind::Super:
      return super_attr(obj->as<SuperVar>(), name);
    case VarKind::Object: {
      PyObject* o = obj->as<ObjectVar>().obj.get();
      if (VarRef v = trace_.overlay_attr(o, name)) return v;
      if (PyObject_IsInstance(o, trace_.table.module_type.get()) == 1) return module_attr(obj, name);
      if (PyModule_Check(o)) {
        PyRef v = PyRef::steal(PyObject_GetAttrString(o, name.c_str()));
        if (!v) {
          PyErr_Clear();
          unsupported("module '" + str_of(PyModule_GetNameObject(o)) + "' has no attribute '" + name + "'");
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
      unsupported(describe(*obj) + " has no attribute '" + name + "'");
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
  auto ints = [&](const std::vector<sym::Expr>& xs) {
    PyRef tuple = PyRef::steal(PyTuple_New(xs.size()));
    for (size_t i = 0; i < xs.size(); ++i) {
      if (!xs[i].is_constant()) unsupported("symbolic sizes are not supported yet");
      PyTuple_SET_ITEM(tuple.get(), i, PyLong_FromLongLong(xs[i].constant()));
    }
    return tuple;
  };
  if (name == "shape") {
    PyRef size = PyRef::steal(PyObject_CallOneArg(trace_.table.size_type.get(), ints(type.sizes).get()));
    if (!size) throw PythonError();
    return trace_.constant(std::move(size));
  }
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
    PyErr_Clear();
    unsupported("'Tensor' object has no attribute '" + name + "'");
  }
  if (!PyCallable_Check(attr.get())) unsupported("tensor attribute '" + name + "'");
  return std::make_shared<BoundMethodVar>(t, trace_.constant(std::move(attr)));
}

VarRef Interpreter::module_attr(const VarRef& module, const std::string& name) {
  PyObject* m = module->as<ObjectVar>().obj.get();
  const SourceRef& src = module->source;
  if (name == "__class__") return trace_.constant(PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(m))));
  PyRef key = PyRef::steal(PyUnicode_FromString(name.c_str()));
  PyObject* descr = _PyType_Lookup(Py_TYPE(m), key.get());
  if (descr && Py_TYPE(descr)->tp_descr_set) {
    if (PyObject_TypeCheck(descr, &PyProperty_Type)) {
      PyRef fget = PyRef::steal(PyObject_GetAttrString(descr, "fget"));
      if (!fget || !PyFunction_Check(fget.get())) unsupported("property '" + name + "' without a Python getter");
      return inline_real_function(fget.get(), nullptr, {module}, {});
    }
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
      if (!src) unsupported("module member '" + name + "' of a module that is not reachable from the frame");
      return trace_.wrap(v, Source::module_member(src, name));
    }
  }
  if (PyErr_Occurred()) throw PythonError();
  if (descr) return class_attr_value(reinterpret_cast<PyObject*>(Py_TYPE(m)), descr, module, nullptr);
  unsupported("'" + std::string(Py_TYPE(m)->tp_name) + "' object has no attribute '" + name + "'");
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
    if (!v) {
      PyErr_Clear();
      unsupported("type object '" + std::string(reinterpret_cast<PyTypeObject*>(o)->tp_name) + "' has no attribute '" + name + "'");
    }
    return src ? trace_.wrap(v.get(), Source::attr(src, name)) : trace_.constant(std::move(v));
  }
  if (is_builtin_instance(o)) {
    // Builtin objects (numbers, strings, tuples, torch.dtype, ...): their attributes are C code.
    PyRef v = PyRef::steal(PyObject_GetAttrString(o, name.c_str()));
    if (!v) {
      PyErr_Clear();
      unsupported("'" + std::string(Py_TYPE(o)->tp_name) + "' object has no attribute '" + name + "'");
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
  PyRef key = PyRef::steal(PyUnicode_FromString(name.c_str()));
  PyObject* descr = _PyType_Lookup(Py_TYPE(o), key.get());
  if (descr && Py_TYPE(descr)->tp_descr_set) {
    if (PyObject_TypeCheck(descr, &PyProperty_Type)) {
      PyRef fget = PyRef::steal(PyObject_GetAttrString(descr, "fget"));
      if (!fget || !PyFunction_Check(fget.get())) unsupported("property '" + name + "' without a Python getter");
      return inline_real_function(fget.get(), nullptr, {obj}, {});
    }
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
  if (missing_ok) return nullptr;
  unsupported("'" + std::string(Py_TYPE(o)->tp_name) + "' object has no attribute '" + name + "'");
}

VarRef Interpreter::class_attr_value(PyObject* owner, PyObject* attr, const VarRef& self, const SourceRef& source) {
  if (PyFunction_Check(attr)) return std::make_shared<BoundMethodVar>(self, trace_.constant(PyRef::borrow(attr)));
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
  unsupported("'super' object has no attribute '" + name + "'");
}

void Interpreter::store_attr(const VarRef& obj, const std::string& name, const VarRef& value) {
  if (obj->kind != VarKind::Object || !obj->source)
    unsupported("assignment to attribute '" + name + "' of " + describe(*obj));
  PyObject* o = obj->as<ObjectVar>().obj.get();
  if (PyObject_IsInstance(o, trace_.table.module_type.get()) == 1) {
    PyRef dict = PyRef::steal(PyObject_GenericGetDict(o, nullptr));
    PyObject* params = dict ? PyDict_GetItemString(dict.get(), "_parameters") : nullptr;
    if (params && PyDict_GetItemString(params, name.c_str()))
      unsupported("assignment to parameter '" + name + "' of a module");
  }
  trace_.record_setattr(obj, name, value);
}

// ---------------------------------------------------------------------------------------------
// Items and iteration

VarRef Interpreter::subscript(const VarRef& obj, const VarRef& index) {
  switch (obj->kind) {
    case VarKind::Tensor:
      return trace_.call_torch(trace_.op_callable(ir::Op::Getitem), {obj, index}, {});
    case VarKind::Tuple:
    case VarKind::List: {
      auto& items = obj->as<SequenceVar>().items;
      PyObject* i = Trace::as_constant(*index);
      if (i && PyIndex_Check(i)) {
        Py_ssize_t at = PyNumber_AsSsize_t(i, PyExc_IndexError);
        if (at == -1 && PyErr_Occurred()) throw PythonError();
        Py_ssize_t n = items.size();
        if (at < 0) at += n;
        if (at < 0 || at >= n) unsupported("index out of range");
        return items[at];
      }
      if (i && PySlice_Check(i)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(i, &start, &stop, &step) < 0) throw PythonError();
        Py_ssize_t n = PySlice_AdjustIndices(items.size(), &start, &stop, step);
        std::vector<VarRef> out;
        for (Py_ssize_t k = 0; k < n; ++k) out.push_back(items[start + k * step]);
        return obj->kind == VarKind::List ? make_list(std::move(out)) : make_tuple(std::move(out));
      }
      unsupported("sequence index that is not a constant int or slice: " + describe(*index));
    }
    case VarKind::Dict: {
      PyObject* k = Trace::as_constant(*index);
      if (!k) unsupported("dict key that is not a constant");
      int at = obj->as<DictVar>().find(k);
      if (at < 0) {
        PyErr_Clear();
        unsupported("KeyError in dict lookup");
      }
      return obj->as<DictVar>().values[at];
    }
    case VarKind::Object: {
      PyObject* o = obj->as<ObjectVar>().obj.get();
      PyObject* i = Trace::as_constant(*index);
      const TorchTable& t = trace_.table;
      if (PyObject_IsInstance(o, t.module_type.get()) == 1) {
        const char* members = module_container_kind(o);
        if (!members || !i) unsupported("indexing " + describe(*obj));
        auto children = module_children(obj, members);
        bool by_key = PyUnicode_Check(i);
        if (by_key) {
          for (auto& c : children)
            if (PyUnicode_Compare(c.key.get(), i) == 0) return c.var;
          unsupported("key not found in a module container");
        }
        std::vector<VarRef> items;
        for (auto& c : children) items.push_back(c.var);
        // Slicing a module list gives a list of its modules (eager builds a new container of
        // the same modules: iteration, len() and indexing agree). A sliced Sequential keeps its
        // type, so calling it runs its modules in order.
        VarRef sliced = subscript(make_list(std::move(items)), index);
        if (sliced->kind == VarKind::List && type_named(o, "torch.nn.modules.container", "Sequential"))
          sliced->as<SequenceVar>().named_type = PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o)));
        return sliced;
      }
      if (i && is_builtin_instance(o)) {
        PyRef v = PyRef::steal(PyObject_GetItem(o, i));
        if (!v) {
          PyErr_Clear();
          unsupported("indexing a constant raised an error");
        }
        return trace_.constant(std::move(v));
      }
      unsupported("indexing " + describe(*obj));
    }
    default:
      unsupported("indexing " + describe(*obj));
  }
}

void Interpreter::store_subscript(const VarRef& obj, const VarRef& index, const VarRef& value) {
  if (obj->kind == VarKind::Tensor) {
    trace_.call_torch(operator_fn("setitem"), {obj, index, value}, {});
    return;
  }
  if (obj->source) unsupported("item assignment would mutate " + obj->source->str() + ", an object of the caller");
  if (obj->kind == VarKind::List) {
    auto& items = obj->as<SequenceVar>().items;
    PyObject* i = Trace::as_constant(*index);
    if (i && PySlice_Check(i)) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(i, &start, &stop, &step) < 0) throw PythonError();
      PySlice_AdjustIndices(items.size(), &start, &stop, step);
      if (step != 1) unsupported("extended slice assignment to a list");
      std::vector<VarRef> repl = iterate(value);
      if (stop < start) stop = start;
      items.erase(items.begin() + start, items.begin() + stop);
      items.insert(items.begin() + start, repl.begin(), repl.end());
      return;
    }
    if (!i || !PyIndex_Check(i)) unsupported("list item assignment at a non-constant index");
    Py_ssize_t at = PyNumber_AsSsize_t(i, nullptr), n = items.size();
    if (at < 0) at += n;
    if (at < 0 || at >= n) unsupported("list assignment index out of range");
    items[at] = value;
    return;
  }
  if (obj->kind == VarKind::Dict) {
    auto& d = obj->as<DictVar>();
    PyObject* k = Trace::as_constant(*index);
    if (!k) unsupported("dict item assignment with a non-constant key");
    int at = d.find(k);
    if (at >= 0) {
      d.values[at] = value;
    } else {
      if (PyErr_Occurred()) throw PythonError();
      d.keys.push_back(PyRef::borrow(k));
      d.values.push_back(value);
    }
    return;
  }
  unsupported("item assignment on " + describe(*obj));
}

void Interpreter::delete_subscript(const VarRef& obj, const VarRef& index) {
  if (obj->source) unsupported("del would mutate " + obj->source->str() + ", an object of the caller");
  PyObject* i = Trace::as_constant(*index);
  if (obj->kind == VarKind::List && i) {
    auto& items = obj->as<SequenceVar>().items;
    if (PySlice_Check(i)) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(i, &start, &stop, &step) < 0) throw PythonError();
      Py_ssize_t n = PySlice_AdjustIndices(items.size(), &start, &stop, step);
      std::vector<bool> drop(items.size(), false);
      for (Py_ssize_t k = 0; k < n; ++k) drop[start + k * step] = true;
      std::vector<VarRef> kept;
      for (size_t k = 0; k < items.size(); ++k)
        if (!drop[k]) kept.push_back(items[k]);
      items = std::move(kept);
      return;
    }
    if (PyIndex_Check(i)) {
      Py_ssize_t at = PyNumber_AsSsize_t(i, nullptr), n = items.size();
      if (at < 0) at += n;
      if (at < 0 || at >= n) unsupported("list deletion index out of range");
      items.erase(items.begin() + at);
      return;
    }
  }
  if (obj->kind == VarKind::Dict && i) {
    auto& d = obj->as<DictVar>();
    int at = d.find(i);
    if (at < 0) unsupported("KeyError in del of a dict item");
    d.keys.erase(d.keys.begin() + at);
    d.values.erase(d.values.begin() + at);
    return;
  }
  unsupported("del of an item of " + describe(*obj));
}

std::vector<Interpreter::ModuleMember> Interpreter::module_children(const VarRef& module, const char* dict_name) {
  if (!module->source) unsupported("members of a module that is not reachable from the frame");
  PyObject* m = module->as<ObjectVar>().obj.get();
  PyRef members = PyRef::steal(PyObject_GetAttrString(m, dict_name));
  if (!members || !PyDict_Check(members.get())) throw PythonError();
  trace_.guards.dict_keys(Source::attr(module->source, dict_name), PyRef::steal(PySequence_Tuple(members.get())).get());
  std::vector<ModuleMember> out;
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(members.get(), &pos, &k, &v)) {
    if (!PyUnicode_Check(k)) unsupported("a module member with a non-string name");
    out.push_back({PyRef::borrow(k), PyRef::borrow(v),
                   v == Py_None ? trace_.none() : trace_.wrap(v, Source::module_member(module->source, str_of(k)))});
  }
  return out;
}

std::vector<VarRef> Interpreter::iterate(const VarRef& v) {
  switch (v->kind) {
    case VarKind::Tuple:
    case VarKind::List:
      return v->as<SequenceVar>().items;
    case VarKind::Dict: {
      std::vector<VarRef> keys;
      for (auto& k : v->as<DictVar>().keys) keys.push_back(trace_.constant(k));
      return keys;
    }
    case VarKind::Iterator: {
      auto& it = v->as<IteratorVar>();
      std::vector<VarRef> rest(it.items.begin() + it.position, it.items.end());
      it.position = it.items.size();
      return rest;
    }
    case VarKind::Tensor: {
      PyRef unbind = PyRef::steal(PyObject_GetAttrString(trace_.table.torch.get(), "unbind"));
      if (!unbind) throw PythonError();
      return iterate(trace_.call_torch(unbind.get(), {v}, {}));
    }
    case VarKind::Object: {
      PyObject* o = v->as<ObjectVar>().obj.get();
      const TorchTable& t = trace_.table;
      if (PyObject_IsInstance(o, t.module_type.get()) == 1) {
        const char* members = module_container_kind(o);
        if (!members) unsupported("iterating " + describe(*v));
        bool dict_like = is_dict_container(o);
        std::vector<VarRef> out;
        for (auto& c : module_children(v, members)) out.push_back(dict_like ? trace_.constant(c.key) : c.var);
        return out;
      }
      if (!is_builtin_instance(o) && !PyType_Check(o)) unsupported("iterating " + describe(*v));
      PyRef it = PyRef::steal(PyObject_GetIter(o));
      if (!it) {
        PyErr_Clear();
        unsupported("iterating " + describe(*v));
      }
      std::vector<VarRef> out;
      while (PyObject* item = PyIter_Next(it.get())) {
        out.push_back(trace_.constant(PyRef::steal(item)));
        if (out.size() > 100000) unsupported("iterating a very long constant sequence");
      }
      if (PyErr_Occurred()) throw PythonError();
      return out;
    }
    default:
      unsupported("iterating " + describe(*v));
  }
}

// ---------------------------------------------------------------------------------------------
// Operators

VarRef Interpreter::binary_op(int nb, const VarRef& lhs_in, const VarRef& rhs_in) {
  bool inplace = nb >= 13;
  int base = nb % 13;
  if (lhs_in->kind == VarKind::SymInt || rhs_in->kind == VarKind::SymInt) {
    // + - * // % on ints keep a SymInt symbolic; anything else specializes it.
    bool arith = base == 0 || base == 10 || base == 5 || base == 2 || base == 6;
    if (arith)
      if (VarRef s = trace_.sym_int_arith(operator_fn(inplace ? kInplace[base] : kBinary[base]), lhs_in, rhs_in)) return s;
  }
  VarRef lhs = trace_.specialize(lhs_in), rhs = trace_.specialize(rhs_in);
  if (lhs->kind == VarKind::Tensor || rhs->kind == VarKind::Tensor) {
    if (inplace && lhs->kind == VarKind::Tensor) return trace_.call_torch(operator_fn(kInplace[base]), {lhs, rhs}, {});
    if (lhs->kind == VarKind::Tensor && kBinaryCore[base] != ir::Op::TorchCall)
      return trace_.call_torch(trace_.op_callable(kBinaryCore[base]), {lhs, rhs}, {});
    return trace_.call_torch(operator_fn(kBinary[base]), {lhs, rhs}, {});
  }
  // Sequences the trace models: concatenation and repetition keep the left operand's kind.
  // (A constant on the left, such as a torch.Size, goes through Python below.)
  bool lseq = lhs->kind == VarKind::Tuple || lhs->kind == VarKind::List;
  bool rseq = rhs->kind == VarKind::Tuple || rhs->kind == VarKind::List;
  if (lseq || (rseq && base == 5)) {
    if (base == 0) {  // concatenation
      std::vector<VarRef> items = iterate(lhs);
      for (auto& x : iterate(rhs)) items.push_back(x);
      if (inplace && lhs->kind == VarKind::List) {
        if (lhs->source) unsupported("+= would mutate " + lhs->source->str() + ", a list of the caller");
        lhs->as<SequenceVar>().items = std::move(items);
        return lhs;
      }
      return lhs->kind == VarKind::List ? make_list(std::move(items)) : make_tuple(std::move(items));
    }
    if (base == 5) {  // repetition
      const VarRef& seq = lseq ? lhs : rhs;
      PyObject* n = Trace::as_constant(*(lseq ? rhs : lhs));
      if (!n || !PyLong_Check(n)) unsupported("sequence repetition by a non-constant");
      std::vector<VarRef> items, one = iterate(seq);
      for (long k = 0; k < PyLong_AsLong(n); ++k) items.insert(items.end(), one.begin(), one.end());
      return seq->kind == VarKind::List ? make_list(std::move(items)) : make_tuple(std::move(items));
    }
  }
  if (base == 7 && lhs->kind == VarKind::Dict && rhs->kind == VarKind::Dict) {  // d1 | d2
    if (inplace && lhs->source) unsupported("|= would mutate " + lhs->source->str() + ", a dict of the caller");
    auto merged = inplace ? std::static_pointer_cast<DictVar>(lhs) : std::make_shared<DictVar>(lhs->as<DictVar>());
    if (!inplace) merged->source = nullptr;
    auto& src = rhs->as<DictVar>();
    for (size_t i = 0; i < src.keys.size(); ++i) {
      int at = merged->find(src.keys[i].get());
      if (at >= 0) {
        merged->values[at] = src.values[i];
      } else {
        merged->keys.push_back(src.keys[i]);
        merged->values.push_back(src.values[i]);
      }
    }
    return merged;
  }
  PyRef a = Trace::materialize(*lhs), b = Trace::materialize(*rhs);
  if (!a || !b) unsupported(std::string("operator ") + kBinary[base] + " on " + describe(*lhs) + " and " + describe(*rhs));
  PyRef r = PyRef::steal(PyObject_CallFunctionObjArgs(operator_fn(inplace ? kInplace[base] : kBinary[base]), a.get(), b.get(), nullptr));
  if (!r) {
    PyErr_Clear();
    unsupported(std::string("operator ") + kBinary[base] + " raised an exception on constants");
  }
  return trace_.constant(std::move(r));
}

VarRef Interpreter::compare(int op, const VarRef& lhs, const VarRef& rhs) {
  if (lhs->kind == VarKind::Tensor) return trace_.call_torch(trace_.op_callable(kCompareCore[op]), {lhs, rhs}, {});
  if (rhs->kind == VarKind::Tensor) return trace_.call_torch(operator_fn(kCompare[op]), {lhs, rhs}, {});
  if ((op == Py_EQ || op == Py_NE) && lhs->kind == VarKind::Object && rhs->kind == VarKind::Object) {
    PyObject* a = lhs->as<ObjectVar>().obj.get();
    PyObject* b = rhs->as<ObjectVar>().obj.get();
    bool plain = (!is_builtin_instance(a) || !is_builtin_instance(b)) &&
                 Py_TYPE(a)->tp_richcompare == PyBaseObject_Type.tp_richcompare &&
                 Py_TYPE(b)->tp_richcompare == PyBaseObject_Type.tp_richcompare;
    if (plain) return trace_.constant(PyRef::borrow(((a == b) == (op == Py_EQ)) ? Py_True : Py_False));
  }
  PyRef a = Trace::materialize(*lhs), b = Trace::materialize(*rhs);
  if (!a || !b) unsupported(std::string("comparison ") + kCompare[op] + " of " + describe(*lhs) + " and " + describe(*rhs));
  if ((!is_builtin_instance(a.get()) && Py_TYPE(a.get())->tp_richcompare != PyBaseObject_Type.tp_richcompare) ||
      (!is_builtin_instance(b.get()) && Py_TYPE(b.get())->tp_richcompare != PyBaseObject_Type.tp_richcompare))
    unsupported("comparison that runs a user-defined __eq__/__lt__");
  PyRef r = PyRef::steal(PyObject_RichCompare(a.get(), b.get(), op));
  if (!r) {
    PyErr_Clear();
    unsupported("comparison raised an exception on constants");
  }
  return trace_.constant(std::move(r));
}

VarRef Interpreter::unary(const char* torch_name, int py_op, const VarRef& v) {
  if (v->kind == VarKind::Tensor) {
    PyRef fn = PyRef::steal(PyObject_GetAttrString(trace_.table.torch.get(), torch_name));
    if (!fn) throw PythonError();
    return trace_.call_torch(fn.get(), {v}, {});
  }
  PyObject* c = Trace::as_constant(*v);
  if (!c) unsupported(std::string("unary ") + torch_name + " of " + describe(*v));
  PyObject* r = py_op == 0 ? PyNumber_Negative(c) : py_op == 1 ? PyNumber_Positive(c) : py_op == 2 ? PyNumber_Invert(c) : PyNumber_Absolute(c);
  if (!r) {
    PyErr_Clear();
    unsupported(std::string("unary ") + torch_name + " raised an exception on a constant");
  }
  return trace_.constant(PyRef::steal(r));
}

bool Interpreter::truthy(const VarRef& v) {
  switch (v->kind) {
    case VarKind::Tensor:
      unsupported("branching on a tensor's value (data-dependent control flow, bool(tensor))");
    case VarKind::Tuple:
    case VarKind::List:
      return !v->as<SequenceVar>().items.empty();
    case VarKind::Dict:
      return !v->as<DictVar>().keys.empty();
    case VarKind::Null:
      unsupported("truth value of NULL");
    case VarKind::Object: {
      PyObject* o = v->as<ObjectVar>().obj.get();
      PyTypeObject* t = Py_TYPE(o);
      bool user_truth = (t->tp_flags & Py_TPFLAGS_HEAPTYPE) &&
                        ((t->tp_as_number && t->tp_as_number->nb_bool) || (t->tp_as_mapping && t->tp_as_mapping->mp_length) ||
                         (t->tp_as_sequence && t->tp_as_sequence->sq_length));
      if (user_truth && PyObject_IsInstance(o, trace_.table.module_type.get()) != 1)
        unsupported("truth value of a " + std::string(t->tp_name) + " object (user-defined __bool__/__len__)");
      if (user_truth) return PyObject_Length(o) != 0;  // a container module: len(_modules)
      int r = PyObject_IsTrue(o);
      if (r < 0) throw PythonError();
      return r;
    }
    default:
      return true;
  }
}

bool Interpreter::identical(const VarRef& a, const VarRef& b) {
  if (a == b) return true;
  if (a->kind == VarKind::Object && b->kind == VarKind::Object)
    return a->as<ObjectVar>().obj.get() == b->as<ObjectVar>().obj.get();
  if (a->kind == VarKind::Tensor && b->kind == VarKind::Tensor)
    return a->as<TensorVar>().value == b->as<TensorVar>().value;
  if (a->kind == VarKind::Null || b->kind == VarKind::Null) return a->kind == b->kind;
  if (a->source && b->source) {
    if (a->source->str() == b->source->str()) return true;
    unsupported("identity test between two objects of the caller");
  }
  return false;  // different kinds of abstract values are different objects
}

bool Interpreter::contains(const VarRef& container, const VarRef& item) {
  if (container->kind == VarKind::Dict) {
    PyObject* k = Trace::as_constant(*item);
    if (!k) unsupported("`in` test of a dict with a non-constant key");
    int at = container->as<DictVar>().find(k);
    if (at < 0 && PyErr_Occurred()) throw PythonError();
    return at >= 0;
  }
  if (container->kind == VarKind::Tuple || container->kind == VarKind::List) {
    PyObject* c = Trace::as_constant(*item);
    for (auto& x : container->as<SequenceVar>().items) {
      if (identical(x, item)) return true;
      PyObject* xc = Trace::as_constant(*x);
      if (c && xc && is_builtin_instance(c) && is_builtin_instance(xc)) {
        int r = PyObject_RichCompareBool(xc, c, Py_EQ);
        if (r < 0) throw PythonError();
        if (r) return true;
      } else if (x->kind == VarKind::Tensor || item->kind == VarKind::Tensor) {
        if (x->kind == item->kind) unsupported("`in` test comparing tensors by value");
      }
    }
    return false;
  }
  PyObject* c = Trace::as_constant(*container);
  PyObject* i = Trace::as_constant(*item);
  if (c && i && is_builtin_instance(c)) {
    int r = PySequence_Contains(c, i);
    if (r < 0) {
      PyErr_Clear();
      unsupported("`in` test raised an exception");
    }
    return r;
  }
  if (c && PyObject_IsInstance(c, trace_.table.module_type.get()) == 1 && i && PyUnicode_Check(i)) {
    // `name in module_dict`
    PyRef modules = PyRef::steal(PyObject_GetAttrString(c, "_modules"));
    if (modules && PyDict_Check(modules.get()) && container->source) {
      trace_.guards.dict_keys(Source::attr(container->source, "_modules"), PyRef::steal(PySequence_Tuple(modules.get())).get());
      return PyDict_Contains(modules.get(), i) == 1;
    }
  }
  unsupported("`in` test on " + describe(*container));
}

VarRef Interpreter::length(const VarRef& v) {
  size_t n = 0;
  switch (v->kind) {
    case VarKind::Tuple:
    case VarKind::List:
      n = v->as<SequenceVar>().items.size();
      break;
    case VarKind::Dict:
      n = v->as<DictVar>().keys.size();
      break;
    case VarKind::Tensor: {
      auto& sizes = v->as<TensorVar>().type.sizes;
      if (sizes.empty()) unsupported("len() of a 0-d tensor");
      if (!sizes[0].is_constant()) unsupported("len() of a tensor with a symbolic size");
      n = sizes[0].constant();
      break;
    }
    case VarKind::Object: {
      PyObject* o = v->as<ObjectVar>().obj.get();
      if (PyObject_IsInstance(o, trace_.table.module_type.get()) == 1) {
        const char* members = module_container_kind(o);
        if (!members) unsupported("len() of " + describe(*v));
        n = module_children(v, members).size();
        break;
      }
      if (!is_builtin_instance(o)) unsupported("len() of a " + std::string(Py_TYPE(o)->tp_name) + " object");
      Py_ssize_t r = PyObject_Length(o);
      if (r < 0) {
        PyErr_Clear();
        unsupported("len() raised an exception");
      }
      n = r;
      break;
    }
    default:
      unsupported("len() of " + describe(*v));
  }
  return trace_.constant(PyRef::steal(PyLong_FromSize_t(n)));
}

VarRef Interpreter::isinstance(const VarRef& obj, const VarRef& cls) {
  PyRef c = Trace::materialize(*cls);
  if (!c) unsupported("isinstance() with a class that is not known at trace time");
  PyObject* type = nullptr;
  switch (obj->kind) {
    case VarKind::Tensor:
      type = obj->as<TensorVar>().py_type.get();
      break;
    case VarKind::Object:
      type = reinterpret_cast<PyObject*>(Py_TYPE(obj->as<ObjectVar>().obj.get()));
      break;
    case VarKind::Tuple:
    case VarKind::List: {
      auto& s = obj->as<SequenceVar>();
      type = s.named_type ? s.named_type.get()
                          : reinterpret_cast<PyObject*>(obj->kind == VarKind::Tuple ? &PyTuple_Type : &PyList_Type);
      break;
    }
    case VarKind::Dict:
      type = reinterpret_cast<PyObject*>(&PyDict_Type);
      break;
    case VarKind::Function:
      type = reinterpret_cast<PyObject*>(&PyFunction_Type);
      break;
    default:
      unsupported("isinstance() of " + describe(*obj));
  }
  int r = PyObject_IsSubclass(type, c.get());
  if (r < 0) {
    PyErr_Clear();
    unsupported("isinstance() raised an exception");
  }
  return trace_.constant(PyRef::borrow(r ? Py_True : Py_False));
}

VarRef Interpreter::build_slice(const VarRef& start, const VarRef& stop, const VarRef& step) {
  PyObject* a = Trace::as_constant(*start);
  PyObject* b = Trace::as_constant(*stop);
  PyObject* c = Trace::as_constant(*step);
  if (!a || !b || !c) unsupported("slice bounds that are not constants (tensor-valued bounds are data-dependent)");
  return trace_.constant(PyRef::steal(PySlice_New(a, b, c)));
}

VarRef Interpreter::format_value(const VarRef& v, const VarRef& spec) {
  PyRef c = Trace::materialize(*v);
  PyObject* s = spec ? Trace::as_constant(*spec) : nullptr;
  if (!c || (spec && !s)) unsupported("formatting " + describe(*v) + " in an f-string");
  PyRef r = PyRef::steal(PyObject_Format(c.get(), s));
  if (!r) {
    PyErr_Clear();
    unsupported("formatting raised an exception");
  }
  return trace_.constant(std::move(r));
}

}  // namespace ember::frontend
