// Which storage each step reads and writes: the facts every scheduling decision is checked against.
//
// Needs: a program that verifies. Guarantees: conservative answers. An extern call reads and
// writes whole buffers (torch may touch any element), and an access through a View counts as an
// access of the View's root buffer, so two steps that touch the same storage by different names
// are never reordered. Graph inputs may share storage with each other -- the caller passed one
// tensor twice, or a resume function receives a tensor both as a local and as a stack value -- so
// a write to one input counts as a write to every input.
#include <algorithm>
#include <stdexcept>

#include "scheduler/internal.h"

namespace ember::scheduler::detail {

namespace {

void sort_unique(std::vector<BufferId>& ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
}


bool intersects(const std::vector<BufferId>& a, const std::vector<BufferId>& b, BufferId* what) {
  for (BufferId x : a) {
    if (std::binary_search(b.begin(), b.end(), x)) {
      if (what) *what = x;
      return true;
    }
  }
  return false;
}

}  // namespace



Accesses accesses_of(const Program& program, const WorkStep& step) {
  Accesses acc;
  switch (step.kind) {
    case loop_ir::Step::Kind::Kernel:
      for (const Node& n : step.kernel.nodes) {
        if (n.op == loop_ir::ScalarOp::Load) acc.reads.push_back(program.storage_root(n.buffer));
        if (n.op == loop_ir::ScalarOp::Store) acc.writes.push_back(program.storage_root(n.buffer));
      }
      break;
    case loop_ir::Step::Kind::Extern: {
      const loop_ir::ExternCall& call = program.externs[step.extern_index];
      std::vector<BufferId> args = call.buffer_args();
      for (BufferId b : args) acc.reads.push_back(program.storage_root(b));
      for (BufferId b : call.results) acc.writes.push_back(program.storage_root(b));
      if (call.mutates_first_arg && !args.empty()) acc.writes.push_back(program.storage_root(args.front()));
      break;
    }
  }
  const auto is_input = [&](BufferId b) { return program.buffers[b].kind == loop_ir::Buffer::Kind::Input; };
  if (std::any_of(acc.writes.begin(), acc.writes.end(), is_input))
    for (const loop_ir::Buffer& b : program.buffers)
      if (b.kind == loop_ir::Buffer::Kind::Input) acc.writes.push_back(b.id);
  sort_unique(acc.reads);
  sort_unique(acc.writes);
  return acc;
}

bool depends_on(const Accesses& earlier, const Accesses& later, BufferId* what) {
  return intersects(later.reads, earlier.writes, what) || intersects(later.writes, earlier.reads, what) ||
         intersects(later.writes, earlier.writes, what);
}

}  // namespace ember::scheduler::detail
