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
#include "ir/graph.h"
#include "scheduler/scheduler.h"

namespace ember::pipeline {

struct Target {
  // The only kind Ember generates code for today; CUDA (Triton) joins with the GPU backend.
  enum class Kind : uint8_t { Cpu };
  Kind kind = Kind::Cpu;
  scheduler::ScheduleOptions schedule;
  codegen::CppOptions cpp;

  static Target cpu() { return Target{}; }
  std::string str() const;  // "cpu"
};

// The target that serves graphs living on `device`, or nullopt (with the reason) when Ember has no
// code generator for it yet: those graphs run on the eager executor.
std::optional<Target> target_for(const ir::Device& device, std::string* reason);

}  // namespace ember::pipeline
