// Extern results into the arena (memory_plan.h, arena_extern_results): a matmul extern call whose
// result is a temporary writes it through `out=` into a Temp buffer instead of returning a tensor
// that torch allocates. On the CPU torch's allocator is malloc: a fresh result per call and per step
// is fresh pages whenever glibc has given the heap's top back to the system, and their page faults
// were 2-3% of a LLaMA training step (1,221 faults a step, 2026-12-04); the arena's pages stay
// mapped from call to call, and the planner packs the results with the other temporaries. A result the
// program returns, or hands to a call that may return an alias of it, stays torch's. First, a linear of
// 2-d operands becomes the addmm / mm torch's linear calls (linear_as_addmm), which takes `out=` too.
#include <set>
#include <string>

#include "memory/memory_plan.h"

namespace ember::memory {

namespace {

using loop_ir::Buffer;
using loop_ir::BufferId;

// Callables whose `out=` form writes the same values into a tensor of the result's sizes.
bool takes_out(const std::string& callable) {
  static const std::set<std::string> kOut = {"torch.mm", "torch.bmm", "torch.matmul", "torch.addmm"};
  return kOut.count(callable) > 0;
}


// `torch.nn.functional.linear(x, w[, b])` of a 2-d x (lowering folds batch dims into rows) as the
// call torch's linear makes for it: `torch.addmm(b, x, w^T)` (`torch.mm(x, w^T)` without a bias), w^T a
// View of w. The same GEMM and bits, without linear's dispatch and `aten::t` on every call (a
// transformer layer's four to six projections), and addmm takes `out=`.
void linear_as_addmm(loop_ir::Program& program, loop_ir::ExternCall& call) {
  if (call.callable != "torch.nn.functional.linear" || call.args.size() < 2 || call.args.size() > 3 ||
      !call.kwargs.empty())
    return;
  for (const ir::Arg& a : call.args)
    if (a.kind != ir::Arg::Kind::Value) return;
  const Buffer& x = program.buffers.at(static_cast<size_t>(call.args[0].value));
  const Buffer w = program.buffers.at(static_cast<size_t>(call.args[1].value));
  if (x.sizes.size() != 2 || w.sizes.size() != 2 ||
      (call.args.size() == 3 && program.buffers.at(static_cast<size_t>(call.args[2].value)).sizes.size() != 1))
    return;
  Buffer wt;
  wt.kind = Buffer::Kind::View;
  wt.dtype = w.dtype;
  wt.device = w.device;
  wt.base = w.id;
  wt.offset = int64_t{0};
  wt.sizes = {w.sizes[1], w.sizes[0]};
  wt.strides = {w.strides[1], w.strides[0]};
  // Lowering passes linear `B^T`, a View of a matmul's right operand B: w^T is then B itself.
  const Buffer* base = w.kind == Buffer::Kind::View ? &program.buffers.at(static_cast<size_t>(w.base)) : nullptr;
  const bool is_base = base && w.offset == sym::Expr(int64_t{0}) && base->offset == sym::Expr(int64_t{0}) &&
                       base->sizes == wt.sizes && base->strides == wt.strides;
  const ir::Arg transposed = ir::Arg::of_value(is_base ? base->id : program.add_buffer(std::move(wt)));
  if (call.args.size() == 3) {
    call.callable = "torch.addmm";
    call.args = {call.args[2], call.args[0], transposed};
  } else {
    call.callable = "torch.mm";
    call.args = {call.args[0], transposed};
  }
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
  for (size_t e = 0; e < program.externs.size(); ++e) {
    const std::string before = program.externs[e].callable;
    linear_as_addmm(program, program.externs[e]);  // may add a buffer: `call` is taken after
    loop_ir::ExternCall& call = program.externs[e];
    changed = changed || call.callable != before;
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
