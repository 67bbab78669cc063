// Compiling generated Triton kernels to cubins, through a disk cache (docs/codegen-triton.md,
// "Compilation"). Compile time only: nothing here runs while a compiled graph runs.
//
// Needs: the GIL (Triton's compiler is Python: python/ember/_triton/compile.py runs it, in a pool of
// worker processes so that one graph's kernels compile in parallel) and triton importable. No GPU:
// the target is given (sm_90 for the H200), never queried from a device.
// Guarantees, as the C++ code cache's (cpp_compiler.h):
//  - A binary is named by sha256 over the kernel's source, signature, constexpr values, compile
//    options, the target, Triton's version, the ptxas version and the bytes of Ember's Triton helper
//    module: anything that changes the cubin changes the key.
//  - Layout <cache_dir>/triton/<key[0:2]>/<key>/{kernel.py, kernel.cubin, meta.json}; files appear
//    only by atomic rename, meta.json last and carrying the cubin's sha256, so a reader never sees half
//    an entry; an entry whose cubin does not match its digest is rebuilt; the directory is 0700 and
//    refused unless owned by this user.
//  - Identical jobs in one batch compile once.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
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

// One binary per job, in order. Throws TritonBuildError (the first failing job), CacheError,
// PythonError-free: a Python exception from the worker becomes a TritonBuildError.
std::vector<TritonBinary> build_triton(const std::vector<TritonJob>& jobs, const TritonBuildOptions& options);

}  // namespace ember::runtime
