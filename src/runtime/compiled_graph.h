// A compiled graph: a loop IR program whose code is built and loaded (generated C++ in a shared
// library, or Triton kernels), run from C++ on torch tensors (docs/codegen-cpp.md, "Runtime";
// docs/codegen-triton.md).
//
// Needs: torch imported (tensors are read through the guards' torch bridge: DLPack's C exchange
// table when torch has one, attributes otherwise) and the GIL held when run() is called; every
// buffer on the program's one device. Guarantees: the same run contract as EagerExecutor — inputs
// borrowed, one per graph input, outputs new references, false with a Python error set on
// failure. Per call: Output buffers become torch tensors of exactly the planned sizes, strides and
// dtype on the program's device (torch.empty_strided), temporaries live in one arena allocation (a
// torch uint8 tensor, from torch's caching allocator on CUDA, so an extern call can be handed a view
// of a temporary), and the code runs every step. The arena and the tensors over it (temporaries
// and views of them) are kept for the next call when that cannot raise the program's peak much: up to
// kSmallArenaBytes per graph always, a larger one only until another compiled graph runs (one such
// arena in the process). That graph's call takes over its memory when it needs a large arena itself
// (in training the forward and the backward take turns with one block, whose pages stay mapped: a new
// block per call cost 1,221 page faults a step on LLaMA) and frees it otherwise; a call that
// finds them in use (another thread, re-entry) allocates its own, and one whose outputs alias the
// arena (an extern returned a view of a temporary, or the temporary it wrote in place) hands it to
// the caller: the next call allocates a new one. Extern calls run through torch by a one-node
// EagerExecutor each, so their arguments and literals are built exactly as the eager backend builds
// them; a result whose strides differ from the planned ones is copied into a tensor laid out as
// planned (kernels fold strides into their code: copy_to_planned). A result whose data lies in the
// arena is kept as it is, an alias of the temporary, which the memory planner keeps alive as long
// as the result (docs/memory.md, "Live ranges"). A failed check_index raises IndexError naming the kernel.
//
// Memory over a call (docs/memory.md, "Peak"): the arena for the whole call; outputs from the start;
// an extern result from its call to its last use; an input until the call returns, or, when the
// caller hands its references over (run_owned: the backward's saved tensors), until its last use.
// The process-wide figures are in memory_stats().
//
// Shape symbols (dynamic shapes, docs/codegen-cpp.md "Runtime"). Each symbol's value is read from
// the input dimension it appears bare in (found once); every input's sizes and strides are then
// checked against its expressions at those values (a mismatch raises RuntimeError naming the input,
// the dimension, the expected and the actual value: never runs wrong), and so are the symbols'
// ranges and divisors. What depends on the sizes (the memory plan, outputs' and views' sizes and
// strides) is a `Sized`, built on the first call with a tuple of values and kept in a small LRU;
// the arena kept between calls grows to the largest plan seen.
//
// Stores into inputs (docs/memory.md, "Stores into inputs"). A kernel may store straight into a graph
// input (the scheduler's rewrite of a copy into an input), which assumes graph inputs do not share
// memory. Each call that runs such a program checks it (the address ranges of all inputs, sorted:
// O(n log n), runtime/aliased_inputs.h's sweep); where a written input overlaps another input, that
// call gives the kernels a copy of each written input and copies the copies back after the run, in
// kernel order (what the copy calls the program had would have done). That is the program's semantics,
// not Python's: the backend wraps every graph whose captured form writes an input in an
// AliasedInputsRunner, which runs such a call eagerly before it gets here, so this stand-in path serves
// only writes the captured graph does not show (batch_norm's running statistics in training). Written
// inputs get their version counters bumped, as torch's in-place ops bump them.
//
// What runs the steps is a GraphCode: CppCode calls the generated library's entry; TritonCode
// (runtime/triton_code.h) launches Triton kernels on torch's current CUDA stream, or runs them in
// Triton's interpreter. CompiledGraph binds buffers, arena and extern calls the same way for both.
// Code that runs without the GIL (generated C++; CUDA launches) has it released while it runs and
// re-acquired inside the extern callback, so kernels (OpenMP threads included) never hold it and
// other Python threads run meanwhile.
#pragma once

