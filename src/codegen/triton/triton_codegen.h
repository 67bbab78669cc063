// The Triton code generator: a scheduled, planned loop IR program -> one Triton kernel (a Python
// module's text) per loop-IR kernel, plus everything the runtime needs to compile and launch it
// without reading that text (docs/codegen-triton.md).
//
// Needs: a verified Program (sizes, strides and offsets constant or over its shape symbols, strides
// and offsets never negative), its MemoryPlan, all buffers on one CUDA device (or the CPU, for Triton's
// interpreter). Guarantees:
//  - Deterministic text: the same kernel prints the same bytes whatever program it comes from and
//    whatever its position there (names are derived from content, never from `k3`), so the cubin
//    cache shares identical kernels within a graph and across graphs.
//  - A kernel's parameters are its root buffers (Input, Output, Extern and Temp buffers; a View is
//    addressed through the buffer its chain of bases ends at, its offset folded into the index
//    math), then its sizes. A Temp's pointer is the arena plus the planned offset, which the
//    runtime computes, so a kernel never sees the arena itself.
//  - Symbolic sizes (docs/dynamic-shapes.md): each shape symbol a kernel mentions is an integer
//    parameter of its name (after xnumel and rnumel); every decision holds for every value in the
//    symbols' ranges: symbolic extents are masked, a persistent reduction's RBLOCK covers the
//    largest row the ranges allow (looped when unbounded), int32 indexing only when the ranges
//    bound every index and span below INT32_MAX. Configs are chosen at the hints.
//  - Values are computed as the loop IR says (loop_ir.h "Dtypes"): f16/bf16 loads upcast to f32,
//    stores round to nearest even; max/min propagate NaN; floordiv/mod round toward -inf.
//  - All math the `tl` namespace lacks goes through Ember's helper module (python/ember/_triton/
//    helpers.py: libdevice on the GPU, `tl` shims under TRITON_INTERPRET=1), imported by every
//    kernel's text; its bytes are part of the cubin cache key.
//  - Under options.matmul_templates (max-autotune on CUDA), each extern matmul whose result only
//    the kernel step after it reads, elementwise, also gets a matmul template doing both steps
//    (MatmulTemplate; matmul_template.cpp); every other extern matmul gets the reason it has none.
//    The program's own kernels are the same with or without them.
// Code generation only prints: the kernel kind (pointwise, persistent or looped reduction), the
// index width and the candidate configs are decided from sizes here and written as a comment
// above the kernel with their reasons.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "codegen/cpp/cpp_codegen.h"  // CodegenError
#include "loop_ir/loop_ir.h"
#include "memory/memory_plan.h"
#include "sym/relation.h"

