// What Ember reads from torch without linking it: the tensor type, DLPack's C exchange table,
// the global-state callables, and tensor metadata in a form that costs no allocation per read.
// The guards read tensors and global state through it; the runtime reads DLPack tensors and
// dtype objects.
//
// The bridge is built lazily, under the GIL, the first time it is asked for while "torch" is in
// sys.modules (Ember never imports torch itself); until then every query answers "no torch".
// Once built it lives for the process (a cache, not configuration).
//
// Reading a tensor: DLPack's `dltensor_from_py_object_no_sync` fills a DLTensor with borrowed
// pointers to torch's own size and stride arrays (no Python call). What DLPack does not carry is
// read through attributes: requires_grad, and the negative / conjugate view bits, which DLPack
// ignores but which change what the memory means (a tensor with either bit is refused, so a
// graph traced on plain tensors is never reused for one). When DLPack is missing or fails
// (tensors without storage, meta tensors, sparse layouts), everything is read through attributes.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/types.h"
#include "pybridge/dlpack_abi.h"

namespace ember::pybridge {

using ir::kDTypeCount;

// A device as two integers: an id for the device type name ("cpu" is 0, "cuda" is 1, others get
// ids on first sight) and torch's index (-1 when the device has none).
struct DeviceKey {
  int32_t type = 0;
  int32_t index = -1;
  bool operator==(const DeviceKey& o) const { return type == o.type && index == o.index; }
  bool operator!=(const DeviceKey& o) const { return !(*this == o); }
};
DeviceKey device_key(const ir::Device& device);
ir::Device device_of(DeviceKey key);

struct TorchBridge {
  PyObject* torch = nullptr;
  PyTypeObject* tensor_type = nullptr;  // torch.Tensor
  const dlpack::ExchangeApi* dlpack = nullptr;  // nullptr: read tensors through attributes
  PyObject* is_grad_enabled = nullptr;
  PyObject* get_default_dtype = nullptr;
  PyObject* is_any_autocast_enabled = nullptr;  // torch._C._is_any_autocast_enabled; null if missing
  // torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type) (torch >= 2.4),
  // torch.is_autocast_cache_enabled(); null if missing
  PyObject* is_autocast_enabled = nullptr;
  PyObject* get_autocast_dtype = nullptr;
  PyObject* is_autocast_cache_enabled = nullptr;
  PyObject* are_deterministic_algorithms_enabled = nullptr;  // torch.are_deterministic_algorithms_enabled
  PyObject* dtypes[kDTypeCount] = {};  // torch.float32, ...; nullptr where this torch lacks one
  PyTypeObject* dtype_type = nullptr;   // torch.dtype
  PyTypeObject* device_type = nullptr;  // torch.device
  PyTypeObject* size_type = nullptr;    // torch.Size (a tuple of ints); null if missing
  PyObject* strided = nullptr;          // torch.strided
  // torch's C implementations of Tensor.requires_grad and Tensor.is_neg()/is_conj(), called
  // directly (skipping attribute lookup, ~15% of a tensor check). Null where torch does not
  // define them as a getset / METH_NOARGS method of a base of torch.Tensor; then the attribute
  // is looked up normally.
  PyGetSetDef* requires_grad_getset = nullptr;
  PyCFunction is_neg = nullptr;
  PyCFunction is_conj = nullptr;
};
// nullptr while torch is not imported (no error set).
const TorchBridge* torch_bridge();

// Maps a torch.dtype object to Ember's dtype; false for dtypes Ember does not model.
bool dtype_from_object(const TorchBridge& bridge, PyObject* dtype_obj, ir::DType* out);

// Tensor metadata without allocation: `sizes`/`strides` point into the tensor (DLPack) or into
// the inline buffer (attribute reads), valid until the tensor changes or this object dies.
struct RawTensorMeta {
  static constexpr int kInlineDims = 8;
  ir::DType dtype = ir::DType::Float32;
  DeviceKey device;
  int ndim = 0;
  const int64_t* sizes = nullptr;
  const int64_t* strides = nullptr;
  bool requires_grad = false;
  // The address of element 0 where the read went through DLPack (which carries it); null otherwise:
  // data_pointer() then answers.
  void* data = nullptr;