#include <Python.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codegen/cpp/cpp_codegen.h"
#include "pybridge/pyref.h"
#include "pybridge/torch_bridge.h"
#include "loop_ir/loop_ir.h"
#include "memory/memory_plan.h"
#include "runtime/cpp_compiler.h"
#include "runtime/eager_executor.h"
#include "runtime/graph_runner.h"
#include "runtime/symbol_binding.h"

struct ember_ctx;

namespace ember::runtime {

// What runs a compiled graph's steps once CompiledGraph has bound its buffers (ember_ctx: buffer
// pointers, the arena, the extern callback).
class GraphCode {
 public:
  // What a run sees besides ember_ctx.
  class Env {
   public:
    // The torch tensor of a buffer (borrowed, valid for the call), for code that takes tensors
    // rather than addresses (Triton's interpreter); null with a Python error set on failure.
    virtual PyObject* tensor(loop_ir::BufferId id) = 0;
    void* stream = nullptr;  // torch's current stream on the program's CUDA device; null on the CPU
    int device_index = -1;

   protected:
    ~Env() = default;
  };
  virtual ~GraphCode() = default;
  // Runs the program's steps in order (extern steps through ctx->call_extern). Returns 0, or
  // non-zero with ctx->error set (a failed index check) or a Python error set.
  virtual int run(ember_ctx* ctx, Env& env) const = 0;
  // Whether run() needs the GIL held throughout; otherwise it runs with the GIL released and the
  // extern callback takes it back.
  virtual bool needs_gil() const = 0;
  // Where each check_index is, by ember_ctx::error_site: "k2 %t5".
  virtual const std::vector<std::string>& check_sites() const = 0;
};

// The C++ backend's code: the entry, called with the addresses of the kernel functions (which may
// live in other libraries: units compiled by this or an earlier graph).
class CppCode : public GraphCode {
 public:
  // `build` is compile_split's of the source's kernels, then its entry.
  CppCode(codegen::CppSource source, SplitBuild build);
  int run(ember_ctx* ctx, Env& env) const override { return entry_(ctx, build_.addresses.data()); }
  bool needs_gil() const override { return false; }
  const std::vector<std::string>& check_sites() const override { return source_.check_sites; }
  const codegen::CppSource& source() const { return source_; }
  const SplitBuild& build() const { return build_; }

 private:
  codegen::CppSource source_;
  SplitBuild build_;  // holds every library the code points into; addresses: kernels, then the entry
  int (*entry_)(ember_ctx*, void* const*) = nullptr;
};

// The bytes from element 0 to one past the last element the strides reach (0 if empty): of a tensor's
// sizes and strides, or of a buffer's at no symbol values.
int64_t span_bytes(const int64_t* sizes, const int64_t* strides, size_t rank, ir::DType dtype);
int64_t span_bytes(const loop_ir::Buffer& b);

class CompiledGraph : public GraphRunner {
 public:
  // `code` runs `program` as planned by `plan`; `callables[k]` is the torch callable of
  // program.externs[k]. Throws std::invalid_argument when the program is something this runtime
  // cannot run (buffers on several devices or on a device other than cpu and cuda, an output
  // that is a temporary).
  CompiledGraph(loop_ir::Program program, memory::MemoryPlan plan, std::unique_ptr<GraphCode> code,
                const std::vector<PyRef>& callables, const EagerExecutor::LiteralToPython& convert);
  ~CompiledGraph();
  CompiledGraph(const CompiledGraph&) = delete;
  CompiledGraph& operator=(const CompiledGraph&) = delete;

  bool run(PyObject* const* inputs, std::vector<PyRef>* outputs) const override;
  bool run_with_reads(PyObject* const* inputs, pybridge::TensorReads& reads,
                      std::vector<PyRef>* outputs) const override;
  bool run_owned(std::vector<PyRef> inputs, std::vector<PyRef>* outputs) const override;

  // Arenas up to this size are kept between calls whatever else runs.
  static constexpr int64_t kSmallArenaBytes = int64_t{1} << 20;

