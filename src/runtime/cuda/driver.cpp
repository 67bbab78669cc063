// Resolving the driver API at run time. libcuda exports every entry point under versioned names
// (cuModuleGetFunction, cuLaunchKernel_ptsz, cuGetProcAddress_v2, ...); cuGetProcAddress picks the
// one whose ABI matches a given CUDA version, which dlsym of the plain name does not. So only
// cuGetProcAddress itself comes from dlsym, and everything else through it, as torch and Triton do.
#include "runtime/cuda/driver.h"

#include <dlfcn.h>

#include <memory>
#include <type_traits>

namespace ember::runtime::cuda {

namespace {

// The ABI Ember's function pointer types are written against: CUDA 12.0's (none of the entries
// in Driver changed signature since, and every driver that runs Triton 3.6's cubins has it).
constexpr int kCudaAbiVersion = 12000;
// CU_GET_PROC_ADDRESS_LEGACY_STREAM: stream 0 means the legacy default stream, as in torch (whose
// default stream is the legacy one), not the per-thread default stream.
constexpr uint64_t kLegacyStream = 1;

using GetProcAddressV2 = CUresult (*)(const char* symbol, void** fn, int cuda_version, uint64_t flags,
                                      int* symbol_status);
using GetProcAddressV1 = CUresult (*)(const char* symbol, void** fn, int cuda_version, uint64_t flags);

struct Loaded {
  std::unique_ptr<Driver> driver;  // null when unavailable
  std::string why_not;
};

Loaded load() {
  Loaded result;
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace, so they never satisfy
  // another library's references by accident; we only reach them through the pointers below.
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* error = dlerror();
    result.why_not = std::string("no CUDA driver: cannot load libcuda.so.1 (") + (error ? error : "unknown") + ")";
    return result;
  }
  // The v2 entry (CUDA 12.0+) reports whether a symbol was found; drivers before 12.0 have only v1.
  auto v2 = reinterpret_cast<GetProcAddressV2>(dlsym(library, "cuGetProcAddress_v2"));
  auto v1 = v2 ? nullptr : reinterpret_cast<GetProcAddressV1>(dlsym(library, "cuGetProcAddress"));
  if (!v2 && !v1) {
    result.why_not = "CUDA driver too old: libcuda.so.1 has no cuGetProcAddress (CUDA 11.3 or newer is needed)";
    return result;
  }
  auto driver = std::make_unique<Driver>();
  std::string missing;
  auto resolve = [&](auto& slot, const char* name) {
    void* fn = nullptr;
    CUresult status = v2 ? v2(name, &fn, kCudaAbiVersion, kLegacyStream, nullptr)
                         : v1(name, &fn, kCudaAbiVersion, kLegacyStream);
    if (status != 0 || !fn) {
      missing += missing.empty() ? name : std::string(", ") + name;
      return;
    }
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(fn);
  };
  resolve(driver->cuInit, "cuInit");
  resolve(driver->cuDeviceGet, "cuDeviceGet");
  resolve(driver->cuDeviceGetAttribute, "cuDeviceGetAttribute");
  resolve(driver->cuCtxGetCurrent, "cuCtxGetCurrent");
  resolve(driver->cuCtxSetCurrent, "cuCtxSetCurrent");
  resolve(driver->cuCtxGetDevice, "cuCtxGetDevice");
  resolve(driver->cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  resolve(driver->cuModuleLoadData, "cuModuleLoadData");
  resolve(driver->cuModuleGetFunction, "cuModuleGetFunction");
  resolve(driver->cuFuncSetAttribute, "cuFuncSetAttribute");
  resolve(driver->cuFuncGetAttribute, "cuFuncGetAttribute");
  resolve(driver->cuFuncSetCacheConfig, "cuFuncSetCacheConfig");
  resolve(driver->cuLaunchKernel, "cuLaunchKernel");
  resolve(driver->cuGetErrorName, "cuGetErrorName");
  resolve(driver->cuGetErrorString, "cuGetErrorString");
  resolve(driver->cuGraphLaunch, "cuGraphLaunch");
  resolve(driver->cuStreamSynchronize, "cuStreamSynchronize");
  resolve(driver->cuEventCreate, "cuEventCreate");
  resolve(driver->cuEventRecord, "cuEventRecord");
  resolve(driver->cuEventSynchronize, "cuEventSynchronize");
  resolve(driver->cuEventElapsedTime, "cuEventElapsedTime");
  resolve(driver->cuEventDestroy, "cuEventDestroy");
  resolve(driver->cuMemAlloc, "cuMemAlloc");
  resolve(driver->cuMemFree, "cuMemFree");
  resolve(driver->cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync");
  resolve(driver->cuDeviceGetName, "cuDeviceGetName");
  resolve(driver->cuStreamIsCapturing, "cuStreamIsCapturing");
  if (!missing.empty()) {
    result.why_not = "CUDA driver lacks " + missing;
    return result;
  }
  // cuInit fails on a machine with the library but no usable device (CUDA_ERROR_NO_DEVICE), or
  // when the kernel module and the library disagree on versions.
  if (CUresult status = driver->cuInit(0); status != 0) {
    result.why_not = "cuInit failed: " + driver->describe(status);
    return result;
  }
  // The library stays loaded for the life of the process: the pointers above point into it.
  result.driver = std::move(driver);
  return result;
}

}  // namespace

const Driver* Driver::get(std::string* why_not) {
  // A function-local static: initialized once, thread-safe (C++11); leaked, so that no kernel
  // still alive at exit (Python may destroy its objects after static destructors) holds a
  // dangling Driver.
  static const Loaded* loaded = new Loaded(load());
  if (!loaded->driver && why_not) *why_not = loaded->why_not;
  return loaded->driver.get();
}

std::string Driver::describe(CUresult error) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName) cuGetErrorName(error, &name);
  if (cuGetErrorString) cuGetErrorString(error, &text);
  std::string described = name ? name : "CUDA error " + std::to_string(error);
  if (text) described += std::string(": ") + text;
  return described;
}

}  // namespace ember::runtime::cuda
