#include "pipeline/pipeline.h"

#include "sym/symbols.h"

#include <chrono>
#include <sstream>

#include "loop_ir/collapse.h"
#include "lowering/lowering.h"
#include "passes/passes.h"
#include "shapes/check_types.h"

namespace ember::pipeline {

const char* ir_kind_name(IRKind kind) {
  switch (kind) {
    case IRKind::Graph: return "graph";
    case IRKind::Loop: return "loop";
    case IRKind::Cpp: return "cpp";
    case IRKind::Triton: return "triton";
  }
  return "?";
}

const std::vector<Step>& steps() {
  static const std::vector<Step> kSteps = {
      // Graph IR.
      {"canonicalize", IRKind::Graph, "bind arguments to parameters: defaults, non-negative dims, sizes as lists",
       [](Compilation& c, const Target&) { return passes::canonicalize(c.graph); }},
      {"functional_writes", IRKind::Graph,
       "in-place calls on intermediates nothing else can see made out of place (docs/decompositions.md)",
       [](Compilation& c, const Target&) { return passes::writes_out_of_place(c.graph); }},
      {"joint", IRKind::Graph, "a training graph becomes its joint forward + backward graph (docs/autograd.md)",
       [](Compilation& c, const Target&) {
         if (!autograd::is_training_graph(c.graph)) return false;
         std::optional<autograd::Joint> joint = autograd::build_joint(c.graph, c.joint_options, &c.not_differentiable);
         if (!joint) return false;
         c.graph = std::move(joint->graph);
         c.joint = std::move(joint->layout);
         return true;
       }},
      {"attention_math", IRKind::Graph,
       "inference on the CPU: attention of shapes torch's fused kernel refuses as the math form torch runs (docs/autograd.md)",
       [](Compilation& c, const Target&) { return !c.joint && autograd::attention_math_for_inference(c.graph); }},
      {"decompose", IRKind::Graph, "rewrite composite ops into primitives (docs/decompositions.md)",
       [](Compilation& c, const Target&) { return passes::decompose(c.graph); }},
      {"dce", IRKind::Graph, "remove nodes whose results are unused and whose execution has no effect",
       [](Compilation& c, const Target&) { return passes::dce(c.graph); }},
      {"cse", IRKind::Graph, "replace a core op that repeats an earlier identical one by the earlier result",
       [](Compilation& c, const Target&) { return passes::cse(c.graph); }},
      {"channels_last", IRKind::Graph,
       "inference: convolutions read channels-last activations, which the ops after them keep (docs/pipeline.md)",
       [](Compilation& c, const Target& target) {
         return target.layout_optimization && !c.joint && passes::channels_last(c.graph);
       }},
      {"partition", IRKind::Graph, "cut a joint graph into forward and backward graphs (docs/autograd.md)",
       [](Compilation& c, const Target&) {
         if (!c.joint) return false;
         c.partition = autograd::partition(autograd::Joint{std::move(c.graph), *c.joint}, c.partition_options);
         c.graph = c.partition->forward;
         return true;
       }},

      // Graph IR -> loop IR.
      {"lower", IRKind::Graph, "lower the graph to loop IR: one kernel per op, extern calls for the rest",
       [](Compilation& c, const Target& target) {
         c.program = lowering::lower(c.graph, &c.lowering_refusals, {target.deterministic});
         c.kind = IRKind::Loop;
         return true;
       }},
      {"simplify", IRKind::Loop, "simplify every index expression with its kernel's and loop's variable ranges",
       [](Compilation& c, const Target&) { return loop_ir::simplify_indices(c.program); }},
      // Splitting belongs to this step, not one of its own: the compiler reads the decisions and
      // the kernel count after `schedule` (src/driver/backend.cpp).
      {"schedule", IRKind::Loop,
       "fuse kernels: inline, vertical and sibling fusion; then split long reductions with few outputs (Triton) "
       "(docs/scheduler.md)",
       [](Compilation& c, const Target& target) {
         c.decisions = scheduler::schedule(c.program, target.schedule);
         for (auto& d : scheduler::split_reductions(c.program, target.split)) c.decisions.push_back(std::move(d));
         for (const auto& d : c.decisions)
           if (d.kind != scheduler::FusionDecision::Kind::Refused) return true;
         return false;
       }},
      // After scheduling (fusion sees the extern's result as before) and before planning, which places
      // the results as temporaries.
      {"extern_outs", IRKind::Loop,
       "CPU: linear of 2-d operands as torch.addmm / torch.mm of the transposed weight; matmul extern calls write a temporary result through out= into the arena (docs/memory.md)",
       [](Compilation& c, const Target& target) {
         return target.kind == Target::Kind::Cpu && memory::arena_extern_results(c.program);
       }},
      {"plan", IRKind::Loop, "plan temporaries into one arena by liveness",
       [](Compilation& c, const Target&) {
         c.plan = memory::plan_memory(c.program);
         return true;
       }},
      // After planning (the plan never sees the change). C++: one long vector loop instead of a short
      // one per row (docs/loop-ir.md, "Collapse"). Triton: pointwise kernels only, in memory order (a
      // channels-last tensor's loads and stores coalesce) and collapsed (a contiguous access is then
      // one affine offset of the flat index, which Triton's loads vectorize).
      {"collapse", IRKind::Loop,
       "merge adjacent loop variables every access walks contiguously (Triton: pointwise kernels); pointwise kernels in memory order",
       [](Compilation& c, const Target& target) {
         if (target.kind == Target::Kind::Cpu) return loop_ir::collapse_loops(c.program);
         // (A template's epilogue may be collapsed: the template decodes its points from each element's
         // flat index, matmul_template.cpp's fit_tile.)
         bool changed = false;
         for (const loop_ir::Step& step : c.program.steps)
           if (step.kind == loop_ir::Step::Kind::Kernel)
             changed |= loop_ir::collapse_pointwise(c.program, c.program.kernels.at(static_cast<size_t>(step.index)));
         return changed;
       }},
      // After collapse (the common body reads flat offsets; docs/scheduler.md, "Grouped kernels").
      // C++: a group opens one parallel region, worth it from the parallel threshold's elements on;
      // Triton: a group is one launch instead of one per member, worth it from two members.
      {"group", IRKind::Loop, "run consecutive pointwise kernels of one body as one grouped kernel",
       [](Compilation& c, const Target& target) {
         // Symbolic programs are planned per call: no offsets to check members' temporaries by.
         if (!c.program.symbols.empty()) return false;
         if (!c.plan) throw std::invalid_argument("group needs the memory plan: run `plan` first");
         const memory::MemoryPlan& plan = *c.plan;
         auto share_memory = [&](loop_ir::BufferId a, loop_ir::BufferId b) {
           const auto bytes = [&](loop_ir::BufferId id) {
             const loop_ir::Buffer& buf = c.program.buffers.at(id);
             int64_t span = 1;
             for (size_t d = 0; d < buf.sizes.size(); ++d) {
               if (!buf.sizes[d].is_constant() || !buf.strides[d].is_constant()) return int64_t{-1};
               if (buf.sizes[d].constant() == 0) return int64_t{0};
               span += (buf.sizes[d].constant() - 1) * buf.strides[d].constant();
             }
             return span * ir::dtype_itemsize(buf.dtype);
           };
           const int64_t ea = bytes(a), eb = bytes(b);
           if (ea < 0 || eb < 0) return true;
           const int64_t pa = plan.offsets.at(a), pb = plan.offsets.at(b);
           return pa < pb + eb && pb < pa + ea;
         };
         const int64_t min_elements = target.kind == Target::Kind::Cpu ? target.cpp.parallel_threshold : 0;
         for (auto& d : scheduler::group_kernels(c.program, min_elements, share_memory)) c.decisions.push_back(std::move(d));
         return !c.program.groups.empty();
       }},

      // Loop IR -> target code.
      {"emit", IRKind::Loop, "generate the target's code from the scheduled, planned program",
       [](Compilation& c, const Target& target) {
         if (!c.plan) throw std::invalid_argument("emit needs the memory plan: run `plan` first");
         switch (target.kind) {
           case Target::Kind::Cpu:
             c.source = codegen::emit_cpp(c.program, *c.plan, target.cpp);
             c.kind = IRKind::Cpp;
             return true;
           case Target::Kind::Triton:
             c.triton = codegen::emit_triton(c.program, *c.plan, target.triton);
             c.kind = IRKind::Triton;
             return true;
         }
         throw std::invalid_argument("emit: unknown target kind");
       }},
  };
  return kSteps;
}

const Step* find_step(std::string_view name) {
  for (const Step& s : steps())
    if (name == s.name) return &s;
  return nullptr;
}

namespace {

size_t first_step_reading(IRKind kind) {
  size_t i = 0;
  while (i < steps().size() && steps()[i].reads != kind) ++i;
  return i;
}

}  // namespace

Compilation::Compilation(ir::Graph g) : graph(std::move(g)), next_step(first_step_reading(IRKind::Graph)) {}
Compilation::Compilation(ir::Graph g, std::string_view first_step) : graph(std::move(g)) {
  const Step* step = find_step(first_step);
  if (!step || step->reads != IRKind::Graph)
    throw std::invalid_argument("a graph compilation cannot start at step '" + std::string(first_step) + "'");
  next_step = static_cast<size_t>(step - steps().data());
}

Compilation::Compilation(loop_ir::Program p)
    : program(std::move(p)), kind(IRKind::Loop), next_step(first_step_reading(IRKind::Loop)) {}

std::string Compilation::print() const {
  if (kind == IRKind::Graph) {
    if (partition) return autograd::print(*partition);
    if (joint) return "// joint: " + joint->str() + "\n" + ir::print(graph);
    return ir::print(graph);
  }
  std::string text;
  for (const auto& d : decisions) text += "// fusion: " + d.str() + "\n";
  if (kind == IRKind::Cpp) return text + source->text;
  if (kind == IRKind::Triton) return text + codegen::print(*triton);
  text += loop_ir::print(program);
  if (plan) {
    std::istringstream lines(plan->str());
    for (std::string line; std::getline(lines, line);) text += "// memory: " + line + "\n";
  }
  return text;
}

std::vector<std::string> Compilation::verify() const {
  switch (kind) {
    case IRKind::Graph: {
      // Structure first; a graph that is well formed also has its core-op types checked against the
      // shape rules (src/shapes/check_types.h: only where a rule answers).
      std::vector<std::string> problems = ir::verify(graph);
      return problems.empty() ? shapes::check_node_types(graph) : problems;
    }
    case IRKind::Loop: return loop_ir::verify(program);
    case IRKind::Cpp: return {};     // the C++ compiler is its verifier
    case IRKind::Triton: return {};  // so is Triton's
  }
  return {};
}

void run_step(const Step& step, Compilation& c, const Target& target, const Instruments& instruments) {
  if (c.kind != step.reads)
    throw StepError(step.name, std::string("step ") + step.name + " reads " + ir_kind_name(step.reads) +
                                   " IR, but the current IR is " + ir_kind_name(c.kind));
  StepRecord record;
  record.name = step.name;
  auto start = std::chrono::steady_clock::now();
  try {
    record.changed = step.run(c, target);
  } catch (const sym::SymbolicUnsupported&) {
    throw;  // not a failure of the step: the driver compiles the graph for static sizes instead
  } catch (const std::exception& e) {
    throw StepError(step.name, e.what());
  }
  record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (instruments.inject_fault_after == record.name)
    throw StepError(record.name, "a fault injected after step " + record.name + " (inject_fault_after)");
  if (instruments.verify) {
    std::vector<std::string> problems = c.verify();
    if (!problems.empty()) {
      std::string message = "after step " + record.name + ", the " + ir_kind_name(c.kind) + " IR does not verify:";
      for (const std::string& p : problems) message += "\n  " + p;
      throw VerifyError(record.name, message);
    }
  }
  bool named = false;
  for (const std::string& n : instruments.print_after) named = named || n == record.name;
  if (named || (instruments.print_changed && record.changed)) record.ir = c.print();
  if (instruments.on_step) instruments.on_step(record);
}

void compile(Compilation& c, const Target& target, const Instruments& instruments) {
  const std::vector<Step>& list = steps();
  size_t end = list.size();
  if (!instruments.stop_after.empty()) {
    const Step* stop = find_step(instruments.stop_after);
    if (!stop) throw std::invalid_argument("no step named '" + instruments.stop_after + "'");
    end = static_cast<size_t>(stop - list.data()) + 1;
    if (end <= c.next_step)
      throw std::invalid_argument("step " + instruments.stop_after + " comes before " +
                                  (c.next_step < list.size() ? list[c.next_step].name : "the end") +
                                  ", where this compilation goes on");
  }
  for (; c.next_step < end; ++c.next_step) run_step(list[c.next_step], c, target, instruments);
}

}  // namespace ember::pipeline
