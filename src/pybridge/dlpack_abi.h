// Ember's own declarations of the DLPack ABI (https://dmlc.github.io/dlpack/latest/), the part
// Ember uses: DLTensor and the C exchange table that torch >= 2.11 publishes as the PyCapsule
// `torch.Tensor.__dlpack_c_exchange_api__` (capsule name "dlpack_exchange_api").
//
// Why our own: the build must not need torch (bytecode tests build on interpreters without it),
// so torch's copy of dlpack.h is never included. Only the memory layout matters; names are
// Ember's. The layouts follow the DLPack 1.2 specification; the static_asserts below pin the
// x86-64/aarch64 (LP64) sizes and offsets, which a change of DLPack major version would break.
// Minor versions only append enumerators and table entries, so a table whose major version is 1
// and minor version >= 2 is read through this struct.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::pybridge::dlpack {

constexpr uint32_t kMajorVersion = 1;
constexpr uint32_t kMinMinorVersion = 2;  // the exchange table appeared in 1.2
constexpr const char* kExchangeApiCapsuleName = "dlpack_exchange_api";

struct Version {
  uint32_t major;
  uint32_t minor;
};

// DLDeviceType: an int32 on the wire. Only the values Ember maps are named.
enum DeviceType : int32_t {
  kCPU = 1,
  kCUDA = 2,
  kCUDAHost = 3,
  kROCM = 10,  // torch's ROCm builds report their "cuda" devices as ROCm
};

struct Device {
  int32_t device_type;  // a DeviceType value
  int32_t device_id;
};

// DLDataTypeCode: a uint8 in DataType. Only the values Ember maps are named.
enum TypeCode : uint8_t {
  kInt = 0,
  kUInt = 1,
  kFloat = 2,
  kBfloat = 4,
  kComplex = 5,
  kBool = 6,
  kFloat8E4M3FN = 10,
  kFloat8E5M2 = 12,
};

struct DataType {
  uint8_t code;  // a TypeCode value
  uint8_t bits;
  uint16_t lanes;
};

// DLTensor: a borrowed description; shape and strides are in elements and, since DLPack 1.2,
// strides are never NULL when ndim > 0.
struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};

struct ManagedTensorVersioned {
  Version version;
  void* manager_ctx;
  void (*deleter)(ManagedTensorVersioned* self);
  uint64_t flags;
  Tensor dl_tensor;
};

struct ExchangeApiHeader {
  Version version;
  ExchangeApiHeader* prev_api;  // an older table of the same producer, or NULL
};

// DLPackExchangeAPI. Every function returns 0 on success and -1 with a Python error set on
// failure; the caller holds the GIL. The `_no_sync` functions do no stream synchronisation.
struct ExchangeApi {
  ExchangeApiHeader header;
  int (*managed_tensor_allocator)(Tensor* prototype, ManagedTensorVersioned** out, void* error_ctx,
                                  void (*set_error)(void* error_ctx, const char* kind,
                                                    const char* message));
  int (*managed_tensor_from_py_object_no_sync)(void* py_object, ManagedTensorVersioned** out);
  int (*managed_tensor_to_py_object_no_sync)(ManagedTensorVersioned* tensor, void** out_py_object);
  // Fills `out` without allocating; valid only while `py_object` is alive and unchanged. May be
  // NULL when the producer does not provide it.
  int (*dltensor_from_py_object_no_sync)(void* py_object, Tensor* out);
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void** out_stream);
};

static_assert(sizeof(Device) == 8, "DLDevice layout");
static_assert(sizeof(DataType) == 4, "DLDataType layout");
static_assert(offsetof(Tensor, device) == 8 && offsetof(Tensor, ndim) == 16 &&
                  offsetof(Tensor, dtype) == 20 && offsetof(Tensor, shape) == 24 &&
                  offsetof(Tensor, strides) == 32 && offsetof(Tensor, byte_offset) == 40 &&
                  sizeof(Tensor) == 48,
              "DLTensor layout");
static_assert(offsetof(ManagedTensorVersioned, flags) == 24 &&
                  offsetof(ManagedTensorVersioned, dl_tensor) == 32,
              "DLManagedTensorVersioned layout");
static_assert(sizeof(ExchangeApiHeader) == 16, "DLPackExchangeAPIHeader layout");
static_assert(offsetof(ExchangeApi, dltensor_from_py_object_no_sync) == 40 &&
                  sizeof(ExchangeApi) == 56,
              "DLPackExchangeAPI layout");

}  // namespace ember::pybridge::dlpack
