// partition: a joint graph -> forward and backward graphs (autograd.h).
//
// Needs: a joint graph from build_joint, after decompose, dce and cse (its layout unchanged: those
// passes keep inputs and outputs in order). Guarantees: deterministic; the forward computes every
// forward output and every node with an effect (in-place writes, random draws) exactly once; the
// backward recomputes only values the ban rules allow and reads everything else from the saved
// values; both verify. Both keep the joint's shape symbols, and every symbol is a dimension of some
// backward input, where the runtime reads its value (a size carrier is saved when none is, below).
//
// How: the joint's values split into the forward region (computed from primals alone) and the
// backward region (depending on a tangent). A forward-region value the backward reads must be
// available there: saved by the forward, or recomputed in the backward from values that are. That
// choice is a minimum cut (as in AOTAutograd's min-cut partitioner, notes/aot_autograd.md §3): each
// forward value v becomes an edge v_in -> v_out whose capacity is the bytes saving v costs;
// v_out -> u_in is unbounded for each forward user u; v_out -> sink is unbounded when the backward
// reads v; source -> v_in is unbounded for primals and for values that must not be recomputed
// (banned). The cut edges are the saved values: the fewest bytes that make the backward computable.
// A primal's or a forward output's edge costs 1 (the least an edge has): the caller holds it anyway.
//
// Ban rules (each decision keeps its reason for EMBER_LOGS=partition): only what Ember's scheduler
// would fuse into its consumer is recomputed — pointwise ops, views, conversions and factories; but not
// a reshape that copies for a backward extern call or matmul (copies_read_by_backward_externs).
// Reductions, matmuls and data movement (gather, cat, ...) are computed once, in the forward, unless
// the memory budget is 0 (activation checkpointing); extern torch calls and random or writing nodes
// always are. Why not ask the scheduler itself: autograd sits below
// lowering in the layering; the op families are what its inline rule keys on (docs/scheduler.md).
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <stdexcept>

#include "autograd/autograd.h"
#include "passes/passes.h"
#include "passes/rewriter.h"

namespace ember::autograd {

using ir::Arg;
using ir::ValueId;

namespace {

constexpr int64_t kInfinite = std::numeric_limits<int64_t>::max() / 4;

// Dinic's maximum flow over int64 capacities; min_cut_source_side() after run().
class MaxFlow {
 public:
  explicit MaxFlow(int vertices) : adjacency_(static_cast<size_t>(vertices)) {}

  void add_edge(int from, int to, int64_t capacity) {
    adjacency_[static_cast<size_t>(from)].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({to, capacity});
    adjacency_[static_cast<size_t>(to)].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({from, 0});
  }

  int64_t run(int source, int sink) {
    int64_t total = 0;
    while (levels(source, sink)) {
      next_.assign(adjacency_.size(), 0);
      while (int64_t pushed = push(source, sink, kInfinite)) total += pushed;
    }
    return total;
  }

  // The vertices reachable from the source in the residual graph.
  std::vector<bool> source_side(int source) const {
    std::vector<bool> seen(adjacency_.size(), false);
    std::vector<int> stack{source};
    seen[static_cast<size_t>(source)] = true;
    while (!stack.empty()) {
      int v = stack.back();
      stack.pop_back();
      for (int e : adjacency_[static_cast<size_t>(v)]) {
        const Edge& edge = edges_[static_cast<size_t>(e)];
        if (edge.capacity > 0 && !seen[static_cast<size_t>(edge.to)]) {
          seen[static_cast<size_t>(edge.to)] = true;
          stack.push_back(edge.to);
        }
      }
    }
    return seen;
  }

 private:
  struct Edge {
    int to;
    int64_t capacity;
  };

