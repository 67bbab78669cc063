// The loop IR's op table lookups (ops.def is the single source) and the Program builder.
#include <string_view>

#include "loop_ir/loop_ir.h"

#include <stdexcept>

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

bool is_expensive(ScalarOp op) {
  static constexpr ScalarOp kExpensive[] = {ScalarOp::Exp,  ScalarOp::Log,     ScalarOp::Log1p,   ScalarOp::Expm1,
                                            ScalarOp::Sqrt, ScalarOp::Rsqrt,   ScalarOp::Sin,     ScalarOp::Cos,
                                            ScalarOp::Tanh, ScalarOp::Sigmoid, ScalarOp::Erf,     ScalarOp::Reciprocal,
                                            ScalarOp::Div,  ScalarOp::Pow};
  for (ScalarOp e : kExpensive)
    if (e == op) return true;
  return false;
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

namespace {

void collect_buffer_args(const ir::Arg& arg, std::vector<BufferId>& out) {
  if (arg.kind == ir::Arg::Kind::Value) out.push_back(arg.value);
  for (const ir::Arg& item : arg.items) collect_buffer_args(item, out);
}

}  // namespace

std::vector<BufferId> ExternCall::buffer_args() const {
  std::vector<BufferId> out;
  for (const ir::Arg& arg : args) collect_buffer_args(arg, out);
  for (const auto& kw : kwargs) collect_buffer_args(kw.second, out);
  return out;
}

std::vector<BufferId> ExternCall::written_args() const {
  std::vector<BufferId> out;
  if (mutates_first_arg) {
    std::vector<BufferId> all = buffer_args();
    if (!all.empty()) out.push_back(all.front());
  }
  for (const auto& kw : kwargs)
    if (kw.first == "out") collect_buffer_args(kw.second, out);
  return out;
}

bool ExternCall::may_return_alias() const { return !written_args().empty() || !ir::returns_new_tensors(callable); }

BufferId Program::storage_root(BufferId id) const {
  for (size_t hops = 0; hops <= buffers.size(); ++hops) {
    if (id < 0 || id >= static_cast<BufferId>(buffers.size()))
      throw std::invalid_argument("buffer id " + std::to_string(id) + " out of range");
    const Buffer& b = buffers[static_cast<size_t>(id)];
    if (b.kind != Buffer::Kind::View) return id;
    id = b.base;
  }
  throw std::invalid_argument("cycle of View buffers");
}

}  // namespace ember::loop_ir
