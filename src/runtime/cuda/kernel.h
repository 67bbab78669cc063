// A Triton binary loaded on CUDA devices, and its launch with Triton's kernel ABI (3.6): the
// signature's parameters in order minus every constexpr, then two trailing pointers,
// global_scratch and profile_scratch (0 when their size is 0).
//
// Needs: the Driver, and the caller on a thread where torch has made the device's primary context
// current (or none current: the primary context is retained and made current, as Triton does).
// Guarantees: the module is loaded once per device, lazily, thread-safe; dynamic shared memory above
// 48 KiB is opted into (cuFuncSetAttribute) up to the device's limit, and a kernel needing more is an
// error naming both sizes; arguments are packed by their Triton type (pointer 8 bytes, i64 8, i32 4,
// fp32 4, fp16/bf16 2, i1 1); a launch with an empty grid does nothing; the stream is the caller's
// (torch's current stream), never synchronized.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/cuda/driver.h"
#include "runtime/triton_build.h"

namespace ember::runtime::cuda {

// One argument as the runtime knows it before packing: a device pointer or an integer/float value.
union ArgValue {
  uint64_t pointer;
  int64_t integer;
  double floating;
};

class Kernel {
 public:
  explicit Kernel(TritonBinary binary);
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  // `args` holds one value per launched parameter (binary.param_types), in order. Returns false with
  // `error` set (the driver's message and the kernel's entry name) on failure.
  bool launch(int device, CUstream stream, uint32_t grid_x, uint32_t grid_y, uint32_t grid_z,
              const ArgValue* args, std::string* error) const;

  const TritonBinary& binary() const { return binary_; }

 private:
  CUfunction function_for(int device, std::string* error) const;
  TritonBinary binary_;
  mutable std::mutex mutex_;
  mutable std::vector<CUfunction> functions_;  // per device ordinal; null until loaded
};

}  // namespace ember::runtime::cuda