namespace ember::codegen {

struct TritonOptions {
  // A reduction whose loops each run at most this many iterations keeps its row in registers
  // (one [XBLOCK, RBLOCK] block, no loop); longer ones loop over RBLOCK-wide chunks.
  int64_t persistent_max_rnumel = 1024;
  // Candidate configs per kernel: 1 = the heuristic's choice only (default mode); more for
  // autotuning (max-autotune widens the list).
  int max_configs = 1;
  // max-autotune: a matmul template (matmul_template.h) for each extern matmul followed by its
  // pointwise epilogue, for the runtime to time against the extern call + epilogue kernel.
  bool matmul_templates = false;
  // torch.backends.cuda.matmul.allow_tf32 at compile time: fp32 templates' tl.dot precision. Part
  // of the template's text, so of every cache key built from it.
  bool allow_tf32 = false;
  // The most pointer parameters of one grouped kernel (runtime/cuda/kernel.h launches at most 126
  // parameters); a program group whose members need more runs as several grouped kernels.
  int64_t max_group_params = 120;
};

// One non-constexpr parameter of a kernel's @triton.jit function, in order.
struct TritonParam {
  enum class Kind : uint8_t {
    Pointer,  // element 0 of `buffer` (a root buffer: Input, Output, Extern or Temp)
    Size,     // an integer the kernel receives at launch (`value`): xnumel, rnumel, symbolic sizes
  };
  // Pointer: how the kernel touches the buffer (the name's prefix says the same, for people). The
  // runtime saves and restores a LoadStore buffer around autotuning's trial launches.
  enum class Use : uint8_t { Load = 1, Store = 2, LoadStore = 3 };
  Kind kind = Kind::Pointer;
  Use use = Use::Load;
  std::string name;            // as in the source: in_ptr0, out_ptr1, in_out_ptr0, xnumel
  std::string type;            // Triton signature type: "*fp32", "*bf16", "*i64", "*i1", "i32", "i64"
  loop_ir::BufferId buffer = -1;  // Pointer
  sym::Expr value;             // Size: over the program's shape symbols when sizes are symbolic
  int64_t hint = 0;            // Size: `value` at the symbols' hints (the cubin built ahead of the first call)
};

// One launch configuration: values of the kernel's constexpr block sizes, and compile options.
struct TritonConfig {
  std::vector<std::pair<std::string, int64_t>> blocks;  // ("XBLOCK", 1024), ("RBLOCK", 256)
  int num_warps = 4;
  int num_stages = 1;
  std::string str() const;  // "XBLOCK=1024 RBLOCK=256 num_warps=4 num_stages=1"
};

struct TritonKernel {
  // Matmul: a matmul template (matmul_template.h), launched over MatmulTemplate::grid. Group: the
  // members of a program group (loop_ir/group.h) in one launch (emit.cpp, emit_group).
  enum class Kind : uint8_t { Pointwise, PersistentReduction, LoopedReduction, Matmul, Group };
  Kind kind = Kind::Pointwise;
  std::string name;            // the @triton.jit function's name, derived from content
  std::string source;          // a whole Python module: imports, then the @triton.jit function
  std::vector<TritonParam> params;
  std::vector<TritonConfig> configs;  // candidates, the heuristic's best guess first; never empty but launched_by's
  sym::Expr xnumel;            // outer points: the grid is ceil(xnumel / XBLOCK) programs (axis 0)
  sym::Expr rnumel;            // the longest loop's trip count (1 for pointwise kernels)
  // check_index nodes become device assertions, which Triton compiles only with debug on; their
  // sites name the kernel and node, as CppSource::check_sites does.
  std::vector<std::string> check_sites;
  // Relations on the shape symbols the code relies on, each true at the hints, for the frame to guard
  // (a call that breaks one recompiles): int32 indexing of a kernel whose sizes are unbounded,
  // `xnumel*rnumel <= 2147483647` and its largest buffer span's, as Inductor guards its 32-bit indexing.
  std::vector<sym::Rel> assumptions;
  // Group: the program kernels it runs, in step order; it launches at the first one's step.
  std::vector<int> members;
  // A kernel whose work the launch of kernels[launched_by] does (a member of a grouped kernel other
  // than its first): it has no source, parameters or configs, and its step launches nothing.
  int launched_by = -1;
  // The Triton signature: (name, type) for every parameter of the function, constexprs included
  // (type "constexpr"), in the function's order, as triton.compile's ASTSource takes it.
  std::vector<std::pair<std::string, std::string>> signature() const;
};

// Candidate (b) of a matmul choice (docs/cuda-runtime.md, "Matmul choice"): one kernel doing the
// work of program.externs[extern_index] and of program.kernels[epilogue], the kernel step right
// after it; the runtime runs either those two steps (candidate (a)) or this kernel.
struct MatmulTemplate {
  int extern_index = -1;
  int epilogue = -1;           // index into program.kernels
  TritonKernel kernel;         // Kind::Matmul; blocks BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M
  int64_t batch = 1, m = 0, n = 0, k = 0;
  // Programs of a launch: (ceil(m / BLOCK_M) * ceil(n / BLOCK_N), batch), axes 0 and 1.
  std::pair<int64_t, int64_t> grid(const TritonConfig& config) const;
};

struct TritonSource {
  // kernels[k] runs program.kernels[k], or, for the members of a program group (loop_ir/group.h),
  // a grouped kernel at its first member's index runs a run of members (at most
  // TritonOptions::max_group_params pointers), the others `launched_by` it.
  std::vector<TritonKernel> kernels;
  // Every kernel's and template's assumptions (TritonKernel::assumptions), without repeats.
  std::vector<sym::Rel> assumptions() const;
  std::vector<MatmulTemplate> matmul_templates;  // options.matmul_templates only
  // Extern matmuls that got no template, each with the reason (EMBER_LOGS=perf, goldens).
  std::vector<std::string> matmul_refusals;
};

// Throws CodegenError naming the buffer or node when the program has something this backend does
// not generate (a view that changes dtype, complex or float8 buffers, a possibly negative stride).
TritonSource emit_triton(const loop_ir::Program& program, const memory::MemoryPlan& plan, const TritonOptions& options);

// Text form for golden tests and EMBER_LOGS=output_code: every kernel's source, each preceded by a
// comment block with its kind, parameters (and which buffer each pointer is) and configs.
std::string print(const TritonSource& source);

}  // namespace ember::codegen
