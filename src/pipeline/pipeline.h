// The pipeline: the one ordered list of steps that turns a captured graph into generated code.
//
//   canonicalize -> [joint] -> decompose -> dce -> cse -> [partition] -> lower -> simplify ->
//   schedule -> plan -> emit
//
// joint and partition act on training graphs only (src/autograd): joint replaces the graph by its
// joint forward + backward graph, partition cuts that in two and leaves the forward as the current
// graph and the backward beside it (`Compilation::backward`), which the caller compiles on from
// `lower` as a Compilation of its own.
//
// pipeline.cpp holds that list (`steps()`), read top to bottom like Halide's Lower.cpp. Everything
// that runs stages calls it: the compiler (frame -> graph -> kernels), `ember-opt` (golden tests),
// the Python bindings (tests). Nothing else wires stages together.
//
// A `Compilation` holds what the steps have produced so far; its current IR is the last one made
// (graph, then loop IR, then C++ source). Each step reads one IR kind, rewrites or produces the
// next, and says whether it changed anything. `run_step` is the one place a step runs: it times
// the step, verifies the IR it left when asked (`Instruments::verify`: always in tests, after
// every step, blaming the step that broke the IR), and prints that IR when asked (after named steps,
// or after every step that changed something: EMBER_LOGS=passes).
//
// Needs: an input IR that verifies (the caller checks; ember-opt and the bindings verify what they
// parse). Guarantees: steps run in list order; a step that throws stops the compilation with a
// `StepError` naming the step and carrying the message (the driver decides between a fallback and
// an error); a `verify` failure is a `VerifyError`, a StepError of the step that broke the IR.
#pragma once

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/cpp/cpp_codegen.h"
#include "codegen/triton/triton_codegen.h"
#include "autograd/autograd.h"
#include "autograd/autograd.h"
#include "ir/graph.h"
#include "loop_ir/loop_ir.h"
#include "memory/memory_plan.h"
#include "pipeline/target.h"
#include "scheduler/scheduler.h"

namespace ember::pipeline {

// The IR kinds a compilation moves through, in order.
enum class IRKind : uint8_t { Graph, Loop, Cpp, Triton };
const char* ir_kind_name(IRKind kind);  // "graph", "loop", "cpp", "triton"

// What the steps have produced so far, and where in the list `compile` goes on.
struct Compilation {
  explicit Compilation(ir::Graph g);
  explicit Compilation(loop_ir::Program p);
  // A graph compiled from the step named `first_step` on (a partition's backward: from `lower`).
  Compilation(ir::Graph g, std::string_view first_step);

  ir::Graph graph;
  // Training graphs: the joint's layout from `joint` on (unset when the graph is not one, or when
  // it cannot be differentiated: `not_differentiable` says why); from `partition` on, the partition
  // (its forward is `graph`; its backward graph is held here).
  std::optional<autograd::JointLayout> joint;
  std::string not_differentiable;
  autograd::JointOptions joint_options;          // set by the caller (CompileOptions)
  autograd::PartitionOptions partition_options;  // set by the caller (CompileOptions)
  std::optional<autograd::Partition> partition;
  loop_ir::Program program;                         // from `lower` on (or the input)
  IRKind kind = IRKind::Graph;                      // the current IR
  std::vector<std::string> lowering_refusals;       // why each core op became an extern call
  std::vector<scheduler::FusionDecision> decisions; // the scheduler's, in order
  std::optional<memory::MemoryPlan> plan;           // from `plan` on
  std::optional<codegen::CppSource> source;         // from `emit` on, for a Cpu target
  std::optional<codegen::TritonSource> triton;      // from `emit` on, for a Triton target
  size_t next_step = 0;                             // index in steps() of the step compile() runs next

  // The current IR as text: graph IR (after partition: the partition's decisions and both graphs); loop IR (the scheduler's decisions first as `// fusion:`
  // lines and the memory plan after it as `// memory:` lines, when those steps ran); the fusion
  // lines and the C++ translation unit, or the printed Triton kernels, once emitted.
  std::string print() const;
  // The verifier's messages for the current IR (empty: valid); graph IR's include core-op result
  // types that differ from the shape rules' answers.
  std::vector<std::string> verify() const;
};

struct Step {
  const char* name;     // as `ember-opt --pass NAME` / `--stop-after NAME` spell it
  IRKind reads;         // the IR kind the step needs as current
  const char* summary;  // one line, for `ember-opt --list-passes`
  bool (*run)(Compilation& c, const Target& target);  // whether it changed anything
};

// The one ordered list.
const std::vector<Step>& steps();
// nullptr if no step has that name.
const Step* find_step(std::string_view name);

// What one step did.
struct StepRecord {
  std::string name;
  double seconds = 0;
  bool changed = false;
  std::string ir;  // the IR it left, printed when Instruments asked for it; else empty
};

// How steps are watched. Plain data, set by the caller (the compiler from CompileOptions, ember-opt
// from its flags, tests always with `verify`).
struct Instruments {
  bool verify = false;                   // verify after each step
  bool print_changed = false;            // print the IR after each step that changed it
  std::vector<std::string> print_after;  // ... and after these steps, changed or not
  std::string stop_after;                // compile(): stop after this step ("" = run to the end)
  // Throw a StepError after this step, as if it had failed: tests of the error path of whoever runs
  // the pipeline (the driver's fallback, strict mode). Like Dynamo's *_TESTING_ONLY settings.
  std::string inject_fault_after;
  std::function<void(const StepRecord&)> on_step;  // called after each step, in order
};

// An exception that escaped a step (or its verification): what() is the original message.
struct StepError : std::runtime_error {
  StepError(std::string step_name, const std::string& message) : std::runtime_error(message), step(std::move(step_name)) {}
  std::string step;
};
struct VerifyError : StepError {
  using StepError::StepError;
};

// Runs one step: times it, verifies and prints as `instruments` ask, reports it to on_step.
// Throws StepError when the step throws, or when the current IR is not the kind the step reads.
void run_step(const Step& step, Compilation& c, const Target& target, const Instruments& instruments);

// Runs the list from `c.next_step` (for a new Compilation: the first step that reads its IR) through
// `instruments.stop_after` (which must name a step not before it) or to the end. A compilation
// stopped early goes on from there when compile() is called again.
void compile(Compilation& c, const Target& target, const Instruments& instruments);

}  // namespace ember::pipeline
