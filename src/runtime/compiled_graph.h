// A compiled graph: a loop IR program whose generated C++ is loaded, run from C++ on torch
// tensors (docs/codegen-cpp.md, "Runtime").
//
// Needs: torch imported (tensors are read through the guards' torch bridge: DLPack's C exchange
// table when torch has one, attributes otherwise) and the GIL held when run() is called; CPU
// tensors. Guarantees: the same run contract as EagerExecutor — inputs borrowed, one per graph
// input, outputs new references, false with a Python error set on failure. Per call: Output
// buffers become torch tensors of exactly the planned sizes, strides and dtype
// (torch.empty_strided), temporaries live in one arena allocation (a torch uint8 tensor, so an
// extern call can be handed a view of a temporary), and the entry runs every step. The arena and
// the tensors over it (temporaries and views of them) are kept for the next call when they are
// small and no output aliases them; a call that finds them in use (another thread, re-entry)
// allocates its own. Extern calls
// run through torch by a one-node EagerExecutor each, so their arguments and literals are built
// exactly as the eager backend builds them; a result whose strides differ from the planned ones
// is copied into a tensor that has them (kernels fold strides into their code). A failed
// check_index raises IndexError naming the kernel.
//
// The GIL is released while generated code runs and re-acquired inside the extern callback, so
// kernels (OpenMP threads included) never hold it and other Python threads run meanwhile.
#pragma once

#include <Python.h>

#include <memory>
#include <string>
#include <vector>

#include "codegen/cpp/cpp_codegen.h"
#include "pybridge/pyref.h"
#include "loop_ir/loop_ir.h"
#include "memory/memory_plan.h"
#include "runtime/cpp_compiler.h"
#include "runtime/eager_executor.h"
#include "runtime/graph_runner.h"

struct ember_ctx;

namespace ember::runtime {

class CompiledGraph : public GraphRunner {
 public:
  // `library` holds the code `source` was generated into for `program` and `plan`;
  // `callables[k]` is the torch callable of program.externs[k]. Throws std::invalid_argument when
  // the program is something this runtime cannot run (non-CPU buffers, an output that is a
  // temporary), std::runtime_error when the library lacks the entry.
  CompiledGraph(loop_ir::Program program, memory::MemoryPlan plan, codegen::CppSource source,
                std::shared_ptr<LoadedLibrary> library, const std::vector<PyRef>& callables,
                const EagerExecutor::LiteralToPython& convert);
  ~CompiledGraph();
  CompiledGraph(const CompiledGraph&) = delete;
  CompiledGraph& operator=(const CompiledGraph&) = delete;

  bool run(PyObject* const* inputs, std::vector<PyRef>* outputs) const override;

  const codegen::CppSource& source() const { return source_; }
  const LoadedLibrary& library() const { return *library_; }

 private:
  struct Call;
  // The arena of a call and the tensors over it (per buffer; a Temp or a View rooted in one).
  struct Arena {
    PyRef bytes;                // uint8 tensor
    char* start = nullptr;      // its first 64-byte aligned byte (ctx.arena)
    int64_t pad = 0;            // bytes from bytes' start to `start`
    PyRef typed[16];            // per dtype: bytes from `start` on, viewed as that dtype
    std::vector<PyRef> tensors;
  };
  // Where a buffer's elements are: `root` is the buffer itself or, for a View, the non-view buffer
  // its chain of bases ends at (-1 where a view changes the dtype); `offset` counts elements from
  // the root's first element.
  struct Placement {
    loop_ir::BufferId root = -1;
    int64_t offset = 0;
  };
  struct ExternStep {
    std::unique_ptr<EagerExecutor> executor;  // one node: the call, over its buffer arguments
    std::vector<loop_ir::BufferId> inputs;    // the executor's graph inputs, in order
    std::vector<loop_ir::BufferId> results;
  };
  static int call_extern(ember_ctx* ctx, int32_t index);
  bool run_extern(Call& call, int32_t index) const;
  bool bind_input(Call& call, size_t k, PyObject* tensor) const;
  bool adopt_result(Call& call, loop_ir::BufferId id, PyObject* tensor) const;
  PyObject* tensor_of(Call& call, loop_ir::BufferId id) const;  // borrowed from call; null + error
  PyObject* arena_tensor(Call& call, loop_ir::BufferId id) const;  // a Temp or a View rooted in one
  bool in_arena(loop_ir::BufferId id) const;
  // Whether `tensor`, the arena's tensor of buffer id, still has its planned sizes, strides and place.
  bool still_as_planned(const Call& call, loop_ir::BufferId id, PyObject* tensor) const;
  bool new_arena(Arena* arena) const;
  bool take_arena(Call& call) const;
  void give_back_arena(Call& call) const;
  PyRef empty_like_buffer(const loop_ir::Buffer& b) const;

  loop_ir::Program program_;
  memory::MemoryPlan plan_;
  codegen::CppSource source_;
  std::shared_ptr<LoadedLibrary> library_;
  int (*entry_)(ember_ctx*) = nullptr;
  std::vector<ExternStep> externs_;
  std::vector<Placement> placement_;      // per buffer
  // The arena kept between calls, while `reused_arena_busy_` is false; held under the GIL.
  mutable Arena reused_arena_;
  mutable bool reused_arena_busy_ = false;
  PyRef empty_strided_;                   // torch.empty_strided
  PyRef empty_;                           // torch.empty
  std::vector<PyRef> alloc_args_;         // per buffer: (sizes, strides) for empty_strided, or null
  PyRef alloc_kwargs_[16];                // per dtype: {dtype=..., device="cpu"}
  PyRef uint8_kwargs_;                    // {dtype=torch.uint8}
};

struct CompiledGraphBuild {
  std::unique_ptr<CompiledGraph> graph;
  bool cache_hit = false;
  double compile_seconds = 0;
};

// Compilation of `source` (generated for `program` and `plan`) through the disk cache, with the
// memos of `code_cache`, and loading. Throws CompileError (carrying the compiler's output),
// CacheError, std::invalid_argument.
CompiledGraphBuild compile_graph(loop_ir::Program program, memory::MemoryPlan plan, codegen::CppSource source,
                                 CodeCache& code_cache, const CppCompileOptions& compile_options,
                                 const std::vector<PyRef>& callables, const EagerExecutor::LiteralToPython& convert);

}  // namespace ember::runtime
