// TritonCode: the GraphCode of the Triton backend. It runs a program's steps in order from C++:
// each kernel step is one launch of its Triton kernel, each extern step the extern callback
// (docs/codegen-triton.md, "Runtime"); a grouped kernel launches at its first member's step, and
// the steps of the members it runs besides (TritonKernel::launched_by) launch nothing.
//
// Two ways to run a kernel, chosen when the graph is built:
//  - on a CUDA device: the kernel's cubin (runtime/triton_build.h) launched through the driver API
//    (runtime/cuda/kernel.h) on torch's current stream, with the GIL released: no Python runs
//    between kernels, and nothing synchronizes with the host;
//  - in Triton's interpreter, on CPU tensors (`ember.compile(..., options={"triton_interpret":
//    True})`, a testing aid that runs the GPU backend's kernels without a GPU): the kernel's
//    @triton.jit function called on torch tensors, with the GIL held.
// Needs: the program, plan and Triton source the kernels were generated from. Guarantees: the
// arguments of a kernel are computed as emit_triton's parameters say (a Temp's pointer is the arena
// plus its planned offset; sizes are their values); a kernel whose grid is empty is not launched.
//
// Alignment. A cubin is compiled with every pointer parameter declared 16-byte aligned
// ("tt.divisibility"), which lets Triton vectorize loads and stores: the arena's temporaries and
// torch's own allocations always are. A caller's tensor may not be (a view at an odd storage
// offset), so each launch checks its pointers and, for a misaligned one, runs a second cubin
// compiled without the promise (built on first need, then kept).
// Autotuning (runtime/autotune.h). A kernel with several candidate configs compiles them all in
// the graph's one batch; its first launch on aligned pointers looks the choice up on disk, else
// times every candidate (and, under max-autotune, coordinate descent's neighbours) on torch's
// stream with the call's own arguments, saving and restoring the buffers it updates in place, and
// keeps the fastest for this TritonCode. The call's result is what the chosen config computes from
// the unchanged inputs. Tuning synchronizes the host with the stream, which a stream capturing a
// CUDA graph forbids: a launch during capture runs the first config untuned (a capturing runner
// should call the graph once before capture, so that the capture records the choice).
// The interpreter never tunes: it runs the first config.
//
// Shape symbols (docs/dynamic-shapes.md, "Triton"). A program with symbols reads their values from
// ctx->sym on every launch: each Size parameter (xnumel, rnumel, s0, ...) is evaluated there, the
// grid is ceil(xnumel / XBLOCK) at those values, and temporaries are addressed through
// ctx->buffers (the memory plan is per tuple of values, CompiledGraph's). Divisibility
// specialization, as Triton's JIT does it (3.6: an integer argument that is a multiple of 16 gets
// "tt.divisibility" = 16): a symbolic kernel's cubins belong to a class, the set of its symbolic
// Size parameters that are multiples of 16, promised to Triton at compile time; each launch
// computes its class and runs only cubins of that class, so no cubin ever runs on sizes that break
// its promise. Built with the graph: the hints' class and the classes its sizes take when each
// symbol is an odd multiple of 1, 2, 4, 8 or 16 (ahead_classes); any other on first need, through
// the disk cache.
// Triton's other specialization, an argument equal to 1, never applies: symbols are >= 2. With
// several configs, tuning is per class and size bucket (next power of two of xnumel and rnumel),
// the bucket part of the choice's disk key.
//
// Matmul choices (max-autotune on CUDA; docs/cuda-runtime.md, "Matmul choice"). For each matmul
// template in the source (an extern matmul and the kernel step after it, done by one kernel), the
// first call on aligned pointers outside a capture decides once: from the disk cache, else by
// timing the extern call + epilogue kernel against the template's configs (choose_matmul), the
// in-place buffers of both saved and restored. A template that chose itself runs in place of the
// two steps on every later call (the extern's result is then never made: nothing else reads it);
// calls before the decision run the extern path. A template none of whose configs compiled
// keeps the extern path.
#pragma once

#include <Python.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/triton/triton_codegen.h"
#include "loop_ir/loop_ir.h"
#include "memory/memory_plan.h"
#include "pybridge/pyref.h"
#include "runtime/autotune.h"
#include "runtime/compiled_graph.h"
#include "runtime/cuda/kernel.h"
#include "runtime/cuda/trials.h"
#include "runtime/triton_build.h"

