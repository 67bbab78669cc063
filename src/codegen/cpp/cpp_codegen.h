// The C++ code generator: a scheduled, planned loop IR program → C++ source: one function per
// distinct kernel and an entry function that runs every step of the program (docs/codegen-cpp.md).
//
// Needs: a verified Program with constant sizes, strides and offsets, and its MemoryPlan (an
// arena offset for every Temp buffer). Guarantees: deterministic text (the same program, plan and
// options print the same bytes, so the code cache keys on it); the source includes only
// <ember/vec.h> and <ember/runtime.h> (the ABI with the runtime) and the C++ standard library.
// Kernels are `extern "C"` functions over typed element-0 pointers (and shape symbols, and ctx
// when they check indices), named after the hash of their canonical text (buffer names replaced by
// their position): kernels identical up to which buffers they touch are one function, emitted
// once, and a later graph that needs the same function can reuse its compiled code (the code cache
// keys each unit of kernels on its text: docs/code-cache.md). The entry `extern "C" int
// ember_entry(ember_ctx*, void* const* kernels)` gets the functions' addresses in the order of
// `kernels` and runs kernels and extern calls (through the ABI's callback), so no Python runs
// between kernels. Code generation only prints: every decision it takes (vectorize a loop or not,
// run outer loops in parallel or not) is written as a comment above the kernel, with its reason.
//
// Why a separate stage that only prints: scheduling and memory planning already fixed what runs
// where; keeping this stage free of decisions other than the loop shapes makes generated code
// easy to diff between versions.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "loop_ir/loop_ir.h"
#include "memory/memory_plan.h"

namespace ember::codegen {

struct CppOptions {
  bool openmp = true;                       // emit `#pragma omp` (the driver compiles with -fopenmp)
  // A kernel runs its outer loops in parallel from this much work: outer points × the sum of its
  // loops' trip counts (elements touched, roughly). Below it OpenMP's fork/join costs more than
  // it saves.
  int64_t parallel_threshold = 32768;
};

// One kernel function.
struct CppKernel {
  std::string name;                    // ember_k_<16 hex digits of the sha256 of its canonical text>
  std::string text;                    // its definition with its comment block; parameters p0, p1, ...
  std::vector<std::string> instances;  // the program's kernels it runs ("k2", "k7")
};

struct CppSource {
  std::string text;                   // everything as one translation unit: prelude, kernels, entry
  std::string prelude;                // what a unit of kernels starts with (includes; vec.h first)
  std::vector<CppKernel> kernels;     // distinct, in first-call order: the entry's table order
  std::string entry_code;             // the entry's definition: compiled after `prelude`, like a kernel
  std::string entry = "ember_entry";  // the entry symbol
  // Check sites (one per check_index node of each kernel call), indexed by ember_ctx::error_site:
  // "k2 %t5", so a failed check names where it failed.
  std::vector<std::string> check_sites;
};

// A program that code generation cannot handle (symbolic sizes, complex or float8 buffers, an op
// applied to a dtype it has no meaning for). The message names the buffer or node.
struct CodegenError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

CppSource emit_cpp(const loop_ir::Program& program, const memory::MemoryPlan& plan, const CppOptions& options);


}  // namespace ember::codegen
