// Loop IR passes. Each is one function in its own file: it takes a program that verifies cleanly,
// rewrites it in place so that it still verifies, and returns whether it changed anything.
// passes.cpp is the one list that names them, for `ember-opt --loop --pass NAME` and the
// compile pipeline (the graph IR's passes have their own list, src/passes/registry.cpp).
#pragma once

#include <string_view>
#include <vector>

#include "loop_ir/loop_ir.h"

namespace ember::loop_ir {

struct LoopPassInfo {
  const char* name;     // as `ember-opt --loop --pass NAME` spells it
  const char* summary;  // one line, for `ember-opt --loop --list-passes`
  bool (*run)(Program& program);
};

// Every loop pass, in a fixed order.
const std::vector<LoopPassInfo>& registered_loop_passes();
// nullptr if no loop pass has that name.
const LoopPassInfo* find_loop_pass(std::string_view name);

}  // namespace ember::loop_ir
