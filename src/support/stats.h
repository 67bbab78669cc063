// Process-wide counters behind ember.stats(): observability only (never configuration), reset by
// ember.reset(). Updated with the GIL held.
#pragma once

#include <cstdint>

namespace ember {

struct Stats {
  uint64_t frames_compiled = 0;  // frames traced into a graph
  uint64_t cache_hits = 0;
  uint64_t recompiles = 0;
  uint64_t graph_breaks = 0;
  uint64_t eager_frames = 0;     // frames the compiler declined (they run eagerly)
  uint64_t kernels_compiled = 0;
  // C++ kernel functions a compile found already built in the code cache (by another graph, an
  // earlier run or process) instead of compiling them (docs/code-cache.md, "Kernels across graphs").
  uint64_t kernels_reused = 0;
  uint64_t codegen_failures = 0;
  uint64_t backend_errors = 0;   // graphs that fell back because a backend stage threw (a bug)
  uint64_t backward_graphs_compiled = 0;  // training graphs compiled as forward + backward
  uint64_t autograd_islands = 0;  // ops of those differentiated through torch autograd (no rule)
  uint64_t graphs = 0;           // graphs built
  uint64_t cuda_graph_records = 0;  // CUDA graphs captured (mode="reduce-overhead"; re-records included)
  uint64_t cuda_graph_replays = 0;  // calls served by replaying one
  // Calls of a compiled graph that writes an input, run op by op because that input shared memory with
  // another (runtime/aliased_inputs.h).
  uint64_t aliased_input_calls = 0;
  // Tensors' metadata or addresses read from torch (through DLPack's exchange or attributes): guards and
  // runtime share a call's reads (pybridge::TensorReads), so a compiled call reads each input tensor once.
  uint64_t tensor_reads = 0;
  uint64_t ops_captured = 0;     // graph nodes built
  double trace_seconds = 0;      // time spent tracing
};

Stats& stats();

}  // namespace ember
