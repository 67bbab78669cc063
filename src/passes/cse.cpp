// Common subexpression elimination: a core op applied again to the same arguments is replaced by
// the results of its first application.
//
// Needs: a graph that verifies. Guarantees: the outputs compute the same values, no output shares
// storage with another that it did not share before, and ids stay dense (removal renumbers,
// keeping order).
//
// Capture and decomposition repeat work (a frame that computes `x.float()` twice, two norms that
// decompose into the same mean); each repeat costs a kernel or an inlined recomputation later.
// Two nodes are the same when their op, target, arguments (values after earlier replacements,
// literals bit for bit: `-0.0` is not `0.0`), keyword arguments, result types and result form are.
// A node is left alone when merging it could change what the program observes:
//   - torch nodes (`TorchCall`): any callable may keep state or be nondeterministic;
//   - a node with an effect (passes::has_effect: random numbers, in-place writes, no results);
//   - any graph that writes a tensor in place: two equal values could then diverge (after
//     `b.add_(1)`, `b` is no longer `a`), and aliasing through views makes "which values change"
//     a question this pass does not answer; such graphs are left as captured;
//   - a node whose result reaches an output, directly or as the base of a view that does: the
//     caller would get two outputs sharing storage where eager returned two tensors.
#include <cstring>
#include <map>
#include <string>

#include "passes/passes.h"

namespace ember::passes {

namespace {

void key_of_literal(const ir::Literal& lit, std::string& key) {
  key += static_cast<char>('a' + lit.index());
  if (const bool* b = std::get_if<bool>(&lit)) {
    key += *b ? '1' : '0';
  } else if (const int64_t* i = std::get_if<int64_t>(&lit)) {
    key += std::to_string(*i);
  } else if (const double* d = std::get_if<double>(&lit)) {
    uint64_t bits;
    std::memcpy(&bits, d, sizeof bits);
    key += std::to_string(bits);
  } else if (const std::string* s = std::get_if<std::string>(&lit)) {
    key += std::to_string(s->size()) + ':' + *s;
  } else if (const ir::DType* dt = std::get_if<ir::DType>(&lit)) {
    key += ir::dtype_name(*dt);
  } else if (const ir::Device* dev = std::get_if<ir::Device>(&lit)) {
    key += dev->str();
  } else if (const ir::Slice* sl = std::get_if<ir::Slice>(&lit)) {
    for (const auto& part : {sl->start, sl->stop, sl->step}) key += part ? std::to_string(*part) + ',' : "_,";
  } else if (const sym::Expr* e = std::get_if<sym::Expr>(&lit)) {
    key += "sym(" + e->str() + ')';
  }
}

void key_of_arg(const ir::Arg& arg, std::string& key) {
  switch (arg.kind) {
    case ir::Arg::Kind::Value: key += '%' + std::to_string(arg.value); return;
    case ir::Arg::Kind::Literal: key_of_literal(arg.literal, key); return;
    case ir::Arg::Kind::List:
    case ir::Arg::Kind::Tuple:
      key += arg.kind == ir::Arg::Kind::List ? '[' : '(';
      for (const ir::Arg& item : arg.items) {
        key_of_arg(item, key);
        key += ' ';
      }
      key += arg.kind == ir::Arg::Kind::List ? ']' : ')';
      return;
  }
}

std::string key_of(const ir::Graph& graph, const ir::Node& node) {
  std::string key = std::string(ir::op_info(node.op).name) + '|' + std::to_string(static_cast<int>(node.result_form));
  for (const ir::Arg& a : node.args) {
    key_of_arg(a, key);
    key += ' ';
  }
  for (const auto& [name, a] : node.kwargs) {
    key += name + '=';
    key_of_arg(a, key);
    key += ' ';
  }
  for (ir::ValueId r : node.results) key += '|' + graph.value(r).type.str();
  return key;
}

void substitute(ir::Arg& arg, const std::vector<ir::ValueId>& replacement) {
  if (arg.kind == ir::Arg::Kind::Value) arg.value = replacement.at(arg.value);
  for (ir::Arg& item : arg.items) substitute(item, replacement);
}

// Values that an output reaches: the outputs, and the bases of views that are.
std::vector<bool> escaping_values(const ir::Graph& graph) {
  std::vector<bool> escapes(graph.values().size(), false);
  for (ir::ValueId out : graph.outputs()) escapes.at(out) = true;
  for (auto it = graph.nodes().rbegin(); it != graph.nodes().rend(); ++it) {
    if (it->op == ir::Op::TorchCall || ir::op_info(it->op).family != ir::OpFamily::View) continue;
    bool reached = false;
    for (ir::ValueId r : it->results) reached = reached || escapes.at(r);
    if (reached && !it->args.empty() && it->args[0].kind == ir::Arg::Kind::Value) escapes.at(it->args[0].value) = true;
  }
  return escapes;
}

}  // namespace

bool cse(ir::Graph& graph) {
  for (const ir::Node& node : graph.nodes())
    if (may_write(node)) return false;
  std::vector<bool> escapes = escaping_values(graph);
  std::vector<ir::ValueId> replacement(graph.values().size());
  for (size_t v = 0; v < replacement.size(); ++v) replacement[v] = static_cast<ir::ValueId>(v);
  std::map<std::string, ir::NodeId> seen;
  std::vector<bool> remove(graph.nodes().size(), false);
  bool changed = false;
  for (ir::Node& node : graph.mutable_nodes()) {
    for (ir::Arg& a : node.args) substitute(a, replacement);
    for (auto& kw : node.kwargs) substitute(kw.second, replacement);
    if (node.op == ir::Op::TorchCall || node.results.empty() || has_effect(node)) continue;
    auto [it, fresh] = seen.emplace(key_of(graph, node), node.id);
    if (fresh) continue;
    bool escapes_here = false;
    for (ir::ValueId r : node.results) escapes_here = escapes_here || escapes.at(r);
    if (escapes_here) continue;
    const ir::Node& first = graph.node(it->second);
    for (size_t k = 0; k < node.results.size(); ++k) replacement.at(node.results[k]) = first.results[k];
    remove[node.id] = true;
    changed = true;
  }
  if (!changed) return false;
  std::vector<ir::ValueId> outputs = graph.outputs();
  for (ir::ValueId& out : outputs) out = replacement.at(out);
  graph.set_outputs(std::move(outputs));
  graph.remove_nodes(remove);
  return true;
}

}  // namespace ember::passes
