// Dead code elimination: removes the nodes whose results no output depends on.
//
// Needs: a graph that verifies. Guarantees: the outputs compute the same values, every effect
// still happens in the same order, and ids stay dense (removal renumbers, keeping order).
//
// Capture records whatever the frame computed, including values it never used (a shape probe, a
// result overwritten before it is read); those nodes cost time in every later stage. A node stays,
// even if unused, when running it does something besides producing its results:
//   - it returns nothing (ResultForm::None): it runs for an effect by definition;
//   - it writes its first argument in place (Node::mutates_first_arg), or an `out=` argument;
//   - it draws random numbers: removing it would shift every later random number away from
//     what eager PyTorch produces.

#include "passes/passes.h"
#include "passes/signatures.h"

namespace ember::passes {

namespace {

std::string_view last_component(std::string_view callable) {
  size_t dot = callable.rfind('.');
  return dot == std::string_view::npos ? callable : callable.substr(dot + 1);
}

// Attention with dropout draws its mask inside the call: random unless dropout_p is a literal 0.
bool attention_with_dropout(const ir::Node& node) {
  if (last_component(node.callable()) != "scaled_dot_product_attention") return false;
  const ir::Arg* p = node.args.size() > 4 ? &node.args[4] : nullptr;
  for (const auto& [name, value] : node.kwargs)
    if (name == "dropout_p") p = &value;
  if (!p) return false;
  auto v = number_literal(*p);
  return !v || *v != 0.0;
}

}  // namespace

bool may_write(const ir::Node& node) {
  if (node.result_form == ir::Node::ResultForm::None || node.mutates_first_arg()) return true;
  for (const auto& kw : node.kwargs)
    if (kw.first == "out") return true;
  return false;
}

bool has_effect(const ir::Node& node) {
  return may_write(node) || ir::draws_random_numbers(node.callable()) || attention_with_dropout(node);
}

namespace {

void mark_live(const ir::Arg& arg, std::vector<bool>& live) {
  if (arg.kind == ir::Arg::Kind::Value) live.at(arg.value) = true;
  for (const ir::Arg& item : arg.items) mark_live(item, live);
}

}  // namespace

bool dce(ir::Graph& graph) {
  std::vector<bool> live(graph.values().size(), false);
  for (ir::ValueId out : graph.outputs()) live.at(out) = true;
  std::vector<bool> remove(graph.nodes().size(), false);
  bool changed = false;
  // Backwards, so a node's users have been decided before the node.
  for (auto it = graph.nodes().rbegin(); it != graph.nodes().rend(); ++it) {
    const ir::Node& node = *it;
    bool used = std::any_of(node.results.begin(), node.results.end(), [&](ir::ValueId r) { return live.at(r); });
    if (!used && !has_effect(node)) {
      remove[node.id] = true;
      changed = true;
      continue;
    }
    for (const ir::Arg& a : node.args) mark_live(a, live);
    for (const auto& kw : node.kwargs) mark_live(kw.second, live);
  }
  if (changed) graph.remove_nodes(remove);
  return changed;
}

}  // namespace ember::passes
