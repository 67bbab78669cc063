// Memory planner: live ranges of the temporaries of a scheduled program, and their places in one
// per-call arena.
//
// Needs: a scheduled Program whose sizes, strides and offsets are constant once its shape symbols
// take their values (a symbol it does not declare throws std::invalid_argument naming the buffer).
// Guarantees: memory_plan.h's contract.
//
// Live range of a Temp: from the first step that touches it to the last, inclusive (a step that
// writes one Temp and reads another needs both at once; a Temp the caller receives, which a
// verified program does not have, lives to the end). Accesses through a View count for its root.
// A Temp passed to an extern call that always returns new tensors (ir::returns_new_tensors) lives to
// that call, like any other use; one passed to any other extern call may be aliased by its result (an
// in-place op returns its argument, a view op a view of it), so it lives to the last use of that result,
// and of results of such calls on that result (to the end when one is returned). The runtime never
// copies a result out of the arena: writes to the temporary stay visible through its aliases.
// Sizes are storage spans (the element offset plus the largest element's offset plus one, times
// the item size), so strided temporaries get all the room their strides reach.
//
// Placement is greedy, largest first (longer live range, then lower id, on ties): each Temp takes
// the lowest aligned offset where it overlaps no placed Temp whose live range overlaps its own.
// Largest-first leaves small holes for small buffers; on the programs lowering produces (a few
// tens of temporaries) it is within a few percent of optimal and costs microseconds.
//
// Peak: the arena is one allocation held for the whole call, so the planned peak is the arena
// plus, at the worst step, the outputs (allocated before the program runs, held to the end) and
// the extern results live at that step (from the extern call to their last use, or the end when
// returned).
#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

#include "memory/memory_plan.h"

#include "ir/graph.h"

namespace ember::memory {

using loop_ir::Buffer;
using loop_ir::BufferId;
using loop_ir::Program;

namespace {


int64_t storage_bytes(const Buffer& b, const std::map<std::string, int64_t>& values) {
  auto need = [&](const sym::Expr& e, const char* what) {
    try {
      return sym::evaluate(e, values);
    } catch (const std::invalid_argument&) {
      throw std::invalid_argument("plan_memory: buffer %" + b.name() + " has a symbolic " + what + " (" + e.str() +
                                  "); the memory planner needs constant sizes");
    }
  };
  int64_t last = need(b.offset, "offset");
  bool empty = false;
  for (size_t k = 0; k < b.sizes.size(); ++k) {
    int64_t size = need(b.sizes[k], "size");
    int64_t stride = k < b.strides.size() ? need(b.strides[k], "stride") : 0;
    if (size == 0) empty = true;
    if (size > 0) last += (size - 1) * (stride < 0 ? -stride : stride);
  }
  return empty ? 0 : (last + 1) * ir::dtype_itemsize(b.dtype);
}

int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }


struct Live {
  int first = -1, last = -1;
  bool overlaps(const Live& o) const { return first >= 0 && o.first >= 0 && first <= o.last && o.first <= last; }
};

}  // namespace

std::vector<std::vector<BufferId>> step_roots(const Program& program) {
  std::vector<std::vector<BufferId>> out;
  for (const loop_ir::Step& step : program.steps) {
    std::vector<BufferId> ids;
    switch (step.kind) {
      case loop_ir::Step::Kind::Kernel:
        for (const loop_ir::Node& n : program.kernels.at(step.index).nodes)
          if (n.op == loop_ir::ScalarOp::Load || n.op == loop_ir::ScalarOp::Store) ids.push_back(n.buffer);
        break;
      case loop_ir::Step::Kind::Extern: {
        const loop_ir::ExternCall& call = program.externs.at(step.index);
        ids = call.buffer_args();
        ids.insert(ids.end(), call.results.begin(), call.results.end());
        break;
      }
    }
    for (BufferId& id : ids) id = program.storage_root(id);
    out.push_back(std::move(ids));
  }
  return out;
}

std::string MemoryPlan::str() const {
  std::string s = "arena " + std::to_string(arena_bytes) + " bytes, peak " + std::to_string(peak_bytes) + " bytes\n";
  for (const Entry& e : entries) {
    s += "%b" + std::to_string(e.buffer) + " @" + std::to_string(e.offset) + " size " + std::to_string(e.bytes) +
         " live ";
    s += e.first < 0 ? "none" : "[" + std::to_string(e.first) + ", " + std::to_string(e.last) + "]";
    s += "\n";
  }
  return s;
}

MemoryPlan plan_memory(const Program& program) {
  std::vector<int64_t> hints;
  for (const sym::SymbolInfo& s : program.symbols) hints.push_back(s.hint);
  MemoryPlan plan = plan_memory(program, hints);
  plan.per_call = !program.symbols.empty();
  return plan;
}

