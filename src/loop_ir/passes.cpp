// The registry of named loop IR passes: adding a pass means one line here and its own file.
#include "loop_ir/passes.h"

namespace ember::loop_ir {

const std::vector<LoopPassInfo>& registered_loop_passes() {
  static const std::vector<LoopPassInfo> kPasses = {
      {"simplify-indices", "simplify every index expression with its kernel's and loop's variable ranges",
       simplify_indices},
  };
  return kPasses;
}

const LoopPassInfo* find_loop_pass(std::string_view name) {
  for (const LoopPassInfo& p : registered_loop_passes())
    if (name == p.name) return &p;
  return nullptr;
}

}  // namespace ember::loop_ir
