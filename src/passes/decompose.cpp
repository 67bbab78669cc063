// decompose: rewrites composite ops into Ember's primitives (docs/decompositions.md, the
// contract with lowering), so lowering needs rules for a few dozen primitives only.
//
// Needs: a graph that verifies (best after canonicalize, though rules bind arguments
// themselves). Guarantees: the graph verifies; every rewritten node computes torch's values and
// result type (dtype, promotion, keepdim, float16/bfloat16 computed in float32); the last node
// of a decomposition carries the original result's recorded type; a node a rule does not handle
// exactly is copied unchanged (an extern call). Values are renumbered: inputs first, then node
// results in order.
#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "passes/decompose_rules.h"
#include "passes/passes.h"

namespace ember::passes {

namespace decomp {

const Arg& Ctx::arg(std::string_view name) const {
  if (!bound) refuse();
  return (*bound)[name];
}

ValueId Ctx::tensor(const Arg& a) const {
  if (a.kind != Arg::Kind::Value) refuse();
  return rw.mapped(a.value);
}

int64_t Ctx::int_arg(std::string_view name) const {
  auto v = int_literal(arg(name));
  if (!v) refuse();
  return *v;
}

double Ctx::number_arg(std::string_view name) const {
  auto v = number_literal(arg(name));
  if (!v) refuse();
  return *v;
}

bool Ctx::bool_arg(std::string_view name) const {
  auto v = bool_literal(arg(name));
  if (!v) refuse();
  return *v;
}

const ir::TensorType& Ctx::result_type(size_t i) const {
  if (i >= node.results.size()) refuse();
  return rw.source().value(node.results[i]).type;
}

void Ctx::finish(ValueId v, size_t i) {
  const ir::TensorType& want = result_type(i);
  if (rw.created_since(v, mark)) {
    const ir::TensorType& got = rw.type(v);
    if (got.dtype != want.dtype || got.sizes != want.sizes)
      throw std::logic_error("decompose " + std::string(node.callable()) + ": built " + got.str() + ", torch records " +
                             want.str());
    // The primitives' layout follows their operands where torch's result is dense (softmax over dim 0
    // of a transposed input), or torch's layout is its input's memory format where the primitives' is
    // not (group norm of a channels-last input on the CPU): a copy into torch's layout, since
    // relabelling the strides would contradict the rules.
    v = relayout(rw, v, want);
    rw.set_type(v, want);
  } else if (rw.type(v).dtype != want.dtype || rw.type(v).sizes != want.sizes) {
    throw std::logic_error("decompose " + std::string(node.callable()) + ": reuses a value of type " +
                           rw.type(v).str() + " for a result of type " + want.str());
  }
  rw.bind(node.results[i], v);
}

const RuleMap& rules() {
  static const RuleMap kRules = [] {
    RuleMap r;
    add_pointwise_rules(r);
    add_reduction_rules(r);
    add_view_rules(r);
    add_subscript_rules(r);
    return r;
  }();
  return kRules;
}

}  // namespace decomp

namespace {

// One pass over `graph`'s nodes (those in `only`, when given). `emitted`: for each rewritten node, the
// positions in the new graph of the nodes its rule emitted, with the rewritten node's callable.
bool decompose_pass(ir::Graph& graph, const std::function<bool(const ir::Node&)>& keep, const std::set<size_t>* only,
                    std::vector<std::pair<size_t, std::string>>* emitted) {
  const decomp::RuleMap& rules = decomp::rules();
  Rewriter rw(graph);
  bool changed = false;
  for (size_t position = 0; position < graph.nodes().size(); ++position) {
    const ir::Node& node = graph.nodes()[position];
    auto it = rules.find(node.callable());
    if (it != rules.end() && !(keep && keep(node)) && (!only || only->count(position))) {
      decomp::Ctx ctx{rw, node, bind(node), rw.mark()};
      try {
        it->second(ctx);
        for (ir::ValueId r : node.results) rw.mapped(r);  // every result bound
        for (size_t k = ctx.mark.nodes; k < rw.mark().nodes; ++k) emitted->emplace_back(k, node.callable());
        changed = true;
        continue;
      } catch (Refuse&) {
        rw.rollback(ctx.mark);
      }
    }
    rw.copy(node);
  }
  if (!changed) return false;
  graph = rw.finish();
  return true;
}

}  // namespace

// Rules may emit composite ops of other rules (cross_entropy emits log_softmax, which training keeps
// whole for its fused derivative): those are decomposed in turn, a round per level of nesting.
bool decompose(ir::Graph& graph, const std::function<bool(const ir::Node&)>& keep) {
  constexpr int kMaxRounds = 4;
  const decomp::RuleMap& rules = decomp::rules();
  bool changed = false;
  std::set<size_t> revisit;
  for (int round = 0; round < kMaxRounds; ++round) {
    std::vector<std::pair<size_t, std::string>> emitted;
    if (!decompose_pass(graph, keep, round == 0 ? nullptr : &revisit, &emitted)) break;
    changed = true;
    revisit.clear();
    for (const auto& [position, from] : emitted) {
      const std::string_view callable = graph.nodes()[position].callable();
      if (callable != from && rules.find(callable) != rules.end()) revisit.insert(position);
    }
    if (revisit.empty()) break;
  }
  return changed;
}

}  // namespace ember::passes
