// build_joint: a training graph -> its joint forward + backward graph (autograd.h).
//
// Needs: a graph that verifies, as captured (canonicalized or not). Guarantees: the joint verifies;
// its first nodes compute the forward exactly as the graph did (nodes the derivative table
// differentiates through their decomposition are decomposed first); then, walking the forward in
// reverse, each node with a gradient flowing into its results adds its rule's nodes, and the
// gradients of a value are summed in the order its uses are visited (deterministic). The joint's
// values do not require grad: it is an ordinary graph from here on, JointLayout says which inputs
// are tangents and which outputs are gradients.
//
// Refused (nullopt, with the reason; the graph then runs eagerly under torch autograd): a node that
// writes a tensor requiring grad in place, and a random op whose result needs a gradient but has no
// rule (an island would recompute it with other numbers). Grad-mode changes (the trace's
// torch._C._set_grad_enabled nodes) are dropped from the joint: the trace already gave every value
// computed with grad disabled requires_grad false, so no gradient flows through them, and nodes in
// such a region are not decomposed here (a decomposition would recompute requires_grad from its
// inputs, a weight's included); the later decompose step takes them.
#include <iterator>
#include <map>
#include <stdexcept>

#include "autograd/rules.h"
#include "passes/passes.h"

namespace ember::autograd {

int JointLayout::tangents() const {
  int n = 0;
  for (int t : tangent_of_output) n += t >= 0;
  return n;
}

std::string JointLayout::str() const {
  std::string s = "primals " + std::to_string(primals) + ", tangents " + std::to_string(tangents()) + ", grads of";
  bool any = false;
  for (size_t i = 0; i < grad_output_of_primal.size(); ++i)
    if (grad_output_of_primal[i] >= 0) {
      s += " %" + std::to_string(i);
      any = true;
    }
  if (!any) s += " none";
  if (!islands.empty()) {
    s += "; islands:";
    for (const std::string& name : islands) s += " " + name;
  }
  if (grad_mode_at_end) s += std::string("; grad mode at end: ") + (*grad_mode_at_end ? "enabled" : "disabled");
  return s;
}

bool is_training_graph(const ir::Graph& graph) {
  for (ir::ValueId out : graph.outputs())
    if (graph.value(out).type.requires_grad) return true;
  return false;
}

namespace {

// The tensor values a node reads, in argument order (nested lists included, keywords last).
void collect_values(const Arg& a, std::vector<ValueId>* out) {
  if (a.kind == Arg::Kind::Value) out->push_back(a.value);
  for (const Arg& item : a.items) collect_values(item, out);
}

std::vector<ValueId> values_read(const ir::Node& node) {
  std::vector<ValueId> out;
  for (const Arg& a : node.args) collect_values(a, &out);
  for (const auto& kw : node.kwargs) collect_values(kw.second, &out);
  return out;
}

bool any_result_requires_grad(const ir::Graph& g, const ir::Node& node) {
  for (ValueId r : node.results)
    if (g.value(r).type.requires_grad) return true;
  return false;
}

// The grad mode a trace's mode-change node sets, or nullopt for any other node.
std::optional<bool> grad_mode_set(const ir::Node& node) {
  if (node.callable() != "torch._C._set_grad_enabled" || node.args.size() != 1) return std::nullopt;
  const Arg& a = node.args[0];
  if (a.kind != Arg::Kind::Literal || !std::holds_alternative<bool>(a.literal)) return std::nullopt;
  return std::get<bool>(a.literal);
}

// Per node id: whether it runs with grad disabled. The trace emits a mode node only where the mode
// changes, so the mode before the first one is its opposite.
std::vector<bool> grad_disabled_nodes(const ir::Graph& g) {
  std::vector<bool> disabled;
  bool enabled = true;
  for (const ir::Node& node : g.nodes())
    if (std::optional<bool> mode = grad_mode_set(node)) {
      enabled = !*mode;
      break;
    }
  for (const ir::Node& node : g.nodes()) {
    if (std::optional<bool> mode = grad_mode_set(node)) enabled = *mode;
    if (disabled.size() <= static_cast<size_t>(node.id)) disabled.resize(static_cast<size_t>(node.id) + 1);
    disabled[static_cast<size_t>(node.id)] = !enabled;
  }
  return disabled;
}

// Why the graph cannot be differentiated ahead of time, or "". (torch.set_grad_enabled captured as a
// call, not as the trace's mode change, is a change the joint cannot see.)
// A write left in place (functional_writes made the others out of place) with grad enabled is
// refused when it writes a tensor that requires grad, or writes with one (`m.diagonal().copy_(x)`:
// eager's autograd records the write into m's history; the joint would drop x's gradient and m's).
std::string why_not_differentiable(const ir::Graph& g) {
  const std::vector<bool> disabled = grad_disabled_nodes(g);
  for (const ir::Node& node : g.nodes()) {
    std::string name(node.callable());
    if (name == "torch.set_grad_enabled") return "the graph calls " + name + " as a function";
    if (!passes::may_write(node)) continue;
    std::vector<ValueId> read = values_read(node);
    if (!read.empty() && g.value(read.front()).type.requires_grad)
      return "the graph writes a tensor that requires grad in place (" + name + ")";
    if (disabled[static_cast<size_t>(node.id)]) continue;  // under no_grad eager records nothing either
    for (ValueId v : read)
      if (g.value(v).type.requires_grad)
        return "the graph writes in place with a value that requires grad (" + name + ")";
  }
  return "";
}

// The gradient of one forward value as it accumulates: a sum of whole gradients, and gradients of
// disjoint slices along one dim, joined by one cat (zeros in the gaps) when the gradient is read.
struct Gradient {
  std::optional<ValueId> whole;
  int64_t dim = -1;
  std::map<int64_t, ValueId> pieces;  // start along dim -> gradient of that slice
};

struct Builder {
  const ir::Graph& g;  // the forward with tangent inputs appended
  Rewriter rw;
  std::vector<Gradient> grad;  // per forward value
  JointLayout& layout;
  std::string reason;

