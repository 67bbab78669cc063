// Memory planner: where each temporary buffer of a scheduled program lives in the per-call arena.
//
// Needs: a scheduled Program with constant sizes, or sizes over its declared shape symbols and a
// value for each (dynamic shapes: the runtime plans each call's sizes, docs/memory.md). Guarantees: every Temp buffer gets a byte
// offset, aligned to `alignment`, such that two temporaries whose live ranges (first write to
// last read, in step order) overlap never overlap in memory; buffers that are dead reuse the
// space. Other buffers are not placed (inputs are the caller's, outputs and extern results are
// torch tensors), but count towards the planned peak.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loop_ir/loop_ir.h"

namespace ember::memory {

struct MemoryPlan {
  // One Temp: where it lives, how many bytes it spans, and its live range in steps (inclusive;
  // first = -1 when no step touches it).
  struct Entry {
    loop_ir::BufferId buffer = -1;
    int64_t offset = 0;
    int64_t bytes = 0;
    int first = -1, last = -1;
  };
  int64_t alignment = 64;
  int64_t arena_bytes = 0;          // one allocation per call
  std::vector<int64_t> offsets;     // per buffer id: arena offset of a Temp, -1 otherwise
  int64_t peak_bytes = 0;           // planned peak of arena + live outputs and extern results
  std::vector<Entry> entries;       // every Temp, by id
  // The program has shape symbols: this plan is for their hints (what `ember.explain` shows); the
  // runtime plans again for each call's values (a small cache per tuple of values).
  bool per_call = false;
  std::string str() const;          // text form for golden tests and `ember.explain`
};

// Per step of the program, in order: the storage roots of the buffers it reads or writes (a kernel's
// loads and stores, an extern call's buffer arguments and results). Live ranges are made of these.
std::vector<std::vector<loop_ir::BufferId>> step_roots(const loop_ir::Program& program);

// CPU: every matmul extern call (torch.mm, bmm, matmul) whose result is a row-major temporary, not
// returned, writes it with `out=` into that buffer, now a Temp the plan places (extern_outs.cpp says
// why); the call then returns nothing. True when a call changed.
bool arena_extern_results(loop_ir::Program& program);

// The plan at the shape symbols' hints (per_call set when there are symbols).
MemoryPlan plan_memory(const loop_ir::Program& program);
// The plan with each shape symbol at its value (`symbol_values[k]` is Program::symbols[k]'s).
MemoryPlan plan_memory(const loop_ir::Program& program, const std::vector<int64_t>& symbol_values);

}  // namespace ember::memory