MemoryPlan plan_memory(const Program& program, const std::vector<int64_t>& symbol_values) {
  if (symbol_values.size() != program.symbols.size())
    throw std::invalid_argument("plan_memory: " + std::to_string(symbol_values.size()) + " values for " +
                                std::to_string(program.symbols.size()) + " shape symbols");
  std::map<std::string, int64_t> values;
  for (size_t k = 0; k < symbol_values.size(); ++k) values.emplace(program.symbols[k].name, symbol_values[k]);
  MemoryPlan plan;
  const int n_steps = static_cast<int>(program.steps.size());
  std::vector<Live> live(program.buffers.size());
  std::vector<std::vector<BufferId>> touched = step_roots(program);
  for (int s = 0; s < n_steps; ++s) {
    for (BufferId b : touched[s]) {
      if (live[b].first < 0) live[b].first = s;
      live[b].last = s;
    }
  }
  for (BufferId b : program.outputs) {
    BufferId r = program.storage_root(b);
    if (live[r].first < 0) live[r].first = 0;
    live[r].last = std::max(n_steps - 1, 0);
  }
  // A temporary handed to an extern call that may return an alias of its arguments (an in-place op
  // returns its first argument; a view op, `contiguous` or a callable Ember cannot see into may return
  // a view) can be read or written through the result after the call: it lives as long as the result
  // does (to the end when the result is returned). A result of such a call on such a result aliases
  // the same temporaries. Callables that always return new tensors (ir::returns_new_tensors) end
  // their arguments' lives at the call.
  std::vector<std::vector<BufferId>> aliased(program.buffers.size());  // per Extern result: Temps it may view
  for (const loop_ir::Step& step : program.steps) {
    if (step.kind != loop_ir::Step::Kind::Extern) continue;
    const loop_ir::ExternCall& call = program.externs.at(step.index);
    if (!call.may_return_alias()) continue;
    std::vector<BufferId> roots;
    for (BufferId a : call.buffer_args()) {
      const BufferId r = program.storage_root(a);
      if (program.buffers[r].kind == Buffer::Kind::Temp) roots.push_back(r);
      if (program.buffers[r].kind == Buffer::Kind::Extern) roots.insert(roots.end(), aliased[r].begin(), aliased[r].end());
    }
    std::sort(roots.begin(), roots.end());
    roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
    for (BufferId r : call.results) aliased[r] = roots;
  }
  for (BufferId r = 0; r < static_cast<BufferId>(program.buffers.size()); ++r)
    for (BufferId t : aliased[r]) live[t].last = std::max(live[t].last, live[r].last);

  std::vector<int64_t> bytes(program.buffers.size(), 0);
  std::vector<BufferId> temps;
  for (const Buffer& b : program.buffers) {
    if (b.kind == Buffer::Kind::View || b.kind == Buffer::Kind::Input) continue;
    bytes[b.id] = storage_bytes(b, values);
    if (b.kind == Buffer::Kind::Temp) temps.push_back(b.id);
  }
  std::stable_sort(temps.begin(), temps.end(), [&](BufferId x, BufferId y) {
    int64_t lx = live[x].last - live[x].first, ly = live[y].last - live[y].first;
    return std::make_tuple(-bytes[x], -lx, x) < std::make_tuple(-bytes[y], -ly, y);
  });

  plan.offsets.assign(program.buffers.size(), -1);
  std::vector<BufferId> placed;
  for (BufferId t : temps) {
    // Intervals of placed temporaries alive at the same time, by offset; take the first gap.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (BufferId p : placed)
      if (live[p].overlaps(live[t])) busy.emplace_back(plan.offsets[p], plan.offsets[p] + align_up(bytes[p], plan.alignment));
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    const int64_t need = align_up(bytes[t], plan.alignment);
    for (const auto& [start, end] : busy) {
      if (offset + need <= start) break;
      offset = std::max(offset, end);
    }
    plan.offsets[t] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + need);
    placed.push_back(t);
  }

  int64_t worst = 0;
  for (int s = 0; s < std::max(n_steps, 1); ++s) {
    int64_t held = 0;
    for (const Buffer& b : program.buffers) {
      if (b.kind == Buffer::Kind::Output) held += bytes[b.id];
      if (b.kind == Buffer::Kind::Extern && live[b.id].first <= s && s <= live[b.id].last) held += bytes[b.id];
    }
    worst = std::max(worst, held);
  }
  plan.peak_bytes = plan.arena_bytes + worst;

  for (BufferId b = 0; b < static_cast<BufferId>(program.buffers.size()); ++b)
    if (program.buffers[b].kind == Buffer::Kind::Temp)
      plan.entries.push_back({b, plan.offsets[b], bytes[b], live[b].first, live[b].last});
  return plan;
}

}  // namespace ember::memory
