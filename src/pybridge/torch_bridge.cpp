// The lazily built view of torch that the guards and the runtime use, and tensor metadata reads
// (see torch_bridge.h).
#include "pybridge/torch_bridge.h"

#include "pybridge/pyref.h"
#include "support/stats.h"

namespace ember::pybridge {

namespace {

// Attribute names read on the tensor paths; interned once for the process.
struct TensorNames {
  PyObject* dlpack_capsule = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
  PyObject* requires_grad = PyUnicode_InternFromString("requires_grad");
  PyObject* is_neg = PyUnicode_InternFromString("is_neg");
  PyObject* is_conj = PyUnicode_InternFromString("is_conj");
  PyObject* dtype = PyUnicode_InternFromString("dtype");
  PyObject* device = PyUnicode_InternFromString("device");
  PyObject* type = PyUnicode_InternFromString("type");
  PyObject* index = PyUnicode_InternFromString("index");
  PyObject* shape = PyUnicode_InternFromString("shape");
  PyObject* stride = PyUnicode_InternFromString("stride");
  PyObject* layout = PyUnicode_InternFromString("layout");
  PyObject* is_nested = PyUnicode_InternFromString("is_nested");
};
const TensorNames& tensor_names() {
  static const TensorNames names;
  return names;
}

// Device type names by id; grows when a new device type is first seen (under the GIL).
std::vector<std::string>& device_type_names() {
  static std::vector<std::string> names = {"cpu", "cuda"};
  return names;
}
int32_t device_type_id(std::string_view name) {
  std::vector<std::string>& names = device_type_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<int32_t>(i);
  names.emplace_back(name);
  return static_cast<int32_t>(names.size() - 1);
}
constexpr int32_t kCpuDevice = 0;
constexpr int32_t kCudaDevice = 1;

const dlpack::ExchangeApi* find_exchange_api(PyTypeObject* tensor_type) {
  PyObject* capsule = PyObject_GetAttr(reinterpret_cast<PyObject*>(tensor_type), tensor_names().dlpack_capsule);
  if (capsule == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  const dlpack::ExchangeApi* api = nullptr;
  if (PyCapsule_IsValid(capsule, dlpack::kExchangeApiCapsuleName)) {
    auto* header = static_cast<const dlpack::ExchangeApiHeader*>(
        PyCapsule_GetPointer(capsule, dlpack::kExchangeApiCapsuleName));
    // A newer major version keeps older tables reachable through prev_api.
    while (header != nullptr && header->version.major > dlpack::kMajorVersion) header = header->prev_api;
    if (header != nullptr && header->version.major == dlpack::kMajorVersion &&
        header->version.minor >= dlpack::kMinMinorVersion) {
      api = reinterpret_cast<const dlpack::ExchangeApi*>(header);
      if (api->dltensor_from_py_object_no_sync == nullptr) api = nullptr;
    }
  }
  PyErr_Clear();
  Py_DECREF(capsule);
  return api;
}

// The descriptor `type.name` when it is of `descr_type` and defined on a base of `type`; the
// reference is kept for the life of the process so its C function stays valid. Else nullptr.
PyObject* c_descriptor(PyTypeObject* type, const char* name, PyTypeObject* descr_type) {
  PyObject* d = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), name);
  if (d != nullptr && Py_IS_TYPE(d, descr_type) && PyType_IsSubtype(type, reinterpret_cast<PyDescrObject*>(d)->d_type)) {
    return d;
  }
  PyErr_Clear();
  Py_XDECREF(d);
  return nullptr;
}

PyGetSetDef* c_getter(PyTypeObject* type, const char* name) {
  PyObject* d = c_descriptor(type, name, &PyGetSetDescr_Type);
  return d ? reinterpret_cast<PyGetSetDescrObject*>(d)->d_getset : nullptr;
}

PyCFunction c_method_noargs(PyTypeObject* type, const char* name) {
  PyObject* d = c_descriptor(type, name, &PyMethodDescr_Type);
  if (d == nullptr) return nullptr;
  PyMethodDef* def = reinterpret_cast<PyMethodDescrObject*>(d)->d_method;
  constexpr int kCallFlags = METH_VARARGS | METH_KEYWORDS | METH_NOARGS | METH_O | METH_FASTCALL;
  return (def->ml_flags & kCallFlags) == METH_NOARGS ? def->ml_meth : nullptr;
}

// Builds the bridge from an imported torch; nullptr (no error set) if torch is only partly
// initialised, so a later call tries again.
TorchBridge* build_bridge(PyObject* torch) {
  auto* b = new TorchBridge();
  b->torch = torch;
  PyObject* tensor = PyObject_GetAttrString(torch, "Tensor");
  PyObject* dtype_type = PyObject_GetAttrString(torch, "dtype");
  PyObject* device_type = PyObject_GetAttrString(torch, "device");
  b->is_grad_enabled = PyObject_GetAttrString(torch, "is_grad_enabled");
  b->get_default_dtype = PyObject_GetAttrString(torch, "get_default_dtype");
  b->strided = PyObject_GetAttrString(torch, "strided");
  if (PyObject* size = PyObject_GetAttrString(torch, "Size")) {
    if (PyType_Check(size)) b->size_type = reinterpret_cast<PyTypeObject*>(size);  // kept for the process
  }
  if (PyObject* c = PyObject_GetAttrString(torch, "_C")) {
    b->is_any_autocast_enabled = PyObject_GetAttrString(c, "_is_any_autocast_enabled");
    Py_DECREF(c);
  }
  PyErr_Clear();
  b->is_autocast_enabled = PyObject_GetAttrString(torch, "is_autocast_enabled");
  b->get_autocast_dtype = PyObject_GetAttrString(torch, "get_autocast_dtype");
  b->is_autocast_cache_enabled = PyObject_GetAttrString(torch, "is_autocast_cache_enabled");
  b->are_deterministic_algorithms_enabled = PyObject_GetAttrString(torch, "are_deterministic_algorithms_enabled");
  PyErr_Clear();
  bool ok = tensor && PyType_Check(tensor) && dtype_type && PyType_Check(dtype_type) && device_type &&
            PyType_Check(device_type) && b->is_grad_enabled && b->get_default_dtype && b->strided;
  if (ok) {
    b->tensor_type = reinterpret_cast<PyTypeObject*>(tensor);
    b->dtype_type = reinterpret_cast<PyTypeObject*>(dtype_type);
    b->device_type = reinterpret_cast<PyTypeObject*>(device_type);
    for (int i = 0; i < kDTypeCount; ++i) {
      PyObject* dt = PyObject_GetAttrString(torch, ir::dtype_torch_name(static_cast<ir::DType>(i)));
      if (dt == nullptr) PyErr_Clear();  // an older torch without this dtype
      b->dtypes[i] = dt;
    }
    b->dlpack = find_exchange_api(b->tensor_type);
    b->requires_grad_getset = c_getter(b->tensor_type, "requires_grad");
    b->is_neg = c_method_noargs(b->tensor_type, "is_neg");
    b->is_conj = c_method_noargs(b->tensor_type, "is_conj");
  }
  PyErr_Clear();
  if (!ok) {
    Py_XDECREF(tensor);
    Py_XDECREF(dtype_type);
    Py_XDECREF(device_type);
    Py_XDECREF(b->is_grad_enabled);
    Py_XDECREF(b->get_default_dtype);
    Py_XDECREF(b->is_any_autocast_enabled);
    Py_XDECREF(b->is_autocast_enabled);
    Py_XDECREF(b->get_autocast_dtype);
    Py_XDECREF(b->is_autocast_cache_enabled);
    Py_XDECREF(b->are_deterministic_algorithms_enabled);
    Py_XDECREF(b->strided);
    Py_DECREF(torch);
    delete b;
    return nullptr;
  }
  return b;
}

bool map_dlpack_dtype(const dlpack::DataType& t, ir::DType* out) {
  if (t.lanes != 1) return false;
  switch (t.code) {
    case dlpack::kBool:
      if (t.bits != 8) return false;
      *out = ir::DType::Bool;
      return true;
    case dlpack::kUInt:
      if (t.bits != 8) return false;  // torch's uint16/32/64 are not modelled
      *out = ir::DType::UInt8;
      return true;
    case dlpack::kInt:
      switch (t.bits) {
        case 8: *out = ir::DType::Int8; return true;
        case 16: *out = ir::DType::Int16; return true;
        case 32: *out = ir::DType::Int32; return true;
        case 64: *out = ir::DType::Int64; return true;
      }
      return false;
    case dlpack::kFloat:
      switch (t.bits) {
        case 16: *out = ir::DType::Float16; return true;
        case 32: *out = ir::DType::Float32; return true;
        case 64: *out = ir::DType::Float64; return true;
      }
      return false;
    case dlpack::kBfloat:
      if (t.bits != 16) return false;
      *out = ir::DType::BFloat16;
      return true;
    case dlpack::kComplex:
      switch (t.bits) {
        case 64: *out = ir::DType::Complex64; return true;
        case 128: *out = ir::DType::Complex128; return true;
      }
      return false;  // complex32 is not modelled
    case dlpack::kFloat8E4M3FN:
      if (t.bits != 8) return false;
      *out = ir::DType::Float8E4M3FN;
      return true;
    case dlpack::kFloat8E5M2:
      if (t.bits != 8) return false;
      *out = ir::DType::Float8E5M2;
      return true;
  }
  return false;  // an open set on the wire: other codes are dtypes Ember does not model
}

// A new reference to the truth value, or -1 with an error set: 0/1.
int truth_of(PyObject* result) {
  if (result == nullptr) return -1;
  int truth = result == Py_True ? 1 : result == Py_False ? 0 : PyObject_IsTrue(result);
  Py_DECREF(result);
  return truth;
}

// obj.<method>(), through torch's C function when the bridge has it. -1 on error (set).
int call_predicate(PyObject* obj, PyCFunction direct, PyObject* method) {
  if (direct != nullptr) return truth_of(direct(obj, nullptr));
  PyObject* args[] = {obj};
  return truth_of(PyObject_VectorcallMethod(method, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
}

int get_bool_attr(PyObject* obj, PyObject* name) { return truth_of(PyObject_GetAttr(obj, name)); }

// requires_grad and the view bits DLPack does not report. False when the tensor must be refused
// (or a read failed, error left set for the caller to clear).
bool read_autograd_and_view_bits(const TorchBridge& bridge, PyObject* obj, RawTensorMeta* out) {
  const TensorNames& n = tensor_names();
  PyGetSetDef* getset = bridge.requires_grad_getset;
  int requires_grad = getset ? truth_of(getset->get(obj, getset->closure)) : get_bool_attr(obj, n.requires_grad);
  if (requires_grad < 0) return false;
  out->requires_grad = requires_grad == 1;
  if (call_predicate(obj, bridge.is_neg, n.is_neg) != 0) return false;
  // Only complex tensors can carry the conjugate bit (conj() of a real tensor is itself).
  if (is_complex(out->dtype) && call_predicate(obj, bridge.is_conj, n.is_conj) != 0) return false;
  return true;
}

int64_t* dims_storage(RawTensorMeta* out, int ndim) {
  if (ndim <= RawTensorMeta::kInlineDims) return out->inline_dims;
  out->heap_dims.resize(2 * static_cast<size_t>(ndim));
  return out->heap_dims.data();
}

// Fills `dst` from a tuple of ints; false with an error set on a non-int.
bool ints_from_tuple(PyObject* tuple, int64_t* dst) {
  Py_ssize_t n = PyTuple_GET_SIZE(tuple);
  for (Py_ssize_t i = 0; i < n; ++i) {
    long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
    if (v == -1 && PyErr_Occurred()) return false;
    dst[i] = v;
  }
  return true;
}

bool read_device_through_attributes(PyObject* device, DeviceKey* out) {
  const TensorNames& n = tensor_names();
  PyObject* type = PyObject_GetAttr(device, n.type);
  if (type == nullptr) return false;
  Py_ssize_t len = 0;
  const char* text = PyUnicode_Check(type) ? PyUnicode_AsUTF8AndSize(type, &len) : nullptr;
  if (text != nullptr) out->type = device_type_id(std::string_view(text, static_cast<size_t>(len)));
  Py_DECREF(type);
  if (text == nullptr) return false;
  PyObject* index = PyObject_GetAttr(device, n.index);
  if (index == nullptr) return false;
  out->index = -1;
  if (index != Py_None) {
    long v = PyLong_AsLong(index);
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(index);
      return false;
    }
    out->index = static_cast<int32_t>(v);
  }
  Py_DECREF(index);
  return true;
}

// Everything through Python attributes: the reference path, and the only one for tensors DLPack
// cannot describe. Leaves an error set on failure for the caller to clear.
bool read_through_attributes(const TorchBridge& bridge, PyObject* obj, RawTensorMeta* out) {
  const TensorNames& n = tensor_names();
  PyObject* layout = PyObject_GetAttr(obj, n.layout);
  if (layout == nullptr) return false;
  bool strided = layout == bridge.strided;
  Py_DECREF(layout);
  if (!strided) return false;
  if (get_bool_attr(obj, n.is_nested) != 0) return false;

  PyObject* dtype = PyObject_GetAttr(obj, n.dtype);
  if (dtype == nullptr) return false;
  bool known = dtype_from_object(bridge, dtype, &out->dtype);
  Py_DECREF(dtype);
  if (!known) return false;

  PyObject* device = PyObject_GetAttr(obj, n.device);
  if (device == nullptr) return false;
  bool device_ok = read_device_through_attributes(device, &out->device);
  Py_DECREF(device);
  if (!device_ok) return false;

  PyObject* shape = PyObject_GetAttr(obj, n.shape);
  if (shape == nullptr) return false;
  PyObject* args[] = {obj};
  PyObject* stride = PyObject_VectorcallMethod(n.stride, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
  bool ok = stride != nullptr && PyTuple_Check(shape) && PyTuple_Check(stride) &&
            PyTuple_GET_SIZE(shape) == PyTuple_GET_SIZE(stride);
  if (ok) {
    int ndim = static_cast<int>(PyTuple_GET_SIZE(shape));
    int64_t* dims = dims_storage(out, ndim);
    ok = ints_from_tuple(shape, dims) && ints_from_tuple(stride, dims + ndim);
    out->ndim = ndim;
    out->sizes = dims;
    out->strides = dims + ndim;
  }
  Py_DECREF(shape);
  Py_XDECREF(stride);
  return ok && read_autograd_and_view_bits(bridge, obj, out);
}

enum class DLPackRead : uint8_t { Done, Refused, UseAttributes };

DLPackRead read_through_dlpack(const TorchBridge& bridge, PyObject* obj, RawTensorMeta* out) {
  dlpack::Tensor t;
  if (bridge.dlpack->dltensor_from_py_object_no_sync(obj, &t) != 0) {
    PyErr_Clear();  // no storage, meta device, sparse layout...: attributes can still describe it
    return DLPackRead::UseAttributes;
  }
  if (t.device.device_type == dlpack::kCPU) {
    out->device = DeviceKey{kCpuDevice, -1};
  } else if (t.device.device_type == dlpack::kCUDA || t.device.device_type == dlpack::kROCM) {
    out->device = DeviceKey{kCudaDevice, t.device.device_id};
  } else {
    return DLPackRead::UseAttributes;  // torch's own device name is the reference
  }
  if (!map_dlpack_dtype(t.dtype, &out->dtype)) return DLPackRead::Refused;
  if (t.ndim > 0 && (t.shape == nullptr || t.strides == nullptr)) return DLPackRead::UseAttributes;
  out->ndim = t.ndim;
  out->sizes = t.shape;
  out->strides = t.strides;
  out->data = static_cast<char*>(t.data) + t.byte_offset;
  return read_autograd_and_view_bits(bridge, obj, out) ? DLPackRead::Done : DLPackRead::Refused;
}

}  // namespace

DeviceKey device_key(const ir::Device& device) { return DeviceKey{device_type_id(device.type), device.index}; }

ir::Device device_of(DeviceKey key) {
  ir::Device device;
  device.type = device_type_names()[static_cast<size_t>(key.type)];
  device.index = key.index;
  return device;
}

const TorchBridge* torch_bridge() {
  static TorchBridge* bridge = nullptr;  // built once, under the GIL; never freed
  if (bridge != nullptr) return bridge;
  static PyObject* torch_name = PyUnicode_InternFromString("torch");
  PyObject* torch = PyImport_GetModule(torch_name);
  if (torch == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  bridge = build_bridge(torch);
  return bridge;
}

bool dtype_from_object(const TorchBridge& bridge, PyObject* dtype_obj, ir::DType* out) {
  for (int i = 0; i < kDTypeCount; ++i) {
    if (bridge.dtypes[i] != nullptr && bridge.dtypes[i] == dtype_obj) {
      *out = static_cast<ir::DType>(i);
      return true;
    }
  }
  return false;
}

bool read_raw_tensor_meta(PyObject* obj, RawTensorMeta* out, TensorReadPath path) {
  ++stats().tensor_reads;
  out->data = nullptr;  // set by a DLPack read only
  const TorchBridge* bridge = torch_bridge();
  if (bridge == nullptr || !PyObject_TypeCheck(obj, bridge->tensor_type)) return false;
  if (path == TensorReadPath::Auto && bridge->dlpack != nullptr) {
    switch (read_through_dlpack(*bridge, obj, out)) {
      case DLPackRead::Done: return true;
      case DLPackRead::Refused: PyErr_Clear(); return false;
      case DLPackRead::UseAttributes: break;
    }
  }
  bool ok = read_through_attributes(*bridge, obj, out);
  PyErr_Clear();
  return ok;
}

bool data_pointer(PyObject* tensor, void** out) {
  ++stats().tensor_reads;
  const TorchBridge* bridge = torch_bridge();
  if (bridge != nullptr && bridge->dlpack != nullptr) {
    dlpack::Tensor t;
    if (bridge->dlpack->dltensor_from_py_object_no_sync(tensor, &t) == 0) {
      *out = static_cast<char*>(t.data) + t.byte_offset;
      return true;
    }
    PyErr_Clear();  // tensors DLPack refuses still answer data_ptr()
  }
  PyRef r = PyRef::steal(PyObject_CallMethod(tensor, "data_ptr", nullptr));
  if (!r) return false;
  *out = PyLong_AsVoidPtr(r.get());
  return !PyErr_Occurred();
}

bool data_pointer(PyObject* tensor, const RawTensorMeta& meta, void** out) {
  if (meta.data == nullptr) return data_pointer(tensor, out);
  *out = meta.data;
  return true;
}

bool current_cuda_stream(int index, void** out) {
  const TorchBridge* bridge = torch_bridge();
  if (bridge == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "ember: CUDA streams need torch imported");
    return false;
  }
  if (bridge->dlpack != nullptr && bridge->dlpack->current_work_stream != nullptr &&
      bridge->dlpack->current_work_stream(dlpack::kCUDA, index, out) == 0)
    return true;
  PyErr_Clear();
  PyRef cuda = PyRef::steal(PyObject_GetAttrString(bridge->torch, "cuda"));
  PyRef stream = cuda ? PyRef::steal(PyObject_CallMethod(cuda.get(), "current_stream", "i", index)) : PyRef();
  PyRef handle = stream ? PyRef::steal(PyObject_GetAttrString(stream.get(), "cuda_stream")) : PyRef();
  if (!handle) return false;
  *out = PyLong_AsVoidPtr(handle.get());
  return !PyErr_Occurred();
}

bool read_grad_enabled(bool* out) {
  const TorchBridge* bridge = torch_bridge();
  if (bridge == nullptr) {
    *out = true;
    return true;
  }
  PyObject* result = PyObject_CallNoArgs(bridge->is_grad_enabled);
  if (result == nullptr) return false;
  *out = result == Py_True;
  Py_DECREF(result);
  return true;
}

bool read_default_dtype(ir::DType* out) {
  const TorchBridge* bridge = torch_bridge();
  if (bridge == nullptr) {
    *out = ir::DType::Float32;
    return true;
  }
  PyObject* result = PyObject_CallNoArgs(bridge->get_default_dtype);
  if (result == nullptr) return false;
  bool known = dtype_from_object(*bridge, result, out);
  Py_DECREF(result);
  if (!known) PyErr_SetString(PyExc_RuntimeError, "torch.get_default_dtype() returned a dtype Ember does not model");
  return known;
}

namespace {

// *out = fn() is True; *out keeps its value where this torch has no `fn` (null). False with a
// Python error set when the call raised.
bool read_flag(PyObject* fn, bool* out) {
  if (fn == nullptr) return true;
  PyObject* result = PyObject_CallNoArgs(fn);
  if (result == nullptr) return false;
  *out = result == Py_True;
  Py_DECREF(result);
  return true;
}

}  // namespace

bool read_autocast(bool* out) {
  const TorchBridge* bridge = torch_bridge();
  *out = false;
  return bridge == nullptr || read_flag(bridge->is_any_autocast_enabled, out);
}

bool read_autocast_device(const char* device_type, bool* enabled, ir::DType* dtype) {
  const TorchBridge* bridge = torch_bridge();
  *enabled = false;
  *dtype = std::string_view(device_type) == "cpu" ? ir::DType::BFloat16 : ir::DType::Float16;
  if (bridge == nullptr) return true;
  if (bridge->is_autocast_enabled == nullptr || bridge->get_autocast_dtype == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "this torch has no torch.get_autocast_dtype(device_type) (Ember needs torch >= 2.4)");
    return false;
  }
  PyObject* name = PyUnicode_FromString(device_type);
  if (name == nullptr) return false;
  PyObject* on = PyObject_CallOneArg(bridge->is_autocast_enabled, name);
  PyObject* dt = on ? PyObject_CallOneArg(bridge->get_autocast_dtype, name) : nullptr;
  Py_DECREF(name);
  if (dt == nullptr) {
    Py_XDECREF(on);
    return false;
  }
  *enabled = on == Py_True;
  bool known = dtype_from_object(*bridge, dt, dtype);
  Py_DECREF(on);
  Py_DECREF(dt);
  if (!known) PyErr_SetString(PyExc_RuntimeError, "torch.get_autocast_dtype() returned a dtype Ember does not model");
  return known;
}

bool read_autocast_cache(bool* out) {
  const TorchBridge* bridge = torch_bridge();
  *out = true;
  return bridge == nullptr || read_flag(bridge->is_autocast_cache_enabled, out);
}

bool read_deterministic(bool* out) {
  const TorchBridge* bridge = torch_bridge();
  *out = false;
  return bridge == nullptr || read_flag(bridge->are_deterministic_algorithms_enabled, out);
}

}  // namespace ember::pybridge