  // A piece's extent along its dim: a constant (slice_vjp gives pieces only then).
  int64_t extent(ValueId piece, int64_t dim) { return sizes_of(rw, piece).at(static_cast<size_t>(dim)).constant(); }

  bool overlaps(const Gradient& slot, int64_t start, int64_t end) {
    auto next = slot.pieces.lower_bound(start);
    if (next != slot.pieces.end() && next->first < end) return true;
    return next != slot.pieces.begin() && std::prev(next)->first + extent(std::prev(next)->second, slot.dim) > start;
  }

  void add_whole(Gradient& slot, ValueId contribution) {
    slot.whole = slot.whole ? binary(rw, Op::Add, *slot.whole, V(contribution)) : contribution;
  }

  // The pieces joined into the whole gradient of forward value `v`.
  void join_pieces(ValueId v) {
    Gradient& slot = grad.at(static_cast<size_t>(v));
    if (slot.pieces.empty()) return;
    const ir::TensorType& t = g.value(v).type;
    int64_t dim = slot.dim, at = 0;
    std::vector<ValueId> parts;
    // Zeros from `at` to `end` along the dim; the value's own extent there may be symbolic (a gap
    // that is empty at run time is a size-0 part of the cat).
    auto zeros_until = [&](const sym::Expr& end) {
      sym::Expr length = end - sym::Expr(at);
      if (length.is_constant() && length.constant() <= 0) return;
      Sizes gap = t.sizes;
      gap[static_cast<size_t>(dim)] = length;
      parts.push_back(filled(rw, gap, 0.0, t.dtype, t.device));
    };
    for (const auto& [start, piece] : slot.pieces) {
      zeros_until(start);
      parts.push_back(piece);
      at = start + extent(piece, dim);
    }
    zeros_until(t.sizes[static_cast<size_t>(dim)]);
    ValueId joined = parts.size() == 1 ? parts[0] : cat(rw, parts, dim, passes::make_type(t.dtype, t.sizes, t.device, false));
    slot.pieces.clear();
    slot.dim = -1;
    add_whole(slot, joined);
  }