  bool levels(int source, int sink) {
    level_.assign(adjacency_.size(), -1);
    std::queue<int> queue;
    level_[static_cast<size_t>(source)] = 0;
    queue.push(source);
    while (!queue.empty()) {
      int v = queue.front();
      queue.pop();
      for (int e : adjacency_[static_cast<size_t>(v)]) {
        const Edge& edge = edges_[static_cast<size_t>(e)];
        if (edge.capacity > 0 && level_[static_cast<size_t>(edge.to)] < 0) {
          level_[static_cast<size_t>(edge.to)] = level_[static_cast<size_t>(v)] + 1;
          queue.push(edge.to);
        }
      }
    }
    return level_[static_cast<size_t>(sink)] >= 0;
  }

  int64_t push(int v, int sink, int64_t limit) {
    if (v == sink) return limit;
    std::vector<int>& adj = adjacency_[static_cast<size_t>(v)];
    for (size_t& i = next_[static_cast<size_t>(v)]; i < adj.size(); ++i) {
      Edge& edge = edges_[static_cast<size_t>(adj[i])];
      if (edge.capacity <= 0 || level_[static_cast<size_t>(edge.to)] != level_[static_cast<size_t>(v)] + 1) continue;
      if (int64_t pushed = push(edge.to, sink, std::min(limit, edge.capacity))) {
        edge.capacity -= pushed;
        edges_[static_cast<size_t>(adj[i] ^ 1)].capacity += pushed;
        return pushed;
      }
    }
    return 0;
  }

