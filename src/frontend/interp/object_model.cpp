// Facts about Python objects and operators that the interpreter's files share.
#include "frontend/interp/object_model.h"

#include <cstring>

#include "pybridge/pyref.h"
#include "frontend/interp/trace.h"

namespace ember::frontend::object_model {

PyObject* operator_module() {
  static PyObject* m = PyImport_ImportModule("operator");
  return m;
}

// operator-module names of binary operators by NB_* number; in-place forms are NB_* + 13.
const char* const kBinary[13] = {"add", "and_", "floordiv", "lshift", "matmul", "mul", "mod",
                                   "or_", "pow", "rshift", "sub", "truediv", "xor"};
const char* const kInplace[13] = {"iadd", "iand", "ifloordiv", "ilshift", "imatmul", "imul", "imod",
                                    "ior", "ipow", "irshift", "isub", "itruediv", "ixor"};
const char* const kCompare[6] = {"lt", "le", "eq", "ne", "gt", "ge"};

// Core ops for `tensor <op> other`, by NB_* number (TorchCall where Python's operator differs).
const ir::Op kBinaryCore[13] = {ir::Op::Add,       ir::Op::BitwiseAnd, ir::Op::FloorDivide, ir::Op::TorchCall,
                                  ir::Op::Matmul,    ir::Op::Mul,        ir::Op::Remainder,   ir::Op::BitwiseOr,
                                  ir::Op::Pow,       ir::Op::TorchCall,  ir::Op::Sub,         ir::Op::Div,
                                  ir::Op::BitwiseXor};
const ir::Op kCompareCore[6] = {ir::Op::Lt, ir::Op::Le, ir::Op::Eq, ir::Op::Ne, ir::Op::Gt, ir::Op::Ge};

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

}  // namespace ember::frontend::object_model