  void accumulate(const VjpCtx::Contribution& c) {
    Gradient& slot = grad.at(static_cast<size_t>(c.value));
    if (c.dim < 0) {
      add_whole(slot, c.grad);
      return;
    }
    int64_t end = c.start + extent(c.grad, c.dim);
    if (!slot.pieces.empty() && (slot.dim != c.dim || overlaps(slot, c.start, end))) join_pieces(c.value);
    slot.dim = c.dim;
    slot.pieces.emplace(c.start, c.grad);
  }
  void accumulate(ValueId v, ValueId contribution) { accumulate(VjpCtx::Contribution{v, contribution}); }

  // The gradient of forward value `v` so far, joined; nullopt when none flows.
  std::optional<ValueId> gradient(ValueId v) {
    join_pieces(v);
    return grad.at(static_cast<size_t>(v)).whole;
  }

  // Runs `rule` on `node` as one transaction: its contributions count only if it finishes.
  bool try_rule(const ir::Node& node, const std::vector<std::optional<ValueId>>& grads_out,
                const std::function<void(VjpCtx&)>& rule) {
    Rewriter::Mark mark = rw.mark();
    VjpCtx ctx(rw, node, grads_out);
    try {
      rule(ctx);
    } catch (passes::Refuse&) {
      rw.rollback(mark);
      return false;
    }
    for (const VjpCtx::Contribution& contribution : ctx.given()) accumulate(contribution);
    return true;
  }

  void zero_gradient(VjpCtx& c) {
    for (ValueId v : values_read(c.node))
      if (g.value(v).type.requires_grad) c.give(Arg::of_value(v), zeros_like(rw, rw.mapped(v)));
  }

  // The backward of a node no rule covers, by torch autograd at run time (python/ember/autograd.py):
  // island_backward(callable, needs, grads, *args, **kwargs) recomputes the call on the inputs with
  // grad enabled and returns the gradients of the inputs that need one, in argument order.
  bool island(const ir::Node& node, const std::vector<std::optional<ValueId>>& grads_out) {
    if (passes::has_effect(node)) {
      reason = "no derivative rule for " + std::string(node.callable()) +
               ", which draws random numbers or writes memory: recomputing it in the backward would differ";
      return false;
    }
    std::vector<ValueId> read = values_read(node);
    std::vector<Arg> needs, grads;
    std::vector<ir::TensorType> types;
    std::vector<ValueId> getting;
    for (ValueId v : read) {
      bool n = g.value(v).type.requires_grad;
      needs.push_back(Arg::of_literal(n));
      if (!n) continue;
      const ir::TensorType& t = g.value(v).type;
      types.push_back(passes::make_type(t.dtype, t.sizes, t.device, false));
      getting.push_back(v);
    }
    if (getting.empty()) return true;
    for (const auto& go : grads_out) grads.push_back(go ? V(*go) : Arg::of_literal(ir::NoneLiteral{}));
    std::vector<Arg> args{Arg::of_literal(std::string(node.callable())), Arg::list(std::move(needs)),
                          Arg::list(std::move(grads))};
    for (const Arg& a : node.args) args.push_back(rw.map(a));
    passes::Kwargs kwargs;
    for (const auto& kw : node.kwargs) kwargs.emplace_back(kw.first, rw.map(kw.second));
    std::vector<ValueId> results = rw.emit_torch_tuple("ember.autograd.island_backward", std::move(args),
                                                       std::move(kwargs), std::move(types));
    for (size_t i = 0; i < getting.size(); ++i) accumulate(getting[i], results[i]);
    layout.islands.emplace_back(node.callable());
    return true;
  }