namespace ember::runtime {

class TritonCode : public GraphCode {
 public:
  // One config of a kernel and, on CUDA, its cubin (pointers promised 16-byte aligned).
  struct Candidate {
    codegen::TritonConfig config;
    std::shared_ptr<const cuda::Kernel> kernel;
    uint32_t grid = 0;  // programs on axis 0 for the kernel's xnumel: set once by TritonCode
    uint32_t grid_y = 1;  // a matmul template's batch
  };
  // What runs one kernel in one divisibility class.
  struct Runnable {
    uint64_t divisible = 0;  // the class: bit k, the k-th symbolic Size parameter is a multiple of 16
    // CUDA: the kernel's configs that compiled, in its order (the heuristic's first); more than
    // one are tuned at the first launch. The interpreter: the first config, without a kernel.
    std::vector<Candidate> candidates;
    std::vector<std::string> dropped;  // configs that did not compile: "<config>: <reason>"
    TritonBuildOptions build_options;  // CUDA: for configs compiled later (unaligned, descent)
    PyRef interpreted;
  };

  // runnables[k] runs source.kernels[k] (none for a kernel launched_by another), then
  // runnables[kernels + t] source.matmul_templates[t]
  // (empty candidates in the first: the template did not compile), one Runnable per class built,
  // the first the hints'. Throws std::invalid_argument on a mismatch.
  TritonCode(const loop_ir::Program& program, const memory::MemoryPlan& plan, codegen::TritonSource source,
             std::vector<std::vector<Runnable>> runnables, TuneOptions tune);

  int run(ember_ctx* ctx, Env& env) const override;
  bool needs_gil() const override { return interpreted_; }
  const std::vector<std::string>& check_sites() const override { return check_sites_; }
  const codegen::TritonSource& source() const { return source_; }

 private:
  // Where one launched argument comes from.
  struct Arg {
    enum class Kind : uint8_t { BufferPointer, ArenaPointer, Value, Symbol, Expr } kind = Kind::Value;
    loop_ir::BufferId buffer = -1;  // BufferPointer: ctx->buffers[buffer]; both pointers: the tensor's buffer
    int64_t value = 0;              // ArenaPointer: byte offset in the arena; Value: the integer;
                                    // Symbol: the index into ctx->sym
    sym::Expr expr;                 // Expr: evaluated at ctx->sym (xnumel = s0*s1)
    // A pointer the kernel loads and stores: the bytes saved while tuning (over the symbols).
    sym::Expr in_place_bytes = 0;
  };
  // A launch's choice, made once (under `mutex`) and then read without a lock once `tuned` is set.
  struct Choice {
    std::mutex mutex;
    std::atomic<bool> tuned{false};
    Candidate best;                               // valid once tuned
    std::string unaligned_config;                 // under mutex: the config `unaligned` was built for
    std::shared_ptr<const cuda::Kernel> unaligned;
  };
  // The cubins of one divisibility class (and, when tuning, size bucket) and their choice.
  struct Variant {
    uint64_t key = 0;       // bit k: Size parameter sized[k] is a multiple of 16; bucket above bit 32
    Runnable runnable;
    Choice choice;
  };
  struct Launch {
    const codegen::TritonKernel* kernel = nullptr;         // in source_; null: launched_by another kernel
    const codegen::MatmulTemplate* matmul = nullptr;       // a template's launch: its grid
    std::vector<Arg> args;
    int64_t xnumel = 0;                // a program without symbols
    std::vector<size_t> sized;         // symbolic programs: args of Size parameters, their class bits
    size_t rnumel_arg = SIZE_MAX;      // the rnumel argument, for the tuning bucket
    // The first ones are built with the graph (the hints' class first); others are added under `mutex`.
    mutable std::vector<std::unique_ptr<Variant>> variants;
    std::unique_ptr<std::mutex> mutex;
  };
  // One matmul template and its choice against the two steps it replaces.
  struct MatmulSlot {
    const codegen::MatmulTemplate* matmul = nullptr;
    Launch launch;
    std::mutex mutex;
    std::atomic<int> state{0};  // kUndecided, kExtern or kTemplate; set once, under `mutex`
  };
  static constexpr int kUndecided = 0, kExtern = 1, kTemplate = 2;

