// The verifier's type check of graph nodes against the shape rules: for every core-op node whose
// rule answers, the recorded result types must be the rule's.
//
// Why here and not in ir::verify: the verifier lives in src/ir, below src/shapes in pipeline
// order (DESIGN.md, Layout), so it cannot call the rules; this check sits on top of both and
// the pipeline's verify step runs it after ir::verify (a graph that does not verify
// structurally is not type-checked).
//
// Needs: a graph that passes ir::verify. Guarantees: only answers are checked, never guesses —
// a node whose rule declines (symbolic sizes, forms not modeled, torch nodes without a rule) is
// skipped. The graph records neither the trace's grad mode nor torch's default dtype, so
// requires_grad is not compared and a node passes when the rule under either default dtype
// (float32, float64) gives its dtype, sizes, strides (but those of size-1 dims) and device. Cost: one rule call per core
// node (microseconds).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace ember::shapes {

// One message per node whose recorded types differ from its rule's answer (empty: all agree).
std::vector<std::string> check_node_types(const ir::Graph& graph);

}  // namespace ember::shapes
