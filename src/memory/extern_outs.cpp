// Extern results into the arena (memory_plan.h, arena_extern_results): a matmul extern call whose
// result is a temporary writes it through `out=` into a Temp buffer instead of returning a tensor
// that torch allocates. On the CPU torch's allocator is malloc: a fresh result per call and per step
// is fresh pages whenever glibc has given the heap's top back to the system, and their page faults
// were 2-3% of a LLaMA training step (1,221 faults a step, 2026-12-04); the arena's pages stay
// mapped from call to call, and the planner packs the results with the other temporaries. A result the
// program returns, or hands to a call that may return an alias of it, stays torch's.
#include <set>
#include <string>

#include "memory/memory_plan.h"

namespace ember::memory {

namespace {

using loop_ir::Buffer;
using loop_ir::BufferId;

// Callables whose `out=` form writes the same values into a tensor of the result's sizes.
bool takes_out(const std::string& callable) {
  static const std::set<std::string> kOut = {"torch.mm", "torch.bmm", "torch.matmul"};
  return kOut.count(callable) > 0;
}


}  // namespace

bool arena_extern_results(loop_ir::Program& program) {
  // Returned, or handed to a call that may return an alias of it (aten._unsafe_view of a folded matmul's
  // matrix, which the program returns): in the arena it would leave with the caller, and the arena with it.
  std::set<BufferId> returned;
  for (BufferId b : program.outputs) returned.insert(program.storage_root(b));
  for (const loop_ir::ExternCall& call : program.externs)
    if (call.may_return_alias())
      for (BufferId b : call.buffer_args()) returned.insert(program.storage_root(b));
  bool changed = false;
  for (loop_ir::ExternCall& call : program.externs) {
    if (!takes_out(call.callable) || call.results.size() != 1 || !call.kwargs.empty() || call.mutates_first_arg ||
        call.result_form != ir::Node::ResultForm::Single)
      continue;
    Buffer& result = program.buffers.at(static_cast<size_t>(call.results[0]));
    // Row-major from element 0: what `out=` writes into a tensor of exactly the result's sizes.
    if (result.kind != Buffer::Kind::Extern || returned.count(result.id) || result.offset != sym::Expr(int64_t{0}) ||
        !ir::row_major(result.sizes, result.strides))
      continue;
    result.kind = Buffer::Kind::Temp;
    call.kwargs.emplace_back("out", ir::Arg::of_value(result.id));
    call.results.clear();
    call.result_form = ir::Node::ResultForm::None;
    changed = true;
  }
  return changed;
}

}  // namespace ember::memory
