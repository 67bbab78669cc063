// Compiling generated Triton kernels to cubins, through a disk cache (docs/cuda-runtime.md,
// "Compilation"). Compile time only: nothing here runs while a compiled graph runs.
//
// Needs: the GIL (Triton's compiler is Python: python/ember/_triton/compile.py runs it, in a pool of
// worker processes so that one graph's kernels compile in parallel; the GIL is released while
// waiting for another thread's or process's lock on an entry) and triton importable. No GPU: the
// target is given (sm_90 for the H200), never queried from a device.
// Guarantees, as the C++ code cache's (cpp_compiler.h):
//  - A binary is named by sha256 over the kernel's source, signature, constexpr values, compile
//    options, the target, Triton's version, the ptxas path and version and the bytes of Ember's
//    Triton helper module: anything that changes the cubin changes the key. The cache directory
//    does not.
//  - Layout <cache_dir>/triton/<key[0:2]>/<key>/{kernel.py, kernel.ptx, kernel.cubin, meta.json};
//    files appear only by atomic rename, meta.json last and carrying the cubin's sha256, so a reader
//    never sees half an entry; an entry whose cubin does not match its digest (or whose meta.json
//    does not parse) is rebuilt; the directories are 0700 and refused unless owned by this user.
//  - Compile-and-publish holds flock(<key>.lock) beside the entry: processes sharing a cache compile
//    a key once. A batch takes its locks in key order, so two batches never wait on each other.
//  - Identical jobs in one batch compile once; the misses of a batch compile in parallel.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "codegen/triton/triton_codegen.h"

namespace ember::runtime {

// What Triton's compiler produced for one (kernel, config): all the launcher needs.
struct TritonBinary {
  std::string entry;                    // the PTX entry name (metadata "name")
  std::string cubin;                    // the bytes cuModuleLoadData takes
  int num_warps = 4;
  int num_ctas = 1;
  int64_t shared_bytes = 0;             // dynamic shared memory (metadata "shared")
  int64_t global_scratch_bytes = 0;     // per program; 0 for ordinary kernels
  int64_t global_scratch_align = 1;
  int64_t profile_scratch_bytes = 0;
  int64_t profile_scratch_align = 1;
  std::vector<std::string> param_types; // the launched parameters' Triton types, constexprs dropped
  bool cache_hit = false;
  std::string key;                      // the cache key (hex sha256)
  std::string dir;                      // the cache entry: kernel.py and kernel.ptx for people
};

struct TritonTarget {
  std::string backend = "cuda";
  int capability = 90;                  // sm_90: the H200
  int warp_size = 32;
  std::string str() const;              // "cuda:90"
};

struct TritonBuildOptions {
  std::string cache_dir;                // EMBER_CACHE_DIR, default ~/.cache/ember
  TritonTarget target;
  int workers = 0;                      // compile processes; 0: min(16, cpus)
};

// A kernel that Triton's compiler rejected: what() names the kernel, `detail` has Triton's message.
struct TritonBuildError : std::runtime_error {
  TritonBuildError(const std::string& what, std::string detail_text)
      : std::runtime_error(what), detail(std::move(detail_text)) {}
  std::string detail;
};

struct TritonJob {
  const codegen::TritonKernel* kernel = nullptr;
  const codegen::TritonConfig* config = nullptr;
};

// What Triton compiles, spelled out: everything of a job that reaches the compiler.
struct TritonCompileJob {
  std::string source;  // a whole Python module
  std::string name;    // the @triton.jit function in it
  std::vector<std::pair<std::string, std::string>> signature;  // TritonKernel::signature()
  std::vector<std::pair<std::string, int64_t>> constexprs;     // TritonConfig::blocks
  // Signature positions whose values are multiples of 16 (pointers 16-byte aligned, sizes):
  // Triton vectorizes accesses through them ("tt.divisibility"). TritonCode promises it for every
  // pointer and checks the promise at each launch (triton_code.h, "Alignment").
  std::vector<int> divisible_by_16;
  int num_warps = 4;
  int num_stages = 1;
  bool debug = false;  // device assertions compiled in: the kernel has check_sites
};

TritonCompileJob compile_job(const TritonJob& job);

// One binary per job, in order. Throws TritonBuildError (the first failing job, after the others
// are published) or CacheError; never PythonError: a Python exception, in a worker or in the
// pool, becomes a TritonBuildError.
std::vector<TritonBinary> build_triton(const std::vector<TritonJob>& jobs, const TritonBuildOptions& options);
std::vector<TritonBinary> build_triton(const std::vector<TritonCompileJob>& jobs, const TritonBuildOptions& options);
// The same, but a job Triton rejects does not fail the batch: `(*errors)[i]` is Triton's message for
// job i ("" when it compiled) and binaries[i] then holds only the entry's key. Autotuning drops the
// candidate configs that do not compile (too many registers, shared memory) this way.
// The line of a TritonBuildError's detail that says what went wrong: Triton's CompilationError puts
// the source excerpt first and the error itself last.
std::string triton_error_summary(const std::string& detail);

std::vector<TritonBinary> build_triton_each(const std::vector<TritonCompileJob>& jobs, const TritonBuildOptions& options,
                                            std::vector<std::string>* errors);

}  // namespace ember::runtime
