// Compiler: the FrameCompiler of one ember.compile() call. It traces a frame with the symbolic
// interpreter, and turns the trace into a cache entry: the guards, the graph run by the backend,
// the side effects to replay and the plan of the return value. A frame that fails at an
// instruction of its own code is traced again up to it and split there (graph_break.h): its entry
// runs the graph, then the generated glue and resume functions. A frame it can neither trace nor
// split gets an entry that runs it eagerly under the guards read so far (the same inputs would
// fail the same way), and the reason is reported; under fullgraph=True the first failure raises
// ember.Unsupported.
//
// Events (compiles, graph breaks, fallbacks, recompiles, the cache limit) go to a Python listener, which
// logs them (EMBER_LOGS) and collects them for ember.explain.
//
// Each Compiler holds its compile context for the C++ code cache (runtime::CodeCache) and passes
// it down explicitly (build_runner -> compile_graph -> CodeCache::compile_and_load). Compilers
// of one process with the same cache_dir and cxx share one context, kept until exit: the memos
// (compiler version, header digests, verified and background-built precompiled headers) then
// cost once per process, as the compiled code they serve does; a context per ember.compile call
// would run `<cxx> --version` and re-hash the ~44 MB precompiled header for each.
//
// This is the frame-to-backend driver: it sits in driver/, above the frontend (which traces and
// splits) and the runtime (which runs the graph: backend.h, compiled_frame.h), so neither of
// those two includes the other.
#pragma once

#include <Python.h>

#include <memory>

#include "frontend/eval_frame.h"
#include "frontend/graph_break.h"
#include "frontend/interp/interpreter.h"
#include "frontend/interp/torch_table.h"
#include "pybridge/pyref.h"
#include "runtime/cpp_compiler.h"
#include "support/options.h"

namespace ember::driver {

class Compiler : public frontend::FrameCompiler {
 public:
  // `listener(event: str, info: dict)`; `unsupported_error`: the ember.Unsupported class.
  Compiler(CompileOptions options, frontend::TorchTable table, PyObject* listener, PyObject* unsupported_error);
  ~Compiler() override;
  Compiler(const Compiler&) = delete;
  Compiler& operator=(const Compiler&) = delete;

  std::unique_ptr<frontend::CacheEntry> compile(const frontend::FrameView& frame, bool* error) override;
  void on_cache_limit(PyCodeObject* code, const std::string& guard) override;
  void on_cache_hit() override;
  void on_recompile(PyCodeObject* code, const std::string& guard) override;

  const CompileOptions& options() const { return options_; }

 private:
  // Sends an event to the listener; returns false with the listener's error set.
  bool emit(const char* event, PyObject* info);

  struct Split;
  // Traces the frame again up to where the first trace failed (`failed`) and plans the graph
  // break there; nullptr with `*why_not` set when the frame cannot be split there.
  std::unique_ptr<Split> plan_split(const frontend::FrameView& frame, frontend::Trace& trace,
                                    const frontend::Unsupported& failed, std::string* why_not);

  // Automatic dynamic shapes (frontend::DynamicPolicy::seen): per code object, the sizes of the
  // tensors its compiles read, -1 for a dimension seen to change. The code is kept alive, so its
  // address stays its key.
  struct SeenShapes {
    PyRef code;
    std::map<std::string, std::vector<int64_t>> sizes;
  };
  std::map<std::string, std::vector<int64_t>>& seen_shapes(PyCodeObject* code);
  std::map<PyCodeObject*, SeenShapes> seen_shapes_;

  CompileOptions options_;
  frontend::TorchTable table_;
  std::shared_ptr<runtime::CodeCache> code_cache_;  // shared by cache_dir and cxx (see the top)
  frontend::CodeInfoCache codes_;
  frontend::BreakCodeCache breaks_;
  PyRef listener_;
  PyRef unsupported_error_;
};

}  // namespace ember::driver
