// Graph passes. Each pass is one function in its own file: it takes a graph that verifies
// cleanly, rewrites it in place so that it still verifies, and returns whether it changed
// anything (so a driver logs IR only after a pass that did something). registry.cpp is the one
// list that names them, for `ember-opt --pass NAME` and the compile pipeline.
#pragma once

#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace ember::passes {

// Removes nodes whose results nothing uses, unless running them has an effect (dce.cpp).
bool dce(ir::Graph& graph);
// Binds the arguments of known calls to their parameters: one form per op (canonicalize.cpp).
bool canonicalize(ir::Graph& graph);
// Rewrites composite ops into Ember's primitives, the contract with lowering (decompose.cpp,
// docs/decompositions.md).
bool decompose(ir::Graph& graph);

struct PassInfo {
  const char* name;     // as `ember-opt --pass NAME` spells it
  const char* summary;  // one line, for `ember-opt --list-passes`
  bool (*run)(ir::Graph& graph);
};

// Every pass, in a fixed order (registry.cpp).
const std::vector<PassInfo>& registered_passes();
// nullptr if no pass has that name.
const PassInfo* find_pass(std::string_view name);

}  // namespace ember::passes
