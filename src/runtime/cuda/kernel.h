// A Triton binary loaded on CUDA devices, and its launch with Triton's kernel ABI (3.6): the
// signature's parameters in order minus every constexpr, then two trailing pointers,
// global_scratch and profile_scratch (0 when their size is 0).
//
// Needs: the Driver, and the caller on a thread where torch has made the device's primary context
// current (or none current: the primary context is retained and made current, as Triton does, at
// the load and at every launch). A current context of another device is an error.
// Guarantees: the module is loaded once per device, lazily, thread-safe; dynamic shared memory above
// 48 KiB is opted into (cuFuncSetAttribute) up to the device's limit, and a kernel needing more is an
// error naming both sizes; arguments are packed by their Triton type (pointer 8 bytes, i64 8, i32 4,
// fp32 4, fp16/bf16 2, i1 1); a launch with an empty grid does nothing; the stream is the caller's
// (torch's current stream), never synchronized. Loaded modules are never unloaded (a launch may
// still be queued when a Kernel dies; Triton and torch keep theirs loaded too).
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

// How one launched parameter travels: which ArgValue member is read, how it is encoded, and how
// many bytes of its 8-byte slot the kernel reads (the PTX .param size).
struct ParamLayout {
  enum class Encoding : uint8_t {
    Pointer,   // `pointer`, 8 bytes
    Signed,    // `integer`, two's complement, `bytes` wide; i1 is one byte holding 0 or 1
    Unsigned,  // `integer`, `bytes` wide
    Float16,   // `floating` rounded to float, then to IEEE half (nearest even), as torch converts
    BFloat16,  // `floating` rounded to float, then to bfloat16 (nearest even)
    Float32,   // `floating` rounded to float
    Float64,   // `floating`
  };
  Encoding encoding = Encoding::Pointer;
  uint8_t bytes = 8;
  bool boolean = false;  // i1: any nonzero integer packs as 1
};

// The layout of a Triton signature type ("*bf16", "i32", "fp16", ...). Throws std::invalid_argument
// for "constexpr" (never launched) and for types the launcher does not pack.
ParamLayout param_layout(const std::string& triton_type);

// Two trailing pointers follow the launched parameters: global_scratch and profile_scratch.
constexpr size_t kScratchSlots = 2;

// Triton's kernel ABI as a pure function: writes layouts.size() + kScratchSlots slots, one per
// parameter (the value's bytes at the low end, little-endian, the rest zero; the driver reads
// `bytes` of it through params[i] = &slots[i]), then the two scratch pointers, 0. Throws
// std::out_of_range naming the parameter when an integer does not fit its width.
void pack_args(const std::vector<ParamLayout>& layouts, const ArgValue* args, uint64_t* slots);

// Modules load into, kernels launch in, and events and copies are made in the current context:
// makes the device's primary context current on a thread that has none. Returns false when it
// could not (`*failed_call` names the driver call and `*status` its error).
bool make_context_current(const Driver& driver, int device, const char** failed_call, CUresult* status);

// The most launched parameters a Kernel takes (torch's static launcher allows 120).
constexpr size_t kMaxParams = 126;

class Kernel {
 public:
  // Throws std::invalid_argument for a binary the launcher cannot run: one that needs global or
  // profile scratch memory (tensor descriptors made on the device, instrumentation: Ember does not
  // allocate scratch yet), clusters (num_ctas > 1), more than kMaxParams parameters or a parameter
  // type it cannot pack.
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
  CUfunction load(const Driver& driver, int device, std::string* error) const;
  TritonBinary binary_;
  std::vector<ParamLayout> layouts_;  // one per binary_.param_types entry
  mutable std::mutex mutex_;
  mutable std::vector<CUfunction> functions_;  // per device ordinal; null until loaded
};

}  // namespace ember::runtime::cuda
