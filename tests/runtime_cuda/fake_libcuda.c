/* A stand-in libcuda.so.1 for test_fake_driver.py: it resolves Ember's entries through
   cuGetProcAddress_v2 like the real driver, keeps one fake primary context, and logs every call that
   matters (with the launch's grid, block, shared bytes, stream and the first FAKE_CUDA_PARAMS
   parameter slots) to FAKE_CUDA_LOG, so the launcher's sequence of driver calls is checked on a
   machine without a GPU. FAKE_CUDA_NO_DEVICE makes cuInit fail as on a machine without a device.
   For the autotuner: device memory is host memory (cuMemAlloc is malloc, cuMemcpyDtoDAsync memcpy);
   an event pair's elapsed time is the last launch's warps in milliseconds, so fewer warps time
   faster; FAKE_CUDA_ADD_ONE=n makes every launch add 1 to n floats at its first parameter (a
   kernel doing x += 1, to check that the trials' in-place updates are undone). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;

static void log_line(const char* format, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void log_line(const char* format, ...) {
  const char* path = getenv("FAKE_CUDA_LOG");
  FILE* f = path ? fopen(path, "a") : stderr;
  va_list args;
  va_start(args, format);
  vfprintf(f, format, args);
  va_end(args);
  fputc('\n', f);
  if (path) fclose(f);
}

static int primary_context, module, function;
static void* current_context;
static unsigned last_block_x;
static int events[64];
static int next_event;

static CUresult cuInit(unsigned flags) {
  log_line("cuInit %u", flags);
  return getenv("FAKE_CUDA_NO_DEVICE") ? 100 : 0;
}
static CUresult cuDeviceGet(int* device, int ordinal) { *device = ordinal; return 0; }
static CUresult cuDeviceGetAttribute(int* value, int attribute, int device) {
  /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, the H200's; COMPUTE_CAPABILITY_MAJOR / _MINOR: 9.0 */
  *value = attribute == 97 ? 232448 : attribute == 75 ? 9 : 0;
  return 0;
}
static CUresult cuCtxGetCurrent(void** context) { *context = current_context; return 0; }
static CUresult cuCtxSetCurrent(void* context) { log_line("cuCtxSetCurrent"); current_context = context; return 0; }
static CUresult cuCtxGetDevice(int* device) { *device = 0; return 0; }
static CUresult cuDevicePrimaryCtxRetain(void** context, int device) {
  log_line("cuDevicePrimaryCtxRetain %d", device);
  *context = &primary_context;
  return 0;
}
static CUresult cuModuleLoadData(void** m, const void* image) {
  log_line("cuModuleLoadData %.4s", (const char*)image);
  *m = &module;
  return 0;
}
static CUresult cuModuleGetFunction(void** f, void* m, const char* name) {
  log_line("cuModuleGetFunction %s", name);
  *f = &function;
  return 0;
}
static CUresult cuFuncSetAttribute(void* f, int attribute, int value) {
  log_line("cuFuncSetAttribute %d %d", attribute, value);
  return 0;
}
static CUresult cuFuncGetAttribute(int* value, int attribute, void* f) {
  *value = attribute == 1 ? 1024 : 0; /* 1 KiB of static shared memory */
  return 0;
}
static CUresult cuFuncSetCacheConfig(void* f, int config) { log_line("cuFuncSetCacheConfig %d", config); return 0; }
static CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                               unsigned shared, void* stream, void** params, void** extra) {
  const char* count = getenv("FAKE_CUDA_PARAMS");
  char slots[1024] = "";
  for (int i = 0, n = count ? atoi(count) : 0; i < n; ++i) {
    uint64_t slot;
    memcpy(&slot, params[i], sizeof slot);
    snprintf(slots + strlen(slots), sizeof slots - strlen(slots), " %llx", (unsigned long long)slot);
  }
  log_line("cuLaunchKernel grid=%u,%u,%u block=%u,%u,%u shared=%u stream=%p extra=%p params=%s", gx, gy, gz, bx, by,
           bz, shared, stream, (void*)extra, slots);
  last_block_x = bx;
  const char* add_one = getenv("FAKE_CUDA_ADD_ONE");
  if (add_one) {
    float* x;
    memcpy(&x, params[0], sizeof x);
    for (int i = 0, n = atoi(add_one); i < n; ++i) x[i] += 1;
  }
  return 0;
}
static CUresult cuEventCreate(void** event, unsigned flags) {
  if (next_event == 64) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
  *event = &events[next_event++];
  log_line("cuEventCreate %u", flags);
  return 0;
}
static CUresult cuEventRecord(void* event, void* stream) {
  log_line("cuEventRecord %d stream=%p", (int)((int*)event - events), stream);
  return 0;
}
static CUresult cuEventSynchronize(void* event) { log_line("cuEventSynchronize %d", (int)((int*)event - events)); return 0; }
static CUresult cuEventElapsedTime(float* ms, void* start, void* end) { *ms = last_block_x / 32.0f; return 0; }
static CUresult cuEventDestroy(void* event) { log_line("cuEventDestroy %d", (int)((int*)event - events)); return 0; }
static CUresult cuMemAlloc(uint64_t* pointer, size_t bytes) {
  log_line("cuMemAlloc %zu", bytes);
  *pointer = (uint64_t)(uintptr_t)malloc(bytes);
  return 0;
}
static CUresult cuMemFree(uint64_t pointer) { log_line("cuMemFree"); free((void*)(uintptr_t)pointer); return 0; }
static CUresult cuMemcpyDtoDAsync(uint64_t to, uint64_t from, size_t bytes, void* stream) {
  log_line("cuMemcpyDtoDAsync %zu stream=%p", bytes, stream);
  memcpy((void*)(uintptr_t)to, (void*)(uintptr_t)from, bytes);
  return 0;
}
static CUresult cuStreamIsCapturing(void* stream, int* status) { *status = 0; return 0; }
static CUresult cuDeviceGetName(char* name, int length, int device) {
  snprintf(name, (size_t)length, "Fake H200");
  return 0;
}
static CUresult cuGetErrorName(CUresult error, const char** name) {
  *name = error == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
  return 0;
}
static CUresult cuGetErrorString(CUresult error, const char** text) { *text = "fake driver"; return 0; }
static CUresult cuGraphLaunch(void* exec, void* stream) {
  log_line("cuGraphLaunch %p %p", exec, stream);
  return 0;
}
static CUresult cuStreamSynchronize(void* stream) {
  log_line("cuStreamSynchronize %p", stream);
  return 0;
}

