// CompileOptions: every setting of one ember.compile() call, parsed once in Python
// (python/ember/options.py, the only reader of the environment, builds this struct through its
// typed binding in src/python/bind_compiler.cpp) and passed down explicitly. The C++ core has no
// global configuration.
//
// Settings that have no CPU meaning yet are still carried, so that the stage that will act on
// them reads them from here; until then options.py tells the user so (one warning per process):
//   - `mode`, as torch.compile's: ReduceOverhead (CUDA graphs: driver/backend.cpp wraps a CUDA
//     graph's runner in runtime::CudaGraphRunner), MaxAutotuneNoCudagraphs (kernel-configuration
//     search) and MaxAutotune (both) are GPU backend features; on CPU every mode generates the same
//     code as Default.
//   - `dynamic`: shapes are specialized and guarded whatever it says (symbolic sizes: issue 14).
//   - `logs`: the channels the C++ stages log on (the pipeline reads kLogPerf and kLogPasses).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember {

enum class Backend : uint8_t { Ember, Eager };
enum class Mode : uint8_t { Default, ReduceOverhead, MaxAutotune, MaxAutotuneNoCudagraphs };
// What a mode turns on (torch.compile's meanings: "max-autotune" replays CUDA graphs too).
inline bool replays_cuda_graphs(Mode m) { return m == Mode::ReduceOverhead || m == Mode::MaxAutotune; }
inline bool searches_configs(Mode m) { return m == Mode::MaxAutotune || m == Mode::MaxAutotuneNoCudagraphs; }

// When sizes become symbols (DESIGN.md, ember.compile(dynamic=...)): Auto (None: static first,
// automatic dynamic on a recompile), Always (True: symbolic from the first call), Never (False).
enum class Dynamic : uint8_t { Auto, Always, Never };

// EMBER_LOGS channels: bit i is python/ember/options.py LOG_CHANNELS[i] (tests/api checks that
// the two lists agree; a new channel goes at the end of both).
enum LogChannel : uint32_t {
  kLogGraph = 1u << 0,
  kLogGraphBreaks = 1u << 1,
  kLogGuards = 1u << 2,
  kLogRecompiles = 1u << 3,
  kLogFallbacks = 1u << 4,
  kLogSchedule = 1u << 5,
  kLogOutputCode = 1u << 6,
  kLogPerf = 1u << 7,
  kLogPasses = 1u << 8,  // the IR after each pass that changed it
  kLogPartition = 1u << 9,  // a training graph's partition: what is saved and recomputed, both graphs
};

struct CompileOptions {
  Backend backend = Backend::Ember;
  Mode mode = Mode::Default;
  bool fullgraph = false;
  Dynamic dynamic = Dynamic::Auto;
  int cache_limit = 8;         // compiled entries per code object before it runs eagerly
  int inline_depth_limit = 64; // nested inlined calls before the frame runs eagerly
  int64_t instruction_limit = 2'000'000;  // interpreted instructions per trace (unrolled loops)
  uint32_t logs = 0;           // LogChannel bits
  bool verify_shape_rules = false;  // also run torch's meta kernel where a shape rule answers, and compare (tests)
  bool verify_each_step = false;    // run the IR verifier after every pipeline step (tests)
  std::string inject_fault_after;   // a pipeline step to fail after, as if it had thrown (tests of the error path)
  // Graphs on the CPU run through the Triton backend, their kernels in Triton's interpreter, instead
  // of the C++ backend: slow, a way to test the GPU backend's code without a GPU (tests).
  bool triton_interpret = false;
  // Graphs on the CPU are compiled by the Triton backend for CUDA (sm_90 cubins through the cubin
  // cache, as on the H200), then run on the eager executor: nothing is launched. A developer path
  // that measures and tests the GPU backend's compile time without a GPU (docs/cuda-runtime.md).
  bool triton_build_only = false;
  // torch.backends.cuda.matmul.allow_tf32 when ember.compile ran: the precision of fp32 matmul
  // templates (max-autotune), part of their text and so of every cache key built from it.
  bool allow_tf32 = false;
  // torch.use_deterministic_algorithms when the graph was traced: set by the compiler for each graph
  // from torch's state (not a user option); lowering::LowerOptions has what it changes.
  bool deterministic = false;
  // Training graphs: what saving a recomputable activation costs the partitioner, from 1 (the cut
  // with the fewest saved bytes) down to 0 (save only inputs and what cannot be recomputed:
  // activation checkpointing). autograd::PartitionOptions::memory_budget.
  double activation_memory_budget = 1.0;
  // Training graphs: dropout draws eager's exact numbers (aten's native_dropout, its mask saved for
  // the backward) instead of Philox streams the backward recomputes. autograd::JointOptions::exact_random.
  bool fallback_random = false;
  // Inference graphs with a chain of 2-d convolutions run them on channels-last activations (the
  // pipeline's channels_last step; pipeline::Target::layout_optimization).
  bool layout_optimization = true;
  // The C++ backend: the compiler ($CXX, else g++), the on-disk cache ($EMBER_CACHE_DIR, else
  // ~/.cache/ember) and the folder holding the headers generated code includes (ember/vec.h).
  std::string cxx = "g++";
  std::string cache_dir;
  std::string include_dir;
};

}  // namespace ember
