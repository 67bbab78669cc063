// The registry of named graph passes: adding a pass means one line here and its own file.
#include "passes/passes.h"

namespace ember::passes {

const std::vector<PassInfo>& registered_passes() {
  static const std::vector<PassInfo> kPasses = {
      {"dce", "remove nodes whose results are unused and whose execution has no effect", dce},
      {"canonicalize", "bind arguments to parameters: defaults, non-negative dims, sizes as lists", canonicalize},
      {"decompose", "rewrite composite ops into primitives (docs/decompositions.md)", decompose},
  };
  return kPasses;
}

const PassInfo* find_pass(std::string_view name) {
  for (const PassInfo& p : registered_passes())
    if (name == p.name) return &p;
  return nullptr;
}

}  // namespace ember::passes