static const struct {
  const char* name;
  void* fn;
} entries[] = {
    {"cuInit", (void*)cuInit},
    {"cuDeviceGet", (void*)cuDeviceGet},
    {"cuDeviceGetAttribute", (void*)cuDeviceGetAttribute},
    {"cuCtxGetCurrent", (void*)cuCtxGetCurrent},
    {"cuCtxSetCurrent", (void*)cuCtxSetCurrent},
    {"cuCtxGetDevice", (void*)cuCtxGetDevice},
    {"cuDevicePrimaryCtxRetain", (void*)cuDevicePrimaryCtxRetain},
    {"cuModuleLoadData", (void*)cuModuleLoadData},
    {"cuModuleGetFunction", (void*)cuModuleGetFunction},
    {"cuFuncSetAttribute", (void*)cuFuncSetAttribute},
    {"cuFuncGetAttribute", (void*)cuFuncGetAttribute},
    {"cuFuncSetCacheConfig", (void*)cuFuncSetCacheConfig},
    {"cuLaunchKernel", (void*)cuLaunchKernel},
    {"cuGetErrorName", (void*)cuGetErrorName},
    {"cuGetErrorString", (void*)cuGetErrorString},
    {"cuGraphLaunch", (void*)cuGraphLaunch},
    {"cuStreamSynchronize", (void*)cuStreamSynchronize},
    {"cuEventCreate", (void*)cuEventCreate},
    {"cuEventRecord", (void*)cuEventRecord},
    {"cuEventSynchronize", (void*)cuEventSynchronize},
    {"cuEventElapsedTime", (void*)cuEventElapsedTime},
    {"cuEventDestroy", (void*)cuEventDestroy},
    {"cuMemAlloc", (void*)cuMemAlloc},
    {"cuMemFree", (void*)cuMemFree},
    {"cuMemcpyDtoDAsync", (void*)cuMemcpyDtoDAsync},
    {"cuDeviceGetName", (void*)cuDeviceGetName},
    {"cuStreamIsCapturing", (void*)cuStreamIsCapturing},
};

CUresult cuGetProcAddress_v2(const char* symbol, void** fn, int cuda_version, uint64_t flags, int* status) {
  log_line("cuGetProcAddress_v2 %s %d %llu", symbol, cuda_version, (unsigned long long)flags);
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; ++i) {
    if (strcmp(entries[i].name, symbol) == 0) {
      *fn = entries[i].fn;
      return 0;
    }
  }
  *fn = NULL;
  return 500; /* CUDA_ERROR_NOT_FOUND */
}