  RawTensorMeta() = default;
  RawTensorMeta(const RawTensorMeta&) = delete;
  RawTensorMeta& operator=(const RawTensorMeta&) = delete;

  int64_t inline_dims[2 * kInlineDims];
  std::vector<int64_t> heap_dims;  // used only past kInlineDims dimensions
};

enum class TensorReadPath : uint8_t { Auto, Attributes };
// False (no Python error left set) for non-tensors and tensors Ember cannot describe: sparse or
// nested layouts, dtypes outside ir::DType, negative or conjugate views.
bool read_raw_tensor_meta(PyObject* obj, RawTensorMeta* out, TensorReadPath path);

// What one call has read of its inputs' metadata, so that each input goes through torch's DLPack
// exchange at most once a call (the exchange is about half the host time of a call over hundreds of
// tensors, which read each tensor three times before: its guard, the aliased-inputs check, its
// binding). The guards record the reads of the inputs they capture (GuardSet::check); a runner reads
// the rest through get(). Input k must be the same object, unchanged, at every use: a call's reads
// live from its guards to the end of its graph's run, when no Python code of the user's runs.
class TensorReads {
 public:
  explicit TensorReads(size_t count) : metas_(new RawTensorMeta[count]), kept_(new bool[count]()) {}
  // Input k's metadata (read_raw_tensor_meta's, TensorReadPath::Auto): the kept read, else read now
  // and kept. Null (no Python error set) for what read_raw_tensor_meta refuses.
  const RawTensorMeta* get(size_t k, PyObject* tensor) {
    if (!kept_[k]) {
      if (!read_raw_tensor_meta(tensor, &metas_[k], TensorReadPath::Auto)) return nullptr;
      kept_[k] = true;
    }
    return &metas_[k];
  }
  // For a reader that reads input k itself (the guards): read into slot(k), then keep(k) on success.
  RawTensorMeta* slot(size_t k) { return &metas_[k]; }
  void keep(size_t k) { kept_[k] = true; }

 private:
  std::unique_ptr<RawTensorMeta[]> metas_;
  std::unique_ptr<bool[]> kept_;  // not vector<bool>: its indexing was 1.5% of a 304-input call
};

// The address of a tensor's element 0 (through DLPack's exchange table when torch has one, else
// data_ptr()). False with a Python error set.
bool data_pointer(PyObject* tensor, void** out);
// The same for a tensor whose metadata `meta` was just read: its DLPack address when the read kept
// one (no second call into torch).
bool data_pointer(PyObject* tensor, const RawTensorMeta& meta, void** out);

// Torch's current stream on CUDA device `index` (a CUstream; null is the legacy default stream),
// through DLPack's exchange table when torch has one (no Python call), else
// torch.cuda.current_stream(index).cuda_stream. False with a Python error set on failure.
bool current_cuda_stream(int index, void** out);

// Grad mode and default dtype as torch reports them now; torch's defaults when torch is not
// imported. False with a Python error set if torch's callables raised.
bool read_grad_enabled(bool* out);
bool read_default_dtype(ir::DType* out);
// Whether torch.autocast is active for any device (false where this torch cannot say).
bool read_autocast(bool* out);
// torch.autocast's state for one device type ("cpu", "cuda"): enabled and its lower-precision
// dtype; and the cast-cache flag. False with a Python error set where torch raised or lacks the
// per-device functions (torch < 2.4).
bool read_autocast_device(const char* device_type, bool* enabled, ir::DType* dtype);
bool read_autocast_cache(bool* out);
// Whether torch.use_deterministic_algorithms is on (false when torch is not imported). False with a
// Python error set where torch raised.
bool read_deterministic(bool* out);

}  // namespace ember::pybridge
