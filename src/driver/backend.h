// The backend: turns a captured graph into the GraphRunner a compiled frame calls.
//
// It sits in driver/, above both frontend (it reads the TorchTable: literal objects, and the
// callables that extern calls resolve to) and runtime (it builds the runtime's executables).
//
// backend="eager" runs the graph node by node through torch (the eager executor). backend="ember"
// compiles a training graph (an output requires grad) into a forward and a backward executable
// joined by torch autograd (src/autograd, runtime/training_runner.h), unless it cannot be
// differentiated ahead of time (then it runs eagerly, with the reason). backend="ember"
// runs Ember's pipeline (src/pipeline/pipeline.h: graph passes -> lowering -> loop passes ->
// scheduler -> memory planner -> code generation), then the C++ compiler and disk cache, and
// falls back to the eager executor, with a reason, when a stage cannot serve the graph:
//   - the generated C++ fails to compile (one warning with the compiler's error; counted in
//     stats()["codegen_failures"]);
//   - the graph has nothing for kernels to do (only extern calls): the eager executor runs it
//     with less overhead.
// Those are fallbacks by design. An exception escaping a stage is not: it is a bug. The graph
// still runs correctly on the eager executor, but the report says so apart (`internal_error`,
// counted in stats()["backend_errors"], warned about once per graph site), and under
// ember.compile(options={"strict": True}) -- on in the test suite -- Python raises
// ember.InternalError instead of falling back (python/ember/api.py).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frontend/interp/torch_table.h"
#include "ir/graph.h"
#include "pybridge/pyref.h"
#include "runtime/cpp_compiler.h"
#include "runtime/graph_runner.h"
#include "support/options.h"
#include "sym/relation.h"

namespace ember::driver {

// What the backend did with one graph: for EMBER_LOGS (schedule, output_code, perf) and explain.
struct BackendReport {
  std::string fallback_reason;  // non-empty: the eager executor runs the graph, and why
  bool codegen_failed = false;  // the generated C++ did not compile (fallback_reason has the error)
  std::string internal_error;   // non-empty: a stage threw (a bug, not a fallback by design): its message
  std::string error_stage;      // with internal_error: the pipeline step that threw, or "compile"
  std::string schedule;         // fusion decisions, one per line
  std::string loop_ir;          // the scheduled program
  std::string code_language;    // "C++" or "Triton"
  std::string code;             // the generated translation unit, or the Triton kernels (codegen::print)
  // mode="reduce-overhead" on a compiled graph: why it is not replayed as a CUDA graph ("" when it
  // is; runtime/cuda_graph_runner.h).
  std::string cuda_graph_skip;
  int kernels = 0;
  int extern_calls = 0;
  // A CUDA kernel adds into memory atomically, in any order (an accumulating store): the frame is
  // guarded on torch's deterministic-algorithms flag being off, as it was when this compiled.
  bool atomic_adds = false;
  int64_t planned_peak_bytes = -1;  // -1 when no memory plan was made
  bool cache_hit = false;           // the shared object came from the disk or memory cache
  int kernels_reused = 0;           // C++ kernel functions found compiled in the code cache
  std::vector<std::pair<std::string, double>> stage_seconds;  // per pipeline step, then the compile
  std::vector<std::pair<std::string, std::string>> step_ir;   // (step, IR it left), when EMBER_LOGS=passes
  // Training graphs: compiled as forward + backward; the ops differentiated through torch autograd
  // (islands); the partition's text (decisions, both graphs) for EMBER_LOGS=partition.
  // Non-empty: the graph's shape symbols were specialized (compiled for the traced sizes) because
  // this stage could not serve them (sym::SymbolicUnsupported's message).
  std::string shape_fallback;
  // Relations on the shape symbols the generated code relies on (codegen::TritonKernel::assumptions:
  // int32 indexing), each true on the traced call: the frame guards them (a call past one recompiles).
  std::vector<sym::Rel> size_assumptions;
  bool training = false;
  std::vector<std::string> autograd_islands;
  std::string partition;

  // Adds what compiling one part of a training graph did (kernels, code, logs), its text under a
  // `// <part>` heading.
  void merge(const BackendReport& part, const std::string& name);
};

// `callables[i]` is the callable of graph node i (as the trace recorded it); `code_cache` is the
// compile context the C++ compiler runs in (the Compiler's). Throws PythonError with a Python
// error set for failures that are not fallbacks.
std::unique_ptr<runtime::GraphRunner> build_runner(const ir::Graph& graph, const std::vector<PyRef>& callables,
                                                   const frontend::TorchTable& table, const CompileOptions& options,
                                                   runtime::CodeCache& code_cache, BackendReport* report);

}  // namespace ember::driver
