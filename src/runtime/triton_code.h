// TritonCode: the GraphCode of the Triton backend. It runs a program's steps in order from C++:
// each kernel step is one launch of its Triton kernel, each extern step the extern callback
// (docs/codegen-triton.md, "Runtime").
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
#pragma once

#include <Python.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/triton/triton_codegen.h"
#include "loop_ir/loop_ir.h"
#include "memory/memory_plan.h"
#include "pybridge/pyref.h"
#include "runtime/compiled_graph.h"
#include "runtime/cuda/kernel.h"
#include "runtime/triton_build.h"

namespace ember::runtime {

class TritonCode : public GraphCode {
 public:
  // What runs one kernel: its cubin on the GPU, or its interpreted function. `config` is the
  // config the binary was compiled with (its block sizes give the grid).
  struct Runnable {
    codegen::TritonConfig config;
    std::shared_ptr<const cuda::Kernel> cuda;  // pointers promised 16-byte aligned
    TritonCompileJob unaligned_job;            // cuda: the same kernel without that promise
    TritonBuildOptions build_options;
    PyRef interpreted;
  };

  // runnables[k] runs source.kernels[k]. Throws std::invalid_argument on a mismatch.
  TritonCode(const loop_ir::Program& program, const memory::MemoryPlan& plan, codegen::TritonSource source,
             std::vector<Runnable> runnables);

  int run(ember_ctx* ctx, Env& env) const override;
  bool needs_gil() const override { return interpreted_; }
  const std::vector<std::string>& check_sites() const override { return check_sites_; }
  const codegen::TritonSource& source() const { return source_; }

 private:
  // Where one launched argument comes from.
  struct Arg {
    enum class Kind : uint8_t { BufferPointer, ArenaPointer, Value } kind = Kind::Value;
    loop_ir::BufferId buffer = -1;  // BufferPointer: ctx->buffers[buffer]; both pointers: the tensor's buffer
    int64_t value = 0;              // ArenaPointer: byte offset in the arena; Value: the integer
  };
  struct Launch {
    std::vector<Arg> args;
    int64_t xnumel = 0;
    int64_t xblock = 1;
    Runnable runnable;
    mutable std::shared_ptr<const cuda::Kernel> unaligned;  // built on first need, under unaligned_mutex_
  };
  bool launch_cuda(const Launch& launch, ember_ctx* ctx, Env& env) const;
  // The cubin for a launch whose pointers are not all 16-byte aligned; null with a Python error set.
  const cuda::Kernel* unaligned_kernel(const Launch& launch) const;
  bool launch_interpreted(const Launch& launch, Env& env) const;

  codegen::TritonSource source_;
  std::vector<loop_ir::Step> steps_;
  std::vector<Launch> launches_;
  std::vector<std::string> check_sites_;
  bool interpreted_ = false;
  mutable std::mutex unaligned_mutex_;
};

// The runnables of `source` for `device`: on CUDA, every kernel's first config compiled through the
// cubin cache in one batch (in parallel); on the CPU, every kernel loaded into Triton's interpreter
// (python/ember/_triton/interpret.py). Needs the GIL. Throws TritonBuildError, CacheError, or
// std::runtime_error with the Python error's message.
std::vector<TritonCode::Runnable> build_runnables(const codegen::TritonSource& source, const ir::Device& device,
                                                  const TritonBuildOptions& options, bool* all_cached);

}  // namespace ember::runtime
