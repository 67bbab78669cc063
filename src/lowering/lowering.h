// Lowering: graph IR (after the canonicalize and decompose passes) -> loop IR.
//
// Needs: a graph that verifies, whose nodes are the primitives of docs/decompositions.md in their
// canonical form, or anything else. Guarantees: a Program that verifies (loop_ir::verify) and
// computes exactly what the graph computes; lowering never fails on a valid graph, because a node
// it has no lowering for becomes an extern call that torch runs.
//
// Shape of the result (the scheduler relies on it):
//   - one kernel per value that must exist in memory ("realized"): each pointwise value, each
//     reduction, each value an extern call or the caller reads. A pointwise kernel has ranges
//     equal to its buffer's sizes and one loop without ranges that stores at [i0, ..., i(n-1)].
//     A reduction kernel has ranges equal to its output's sizes, a loop over the reduced
//     extents, and a final loop without ranges that stores at [i0, ...]. Nothing is fused yet.
//   - views (reshape, permute, expand, slice, select) are never realized: consumers load their
//     input with remapped indices. A view the caller or an extern call must see as a tensor is a
//     View buffer of its base, so aliasing matches eager.
//   - realized values are Temp buffers, or Output buffers when the caller reads them; the strides
//     of every buffer are the graph value's (torch's) strides.
//   - steps keep the graph's node order; in-place extern calls (`mutates_first_arg`) are never
//     moved across reads or writes of the buffer they write.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "loop_ir/loop_ir.h"

namespace ember::lowering {

struct LowerOptions {
  // torch.use_deterministic_algorithms was on when the graph was traced: a value whose kernel would
  // add into memory atomically, in any order (index_add, scatter_add on CUDA), stays torch's call,
  // which then takes its deterministic algorithm.
  bool deterministic = false;
};

// Throws std::invalid_argument if the graph does not verify, std::logic_error if the program
// lowering made does not verify (a lowering bug).
loop_ir::Program lower(const ir::Graph& graph);
// The same; also appends to `refusals` one line per node that became an extern call although it
// is a core op, saying why ("%5 torch.add: ..."), for EMBER_LOGS and tests.
loop_ir::Program lower(const ir::Graph& graph, std::vector<std::string>* refusals, const LowerOptions& options = {});

}  // namespace ember::lowering
