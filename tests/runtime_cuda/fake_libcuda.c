/* A stand-in libcuda.so.1 for test_fake_driver.py: it resolves Ember's entries through
   cuGetProcAddress_v2 like the real driver, keeps one fake primary context, and logs every call that
   matters (with the launch's grid, block, shared bytes, stream and the first FAKE_CUDA_PARAMS
   parameter slots) to FAKE_CUDA_LOG, so the launcher's sequence of driver calls is checked on a
   machine without a GPU. FAKE_CUDA_NO_DEVICE makes cuInit fail as on a machine without a device. */
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

static CUresult cuInit(unsigned flags) {
  log_line("cuInit %u", flags);
  return getenv("FAKE_CUDA_NO_DEVICE") ? 100 : 0;
}
static CUresult cuDeviceGet(int* device, int ordinal) { *device = ordinal; return 0; }
static CUresult cuDeviceGetAttribute(int* value, int attribute, int device) {
  *value = attribute == 97 ? 232448 : 0; /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, the H200's */
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
