// Checks recorded node types against the shape rules; the contract is in check_types.h.
#include "shapes/check_types.h"

#include <algorithm>

#include "shapes/shape_rules.h"

namespace ember::shapes {

namespace {

// The parts of a type a rule determines whatever the grad mode. The stride of a size-1 dim
// addresses nothing (torch's own contiguity checks skip it), nor does any stride of a tensor without
// elements (torch's views of one keep strides a rule cannot know: `x[1:]` of a [1, 2] tensor, then
// unsqueezed), so they are not compared.
bool same_layout(const ir::TensorType& a, const ir::TensorType& b) {
  if (a.dtype != b.dtype || a.sizes != b.sizes || a.device != b.device || a.strides.size() != b.strides.size())
    return false;
  if (std::any_of(a.sizes.begin(), a.sizes.end(), [](const auto& s) { return s.is_constant() && s.constant() == 0; }))
    return true;
  for (size_t i = 0; i < a.strides.size(); ++i) {
    bool unit = a.sizes[i].is_constant() && a.sizes[i].constant() == 1;
    if (!unit && a.strides[i] != b.strides[i]) return false;
  }
  return true;
}

bool agrees(const std::vector<ir::TensorType>& ruled, const ir::Graph& graph, const ir::Node& node) {
  if (ruled.size() != node.results.size()) return false;
  for (size_t i = 0; i < ruled.size(); ++i)
    if (!same_layout(ruled[i], graph.value(node.results[i]).type)) return false;
  return true;
}

}  // namespace

std::vector<std::string> check_node_types(const ir::Graph& graph) {
  std::vector<std::string> problems;
  for (const ir::Node& node : graph.nodes()) {
    if (node.op == ir::Op::TorchCall) continue;
    std::vector<Operand> args = operands_of(node.args, graph);
    std::vector<std::pair<std::string, Operand>> kwargs = operands_of(node.kwargs, graph);
    std::optional<std::vector<ir::TensorType>> first;
    bool ok = false;
    // A factory that names no device gets torch's default device (a `with torch.device(...)` block):
    // the trace resolves it, the rule cannot, so the recorded one stands.
    const bool default_device =
        op_info(node.op).family == ir::OpFamily::Factory &&
        std::none_of(node.kwargs.begin(), node.kwargs.end(), [](const auto& kv) { return kv.first == "device"; });
    for (ir::DType default_dtype : {ir::DType::Float32, ir::DType::Float64}) {
      auto ruled = infer_result_types(node.op, args, kwargs, /*grad_enabled=*/true, default_dtype);
      if (!ruled) continue;
      if (default_device)
        for (size_t i = 0; i < ruled->size() && i < node.results.size(); ++i)
          (*ruled)[i].device = graph.value(node.results[i]).type.device;
      if (!first) first = ruled;
      if (agrees(*ruled, graph, node)) ok = true;
    }
    if (!first || ok) continue;
    std::string recorded, expected;
    for (ir::ValueId r : node.results) recorded += (recorded.empty() ? "" : ", ") + graph.value(r).type.str();
    for (const ir::TensorType& t : *first) expected += (expected.empty() ? "" : ", ") + t.str();
    problems.push_back("node " + std::to_string(node.id) + " (" + op_info(node.op).name + "): recorded " + recorded +
                       ", its shape rule gives " + expected);
  }
  return problems;
}

}  // namespace ember::shapes