  // A variant of `runnable`'s cubins under `key`, its choice made when there is nothing to tune.
  static std::unique_ptr<Variant> new_variant(uint64_t key, Runnable runnable);
  Launch make_launch(const loop_ir::Program& program, const memory::MemoryPlan& plan, const codegen::TritonKernel& kernel,
                     const codegen::MatmulTemplate* matmul, std::vector<Runnable> classes);
  // Programs along axes 0 and 1 for `config` at this xnumel.
  std::pair<uint32_t, uint32_t> grid_of(const Launch& launch, const codegen::TritonConfig& config, int64_t xnumel) const;
  // The buffers a launch loads and stores, at this call's values: saved and restored around timing.
  std::vector<cuda::InPlaceRegion> in_place_regions(const Launch& launch, const cuda::ArgValue* values) const;
  // Whether this call runs the template (deciding first when it can); false with a Python error set.
  bool matmul_choice(MatmulSlot& slot, ember_ctx* ctx, Env& env, bool* use_template) const;
  // The launch's arguments for this call: pointers from ctx, sizes evaluated at ctx->sym; returns xnumel.
  int64_t arg_values(const Launch& launch, const ember_ctx* ctx, cuda::ArgValue* values) const;
  // The key of the variant a launch with these argument values runs: its class and bucket.
  uint64_t variant_key(const Launch& launch, const cuda::ArgValue* values, int64_t xnumel) const;
  // The launch's variant for `key`, null when not built yet; `*first` (if given) its first variant,
  // read under the same lock (another thread may be adding a variant).
  Variant* find_variant(const Launch& launch, uint64_t key, const Variant** first = nullptr) const;
  // The variant for these argument values, built on first need together with the variants this
  // call (ctx) needs for the graph's other kernels; null with a Python error set.
  Variant* variant_for(const Launch& launch, const ember_ctx* ctx, const cuda::ArgValue* values, int64_t xnumel) const;
  struct MissingVariant {
    const Launch* launch = nullptr;
    uint64_t key = 0;
    const Variant* first = nullptr;  // the launch's first variant: its configs and build options
  };
  // Builds the variants in one parallel batch and adds those with a config that compiled; per
  // variant, "" or why none did. Takes the GIL.
  std::vector<std::string> build_variants(const std::vector<MissingVariant>& missing) const;
  bool launch_cuda(const Launch& launch, ember_ctx* ctx, Env& env) const;
  // Sets variant.choice (from the disk cache, else by timing); false with a Python error set.
  bool tune(const Launch& launch, Variant& variant, const cuda::ArgValue* values, int64_t xnumel, const Env& env) const;
  // A candidate for `config`: one already compiled, else compiled now (taking the GIL); a null
  // kernel with `*why` set when it does not compile.
  Candidate candidate_for(const Launch& launch, const Variant& variant, const codegen::TritonConfig& config,
                          int64_t xnumel, std::string* why) const;
  // The cubin of `config` without the alignment promise, for a launch whose pointers are not all
  // 16-byte aligned; null with a Python error set.
  const cuda::Kernel* unaligned_kernel(const Launch& launch, Variant& variant, const codegen::TritonConfig& config) const;
  bool launch_interpreted(const Launch& launch, const ember_ctx* ctx, Env& env) const;

  codegen::TritonSource source_;
  std::vector<loop_ir::Step> steps_;
  std::vector<Launch> launches_;
  std::vector<std::unique_ptr<MatmulSlot>> matmuls_;
  std::vector<int> matmul_at_step_;  // per step: the slot deciding that extern step, or -1
  std::vector<std::string> check_sites_;
  std::vector<std::string> symbol_names_;  // Program::symbols' names: ctx->sym[k] is symbol k's value
  bool interpreted_ = false;
  TuneOptions tune_;
};

// The runnables of `source` for `device`, per kernel (then per template) and class: on CUDA, every
// config of every kernel in each of its ahead_classes compiled through the cubin cache in one batch
// (in parallel), those that fail dropped with their reason (a kernel none of whose configs compiles
// in the hints' class throws; another class none of whose do is left to its first launch); on the
// CPU, every kernel loaded into Triton's interpreter (python/ember/_triton/interpret.py), one
// class. Needs the GIL. Throws TritonBuildError, CacheError, or std::runtime_error with the Python
// error's message.
std::vector<std::vector<TritonCode::Runnable>> build_runnables(const codegen::TritonSource& source,
                                                               const ir::Device& device,
                                                               const TritonBuildOptions& options, bool* all_cached);

// The compile job of `config` of `kernel` with its promises: every pointer 16-byte aligned when
// `aligned`, and the symbolic Size parameters whose bit is set in `divisible` (bit k: the k-th
// symbolic Size parameter in order) multiples of 16.
TritonCompileJob specialized_job(const codegen::TritonKernel& kernel, const codegen::TritonConfig& config, bool aligned,
                                 uint64_t divisible);

// The divisibility classes of `kernel` built with its graph: the class of its Size parameters'
// hints, then the classes they fall in when every symbol they mention is an odd multiple of 1, 2, 4,
// 8 or 16 (each combination for up to three symbols, all symbols alike beyond), distinct, at most
// kClassesAhead: the classes a model served over many sizes meets, compiled in the graph's one
// parallel batch rather than one batch per new class at the call that meets it. A static kernel: {0};
// a kernel with several configs (max-autotune: each class is that many jobs) only the hints' class.
std::vector<uint64_t> ahead_classes(const codegen::TritonKernel& kernel);
constexpr size_t kClassesAhead = 8;

}  // namespace ember::runtime