  std::vector<std::vector<int>> adjacency_;
  std::vector<Edge> edges_;
  std::vector<int> level_;
  std::vector<size_t> next_;
};

void for_each_value(const Arg& a, const std::function<void(ValueId)>& f) {
  if (a.kind == Arg::Kind::Value) f(a.value);
  for (const Arg& item : a.items) for_each_value(item, f);
}

void for_each_read(const ir::Node& node, const std::function<void(ValueId)>& f) {
  for (const Arg& a : node.args) for_each_value(a, f);
  for (const auto& kw : node.kwargs) for_each_value(kw.second, f);
}

// A value's size in bytes; a symbolic size counts at its symbol's hint (the traced size): the cut is
// chosen once for every size the graph serves, by the sizes it was traced at.
int64_t bytes_of(const ir::TensorType& t, const std::map<std::string, int64_t>& hints) {
  int64_t n = ir::dtype_info(t.dtype).itemsize;
  for (const sym::Expr& s : t.sizes) n *= s.is_constant() ? s.constant() : sym::evaluate(s, hints);
  return n;
}

// Whether a forward-region node may be recomputed in the backward, and why not.
struct Ban {
  enum class Level : uint8_t {
    None,       // cheap: fused into its consumer (pointwise, views, factories)
    Expensive,  // recomputable, but at a cost the default budget does not pay (reductions, matmuls, data movement)
    Never,      // must run once, in the forward: it writes memory, draws random numbers, or calls torch
  } level = Level::None;
  std::string reason;
};

Ban ban_of(const ir::Node& node) {
  using L = Ban::Level;
  if (passes::has_effect(node)) return {L::Never, "it writes memory or draws random numbers"};
  if (node.op == ir::Op::TorchCall) return {L::Never, "an extern call (" + node.target + ")"};
  switch (ir::op_info(node.op).family) {
    case ir::OpFamily::Pointwise:
    case ir::OpFamily::View:
    case ir::OpFamily::Factory: return {};
    case ir::OpFamily::Reduction:
    case ir::OpFamily::Normalization: return {L::Expensive, "a reduction"};
    case ir::OpFamily::Matmul: return {L::Expensive, "a matmul"};
    case ir::OpFamily::Data:
      if (node.op == ir::Op::Tril || node.op == ir::Op::Triu || node.op == ir::Op::Contiguous) return {};
      return {L::Expensive, "data movement (" + std::string(ir::op_info(node.op).name) + ")"};
    case ir::OpFamily::Other: return {L::Never, std::string(ir::op_info(node.op).name)};
  }
  return {L::Never, "an op the partitioner does not know"};
}

// Per forward value: whether it is a reshape that copies (a reshape or flatten laid out contiguously
// from an input that is not: repeat_kv's reshape of an expanded k or v) which a backward node that
// reads its operands from memory -- an extern torch call or a matmul, which no kernel fuses with --
// reads, directly or through views. Recomputed in the backward, such a copy is one more kernel
// writing it (the attention backward's repeated k and v, in every layer of a grouped-query model);
// saved, it costs its bytes, as eager's attention saves its inputs. (AOTAutograd bans every value the
// backward must materialize; here other pointwise values stay recomputable, as they fuse with the
// backward's kernels or alias what is saved: an attention output's layout copies, scheduler.md.)
std::vector<bool> copies_read_by_backward_externs(const ir::Graph& g, const std::vector<bool>& backward) {
  auto copies = [&g](const ir::Node& node) {
    if (node.op != ir::Op::Reshape && node.op != ir::Op::Flatten) return false;
    const ir::TensorType& in = g.value(node.args.front().value).type;
    const ir::TensorType& out = g.value(node.results.front()).type;
    return in.strides != ir::contiguous_strides(in.sizes) && out.strides == ir::contiguous_strides(out.sizes);
  };
  std::vector<bool> out(g.values().size(), false);
  for (const ir::Node& node : g.nodes()) {
    if (node.results.empty() || !backward[static_cast<size_t>(node.results[0])]) continue;
    if (node.op != ir::Op::TorchCall && ir::op_info(node.op).family != ir::OpFamily::Matmul) continue;
    for_each_read(node, [&](ValueId v) {
      while (!backward[static_cast<size_t>(v)] && g.value(v).producer >= 0) {
        const ir::Node& producer = g.node(g.value(v).producer);
        if (ir::op_info(producer.op).family != ir::OpFamily::View || producer.args.empty() ||
            producer.args.front().kind != Arg::Kind::Value)
          return;
        if (copies(producer)) {
          out[static_cast<size_t>(v)] = true;
          return;
        }
        v = producer.args.front().value;
      }
    });
  }
  return out;
}

Arg remap(const Arg& a, const std::vector<ValueId>& map) {
  Arg out = a;
  if (a.kind == Arg::Kind::Value) {
    out.value = map.at(static_cast<size_t>(a.value));
    if (out.value < 0) throw std::logic_error("partition: %" + std::to_string(a.value) + " is not available");
  }
  for (Arg& item : out.items) item = remap(item, map);
  return out;
}

// The subgraph of `joint` that computes `outputs` from `inputs` (value, source): the nodes needed,
// plus `forced` nodes, in joint order.
ir::Graph extract(const ir::Graph& joint, const std::string& name, const std::vector<std::pair<ValueId, std::string>>& inputs,
                  const std::vector<ValueId>& outputs, const std::vector<bool>& forced) {
  std::vector<bool> is_input(joint.values().size(), false), needed(joint.nodes().size(), false);
  for (const auto& in : inputs) is_input[static_cast<size_t>(in.first)] = true;
  std::vector<ValueId> work(outputs);
  for (const ir::Node& node : joint.nodes()) {
    if (!forced[static_cast<size_t>(node.id)]) continue;
    needed[static_cast<size_t>(node.id)] = true;
    for_each_read(node, [&](ValueId v) { work.push_back(v); });
  }
  while (!work.empty()) {
    ValueId v = work.back();
    work.pop_back();
    if (is_input[static_cast<size_t>(v)]) continue;
    ir::NodeId p = joint.value(v).producer;
    if (p < 0) throw std::logic_error("partition: " + name + " needs joint input %" + std::to_string(v));
    if (needed[static_cast<size_t>(p)]) continue;
    needed[static_cast<size_t>(p)] = true;
    for_each_read(joint.node(p), [&](ValueId r) { work.push_back(r); });
  }
  ir::Graph g(name);
  g.symbols = joint.symbols;
  std::vector<ValueId> map(joint.values().size(), -1);
  for (const auto& [v, source] : inputs) map[static_cast<size_t>(v)] = g.add_input(joint.value(v).type, source);
  for (const ir::Node& node : joint.nodes()) {
    if (!needed[static_cast<size_t>(node.id)]) continue;
    std::vector<Arg> args;
    for (const Arg& a : node.args) args.push_back(remap(a, map));
    std::vector<std::pair<std::string, Arg>> kwargs;
    for (const auto& [k, a] : node.kwargs) kwargs.emplace_back(k, remap(a, map));
    std::vector<ir::TensorType> types;
    for (ValueId r : node.results) types.push_back(joint.value(r).type);
    ir::NodeId id = g.add_node(node.op, node.target, std::move(args), std::move(kwargs), std::move(types), node.result_form);
    for (size_t i = 0; i < node.results.size(); ++i) map[static_cast<size_t>(node.results[i])] = g.node(id).results[i];
  }
  std::vector<ValueId> outs;
  for (ValueId v : outputs) outs.push_back(map.at(static_cast<size_t>(v)));
  g.set_outputs(std::move(outs));
  return g;
}

// The backward binds each shape symbol from a dimension of one of its inputs that is exactly that
// symbol (runtime/symbol_binding.h); the forward binds it from the primals. When the saved values,
// saved primals and tangents have no such dimension (the backward of `x.sum()` reads a scalar
// tangent alone, yet expands it to x's symbolic sizes), the forward also returns a size carrier: a
// tensor with no elements whose sizes are 0 and those symbols, so the symbols' values pass from
// forward to backward at no cost in memory. The symbols no value of `read` has as a dimension:
std::vector<sym::Expr> unbound_symbols(const ir::Graph& g, const std::vector<ValueId>& read) {
  std::vector<sym::Expr> unbound;
  for (const sym::SymbolInfo& s : g.symbols) {
    sym::Expr symbol = sym::Expr::symbol(s.name);
    bool bound = false;
    for (ValueId v : read)
      for (const sym::Expr& d : g.value(v).type.sizes) bound = bound || d == symbol;
    if (!bound) unbound.push_back(symbol);
  }
  return unbound;
}

// Appends to `g` the carrier of `symbols` (a forward-region factory) and returns it.
ValueId add_size_carrier(ir::Graph& g, const std::vector<sym::Expr>& symbols) {
  std::vector<Arg> sizes{Arg::of_literal(int64_t{0})};
  std::vector<sym::Expr> exprs{sym::Expr(0)};
  for (const sym::Expr& symbol : symbols) {
    sizes.push_back(Arg::of_size(symbol));
    exprs.push_back(symbol);
  }
  const ir::Device device = g.value(g.inputs().at(0).value).type.device;
  ir::TensorType type = passes::make_type(ir::DType::Bool, std::move(exprs), device, false);
  ir::NodeId id = g.add_node(ir::Op::Full, "", {Arg::list(std::move(sizes)), Arg::of_literal(false)},
                             {{"dtype", Arg::of_literal(ir::DType::Bool)}, {"device", Arg::of_literal(device)}},
                             {std::move(type)}, ir::Node::ResultForm::Single);
  return g.node(id).results[0];
}

}  // namespace

std::string PartitionDecision::str() const {
  const char* what = kind == Kind::Saved ? "saved" : kind == Kind::Recomputed ? "recomputed" : "banned";
  return "%" + std::to_string(value) + " " + what + ": " + reason;
}

Partition partition(const Joint& joint, const PartitionOptions& options) {
  const ir::Graph* graph = &joint.graph;  // the joint, or its copy with a size carrier (below)
  const ir::Graph& g = joint.graph;
  const JointLayout& layout = joint.layout;
  const size_t n_values = g.values().size();
  std::map<std::string, int64_t> hints;
  for (const sym::SymbolInfo& s : g.symbols) hints.emplace(s.name, s.hint);
  int primals = layout.primals, tangents = layout.tangents();
  if (static_cast<int>(g.inputs().size()) != primals + tangents)
    throw std::logic_error("partition: the joint has " + std::to_string(g.inputs().size()) + " inputs, its layout " +
                           std::to_string(primals + tangents));

  // Regions: a value is in the backward region when it depends on a tangent.
  std::vector<bool> backward(n_values, false);
  for (int t = 0; t < tangents; ++t) backward[static_cast<size_t>(g.inputs()[static_cast<size_t>(primals + t)].value)] = true;
  for (const ir::Node& node : g.nodes()) {
    bool b = false;
    for_each_read(node, [&](ValueId v) { b = b || backward[static_cast<size_t>(v)]; });
    for (ValueId r : node.results) backward[static_cast<size_t>(r)] = b;
  }
  // Forward values the backward reads: by a backward node, or as a gradient output itself.
  std::vector<bool> read_by_backward(n_values, false);
  for (const ir::Node& node : g.nodes()) {
    if (node.results.empty() || !backward[static_cast<size_t>(node.results[0])]) continue;
    for_each_read(node, [&](ValueId v) {
      if (!backward[static_cast<size_t>(v)]) read_by_backward[static_cast<size_t>(v)] = true;
    });
  }
  std::vector<ValueId> grads;
  for (size_t i = static_cast<size_t>(layout.forward_outputs); i < g.outputs().size(); ++i) {
    grads.push_back(g.outputs()[i]);
    if (!backward[static_cast<size_t>(g.outputs()[i])]) read_by_backward[static_cast<size_t>(g.outputs()[i])] = true;
  }

  Partition result;
  result.layout = layout;
  // Which tangents each gradient depends on: one forward flood from each tangent.
  result.layout.tangents_of_gradient.assign(grads.size(), {});
  for (int t = 0; t < tangents; ++t) {
    std::vector<bool> reached(n_values, false);
    reached[static_cast<size_t>(g.inputs()[static_cast<size_t>(primals + t)].value)] = true;
    for (const ir::Node& node : g.nodes()) {
      bool r = false;
      for_each_read(node, [&](ValueId v) { r = r || reached[static_cast<size_t>(v)]; });
      for (ValueId out : node.results) reached[static_cast<size_t>(out)] = r;
    }
    for (size_t j = 0; j < grads.size(); ++j)
      if (reached[static_cast<size_t>(grads[j])]) result.layout.tangents_of_gradient[j].push_back(t);
  }
  // A gradient that reads no tangent is a constant (the zeros of floor, sign, rounding division):
  // eager gives it once a gradient flows at all, so it depends on every tangent.
  for (std::vector<int>& ts : result.layout.tangents_of_gradient)
    if (ts.empty())
      for (int t = 0; t < tangents; ++t) ts.push_back(t);
  // The flow network over forward values: v_in = 2v, v_out = 2v + 1.
  const int source = static_cast<int>(2 * n_values), sink = source + 1;
  MaxFlow flow(sink + 1);
  std::vector<bool> is_primal(n_values, false);
  for (int p = 0; p < primals; ++p) is_primal[static_cast<size_t>(g.inputs()[static_cast<size_t>(p)].value)] = true;
  std::vector<bool> is_output(n_values, false);
  for (int i = 0; i < layout.forward_outputs; ++i) is_output[static_cast<size_t>(g.outputs()[static_cast<size_t>(i)])] = true;
  double budget = std::clamp(options.memory_budget, 0.0, 1.0);
  // A value whose storage is written is read by later nodes as the written storage, but recomputing its
  // producer (a cheap factory, `torch.zeros`) gives the value before the writes: timm ConViT fills its
  // relative-position table by setitem into zeros inside the forward, and the backward recomputed the
  // zeros (a zero weight gradient for pos_proj).
  const std::vector<bool> written = ir::written_storage(g);
  const std::vector<bool> copied_for_externs = copies_read_by_backward_externs(g, backward);
  for (const ir::Value& v : g.values()) {
    if (backward[static_cast<size_t>(v.id)]) continue;
    int in = 2 * v.id, out = in + 1;
    int64_t bytes = bytes_of(v.type, hints);
    bool primal = is_primal[static_cast<size_t>(v.id)];
    Ban ban = primal ? Ban{} : ban_of(g.node(v.producer));
    if (!primal && written[static_cast<size_t>(v.id)])
      ban = {Ban::Level::Never, "a node writes its storage in place (recomputed, it would miss the write)"};
    if (!primal && ban.level == Ban::Level::None && copied_for_externs[static_cast<size_t>(v.id)])
      ban = {Ban::Level::Expensive, "a reshape that copies, which an extern call or matmul of the backward reads "
                                    "(recomputed, it would be one more kernel writing it)"};
    // Budget 1: only cheap values are recomputed. Below 1, saving a cheap value costs 1/budget per
    // byte. At 0, everything that can be recomputed is (activation checkpointing): only primals and
    // values that must run once are saved.
    bool banned = ban.level == Ban::Level::Never || (ban.level == Ban::Level::Expensive && budget > 0.0);
    // A primal or a forward output costs nothing to save: the caller holds it anyway (eager saves it
    // too), so views and cheap functions of them are recomputed rather than saved beside them.
    int64_t capacity = primal || is_output[static_cast<size_t>(v.id)] ? 0 : bytes;
    if (primal || banned) {
      flow.add_edge(source, in, kInfinite);
    } else if (budget < 1.0) {
      capacity = budget <= 0.0 ? kInfinite : static_cast<int64_t>(static_cast<double>(bytes) / budget);
    }
    flow.add_edge(in, out, std::max<int64_t>(capacity, 1));
    if (read_by_backward[static_cast<size_t>(v.id)]) flow.add_edge(out, sink, kInfinite);
    if (banned && (read_by_backward[static_cast<size_t>(v.id)] || copied_for_externs[static_cast<size_t>(v.id)]))
      result.decisions.push_back({v.id, PartitionDecision::Kind::Banned, "not recomputed: " + ban.reason});
  }
  for (const ir::Node& node : g.nodes()) {
    for_each_read(node, [&](ValueId v) {
      if (backward[static_cast<size_t>(v)]) return;
      for (ValueId r : node.results)
        if (!backward[static_cast<size_t>(r)]) flow.add_edge(2 * v + 1, 2 * r, kInfinite);
    });
  }
  int64_t cut = flow.run(source, sink);
  if (cut >= kInfinite) throw std::logic_error("partition: no finite cut (a value the backward needs cannot be saved)");
  std::vector<bool> reached = flow.source_side(source);

  // Saved: forward values whose in-vertex is on the source side and out-vertex on the sink side.
  std::vector<ValueId> saved, saved_primals;
  std::vector<bool> is_saved(n_values, false);
  for (const ir::Value& v : g.values()) {
    if (backward[static_cast<size_t>(v.id)]) continue;
    if (!reached[static_cast<size_t>(2 * v.id)] || reached[static_cast<size_t>(2 * v.id + 1)]) continue;
    is_saved[static_cast<size_t>(v.id)] = true;
    (is_primal[static_cast<size_t>(v.id)] ? saved_primals : saved).push_back(v.id);
    if (!is_primal[static_cast<size_t>(v.id)]) result.saved_bytes += bytes_of(v.type, hints);
    result.decisions.push_back({v.id, PartitionDecision::Kind::Saved, std::to_string(bytes_of(v.type, hints)) + " bytes"});
  }
  for (const ir::Value& v : g.values())
    if (!backward[static_cast<size_t>(v.id)] && read_by_backward[static_cast<size_t>(v.id)] && !is_saved[static_cast<size_t>(v.id)])
      result.decisions.push_back({v.id, PartitionDecision::Kind::Recomputed, "from saved values, in the backward"});
  std::stable_sort(result.decisions.begin(), result.decisions.end(),
                   [](const PartitionDecision& a, const PartitionDecision& b) { return a.value < b.value; });

  std::vector<ValueId> read_by_backward_graph(saved);
  read_by_backward_graph.insert(read_by_backward_graph.end(), saved_primals.begin(), saved_primals.end());
  for (int t = 0; t < tangents; ++t) read_by_backward_graph.push_back(g.inputs()[static_cast<size_t>(primals + t)].value);
  std::optional<ir::Graph> with_carrier;
  if (std::vector<sym::Expr> unbound = unbound_symbols(g, read_by_backward_graph); !unbound.empty()) {
    graph = &with_carrier.emplace(g);
    saved.push_back(add_size_carrier(*with_carrier, unbound));
    result.decisions.push_back({saved.back(), PartitionDecision::Kind::Saved, "0 bytes: the size carrier of shape symbols"});
  }

  // The forward: primals -> forward outputs, saved values; every node with an effect runs here.
  std::vector<std::pair<ValueId, std::string>> fw_inputs;
  for (int p = 0; p < primals; ++p) fw_inputs.emplace_back(g.inputs()[static_cast<size_t>(p)].value, g.inputs()[static_cast<size_t>(p)].source);
  std::vector<ValueId> fw_outputs(g.outputs().begin(), g.outputs().begin() + layout.forward_outputs);
  fw_outputs.insert(fw_outputs.end(), saved.begin(), saved.end());
  std::vector<bool> effects(graph->nodes().size(), false);
  for (const ir::Node& node : g.nodes()) effects[static_cast<size_t>(node.id)] = passes::has_effect(node);
  result.forward = extract(*graph, "forward", fw_inputs, fw_outputs, effects);
  result.saved = static_cast<int>(saved.size());

  // The backward: saved values, saved primals, tangents -> gradients.
  std::vector<std::pair<ValueId, std::string>> bw_inputs;
  for (size_t i = 0; i < saved.size(); ++i) bw_inputs.emplace_back(saved[i], "saved[" + std::to_string(i) + "]");
  for (ValueId p : saved_primals) {
    size_t index = 0;
    while (g.inputs()[index].value != p) ++index;
    result.saved_primals.push_back(static_cast<int>(index));
    bw_inputs.emplace_back(p, "primals[" + std::to_string(index) + "]");
  }
  for (int t = 0; t < tangents; ++t)
    bw_inputs.emplace_back(g.inputs()[static_cast<size_t>(primals + t)].value, g.inputs()[static_cast<size_t>(primals + t)].source);
  result.backward = extract(*graph, "backward", bw_inputs, grads, std::vector<bool>(graph->nodes().size(), false));
  // The backward has no int inputs: it reads an int symbol, as every symbol, from a dimension of a
  // saved value or tangent, or from the size carrier (an int symbol is >= 1, so a carrier's extent).
  // It costs no saved bytes, as AOTAutograd's saved SymInts (notes/aot_autograd.md).
  for (sym::SymbolInfo& s : result.backward.symbols) s.from_int = false;
  return result;
}

std::string print(const Partition& p) {
  std::string text = "// layout: " + p.layout.str() + "\n// saved: " + std::to_string(p.saved) + " values";
  if (!p.saved_primals.empty()) {
    text += ", primals";
    for (int i : p.saved_primals) text += " " + std::to_string(i);
  }
  text += ", " + std::to_string(p.saved_bytes) + " bytes\n";
  for (const PartitionDecision& d : p.decisions) text += "// partition: " + d.str() + "\n";
  return text + ir::print(p.forward) + ir::print(p.backward);
}

}  // namespace ember::autograd