  // Adds the backward of one forward node; false (with `reason`) when the graph must stay eager.
  bool differentiate(const ir::Node& node) {
    std::vector<std::optional<ValueId>> grads_out;
    bool any = false;
    for (ValueId r : node.results) {
      grads_out.push_back(gradient(r));
      any = any || grads_out.back().has_value();
    }
    if (!any || !any_result_requires_grad(g, node)) return true;
    if (node.op != Op::TorchCall) {
      const VjpEntry& entry = vjp_entry(node.op);
      switch (entry.kind) {
        case VjpEntry::Kind::NonDifferentiable: return true;
        case VjpEntry::Kind::ZeroGradient:
          if (try_rule(node, grads_out, [this](VjpCtx& c) { zero_gradient(c); })) return true;
          break;
        case VjpEntry::Kind::Rule:
          if (try_rule(node, grads_out, entry.rule)) return true;
          break;
        case VjpEntry::Kind::Decomposed:  // decompose kept it whole: an island, but for advanced indexing
          if (node.op == Op::Getitem && try_rule(node, grads_out, rules::getitem_index_vjp)) return true;
          break;
      }
    } else if (const VjpRule* rule = torch_call_rule(node.target)) {
      if (try_rule(node, grads_out, *rule)) return true;
    }
    return island(node, grads_out);
  }
};

}  // namespace

std::optional<Joint> build_joint(const ir::Graph& forward, const JointOptions& options, std::string* reason) {
  ir::Graph g = forward;
  *reason = why_not_differentiable(g);
  if (!reason->empty()) return std::nullopt;
  std::vector<bool> disabled = grad_disabled_nodes(g);
  passes::decompose(g, [&disabled](const ir::Node& node) {
    return differentiates_whole(node) || disabled[static_cast<size_t>(node.id)];
  });
  random_ops_for_training(g, options.exact_random);

  Joint joint;
  JointLayout& layout = joint.layout;
  for (const ir::Node& node : g.nodes())
    if (std::optional<bool> mode = grad_mode_set(node)) layout.grad_mode_at_end = *mode;
  layout.primals = static_cast<int>(g.inputs().size());
  layout.forward_outputs = static_cast<int>(g.outputs().size());
  std::vector<ValueId> tangent_inputs;
  for (ValueId out : g.outputs()) {
    const ir::TensorType& t = g.value(out).type;
    if (!t.requires_grad) {
      layout.tangent_of_output.push_back(-1);
      continue;
    }
    layout.tangent_of_output.push_back(static_cast<int>(tangent_inputs.size()));
    tangent_inputs.push_back(g.add_input(passes::make_type(t.dtype, t.sizes, t.device, false),
                                         "tangents[" + std::to_string(tangent_inputs.size()) + "]"));
  }

  Builder b{g, Rewriter(g), std::vector<Gradient>(g.values().size()), layout, ""};
  for (const ir::Node& node : g.nodes())
    if (!grad_mode_set(node)) b.rw.copy(node);
  for (size_t i = 0; i < g.outputs().size(); ++i)
    if (layout.tangent_of_output[i] >= 0)
      b.accumulate(g.outputs()[i], b.rw.mapped(tangent_inputs[static_cast<size_t>(layout.tangent_of_output[i])]));
  const std::vector<ir::Node>& nodes = g.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    if (!b.differentiate(*it)) {
      *reason = b.reason;
      return std::nullopt;
    }

  std::vector<ValueId> outputs;
  for (ValueId out : g.outputs()) outputs.push_back(b.rw.mapped(out));
  for (int p = 0; p < layout.primals; ++p) {
    ValueId v = g.inputs()[static_cast<size_t>(p)].value;
    std::optional<ValueId> gv = b.gradient(v);
    if (!g.value(v).type.requires_grad || !gv) {
      layout.grad_output_of_primal.push_back(-1);
      continue;
    }
    layout.grad_output_of_primal.push_back(static_cast<int>(outputs.size()));
    outputs.push_back(*gv);
  }
  joint.graph = b.rw.finish();
  joint.graph.set_outputs(std::move(outputs));
  joint.graph.clear_requires_grad();
  return joint;
}

}  // namespace ember::autograd