  // How many tuples of symbol values the runtime keeps planned (each a memory plan and the
  // sizes evaluated; a new tuple past them evicts the least recently used).
  static constexpr size_t kSizedCacheSize = 8;

  const GraphCode& code() const { return *code_; }
  const loop_ir::Program& program() const { return program_; }
  const ir::Device& device() const { return device_; }

 private:
  struct Call;
  // The arena of a call and the tensors over it (per buffer; a Temp or a View rooted in one).
  struct Arena {
    PyRef bytes;                // uint8 tensor
    char* start = nullptr;      // its first 64-byte aligned byte (ctx.arena)
    int64_t pad = 0;            // bytes from bytes' start to `start`
    int64_t span = 0;           // bytes from `start` on (a multiple of 64)
    PyRef typed[16];            // per dtype: bytes from `start` on, viewed as that dtype
    std::vector<PyRef> tensors;
    uint64_t sized_serial = 0;  // the Sized whose plan `tensors` were made for (serials are process-wide)
    // The tensors other plans made over this block before it was handed on (by Sized serial): a graph
    // that takes the block back finds its tensors still valid. They go with the block.
    std::map<uint64_t, std::vector<PyRef>> parked;
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
  // Everything that depends on the sizes, at one tuple of symbol values (the only one for a program
  // without symbols).
  struct Sized {
    uint64_t serial = 0;                          // unique per CompiledGraph
    std::vector<int64_t> values;                  // in Program::symbols order
    memory::MemoryPlan plan;
    std::vector<std::vector<int64_t>> sizes, strides;  // per buffer
    std::vector<Placement> placement;             // per buffer
    std::vector<PyRef> alloc_args;                // per buffer: (sizes, strides) for empty_strided
    // Per extern call with a symbolic integer argument: its step with the argument evaluated
    // (else null: externs_'s).
    std::vector<std::shared_ptr<const ExternStep>> externs;
  };
  // The step of program_.externs[k], its symbolic integer arguments at `at` (empty: as written).
  ExternStep make_extern_step(size_t k, const std::map<std::string, int64_t>& at) const;
  std::shared_ptr<const Sized> make_sized(std::vector<int64_t> values, memory::MemoryPlan plan) const;
  void plan_releases();  // fills release_after_extern_
  // The Sized of this call's symbol values (read from the inputs and checked against the
  // symbols' ranges); null with a Python error set.
  std::shared_ptr<const Sized> sized_for(PyObject* const* inputs, pybridge::TensorReads& reads) const;
  // run(), run_with_reads() and run_owned(): `owned` (null but for run_owned) holds the references to
  // `inputs` the call may drop.
  bool run_call(PyObject* const* inputs, pybridge::TensorReads& reads, std::vector<PyRef>* owned,
                std::vector<PyRef>* outputs) const;
  static int call_extern(ember_ctx* ctx, int32_t index);
  bool run_extern(Call& call, int32_t index) const;
  bool bind_input(Call& call, size_t k, PyObject* tensor, pybridge::TensorReads& reads) const;
  // Stores into inputs (above): before the run, stand-ins for written inputs that overlap another
  // input (`copies`: (caller's tensor, stand-in)); after it, the copies back and the version bumps.
  bool stand_in_for_overlaps(Call& call, PyObject* const* inputs, std::vector<std::pair<PyObject*, PyRef>>* copies) const;
  bool finish_input_writes(PyObject* const* inputs, const std::vector<std::pair<PyObject*, PyRef>>& copies) const;
  bool same_dims(const Call& call, loop_ir::BufferId id, const pybridge::RawTensorMeta& m, bool* strides_equal) const;
  bool adopt_result(Call& call, loop_ir::BufferId id, PyObject* tensor) const;
  PyObject* tensor_of(Call& call, loop_ir::BufferId id) const;  // borrowed from call; null + error
  PyObject* arena_tensor(Call& call, loop_ir::BufferId id) const;  // a Temp or a View rooted in one
  bool in_arena(const Call& call, loop_ir::BufferId id) const;
  // Whether `tensor`, the arena's tensor of buffer id, still has its planned sizes, strides and place.
  bool still_as_planned(const Call& call, loop_ir::BufferId id, PyObject* tensor) const;
  // An arena for `sized`'s plan: `donor`'s block when it is large enough (with the tensors this plan
  // parked there, if any), else a new block (the donor's freed first).
  bool new_arena(Arena* arena, const Sized& sized, Arena donor) const;
  bool take_arena(Call& call) const;
  void give_back_arena(Call& call) const;
  PyRef empty_like_buffer(const Call& call, const loop_ir::Buffer& b) const;
  // A new tensor with b's planned layout holding `tensor`'s values (null with a Python error set).
  PyRef copy_to_planned(const Call& call, const loop_ir::Buffer& b, PyObject* tensor) const;

