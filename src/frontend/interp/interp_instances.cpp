// Instances the trace constructs: `cls(...)` of a plain Python class (python_table.py decides
// which classes qualify: object's own __new__/__setattr__/__getattribute__, an instance __dict__,
// no C base but object). The instance is an ObjectVar whose `made_attrs` hold its attributes;
// its `obj` is a placeholder of the class with an empty __dict__, used only for the class's own
// lookups and never handed to the program. After the graph, ValuePlan::Kind::Object builds a new
// instance per run (object.__new__, then the attributes), so a returned or stored instance, or
// one live across a graph break, is a real object of the class with exactly those attributes.
#include "frontend/interp/interpreter.h"
#include "frontend/pyutil.h"

namespace ember::frontend {

namespace {

PyObject* lookup(PyTypeObject* type, const char* name) {
  PyRef key = PyRef::steal(PyUnicode_FromString(name));
  if (!key) throw PythonError();
  return _PyType_Lookup(type, key.get());  // borrowed, no error set
}

}  // namespace

std::shared_ptr<ObjectVar> Interpreter::new_instance(PyObject* cls) {
  PyRef placeholder = PyRef::steal(
      PyObject_CallMethod(reinterpret_cast<PyObject*>(&PyBaseObject_Type), "__new__", "O", cls));
  if (!placeholder) throw PythonError();
  auto obj = std::make_shared<ObjectVar>(std::move(placeholder));
  obj->made_attrs = std::make_shared<std::vector<std::pair<std::string, VarRef>>>();
  return obj;
}

VarRef Interpreter::construct(PyObject* cls, std::vector<VarRef> args, Kwargs kwargs) {
  auto* type = reinterpret_cast<PyTypeObject*>(cls);
  std::string what = type->tp_name;
  std::shared_ptr<ObjectVar> obj = new_instance(cls);
  PyObject* init = lookup(type, "__init__");
  if (init && PyFunction_Check(init)) {
    args.insert(args.begin(), obj);
    VarRef r = inline_real_function(init, nullptr, std::move(args), std::move(kwargs));
    if (Trace::as_constant(*r) != Py_None) unsupported("__init__ of " + what + " returned a value other than None");
  } else if (init == lookup(&PyBaseObject_Type, "__init__")) {
    if (!args.empty() || !kwargs.empty()) unsupported(what + "() takes no arguments");
  } else {
    unsupported("constructing an instance of " + what + ", whose __init__ is not Python code");
  }
  return obj;
}

VarRef Interpreter::instance_attr(const VarRef& obj, const std::string& name) {
  auto& o = obj->as<ObjectVar>();
  // The class refuses data descriptors but properties when the trace assigns (store_attr), so an
  // assigned name shadows nothing the class would answer first.
  for (const auto& kv : *o.made_attrs)
    if (kv.first == name) return kv.second;
  if (name == "__dict__") unsupported("the __dict__ of a " + std::string(Py_TYPE(o.obj.get())->tp_name) + " made in the trace");
  if (name == "__class__") return trace_.constant(PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o.obj.get()))));
  return generic_attr(obj, o.obj.get(), name, false);
}

void Interpreter::store_instance_attr(const VarRef& obj, const std::string& name, const VarRef& value) {
  auto& o = obj->as<ObjectVar>();
  PyTypeObject* type = Py_TYPE(o.obj.get());
  PyObject* descr = lookup(type, name.c_str());
  if (descr && Py_TYPE(descr)->tp_descr_set) {
    PyRef fset = PyObject_TypeCheck(descr, &PyProperty_Type) ? PyRef::steal(PyObject_GetAttrString(descr, "fset")) : PyRef();
    if (!fset) PyErr_Clear();
    if (!fset || !PyFunction_Check(fset.get()))
      unsupported("assignment to '" + name + "' of a " + type->tp_name + ", a data descriptor of its class without a Python setter");
    inline_real_function(fset.get(), nullptr, {obj, value}, {});
    return;
  }
  for (auto& kv : *o.made_attrs) {
    if (kv.first == name) {
      kv.second = value;
      return;
    }
  }
  o.made_attrs->emplace_back(name, value);
}

void Interpreter::delete_attr(const VarRef& obj, const std::string& name) {
  if (obj->kind != VarKind::Object || !obj->as<ObjectVar>().made_attrs)
    unsupported("del of attribute '" + name + "' of " + describe(*obj));
  auto& o = obj->as<ObjectVar>();
  PyObject* descr = lookup(Py_TYPE(o.obj.get()), name.c_str());
  if (descr && Py_TYPE(descr)->tp_descr_set)
    unsupported("del of '" + name + "' of a " + Py_TYPE(o.obj.get())->tp_name + ", a data descriptor of its class");
  auto& attrs = *o.made_attrs;
  for (auto it = attrs.begin(); it != attrs.end(); ++it) {
    if (it->first == name) {
      attrs.erase(it);
      return;
    }
  }
  raise(PyExc_AttributeError, "'" + std::string(Py_TYPE(o.obj.get())->tp_name) + "' object has no attribute '" + name + "'");
}

bool Interpreter::enter_python_context(const VarRef& ctx) {
  if (ctx->kind != VarKind::Object || ctx->as<ObjectVar>().opaque || ctx->as<ObjectVar>().dict_owner) return false;
  PyTypeObject* type = Py_TYPE(ctx->as<ObjectVar>().obj.get());
  PyObject* enter = lookup(type, "__enter__");
  PyObject* exit = lookup(type, "__exit__");
  if (!enter || !exit || !PyFunction_Check(enter) || !PyFunction_Check(exit)) return false;
  // What BEFORE_WITH leaves: the bound __exit__ (called when the block ends), then what
  // __enter__ returned.
  push(std::make_shared<BoundMethodVar>(ctx, trace_.constant(PyRef::borrow(exit))));
  push(call(std::make_shared<BoundMethodVar>(ctx, trace_.constant(PyRef::borrow(enter))), {}, {}));
  return true;
}

// Eager builds a fresh layer per call (`loss_fct = CrossEntropyLoss()` in a forward). One built at
// trace time and reused serves every call alike where the layer holds no state a call could change
// or that would differ between two constructions: no parameters (their random init), no buffers, no
// children. Its configuration (reduction, ignore_index) is in its __dict__, fixed by the constant
// arguments. (A program that keeps the layer and compares identities would see one object.)
VarRef Interpreter::construct_stateless_module(PyObject* cls, std::vector<VarRef>& args, Kwargs& kwargs) {
  const std::string what = std::string("constructing a ") + reinterpret_cast<PyTypeObject*>(cls)->tp_name + " module";
  VarRef m = constant_call(cls, args, kwargs);
  if (!m) unsupported(what + " from arguments that are not constants");
  PyObject* obj = Trace::as_constant(*m);
  for (const char* state : {"_parameters", "_buffers", "_modules"}) {
    // A None entry (CrossEntropyLoss's `weight` buffer without weights) holds nothing.
    PyRef d = PyRef::steal(PyObject_GetAttrString(obj, state));
    if (!d || !PyDict_Check(d.get())) throw PythonError();
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d.get(), &pos, &k, &v))
      if (v != Py_None) unsupported(what + " that holds " + std::string(state + 1) + " inside compiled code");
  }
  trace_.built_modules.push_back(PyRef::borrow(obj));
  return m;
}

}  // namespace ember::frontend
