// Which storage each step reads and writes: the facts every scheduling decision is checked against.
//
// Needs: a program that verifies. Guarantees: conservative answers. An extern call reads and
// writes whole buffers (torch may touch any element), and an access through a View counts as an
// access of the View's root buffer, so two steps that touch the same storage by different names
// are never reordered. Storage that torch owns may be shared under names the program cannot see:
// graph inputs with each other (the caller passed one tensor twice; a resume function receives a
// tensor both as a local and as a stack value), and an extern call's result with its arguments (a
// torch call that returns a view, such as movedim). So a write into an Input or Extern root that
// already holds data (a kernel's store, an in-place extern call; not an extern call defining its
// results) counts as a write to every Input and Extern root. Except a kernel's store into an Input
// root (stores into inputs, input_store.cpp): the runtime runs such a program only on inputs that do not
// overlap the written ones (runtime/compiled_graph.h), so that store counts as a write to every Extern
// root only (an extern result may still be a view of the input).
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
  std::vector<BufferId> overwritten;  // storage that existed before the step and is written by it
  switch (step.kind) {
    case loop_ir::Step::Kind::Kernel:
      for (const Node& n : step.kernel.nodes) {
        if (n.op == loop_ir::ScalarOp::Load) acc.reads.push_back(program.storage_root(n.buffer));
        if (n.op == loop_ir::ScalarOp::Store) overwritten.push_back(program.storage_root(n.buffer));
        if (n.accumulate) acc.reads.push_back(program.storage_root(n.buffer));  // adds to what is there
      }
      break;
    case loop_ir::Step::Kind::Extern: {
      const loop_ir::ExternCall& call = program.externs[step.extern_index];
      std::vector<BufferId> args = call.buffer_args();
      for (BufferId b : args) acc.reads.push_back(program.storage_root(b));
      for (BufferId b : call.results) acc.writes.push_back(program.storage_root(b));
      for (BufferId b : call.written_args()) overwritten.push_back(program.storage_root(b));
      break;
    }
  }
  const auto kind_of = [&](BufferId b) { return program.buffers[b].kind; };
  const auto torch_owned = [&](BufferId b) {
    return kind_of(b) == loop_ir::Buffer::Kind::Input || kind_of(b) == loop_ir::Buffer::Kind::Extern;
  };
  const bool kernel = step.kind == loop_ir::Step::Kind::Kernel;
  acc.writes.insert(acc.writes.end(), overwritten.begin(), overwritten.end());
  for (BufferId w : overwritten) {
    if (!torch_owned(w)) continue;
    const bool inputs_too = !kernel || kind_of(w) == loop_ir::Buffer::Kind::Extern;
    for (const loop_ir::Buffer& b : program.buffers)
      if (kind_of(b.id) == loop_ir::Buffer::Kind::Extern || (inputs_too && torch_owned(b.id))) acc.writes.push_back(b.id);
    if (inputs_too) break;
  }
  sort_unique(acc.reads);
  sort_unique(acc.writes);
  return acc;
}

bool depends_on(const Accesses& earlier, const Accesses& later, BufferId* what) {
  return intersects(later.reads, earlier.writes, what) || intersects(later.writes, earlier.reads, what) ||
         intersects(later.writes, earlier.writes, what);
}

}  // namespace ember::scheduler::detail
