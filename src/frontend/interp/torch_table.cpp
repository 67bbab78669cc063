// Reading the torch table from Python, and the memoized classification of callables.
#include "frontend/interp/torch_table.h"

#include <stdexcept>

#include "frontend/interp/trace.h"

namespace ember::frontend {

namespace {

PyRef field(PyObject* table, const char* name) {
  PyRef v = PyRef::steal(PyObject_GetAttrString(table, name));
  if (!v) {
    PyErr_Clear();
    throw std::runtime_error(std::string("ember torch table has no field '") + name + "'");
  }
  return v;
}

}  // namespace

TorchTable TorchTable::from_python(PyObject* py) {
  TorchTable t;
  t.torch = field(py, "torch");
  t.tensor_type = field(py, "tensor_type");
  t.module_type = field(py, "module_type");
  t.sequential_type = field(py, "sequential_type");
  t.size_type = field(py, "size_type");
  t.dtype_type = field(py, "dtype_type");
  t.device_type = field(py, "device_type");
  t.no_grad_type = field(py, "no_grad_type");
  t.set_grad_enabled_type = field(py, "set_grad_enabled_type");
  t.set_grad_enabled_fn = field(py, "set_grad_enabled_fn");
  t.grad_mode_exit_type = field(py, "grad_mode_exit_type");
  t.tensor_to = field(py, "tensor_to");
  t.tensor_items = field(py, "tensor_items");
  t.autocast_policy_fn = field(py, "autocast_policy");
  t.autocast_arguments = field(py, "autocast_arguments");
  t.autocast_exit_type = field(py, "autocast_exit_type");
  t.autocast_replay = field(py, "autocast_replay");
  t.autocast_suspend = field(py, "autocast_suspend");
  t.autocast_resume = field(py, "autocast_resume");
  t.environ = field(py, "environ");
  t.inplace_callables = field(py, "inplace_callables");
  t.qualname = field(py, "qualname");
  t.classify_fn = field(py, "classify");
  t.make_meta = field(py, "make_meta");
  t.resolve = field(py, "resolve");
  PyRef op_callables = field(py, "op_callables");  // dict: op name -> callable
  for (size_t i = 0; i <= static_cast<size_t>(ir::Op::TorchCall); ++i) {
    auto op = static_cast<ir::Op>(i);
    if (op == ir::Op::TorchCall) {
      t.op_callables.emplace_back();
      continue;
    }
    PyObject* c = PyDict_GetItemString(op_callables.get(), ir::op_info(op).name);
    if (!c) throw std::runtime_error(std::string("ember torch table has no callable for op '") + ir::op_info(op).name + "'");
    t.op_callables.push_back(PyRef::borrow(c));
  }
  for (int i = 0; i <= static_cast<int>(ir::DType::Float8E5M2); ++i) {
    const char* name = ir::dtype_torch_name(static_cast<ir::DType>(i));
    PyObject* d = PyObject_GetAttrString(t.torch.get(), name);
    if (!d) {
      PyErr_Clear();
      t.dtype_objects_.emplace_back();
      continue;
    }
    t.dtype_objects_.push_back(PyRef::steal(d));
  }
  return t;
}

PyObject* TorchTable::dtype_object(ir::DType dt) const { return dtype_objects_.at(static_cast<size_t>(dt)).get(); }

PyRef TorchTable::literal_object(const ir::Literal& literal) const {
  struct Visitor {
    const TorchTable& t;
    PyRef operator()(const ir::NoneLiteral&) const { return PyRef::borrow(Py_None); }
    PyRef operator()(bool b) const { return PyRef::borrow(b ? Py_True : Py_False); }
    PyRef operator()(int64_t i) const { return PyRef::steal(PyLong_FromLongLong(i)); }
    PyRef operator()(double d) const { return PyRef::steal(PyFloat_FromDouble(d)); }
    PyRef operator()(const std::string& s) const { return PyRef::steal(PyUnicode_FromStringAndSize(s.data(), s.size())); }
    PyRef operator()(ir::DType dt) const { return PyRef::borrow(t.dtype_object(dt)); }
    PyRef operator()(const ir::Device& d) const {
      PyRef s = PyRef::steal(PyUnicode_FromString(d.str().c_str()));
      return PyRef::steal(PyObject_CallOneArg(t.device_type.get(), s.get()));
    }
    PyRef operator()(const ir::Slice& sl) const {
      auto part = [](const std::optional<int64_t>& v) {
        return v ? PyRef::steal(PyLong_FromLongLong(*v)) : PyRef::borrow(Py_None);
      };
      PyRef a = part(sl.start), b = part(sl.stop), c = part(sl.step);
      return PyRef::steal(PySlice_New(a.get(), b.get(), c.get()));
    }
    PyRef operator()(const ir::Ellipsis&) const { return PyRef::borrow(Py_Ellipsis); }
    PyRef operator()(const sym::Expr& e) const {
      throw std::invalid_argument("the symbolic integer " + e.str() + " has no value until the graph's symbols are bound");
    }
  };
  PyRef r = std::visit(Visitor{*this}, literal);
  if (!r) throw PythonError();
  return r;
}

const std::string& TorchTable::name_of(PyObject* fn) const {
  auto it = names_.find(fn);
  if (it != names_.end()) return it->second.second;
  PyRef r = PyRef::steal(PyObject_CallOneArg(qualname.get(), fn));
  if (!r) throw PythonError();
  const char* s = PyUnicode_AsUTF8(r.get());
  if (!s) throw PythonError();
  return names_.emplace(fn, std::make_pair(PyRef::borrow(fn), std::string(s))).first->second.second;
}

const CallableKind& TorchTable::classify(PyObject* fn) const {
  auto it = kinds_.find(fn);
  if (it != kinds_.end()) return it->second.second;
  PyRef r = PyRef::steal(PyObject_CallOneArg(classify_fn.get(), fn));
  if (!r) throw PythonError();
  if (!PyTuple_Check(r.get()) || PyTuple_GET_SIZE(r.get()) != 2) throw std::runtime_error("classify() must return a pair");
  std::string kind = PyUnicode_AsUTF8(PyTuple_GET_ITEM(r.get(), 0));
  PyObject* detail = PyTuple_GET_ITEM(r.get(), 1);
  CallableKind k;
  static const std::pair<const char*, CallableKind::Kind> kNames[] = {
      {"core", CallableKind::CoreOp},       {"torch", CallableKind::TorchOp},
      {"query", CallableKind::Query},       {"factory", CallableKind::Factory},
      {"pure", CallableKind::Pure},         {"builtin", CallableKind::Builtin},
      {"operator", CallableKind::Operator}, {"inline", CallableKind::Inline},
      {"grad_mode", CallableKind::GradMode}, {"is_grad_enabled", CallableKind::IsGradEnabled},
      {"constant", CallableKind::Constant}, {"unsupported", CallableKind::Unsupported},
      {"module_method", CallableKind::ModuleMethod}, {"signature", CallableKind::Signature},
      {"null_context", CallableKind::NullContext}, {"construct", CallableKind::Construct},
      {"autocast", CallableKind::Autocast}, {"autocast_query", CallableKind::AutocastQuery},
      {"assert", CallableKind::Assert},     {"check", CallableKind::Check},
      {"autograd_function_apply", CallableKind::AutogradFunctionApply},
      {"lru_cache", CallableKind::LruCache},
      {"dataclass_fields", CallableKind::DataclassFields},
      {"stateless_module", CallableKind::StatelessModule},
  };
  bool found = false;
  for (auto& [n, kk] : kNames) {
    if (kind == n) {
      k.kind = kk;
      found = true;
    }
  }
  if (!found) throw std::runtime_error("classify() returned an unknown kind '" + kind + "'");
  if (k.kind == CallableKind::Constant || k.kind == CallableKind::Check) {
    k.constant = PyRef::borrow(detail);
  } else if (PyUnicode_Check(detail)) {
    k.detail = PyUnicode_AsUTF8(detail);
  }
  if (k.kind == CallableKind::CoreOp) {
    auto op = ir::op_from_name(k.detail);
    if (!op) throw std::runtime_error("classify() named an unknown core op '" + k.detail + "'");
    k.op = *op;
  }
  return kinds_.emplace(fn, std::make_pair(PyRef::borrow(fn), std::move(k))).first->second.second;
}

const TorchTable::AutocastPolicy& TorchTable::autocast_policy(PyObject* fn, const std::string& device_type) const {
  auto key = std::make_pair(fn, device_type);
  auto it = autocast_policies_.find(key);
  if (it != autocast_policies_.end()) return it->second.second;
  PyRef r = PyRef::steal(PyObject_CallFunction(autocast_policy_fn.get(), "Os", fn, device_type.c_str()));
  if (!r) throw PythonError();
  if (!PyTuple_Check(r.get()) || PyTuple_GET_SIZE(r.get()) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(r.get(), 0)) ||
      !PyUnicode_Check(PyTuple_GET_ITEM(r.get(), 1)))
    throw std::runtime_error("autocast policy() must return a pair of str");
  std::string kind = PyUnicode_AsUTF8(PyTuple_GET_ITEM(r.get(), 0));
  static const std::pair<const char*, AutocastPolicy::Kind> kNames[] = {
      {"lower", AutocastPolicy::Lower},     {"fp32", AutocastPolicy::Fp32},
      {"promote", AutocastPolicy::Promote}, {"fp32_opt_dtype", AutocastPolicy::Fp32OptDType},
      {"none", AutocastPolicy::None},       {"unknown", AutocastPolicy::Unknown},
  };
  AutocastPolicy p;
  bool found = false;
  for (auto& [n, k] : kNames) {
    if (kind == n) {
      p.kind = k;
      found = true;
    }
  }
  if (!found) throw std::runtime_error("autocast policy() returned an unknown policy '" + kind + "'");
  p.detail = PyUnicode_AsUTF8(PyTuple_GET_ITEM(r.get(), 1));
  return autocast_policies_.emplace(key, std::make_pair(PyRef::borrow(fn), std::move(p))).first->second.second;
}

}  // namespace ember::frontend
