// The op table's derived lookups (ops.def is the single source).
#include <string_view>

#include "ir/graph.h"

namespace ember::ir {

namespace {
constexpr OpInfo kOps[] = {
#define EMBER_OP(Enum, name, target, arity, family) {name, target, arity, OpFamily::family},
#include "ir/ops.def"
#undef EMBER_OP
    {"torch", "", -1, OpFamily::Other},
};
}  // namespace

const OpInfo& op_info(Op op) { return kOps[static_cast<size_t>(op)]; }

std::optional<Op> op_from_name(std::string_view name) {
  for (size_t i = 0; i < std::size(kOps); ++i)
    if (name == kOps[i].name) return static_cast<Op>(i);
  return std::nullopt;
}

}  // namespace ember::ir