  loop_ir::Program program_;
  SymbolBinding binding_;                 // where each shape symbol's value is read
  // Program without symbols: its one Sized. With symbols: the LRU, most recent first (under the GIL).
  std::shared_ptr<const Sized> static_sized_;
  mutable std::vector<std::shared_ptr<const Sized>> sized_cache_;
  std::unique_ptr<GraphCode> code_;
  ir::Device device_;                     // every buffer's
  bool on_cuda_ = false;                  // device_.type == "cuda", decided once: run() reads it per call
  pybridge::DeviceKey device_key_;
  std::vector<ExternStep> externs_;
  // Per extern call: the torch-held buffers (extern results and inputs no step after it reads, and the
  // views over them) whose tensors the call drops once it has run, so that torch's allocator has their
  // memory back mid-call, as in eager; outputs are kept, and inputs only dropped by run_owned.
  std::vector<std::vector<loop_ir::BufferId>> release_after_extern_;
  std::vector<size_t> written_inputs_;    // graph inputs a kernel stores into, in kernel order
  PyRef increment_version_;               // torch._C._increment_version, when written_inputs_ is not empty
  std::vector<PyRef> callables_;          // per extern call
  EagerExecutor::LiteralToPython convert_;
  // The arena kept between calls, while `reused_arena_busy_` is false; held under the GIL.
  Arena release_reused_arena() const;  // empty when busy; keeps memory_stats() true
  void drop_reused_arena() const;      // release_reused_arena(), its memory freed
  mutable Arena reused_arena_;
  mutable bool reused_arena_busy_ = false;
  PyRef empty_strided_;                   // torch.empty_strided
  PyRef empty_;                           // torch.empty
  PyRef alloc_kwargs_[16];                // per dtype: {dtype=..., device="cpu"}
  PyRef uint8_kwargs_;                    // {dtype=torch.uint8}
};

// What compiled graphs hold, process-wide (ember.stats()'s `arena_*` entries; updated under the GIL).
struct MemoryStats {
  int64_t arena_bytes_kept = 0;     // arenas kept between calls by live graphs, now
  int64_t arena_bytes_max = 0;      // the largest arena one call used, since reset_memory_stats()
  int64_t arenas_kept_by_outputs = 0; // calls whose outputs alias their arena (it lives as long as they do)
  int64_t arenas_handed_over = 0;     // calls that took over the large arena another graph kept
  int64_t input_bytes_released = 0; // inputs run_owned dropped before the call's end (their spans)
};
const MemoryStats& memory_stats();
void reset_memory_stats();  // all but arena_bytes_kept, which describes the graphs alive

struct CompiledGraphBuild {
  std::unique_ptr<CompiledGraph> graph;
  bool cache_hit = false;
  double compile_seconds = 0;
  int kernels_reused = 0;  // kernel functions found compiled in the cache (SplitBuild)
};

// Compilation of `source` (generated for `program` and `plan`) through the disk cache, with the
// memos of `code_cache`, by up to `jobs` concurrent compilers (compile_split), and loading. Throws
// CompileError (carrying the compiler's output), CacheError, std::invalid_argument.
CompiledGraphBuild compile_graph(loop_ir::Program program, memory::MemoryPlan plan, codegen::CppSource source,
                                 CodeCache& code_cache, const CppCompileOptions& compile_options, int jobs,
                                 const std::vector<PyRef>& callables, const EagerExecutor::LiteralToPython& convert);

}  // namespace ember::runtime
