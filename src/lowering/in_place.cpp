// In-place pointwise ops on graph inputs (`x.mul_(2)`, `x += y`): the functional op's kernel into a
// temporary, then `torch.Tensor.copy_(x, value)` -- which the scheduler turns into that kernel's store
// into x (docs/scheduler.md, "Stores into inputs") -- and the op's result is x itself, as in eager.
// Without this the op runs through torch, an extern call between kernels that stops their fusion.
//
// Lowered only in the plain case, where the functional op computes exactly what torch's in-place op
// writes: a binary op (add_, sub_, mul_, div_ and their operator forms) with no keyword arguments, on
// a floating graph input held as is (no view, its own layout), the other operand a literal or a
// tensor of the input's dtype, the result not a graph output. Anything else stays an extern call.
#include <array>
#include <string_view>

#include "lowering/lower_internal.h"

namespace ember::lowering::detail {

namespace {

std::optional<ir::Op> functional_op(std::string_view callable) {
  static constexpr std::array<std::pair<std::string_view, ir::Op>, 12> kOps = {{
      {"add_", ir::Op::Add}, {"sub_", ir::Op::Sub}, {"mul_", ir::Op::Mul}, {"div_", ir::Op::Div},
      {"__iadd__", ir::Op::Add}, {"__isub__", ir::Op::Sub}, {"__imul__", ir::Op::Mul}, {"__itruediv__", ir::Op::Div},
      {"iadd", ir::Op::Add}, {"isub", ir::Op::Sub}, {"imul", ir::Op::Mul}, {"itruediv", ir::Op::Div},
  }};
  const size_t dot = callable.rfind('.');
  const std::string_view module = dot == std::string_view::npos ? std::string_view() : callable.substr(0, dot);
  const std::string_view name = callable.substr(dot == std::string_view::npos ? 0 : dot + 1);
  if (module != "torch.Tensor" && module != "operator") return std::nullopt;
  for (const auto& [n, op] : kOps)
    if (n == name && (module == "operator") == (n.front() == 'i')) return op;
  return std::nullopt;
}

}  // namespace

std::string lower_in_place(Lowerer& L, const ir::Node& node) {
  std::optional<ir::Op> op = functional_op(node.callable());
  if (!op || !node.kwargs.empty() || node.args.size() != 2 || node.results.size() != 1 ||
      node.args[0].kind != ir::Arg::Kind::Value)
    return "a torch call";
  const ir::ValueId self = node.args[0].value;
  const ir::ValueId result = node.results[0];
  const ir::TensorType& t = L.type(self);
  const Lazy& held = L.lazy(self);
  const loop_ir::Buffer& input = L.program().buffers.at(held.buffer);
  if (L.is_output(result) || !ir::is_floating(t.dtype) || held.remap || input.kind != loop_ir::Buffer::Kind::Input ||
      input.sizes != t.sizes || input.strides != t.strides || input.dtype != t.dtype || !(L.type(result) == t))
    return "a torch call (in place, not on a floating graph input as is)";
  const ir::Arg& other = node.args[1];
  if (other.kind == ir::Arg::Kind::Value ? L.type(other.value).dtype != t.dtype : other.kind != ir::Arg::Kind::Literal)
    return "a torch call (in place, with an operand of another dtype)";

  const BufferId target = held.buffer;  // `input` and `held` do not outlive the kernel's new buffers
  ir::Node functional = node;
  functional.op = *op;
  functional.target.clear();
  std::string refusal = lower_pointwise(L, functional);
  if (!refusal.empty()) return refusal;
  loop_ir::ExternCall copy;
  copy.callable = "torch.Tensor.copy_";
  copy.args = {ir::Arg::of_value(target), ir::Arg::of_value(L.lazy(result).buffer)};
  copy.result_form = ir::Node::ResultForm::None;
  copy.mutates_first_arg = true;
  L.program().steps.push_back(
      loop_ir::Step{loop_ir::Step::Kind::Extern, static_cast<int>(L.program().externs.size())});
  L.program().externs.push_back(std::move(copy));
  L.bind_realized(result, target);
  return "";
}

}  // namespace ember::lowering::detail
