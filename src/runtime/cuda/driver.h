// The CUDA driver API, resolved at run time: dlopen("libcuda.so.1") and cuGetProcAddress, as Triton's
// own launcher does. Ember has no link-time CUDA dependency, builds and tests on machines without a
// GPU, and shares the primary context (and so the device memory) torch uses.
//
// Needs: nothing at build time. Guarantees: Driver::get() is thread-safe, loads once per process, and
// returns nullptr with a readable reason where there is no driver (no libcuda, no device, cuInit
// failed); every call that fails reports the driver's error name and string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ember::runtime::cuda {

// The driver's handle types, as opaque pointers (cuda.h is not needed to build).
using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUdeviceptr = uint64_t;
using CUgraphExec = struct CUgraphExec_st*;  // torch.cuda.CUDAGraph.raw_cuda_graph_exec() is one
using CUevent = struct CUevent_st*;

struct Driver {
  CUresult (*cuInit)(unsigned int flags) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device) = nullptr;
  CUresult (*cuCtxGetCurrent)(CUcontext* ctx) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext ctx) = nullptr;
  CUresult (*cuCtxGetDevice)(CUdevice* device) = nullptr;  // of the current context
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device) = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule* module, const void* image) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction* fn, CUmodule module, const char* name) = nullptr;
  CUresult (*cuFuncSetAttribute)(CUfunction fn, int attribute, int value) = nullptr;
  CUresult (*cuFuncGetAttribute)(int* value, int attribute, CUfunction fn) = nullptr;
  CUresult (*cuFuncSetCacheConfig)(CUfunction fn, int config) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction fn, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                             unsigned block_y, unsigned block_z, unsigned shared_bytes, CUstream stream,
                             void** params, void** extra) = nullptr;
  CUresult (*cuGetErrorName)(CUresult error, const char** name) = nullptr;
  CUresult (*cuGetErrorString)(CUresult error, const char** text) = nullptr;
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream stream) = nullptr;
  // Autotuning (runtime/autotune.h): timing candidates on the stream, saving and restoring the
  // buffers a kernel updates in place around the trials, naming the device in the choice's key.
  CUresult (*cuEventCreate)(CUevent* event, unsigned int flags) = nullptr;
  CUresult (*cuEventRecord)(CUevent event, CUstream stream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent event) = nullptr;
  CUresult (*cuEventElapsedTime)(float* milliseconds, CUevent start, CUevent end) = nullptr;
  CUresult (*cuEventDestroy)(CUevent event) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr* pointer, size_t bytes) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr pointer) = nullptr;
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr to, CUdeviceptr from, size_t bytes, CUstream stream) = nullptr;
  CUresult (*cuDeviceGetName)(char* name, int length, CUdevice device) = nullptr;
  CUresult (*cuStreamIsCapturing)(CUstream stream, int* status) = nullptr;  // status: CUstreamCaptureStatus

  // The process's driver, or nullptr with `why_not` set.
  static const Driver* get(std::string* why_not);
  // "CUDA_ERROR_INVALID_VALUE: invalid argument"
  std::string describe(CUresult error) const;
};

}  // namespace ember::runtime::cuda
