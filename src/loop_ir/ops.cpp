// The loop IR's op table lookups (ops.def is the single source) and the Program builder.
#include <string_view>

#include "loop_ir/loop_ir.h"

namespace ember::loop_ir {

namespace {
constexpr ScalarOpInfo kOps[] = {
#define EMBER_LOOP_OP(Enum, name, arity, cls) {name, arity, OpClass::cls},
#include "loop_ir/ops.def"
#undef EMBER_LOOP_OP
};
}  // namespace

const ScalarOpInfo& op_info(ScalarOp op) {
  size_t i = static_cast<size_t>(op);
  if (i >= std::size(kOps)) throw std::logic_error("op_info: corrupt ScalarOp " + std::to_string(i));
  return kOps[i];
}

std::optional<ScalarOp> op_from_name(std::string_view name) {
  for (size_t i = 0; i < std::size(kOps); ++i)
    if (name == kOps[i].name) return static_cast<ScalarOp>(i);
  return std::nullopt;
}

BufferId Program::add_buffer(Buffer buffer) {
  buffer.id = static_cast<BufferId>(buffers.size());
  buffers.push_back(std::move(buffer));
  return buffers.back().id;
}

}  // namespace ember::loop_ir
