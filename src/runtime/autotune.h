// Autotuning a Triton kernel's configs: which candidate runs fastest, and the disk cache of that
// choice (docs/cuda-runtime.md, "Autotuning"). Device-free: the timing itself is a callback, so the
// choice logic and the cache are tested without a GPU (runtime/autotune_cuda.h times on a device).
//
// Needs: candidates from code generation (TritonKernel::configs, the heuristic's guess first), all
// compiled from one source whose masks were decided for the largest block of each name among them
// (codegen/triton/emit.cpp, decide_masks).
// Guarantees:
//  - tune_configs times every candidate once through the timer; one that cannot run (it did not
//    compile, the launch ran out of resources) is dropped with its reason, never fatal unless all
//    are. The fastest is kept; ties keep the earlier (the heuristic's order).
//  - Coordinate descent (Inductor's CoordescTuner, max-autotune): from the best, one field at a
//    time (each block size, then num_warps), ×2 and ÷2, keeping a move only when it is more than
//    0.1% faster, until no move helps or kMaxDescentTrials configs were timed. Blocks stay within
//    [1, the largest value any candidate has]: larger blocks would need masks the source lacks; a
//    block every candidate gives the same value is not moved (a persistent reduction's RBLOCK must
//    cover its row).
//  - The choice is cached at <cache_dir>/triton/best/<key>.json, the key a sha256 over the kernel's
//    source, every candidate, the compiled candidates' cubin keys (Triton's and ptxas's versions,
//    the target), the device's name and capability and whether descent ran; as the cubin cache
//    (triton_build.h): 0700 directories owned by this user, files published by atomic rename, an
//    entry that does not parse ignored (tuned again and rewritten).
//  - The matmul choice (max-autotune, docs/cuda-runtime.md "Matmul choice") is the same concept one
//    level up: candidate (a), the extern call + its epilogue kernel, timed once; candidate (b), the
//    matmul template, tuned over its configs as any kernel; the faster kept, (a) on a tie within
//    kTemplateImprovement (today's path, no template to load). Cached in the same directory and
//    format, its entry naming the choice too ("choice": "extern" | "template").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codegen/triton/triton_codegen.h"

namespace ember::runtime {

// Median milliseconds of one config's launches, or nullopt with `*why` set when it cannot run.
using ConfigTimer = std::function<std::optional<double>(const codegen::TritonConfig& config, std::string* why)>;

// How a TritonCode tunes its kernels (set from the compile's mode by the driver).
struct TuneOptions {
  bool coordinate_descent = false;  // max-autotune
  std::string cache_dir;            // EMBER_CACHE_DIR: the choices live under triton/best/
  bool log_perf = false;            // EMBER_LOGS=perf: one line per tuned kernel
};

struct TuneResult {
  codegen::TritonConfig best;
  double best_ms = 0;
  bool found_by_coordinate_descent = false;
  int timed = 0;                      // configs timed, dropped ones included
  std::vector<std::string> dropped;   // "<config>: <reason>"
};

// Bounds the extra timing coordinate descent may add to a first call.
constexpr int kMaxDescentTrials = 32;

// Programs a launch of `config` runs along axis 0: ceil(xnumel / XBLOCK).
uint32_t launch_grid(int64_t xnumel, const codegen::TritonConfig& config);

// Throws std::runtime_error listing the reasons when no candidate runs.
TuneResult tune_configs(const std::vector<codegen::TritonConfig>& candidates, const ConfigTimer& timer,
                        bool coordinate_descent);

// TritonConfig::str() read back ("XBLOCK=64 RBLOCK=8 num_warps=4 num_stages=1"); nullopt if malformed.
std::optional<codegen::TritonConfig> parse_config(const std::string& text);

// The choice's cache key (hex sha256). `binary_keys`: the cubin keys of the candidates that compiled.
std::string best_config_key(const codegen::TritonKernel& kernel, const std::vector<std::string>& binary_keys,
                            const std::string& device, bool coordinate_descent);
// The cached choice, or nullopt when absent or unreadable. Throws CacheError for an unsafe directory.
std::optional<codegen::TritonConfig> load_best_config(const std::string& cache_dir, const std::string& key);
void store_best_config(const std::string& cache_dir, const std::string& key, const TuneResult& result);
// The entry's path (tests, logs).
std::string best_config_path(const std::string& cache_dir, const std::string& key);

// Median milliseconds of the extern call + epilogue kernel, or nullopt with `*why` set.
using StepsTimer = std::function<std::optional<double>(std::string* why)>;

// The template must be this much faster to replace the extern call (as descent's threshold).
constexpr double kTemplateImprovement = 0.001;

struct MatmulChoice {
  bool use_template = false;
  double extern_ms = 0;           // candidate (a); 0 when read from the cache
  TuneResult template_result;     // candidate (b): its best config and time (config only when cached)
  std::string template_failed;    // why (b) did not run (no config ran): (a) kept
};

// Times (a) with `extern_timer` and (b) with tune_configs; throws std::runtime_error when (a)
// cannot run (the graph cannot run either).
MatmulChoice choose_matmul(const StepsTimer& extern_timer, const std::vector<codegen::TritonConfig>& template_configs,
                           const ConfigTimer& template_timer, bool coordinate_descent);
// The choice's key: best_config_key of the template with what (a) is (the extern's callable and
// the epilogue kernel's source) added.
std::string matmul_choice_key(const codegen::TritonKernel& template_kernel, const std::vector<std::string>& binary_keys,
                              const std::string& extern_steps, const std::string& device, bool coordinate_descent);
std::optional<MatmulChoice> load_matmul_choice(const std::string& cache_dir, const std::string& key);
void store_matmul_choice(const std::string& cache_dir, const std::string& key, const MatmulChoice& choice);
// "extern call + epilogue 0.412 ms, template BLOCK_M=... 0.301 ms: template" (EMBER_LOGS=perf).
std::string describe(const MatmulChoice& choice);

}  // namespace ember::runtime
