// Graph passes. Each pass is one function in its own file: it takes a graph that verifies
// cleanly, rewrites it in place so that it still verifies, and returns whether it changed
// anything (so a driver logs IR only after a pass that did something). The pipeline
// (src/pipeline/pipeline.cpp) is the one list that orders and names them.
#pragma once

#include <functional>

#include "ir/graph.h"

namespace ember::passes {

// Whether `node` may write a tensor: it writes an argument in place (or `out=`), or returns
// nothing, so it runs for an effect by definition (dce.cpp).
bool may_write(const ir::Node& node);
// Whether running `node` does something besides producing its results: it may write, or it draws
// random numbers (dce.cpp).
bool has_effect(const ir::Node& node);

// Removes nodes whose results nothing uses, unless running them has an effect (dce.cpp).
bool dce(ir::Graph& graph);
// Binds the arguments of known calls to their parameters: one form per op (canonicalize.cpp).
bool canonicalize(ir::Graph& graph);
// In-place calls on intermediates that nothing else can see made out of place (`F.relu(x, inplace=True)`
// without `inplace`, `x += y` as add, `x.relu_()` as relu), reads after each write bound to its result
// (functional_writes.cpp): such a write is then an ordinary op that lowering fuses and autograd
// differentiates; a constant fill of one slice of such a value (`b[n:2 * n].zero_()`) becomes a cat of
// the kept slices and the constant. Other writes to graph inputs, through views, or to storage another node may alias (a view
// taken before or after) stay in place: lowering makes them stores or torch calls, and a training graph
// holding one runs eagerly (autograd/joint.cpp).
bool writes_out_of_place(ir::Graph& graph);
// Rewrites composite ops into Ember's primitives, the contract with lowering (decompose.cpp,
// docs/decompositions.md). Nodes for which `keep` answers true are copied as they are (autograd
// decomposes only the nodes its derivative table does not cover).
bool decompose(ir::Graph& graph, const std::function<bool(const ir::Node&)>& keep = {});
// Replaces a core op that repeats an earlier identical one by the earlier one's results (cse.cpp).
bool cse(ir::Graph& graph);
// A CPU inference graph's 2-d convolutions read channels-last inputs, and what follows them takes the
// layouts its shape rules give; outputs keep their recorded layouts (channels_last.cpp).
bool channels_last(ir::Graph& graph);

}  // namespace ember::passes
