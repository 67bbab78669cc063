// Which storage each step reads and writes: the facts every scheduling decision is checked against.
//
// Needs: a program that verifies. Guarantees: conservative answers. An extern call reads and
// writes whole buffers (torch may touch any element), and an access through a View counts as an
// access of the View's root buffer, so two steps that touch the same storage by different names
// are never reordered.
#include <algorithm>
#include <stdexcept>

#include "scheduler/internal.h"

namespace ember::scheduler::detail {

namespace {

void sort_unique(std::vector<BufferId>& ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
}

void collect_arg_buffers(const ir::Arg& arg, std::vector<BufferId>& out) {
  switch (arg.kind) {
    case ir::Arg::Kind::Value:
      out.push_back(arg.value);
      return;
    case ir::Arg::Kind::Literal:
      return;
    case ir::Arg::Kind::List:
    case ir::Arg::Kind::Tuple:
      for (const ir::Arg& item : arg.items) collect_arg_buffers(item, out);
      return;
  }
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

BufferId root_of(const Program& program, BufferId buffer) {
  // A View chain is acyclic in a verified program; the bound guards against a malformed one.
  for (size_t hops = 0; hops <= program.buffers.size(); ++hops) {
    if (buffer < 0 || buffer >= static_cast<BufferId>(program.buffers.size()))
      throw std::invalid_argument("scheduler: buffer id " + std::to_string(buffer) + " out of range");
    const loop_ir::Buffer& b = program.buffers[buffer];
    if (b.kind != loop_ir::Buffer::Kind::View) return buffer;
    buffer = b.base;
  }
  throw std::invalid_argument("scheduler: cycle of View buffers");
}

std::vector<BufferId> extern_buffer_args(const loop_ir::ExternCall& call) {
  std::vector<BufferId> out;
  for (const ir::Arg& arg : call.args) collect_arg_buffers(arg, out);
  for (const auto& kw : call.kwargs) collect_arg_buffers(kw.second, out);
  return out;
}

Accesses accesses_of(const Program& program, const WorkStep& step) {
  Accesses acc;
  switch (step.kind) {
    case loop_ir::Step::Kind::Kernel:
      for (const Node& n : step.kernel.nodes) {
        if (n.op == loop_ir::ScalarOp::Load) acc.reads.push_back(root_of(program, n.buffer));
        if (n.op == loop_ir::ScalarOp::Store) acc.writes.push_back(root_of(program, n.buffer));
      }
      break;
    case loop_ir::Step::Kind::Extern: {
      const loop_ir::ExternCall& call = program.externs[step.extern_index];
      std::vector<BufferId> args = extern_buffer_args(call);
      for (BufferId b : args) acc.reads.push_back(root_of(program, b));
      for (BufferId b : call.results) acc.writes.push_back(root_of(program, b));
      if (call.mutates_first_arg && !args.empty()) acc.writes.push_back(root_of(program, args.front()));
      break;
    }
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
