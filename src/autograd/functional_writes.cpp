// writes_out_of_place (rules.h): a training graph's in-place calls on intermediates, out of place.
//
// Why: `nn.ReLU(inplace=True)` after a convolution or BatchNorm (most CNNs) writes a value that requires
// grad in place, and the joint does not differentiate in-place writes, so the whole graph ran eagerly
// under torch's autograd. When nothing else can see the written value — the graph made it in storage
// of its own and nothing but this call may alias it — writing a new value instead is what eager computes,
// and the rules then see an ordinary functional op (relu, silu, hardswish, dropout, ...; `x += y`,
// `x.mul_(y)` become add and mul).
#include <algorithm>
#include <array>
#include <map>
#include <optional>

#include "autograd/rules.h"
#include "passes/passes.h"

namespace ember::autograd {

namespace {

// The call's `inplace=True` flag (canonicalize keeps `inplace` a keyword), or nullptr.
bool* inplace_flag(ir::Node& node) {
  for (auto& [key, value] : node.kwargs)
    if (key == "inplace" && value.kind == Arg::Kind::Literal)
      if (bool* flag = std::get_if<bool>(&value.literal); flag && *flag) return flag;
  return nullptr;
}

// The core op computing out of place what an in-place arithmetic call (`x += y`, `x.mul_(y)`) writes, or
// nullopt. Only when every tensor it reads has the written tensor's dtype: then the out-of-place result
// has the dtype the write kept (it would otherwise promote).
std::optional<Op> out_of_place_op(const ir::Graph& g, const ir::Node& node) {
  static const std::map<std::string_view, Op> kOps = {
      {"operator.iadd", Op::Add}, {"torch.Tensor.__iadd__", Op::Add}, {"torch.Tensor.add_", Op::Add},
      {"operator.isub", Op::Sub}, {"torch.Tensor.__isub__", Op::Sub}, {"torch.Tensor.sub_", Op::Sub},
      {"operator.imul", Op::Mul}, {"torch.Tensor.__imul__", Op::Mul}, {"torch.Tensor.mul_", Op::Mul},
      {"operator.itruediv", Op::Div}, {"torch.Tensor.__itruediv__", Op::Div}, {"torch.Tensor.div_", Op::Div}};
  auto it = node.op == Op::TorchCall ? kOps.find(node.target) : kOps.end();
  if (it == kOps.end() || node.args.size() != 2 || node.args[0].kind != Arg::Kind::Value) return std::nullopt;
  const ir::DType written = g.value(node.args[0].value).type.dtype;
  for (const Arg& a : node.args)
    if (a.kind == Arg::Kind::Value && g.value(a.value).type.dtype != written) return std::nullopt;
    else if (a.kind != Arg::Kind::Value && a.kind != Arg::Kind::Literal) return std::nullopt;
  return it->second;
}

// Whether the node's results are new storage, never an alias of what it reads. Python's arithmetic
// operators on tensors (`0 + x`, as sum() over a list of tensors starts) always make a new tensor.
bool returns_fresh(const ir::Node& node) {
  static constexpr std::array<std::string_view, 6> kOperators = {
      "operator.add", "operator.sub", "operator.mul", "operator.truediv", "operator.neg", "operator.matmul"};
  if (node.mutates_first_arg()) return false;
  return ir::returns_new_tensors(node.callable()) ||
         std::find(kOperators.begin(), kOperators.end(), node.callable()) != kOperators.end();
}

void mark_read(const Arg& a, std::vector<int>& count) {
  if (a.kind == Arg::Kind::Value) ++count.at(static_cast<size_t>(a.value));
  for (const Arg& item : a.items) mark_read(item, count);
}

void remap(Arg& a, const std::vector<ValueId>& current) {
  if (a.kind == Arg::Kind::Value) a.value = current.at(static_cast<size_t>(a.value));
  for (Arg& item : a.items) remap(item, current);
}

}  // namespace

void writes_out_of_place(ir::Graph& g) {
  const size_t n = g.values().size();
  // Per value: how many nodes may return an alias of it (a view, an in-place call, an unknown callable).
  std::vector<int> aliasers(n, 0);
  for (const ir::Node& node : g.nodes()) {
    if (returns_fresh(node)) continue;
    for (const Arg& a : node.args) mark_read(a, aliasers);
    for (const auto& kw : node.kwargs) mark_read(kw.second, aliasers);
  }
  bool arithmetic = false;
  std::vector<bool> own(n, false);  // made by the graph in storage of its own
  std::vector<ValueId> current(n);  // what a read of the value sees: the last write's result
  for (size_t v = 0; v < n; ++v) current[v] = static_cast<ValueId>(v);
  for (ir::Node& node : g.mutable_nodes()) {
    for (Arg& a : node.args) remap(a, current);
    for (auto& kw : node.kwargs) remap(kw.second, current);
    bool* flag = inplace_flag(node);
    std::optional<Op> op = out_of_place_op(g, node);
    const Arg* first = node.args.empty() ? nullptr : &node.args.front();
    if ((flag || op) && first && first->kind == Arg::Kind::Value && node.results.size() == 1 &&
        own[static_cast<size_t>(first->value)] && aliasers[static_cast<size_t>(first->value)] == 1) {
      if (flag) *flag = false;
      if (op) {  // canonicalize binds the core op's arguments below
        node.op = *op;
        node.target.clear();
        arithmetic = true;
      }
      current[static_cast<size_t>(first->value)] = node.results.front();
      own[static_cast<size_t>(node.results.front())] = true;
      continue;
    }
    if (returns_fresh(node))
      for (ValueId r : node.results) own[static_cast<size_t>(r)] = true;
  }
  std::vector<ValueId> outputs = g.outputs();
  for (ValueId& out : outputs) out = current.at(static_cast<size_t>(out));
  g.set_outputs(std::move(outputs));
  if (arithmetic) passes::canonicalize(g);
}

}  // namespace ember::autograd
