// Loading and launching one Triton binary (kernel.h). The module load follows Triton's own
// loadBinary (driver.c): load into the current context, look the entry up, and opt into dynamic
// shared memory above the 48 KiB every kernel may use without asking.
#include "runtime/cuda/kernel.h"

#include <climits>
#include <cstring>
#include <stdexcept>

namespace ember::runtime::cuda {

namespace {

// Driver enum values (cuda.h), spelled here because cuda.h is not needed to build.
constexpr int kDeviceMaxSharedPerBlockOptin = 97;  // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
constexpr int kFuncSharedSizeBytes = 1;            // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES (static)
constexpr int kFuncMaxDynamicSharedBytes = 8;      // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr int kFuncCachePreferShared = 1;          // CU_FUNC_CACHE_PREFER_SHARED
// Dynamic shared memory a kernel may use without opting in.
constexpr int64_t kDefaultSharedLimit = 48 * 1024;
// Launch limits of every device since compute capability 3.0.
constexpr uint32_t kMaxGridX = INT32_MAX;
constexpr uint32_t kMaxGridYZ = 65535;

struct NamedLayout {
  const char* type;
  ParamLayout layout;
};

using E = ParamLayout::Encoding;
// Triton's scalar signature types (pointers, "*<dtype>", are handled before this table).
constexpr NamedLayout kScalarLayouts[] = {
    {"i1", {E::Signed, 1, true}},     {"i8", {E::Signed, 1, false}},   {"i16", {E::Signed, 2, false}},
    {"i32", {E::Signed, 4, false}},   {"i64", {E::Signed, 8, false}},  {"u1", {E::Unsigned, 1, true}},
    {"u8", {E::Unsigned, 1, false}},  {"u16", {E::Unsigned, 2, false}}, {"u32", {E::Unsigned, 4, false}},
    {"u64", {E::Unsigned, 8, false}}, {"fp16", {E::Float16, 2, false}}, {"bf16", {E::BFloat16, 2, false}},
    {"fp32", {E::Float32, 4, false}}, {"fp64", {E::Float64, 8, false}},
};

uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// IEEE binary16, round to nearest even; NaN stays a (quiet) NaN, overflow becomes infinity.
uint16_t half_bits(float value) {
  uint32_t x = float_bits(value);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t exponent = (x >> 23) & 0xff;
  uint32_t mantissa = x & 0x7fffff;
  if (exponent == 0xff) return uint16_t(sign | 0x7c00 | (mantissa ? 0x200 | (mantissa >> 13) : 0));
  int32_t e = int32_t(exponent) - 127 + 15;
  if (e >= 0x1f) return uint16_t(sign | 0x7c00);
  if (e <= 0) {
    // A half subnormal, m * 2^-24: the 24-bit significand shifted right by 14 - e. Below 2^-25
    // (e < -10) everything rounds to zero, and the shift would pass the word's width.
    if (e < -10) return uint16_t(sign);
    uint32_t significand = mantissa | 0x800000;
    uint32_t shift = uint32_t(14 - e);
    uint32_t m = significand >> shift;
    uint32_t rest = significand & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (m & 1))) ++m;  // may carry into the smallest normal
    return uint16_t(sign | m);
  }
  uint32_t h = sign | (uint32_t(e) << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // a carry out of the mantissa is right
  return uint16_t(h);
}

// bfloat16: the float's top half, rounded to nearest even; NaN stays a quiet NaN.
uint16_t bfloat16_bits(float value) {
  uint32_t x = float_bits(value);
  if ((x & 0x7fffffff) > 0x7f800000) return uint16_t((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

uint64_t pack_integer(const ParamLayout& layout, int64_t value, size_t index) {
  if (layout.boolean) return value != 0 ? 1 : 0;
  if (layout.bytes == 8) return uint64_t(value);
  int bits = 8 * layout.bytes;
  bool fits = layout.encoding == E::Signed
                  ? value >= -(int64_t(1) << (bits - 1)) && value < (int64_t(1) << (bits - 1))
                  : value >= 0 && value < (int64_t(1) << bits);
  if (!fits) {
    throw std::out_of_range("kernel parameter " + std::to_string(index) + ": " + std::to_string(value) +
                            " does not fit in " + std::to_string(bits) + " bits");
  }
  return uint64_t(value) & ((uint64_t(1) << bits) - 1);
}

uint64_t pack_one(const ParamLayout& layout, const ArgValue& arg, size_t index) {
  switch (layout.encoding) {
    case E::Pointer:
      return arg.pointer;
    case E::Signed:
    case E::Unsigned:
      return pack_integer(layout, arg.integer, index);
    case E::Float16:
      return half_bits(float(arg.floating));
    case E::BFloat16:
      return bfloat16_bits(float(arg.floating));
    case E::Float32:
      return float_bits(float(arg.floating));
    case E::Float64: {
      uint64_t bits;
      std::memcpy(&bits, &arg.floating, sizeof bits);
      return bits;
    }
  }
  throw std::logic_error("pack_one: unknown parameter encoding");
}

}  // namespace

// torch has made the device's primary context current on a thread that ran CUDA work; a fresh
// thread has none, so retain the primary one (what torch uses too) and make it current, as Triton
// does.
bool make_context_current(const Driver& driver, int device, const char** failed_call, CUresult* status) {
  CUcontext context = nullptr;
  if ((*status = driver.cuCtxGetCurrent(&context))) return *failed_call = "cuCtxGetCurrent", false;
  if (context) return true;
  CUdevice handle;
  if ((*status = driver.cuDeviceGet(&handle, device))) return *failed_call = "cuDeviceGet", false;
  if ((*status = driver.cuDevicePrimaryCtxRetain(&context, handle))) {
    return *failed_call = "cuDevicePrimaryCtxRetain", false;
  }
  if ((*status = driver.cuCtxSetCurrent(context))) return *failed_call = "cuCtxSetCurrent", false;
  return true;
}

ParamLayout param_layout(const std::string& triton_type) {
  if (!triton_type.empty() && triton_type[0] == '*') return ParamLayout{E::Pointer, 8, false};
  for (const NamedLayout& named : kScalarLayouts) {
    if (triton_type == named.type) return named.layout;
  }
  throw std::invalid_argument("the CUDA launcher cannot pass a kernel parameter of Triton type '" + triton_type + "'");
}

void pack_args(const std::vector<ParamLayout>& layouts, const ArgValue* args, uint64_t* slots) {
  for (size_t i = 0; i < layouts.size(); ++i) slots[i] = pack_one(layouts[i], args[i], i);
  for (size_t i = 0; i < kScratchSlots; ++i) slots[layouts.size() + i] = 0;
}

Kernel::Kernel(TritonBinary binary) : binary_(std::move(binary)) {
  const std::string& name = binary_.entry;
  if (binary_.global_scratch_bytes > 0 || binary_.profile_scratch_bytes > 0) {
    throw std::invalid_argument("Triton kernel " + name + " needs " + std::to_string(binary_.global_scratch_bytes) +
                                " bytes of global scratch and " + std::to_string(binary_.profile_scratch_bytes) +
                                " of profile scratch per program; Ember's launcher does not allocate scratch");
  }
  if (binary_.num_ctas != 1) {
    throw std::invalid_argument("Triton kernel " + name + " uses clusters of " + std::to_string(binary_.num_ctas) +
                                " CTAs; Ember's launcher launches one CTA per program");
  }
  if (binary_.param_types.size() + kScratchSlots > kMaxParams) {
    throw std::invalid_argument("Triton kernel " + name + " has " + std::to_string(binary_.param_types.size()) +
                                " parameters; the launcher takes at most " +
                                std::to_string(kMaxParams - kScratchSlots));
  }
  for (const std::string& type : binary_.param_types) layouts_.push_back(param_layout(type));
}

CUfunction Kernel::load(const Driver& driver, int device, std::string* error) const {
  auto failed = [&](const char* what, CUresult status) {
    *error = "Triton kernel " + binary_.entry + " on cuda:" + std::to_string(device) + ": " + what + ": " +
             driver.describe(status);
    return nullptr;
  };
  const char* failed_call = nullptr;
  CUresult status = 0;
  if (!make_context_current(driver, device, &failed_call, &status)) return failed(failed_call, status);
  CUdevice handle, current;
  if (CUresult s = driver.cuDeviceGet(&handle, device)) return failed("cuDeviceGet", s);
  if (CUresult s = driver.cuCtxGetDevice(&current)) return failed("cuCtxGetDevice", s);
  if (current != handle) {
    *error = "Triton kernel " + binary_.entry + ": launched for cuda:" + std::to_string(device) +
             " while the current CUDA context is another device's (torch.cuda.set_device first)";
    return nullptr;
  }
  CUmodule module;
  if (CUresult s = driver.cuModuleLoadData(&module, binary_.cubin.data())) return failed("cuModuleLoadData", s);
  CUfunction function;
  if (CUresult s = driver.cuModuleGetFunction(&function, module, binary_.entry.c_str())) {
    return failed("cuModuleGetFunction", s);
  }
  if (binary_.shared_bytes > kDefaultSharedLimit) {
    int optin = 0, static_bytes = 0;
    if (CUresult s = driver.cuDeviceGetAttribute(&optin, kDeviceMaxSharedPerBlockOptin, handle)) {
      return failed("cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)", s);
    }
    if (CUresult s = driver.cuFuncGetAttribute(&static_bytes, kFuncSharedSizeBytes, function)) {
      return failed("cuFuncGetAttribute(SHARED_SIZE_BYTES)", s);
    }
    int64_t available = int64_t(optin) - static_bytes;
    if (binary_.shared_bytes > available) {
      *error = "Triton kernel " + binary_.entry + " needs " + std::to_string(binary_.shared_bytes) +
               " bytes of dynamic shared memory; cuda:" + std::to_string(device) + " allows " +
               std::to_string(available);
      return nullptr;
    }
    if (CUresult s = driver.cuFuncSetCacheConfig(function, kFuncCachePreferShared)) {
      return failed("cuFuncSetCacheConfig", s);
    }
    if (CUresult s = driver.cuFuncSetAttribute(function, kFuncMaxDynamicSharedBytes, int(available))) {
      return failed("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", s);
    }
  }
  return function;
}

CUfunction Kernel::function_for(int device, std::string* error) const {
  if (device < 0) {
    *error = "Triton kernel " + binary_.entry + ": invalid device ordinal " + std::to_string(device);
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (size_t(device) < functions_.size() && functions_[device]) return functions_[device];
  std::string why_not;
  const Driver* driver = Driver::get(&why_not);
  if (!driver) {
    *error = "Triton kernel " + binary_.entry + ": " + why_not;
    return nullptr;
  }
  CUfunction function = load(*driver, device, error);
  if (!function) return nullptr;
  if (functions_.size() <= size_t(device)) functions_.resize(device + 1, nullptr);
  functions_[device] = function;
  return function;
}

bool Kernel::launch(int device, CUstream stream, uint32_t grid_x, uint32_t grid_y, uint32_t grid_z,
                    const ArgValue* args, std::string* error) const {
  if (grid_x == 0 || grid_y == 0 || grid_z == 0) return true;  // Triton's launcher skips empty grids too
  if (grid_x > kMaxGridX || grid_y > kMaxGridYZ || grid_z > kMaxGridYZ) {
    *error = "Triton kernel " + binary_.entry + ": grid (" + std::to_string(grid_x) + ", " + std::to_string(grid_y) +
             ", " + std::to_string(grid_z) + ") exceeds the device's limits (2^31-1, 65535, 65535)";
    return false;
  }
  CUfunction function = function_for(device, error);
  if (!function) return false;
  const Driver& driver = *Driver::get(nullptr);
  const char* failed_call = nullptr;
  CUresult status = 0;
  if (!make_context_current(driver, device, &failed_call, &status)) {
    *error = "Triton kernel " + binary_.entry + ": " + failed_call + ": " + driver.describe(status);
    return false;
  }
  uint64_t slots[kMaxParams];
  void* params[kMaxParams];
  try {
    pack_args(layouts_, args, slots);
  } catch (const std::out_of_range& e) {
    *error = "Triton kernel " + binary_.entry + ": " + e.what();
    return false;
  }
  for (size_t i = 0; i < layouts_.size() + kScratchSlots; ++i) params[i] = &slots[i];
  unsigned block_x = unsigned(32 * binary_.num_warps);
  status = driver.cuLaunchKernel(function, grid_x, grid_y, grid_z, block_x, 1, 1,
                                          unsigned(binary_.shared_bytes), stream, params, nullptr);
  if (status != 0) {
    *error = "Triton kernel " + binary_.entry + ": cuLaunchKernel: " + driver.describe(status);
    return false;
  }
  return true;
}

}  // namespace ember::runtime::cuda
