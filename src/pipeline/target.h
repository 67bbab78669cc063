// Target: the machine a compilation generates code for, and that machine's settings as data.
//
// The pipeline's steps read their target-dependent choices (fusion limits, parallel thresholds,
// vector spelling) from here instead of hard-wiring them, so a second backend is a second Target
// value plus its emit step, not an edit of every stage. The C++ compiler's own flags (ISA, cache)
// are the runtime's (runtime/cpp_compiler.h): they choose how source becomes a library, not what
// source is generated.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "codegen/cpp/cpp_codegen.h"
#include "codegen/triton/triton_codegen.h"
#include "ir/graph.h"
#include "scheduler/scheduler.h"
#include "support/options.h"

namespace ember::pipeline {

struct Target {
  // The GPU whose size the Triton settings assume: code is compiled for sm_90 without a device, so
  // the SM count is a setting, not a query.
  static constexpr int64_t kH200Sms = 132;

  // Cpu: one C++ translation unit (codegen/cpp). Triton: one Triton kernel per loop-IR kernel
  // (codegen/triton), for NVIDIA GPUs or Triton's interpreter.
  enum class Kind : uint8_t { Cpu, Triton };
  Kind kind = Kind::Cpu;
  // Where the graph's tensors live: the CPU for Cpu; for Triton a CUDA device, or the CPU when the
  // kernels run in Triton's interpreter (CompileOptions::triton_interpret). Code generation does not
  // read it; the runtime builds for it.
  ir::Device device;
  scheduler::ScheduleOptions schedule;
  scheduler::SplitOptions split;  // off for Cpu
  codegen::CppOptions cpp;        // Cpu
  codegen::TritonOptions triton;  // Triton
  // Triton on CUDA: after timing the candidates at the first launch, refine the fastest by
  // coordinate descent (runtime/autotune.h). Set by max-autotune.
  bool coordinate_descent = false;
  // torch.use_deterministic_algorithms when the graph was traced (lowering::LowerOptions).
  bool deterministic = false;
  // Inference graphs with a chain of 2-d convolutions run them channels-last (passes::channels_last;
  // CompileOptions::layout_optimization).
  bool layout_optimization = true;

  static Target cpu() { return Target{}; }
  static Target gpu(ir::Device device = ir::Device{"cuda", 0}) {  // Kind::Triton (`triton()` is the field)
    Target t;
    t.kind = Kind::Triton;
    t.device = std::move(device);
    t.split.min_programs = 2 * kH200Sms;
    t.schedule.inline_max_recompute = 0;
    return t;
  }
  std::string str() const;  // "cpu", "triton"
};

// The target that serves graphs living on `device`, or nullopt (with the reason) when Ember has no
// code generator for it: those graphs run on the eager executor. CUDA devices get Triton; the CPU
// gets C++, or Triton run by its interpreter when `triton_on_cpu` (a testing aid).
// `mode` sets the Triton settings: Default and ReduceOverhead keep the heuristic's one config per
// kernel (nothing to tune: a first call costs no timing, a kernel one compile); MaxAutotune
// compiles up to kMaxAutotuneConfigs candidates per kernel, times them at the first launch and
// refines the fastest by coordinate descent (runtime/autotune.h); on CUDA it also emits a matmul
// template per extern matmul + epilogue for the runtime to time against them (matmul choice). The C++ target is the same in
// every mode.
constexpr int kMaxAutotuneConfigs = 8;
std::optional<Target> target_for(const ir::Device& device, bool triton_on_cpu, Mode mode, std::string* reason);

}  // namespace ember::pipeline
