// The scheduler's driver: the order of its decisions, and the rewrite of the program they produce.
//
// Needs: a Program in lowering's shape that verifies. Guarantees: the rewritten Program verifies
// (checked here: a scheduler bug is a logic_error, never a silently wrong program), kernels are
// named k0, k1, ... in step order, buffers nothing uses any more are gone and ids are dense.
//
// Order: inline cheap producers first (it removes whole kernels and exposes the loads fusion
// compares), then drop the copies inlining left moving nothing (alias_copies.cpp), then fuse, then
// turn copies into graph inputs into stores (on the final kernels), then clean up -- a store into a
// Temp that no step reads any more (its readers now receive the value directly) is dropped, with the
// nodes only it needed, and a kernel left without stores goes. Everything iterates in step or id order, so the output is
// deterministic.
#include <algorithm>
#include <map>
#include <stdexcept>

#include "scheduler/internal.h"

namespace ember::scheduler {

using loop_ir::Buffer;
using loop_ir::Program;
using loop_ir::ScalarOp;
using namespace detail;

std::string FusionDecision::str() const {
  switch (kind) {
    case Kind::Inline:
      return "inline " + producer + " into " + consumer + ": " + reason;
    case Kind::Alias:
      return "alias " + producer + " to " + consumer + ": " + reason;
    case Kind::Vertical:
      return "vertical " + producer + " -> " + consumer + ": " + reason;
    case Kind::Sibling:
      return "sibling " + producer + " + " + consumer + ": " + reason;
    case Kind::Split:
      return "split " + producer + " into " + consumer + ": " + reason;
    case Kind::Store:
      return "store " + producer + " into input " + consumer + ": " + reason;
    case Kind::Group:
      return "group " + producer + " as " + consumer + ": " + reason;
    case Kind::Refused:
      return "refused " + producer + " -> " + consumer + ": " + reason;
  }
  return reason;
}

namespace detail {

void check_verifies(const Program& program, const char* who) {
  const std::vector<std::string> problems = loop_ir::verify(program);
  if (problems.empty()) return;
  std::string all;
  for (const std::string& p : problems) all += "\n  " + p;
  throw std::logic_error(std::string(who) + " produced a program that does not verify:" + all);
}

}  // namespace detail

namespace {

// Roots whose contents someone still needs after the program: outputs; and roots read by a step.
std::set<BufferId> needed_roots(const Program& program, const std::vector<WorkStep>& steps) {
  std::set<BufferId> needed;
  for (BufferId b : program.outputs) needed.insert(program.storage_root(b));
  for (const WorkStep& s : steps) {
    Accesses acc = accesses_of(program, s);
    needed.insert(acc.reads.begin(), acc.reads.end());
  }
  return needed;
}

// Drops stores into Temps nobody reads, and what only they needed; repeats until stable, since a
// kernel that goes may have been the last reader of another Temp.
void remove_dead_stores(const Program& program, std::vector<WorkStep>& steps) {
  for (bool changed = true; changed;) {
    changed = false;
    const std::set<BufferId> needed = needed_roots(program, steps);
    for (size_t s = steps.size(); s-- > 0;) {
      if (steps[s].kind != loop_ir::Step::Kind::Kernel) continue;
      Kernel& k = steps[s].kernel;
      const size_t before = k.nodes.size();
      k.nodes.erase(std::remove_if(k.nodes.begin(), k.nodes.end(),
                                   [&](const Node& n) {
                                     return n.op == ScalarOp::Store &&
                                            program.buffers[n.buffer].kind == Buffer::Kind::Temp &&
                                            !needed.count(n.buffer);
                                   }),
                    k.nodes.end());
      if (k.nodes.size() == before) continue;
      remove_dead_nodes(k);
      if (k.nodes.empty()) steps.erase(steps.begin() + static_cast<std::ptrdiff_t>(s));
      changed = true;
    }
  }
}

void remap_arg(ir::Arg& arg, const std::vector<BufferId>& ids) {
  switch (arg.kind) {
    case ir::Arg::Kind::Value:
      arg.value = ids.at(arg.value);
      return;
    case ir::Arg::Kind::Literal:
      return;
    case ir::Arg::Kind::List:
    case ir::Arg::Kind::Tuple:
      for (ir::Arg& item : arg.items) remap_arg(item, ids);
      return;
  }
}

// Writes the steps back into the program: kernels renamed in step order, unused Temps dropped,
// extern calls no step runs any more dropped with their results, buffer and extern ids renumbered
// densely everywhere they occur.
void rebuild(Program& program, std::vector<WorkStep>& steps) {
  std::vector<bool> used(program.buffers.size(), false);
  for (const Buffer& b : program.buffers)
    if (b.kind != Buffer::Kind::Temp && b.kind != Buffer::Kind::Extern) used[b.id] = true;
  for (BufferId b : program.outputs) used[b] = true;
  std::vector<int> extern_ids(program.externs.size(), -1);  // old index -> new, by old order
  for (const WorkStep& s : steps)
    if (s.kind == loop_ir::Step::Kind::Extern) extern_ids[s.extern_index] = 0;
  std::vector<loop_ir::ExternCall> externs;
  for (size_t e = 0; e < extern_ids.size(); ++e) {
    if (extern_ids[e] < 0) continue;
    extern_ids[e] = static_cast<int>(externs.size());
    externs.push_back(std::move(program.externs[e]));
  }
  program.externs = std::move(externs);
  for (WorkStep& s : steps) {
    if (s.kind == loop_ir::Step::Kind::Kernel) {
      for (const Node& n : s.kernel.nodes)
        if (n.op == ScalarOp::Load || n.op == ScalarOp::Store) used[n.buffer] = true;
    } else {
      s.extern_index = extern_ids[s.extern_index];
      const loop_ir::ExternCall& call = program.externs[s.extern_index];
      for (BufferId b : call.buffer_args()) used[b] = true;
      for (BufferId b : call.results) used[b] = true;
    }
  }
  // A View keeps its base chain.
  for (size_t b = program.buffers.size(); b-- > 0;)
    if (used[b] && program.buffers[b].kind == Buffer::Kind::View) used[program.buffers[b].base] = true;
  for (size_t b = program.buffers.size(); b-- > 0;)
    if (used[b] && program.buffers[b].kind == Buffer::Kind::View) used[program.storage_root(b)] = true;

  std::vector<BufferId> ids(program.buffers.size(), -1);
  std::vector<Buffer> buffers;
  for (const Buffer& b : program.buffers) {
    if (!used[b.id]) continue;
    ids[b.id] = static_cast<BufferId>(buffers.size());
    buffers.push_back(b);
  }
  for (Buffer& b : buffers) {
    b.id = ids[b.id];
    if (b.kind == Buffer::Kind::View) b.base = ids.at(b.base);
  }
  for (loop_ir::ExternCall& call : program.externs) {
    for (ir::Arg& arg : call.args) remap_arg(arg, ids);
    for (auto& kw : call.kwargs) remap_arg(kw.second, ids);
    for (BufferId& r : call.results) r = ids.at(r);
  }
  for (BufferId& b : program.inputs) b = ids.at(b);
  for (BufferId& b : program.outputs) b = ids.at(b);

  program.kernels.clear();
  program.steps.clear();
  for (WorkStep& s : steps) {
    loop_ir::Step step;
    step.kind = s.kind;
    if (s.kind == loop_ir::Step::Kind::Kernel) {
      Kernel k = std::move(s.kernel);
      for (Node& n : k.nodes)
        if (n.op == ScalarOp::Load || n.op == ScalarOp::Store) n.buffer = ids.at(n.buffer);
      k.name = "k" + std::to_string(program.kernels.size());
      renumber_nodes(k);
      step.index = static_cast<int>(program.kernels.size());
      program.kernels.push_back(std::move(k));
    } else {
      step.index = s.extern_index;
    }
    program.steps.push_back(step);
  }
  program.buffers = std::move(buffers);
}

}  // namespace

std::vector<FusionDecision> schedule(Program& program, const ScheduleOptions& options) {
  std::vector<std::string> problems = loop_ir::verify(program);
  if (!problems.empty()) throw std::invalid_argument("schedule: the input program does not verify: " + problems[0]);

  std::vector<WorkStep> steps;
  for (const loop_ir::Step& s : program.steps) {
    WorkStep w;
    w.kind = s.kind;
    if (s.kind == loop_ir::Step::Kind::Kernel) {
      w.kernel = program.kernels.at(s.index);
      w.label = w.kernel.name;
      renumber_nodes(w.kernel);
      drop_unit_ranges(w.kernel);
    } else {
      w.extern_index = s.index;
      w.label = program.externs.at(s.index).callable;
    }
    steps.push_back(std::move(w));
  }

  std::vector<FusionDecision> decisions;
  inline_producers(program, steps, options, decisions);
  alias_copies(program, steps, decisions);
  fuse_kernels(program, steps, options, decisions);
  store_into_inputs(program, steps, decisions);
  remove_dead_stores(program, steps);
  rebuild(program, steps);

  check_verifies(program, "schedule");
  return decisions;
}

}  // namespace ember::scheduler
