// Inlining: a cheap pointwise producer is recomputed inside each kernel that loads its buffer, and
// the buffer is never stored. The scheduler's first decision (it cuts memory traffic before any
// kernel merges, and exposes the reductions' direct inputs to fusion).
//
// Needs: the WorkStep list of a verified program. Guarantees: every inlined load yields what the
// producer would have stored there, and no loaded value changes: the producer's own loads move to
// the consumer's step only when no step in between writes what they read. A producer is inlined
// into all of its consumers or into none (keeping it stored while also recomputing it would do
// the work twice), and its kernel then disappears.
//
// A store that rounds (an f32 value into a bf16/f16 Temp: low-precision arithmetic, or a conversion
// the program asked for) inlines as a cast of the value, the same rounding in registers; a float
// stored into an integer Temp is not inlined.
//
// Candidates: a kernel with one loop without ranges and a single store at [i0, ..., i(n-1)] into
// a Temp that nothing else needs as memory (not an output, not a View's base, not read by an
// extern call, not written elsewhere). Producers are visited last to first, so a chain of
// pointwise kernels collapses into its final consumer; each load site is one recomputation, so
// the site count is what `inline_max_consumers` bounds (Inductor bounds users and reads likewise,
// because recomputation under fan-out grows multiplicatively).
//
// An expensive producer (exp, cos, ...) is stored when its consumers would compute it more than
// `inline_max_recompute` times per element (a broadcast: the C++ target; Triton recomputes), not
// counting what the C++ target hoists out of its vector loops (BatchNorm's per-channel rsqrt over
// [N, C, H, W] runs once per (n, c) point: inlined; the rotary embedding's cos over [T, D] read over
// [B, H, T, D] changes along the vector variable: stored).
//
// Masked loads (cat, padding) read only where the mask holds. The inlined producer must not read
// out of bounds where it does not: its loads take the consumer's mask (and-ed with their own),
// and the result is where(mask, value, constant). A producer with an index check or an integer
// division is not inlined under a mask, since those would run on the masked-off placeholder values.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <set>

#include "scheduler/internal.h"

namespace ember::scheduler::detail {

using loop_ir::Buffer;
using loop_ir::ScalarOp;

namespace {

// A dtype's zero in the Scalar alternative loop IR holds that dtype's constants in.
loop_ir::Scalar zero_of(ir::DType dt) {
  if (dt == ir::DType::Bool) return false;
  if (ir::is_integral(dt)) return int64_t{0};
  return 0.0;
}

// Nodes that must not run on placeholder values where a consumer's mask is false.
bool unsafe_under_mask(const Kernel& producer) {
  for (const Node& n : producer.nodes) {
    if (n.op == ScalarOp::CheckIndex) return true;
    if ((n.op == ScalarOp::Div || n.op == ScalarOp::FloorDiv || n.op == ScalarOp::Mod) && ir::is_integral(n.dtype))
      return true;
  }
  return false;
}

const Node* single_store(const Kernel& kernel) {
  const Node* store = nullptr;
  for (const Node& n : kernel.nodes) {
    if (n.op != ScalarOp::Store) continue;
    if (store || n.accumulate) return nullptr;  // an accumulated element is no function of one point
    store = &n;
  }
  return store;
}

// For a store that writes each point of the producer's space to its own element -- every index
// component a distinct outer variable, or 0 in a dimension of size 1 -- the buffer dimension
// each outer variable i(j) indexes. Empty when the store is not of that form.
std::optional<std::vector<size_t>> var_dims(const Node& store, const Buffer& buffer, size_t outer) {
  std::vector<size_t> dim_of(outer, SIZE_MAX);
  if (store.index.size() != buffer.sizes.size()) return std::nullopt;
  for (size_t k = 0; k < store.index.size(); ++k) {
    const sym::Expr& e = store.index[k];
    if (e.is_constant() && e.constant() == 0 && buffer.sizes[k] == sym::Expr(1)) continue;
    bool found = false;
    for (size_t j = 0; j < outer && !found; ++j) {
      if (e != var("i", static_cast<int>(j))) continue;
      if (dim_of[j] != SIZE_MAX) return std::nullopt;
      dim_of[j] = k;
      found = true;
    }
    if (!found) return std::nullopt;
  }
  for (size_t d : dim_of)
    if (d == SIZE_MAX) return std::nullopt;
  return dim_of;
}

// Buffers that must stay in memory whatever their producer looks like.
std::set<BufferId> pinned_buffers(const Program& program) {
  std::set<BufferId> pinned;
  for (BufferId b : program.outputs) pinned.insert(program.storage_root(b));
  for (const Buffer& b : program.buffers)
    if (b.kind == Buffer::Kind::View) pinned.insert(program.storage_root(b.id));
  for (const loop_ir::ExternCall& call : program.externs)
    for (BufferId b : call.buffer_args()) pinned.insert(program.storage_root(b));
  return pinned;
}

// Points of `ranges` with each symbol at its hint: a cost estimate, never a decision about validity.
double points_at_hints(const std::vector<sym::Expr>& ranges, const std::map<std::string, int64_t>& hints) {
  double n = 1;
  for (const sym::Expr& r : ranges) n *= static_cast<double>(sym::evaluate(r, hints));
  return n;
}

// How many times `consumer` computes a value it loads at `load`: once per point of its outer ranges and
// the load's loop -- except that in a pointwise consumer (one loop, no ranges) a value that does not
// change along its trailing outer variables is computed once per point of the others (the C++ target
// merges those variables and hoists such values out of the vector loop: collapse, hoist_invariants).
double computations(const Kernel& consumer, const Node& load, const std::map<std::string, int64_t>& hints) {
  const bool pointwise = consumer.pointwise();
  if (!pointwise)
    return points_at_hints(consumer.ranges, hints) *
           points_at_hints(consumer.loops[static_cast<size_t>(load.loop)].ranges, hints);
  std::set<std::string> used;
  for (const sym::Expr& e : load.index) sym::free_symbols(e, used);
  size_t varying = consumer.ranges.size();
  while (varying > 0 && !used.count("i" + std::to_string(varying - 1))) --varying;
  return points_at_hints({consumer.ranges.begin(), consumer.ranges.begin() + static_cast<std::ptrdiff_t>(varying)},
                         hints);
}

// The producer's first op that is costly to recompute, or nullptr: vector math (loop_ir::is_expensive), or
// an index check (a gather, whose consumer the C++ code generator runs one scalar at a time: Swin's
// relative-position bias gathered inside the attention softmax of every window made it scalar).
const Node* expensive_op(const Kernel& producer) {
  for (const Node& n : producer.nodes)
    if (loop_ir::is_expensive(n.op) || n.op == ScalarOp::CheckIndex) return &n;
  return nullptr;
}

NodeId max_id(const Kernel& k) {
  NodeId m = -1;
  for (const Node& n : k.nodes) m = std::max(m, n.id);
  return m;
}

// Replaces every load of `buffer` in `consumer` by a copy of the producer's computation, rounded
// through the buffer's dtype `storage` when `rounds` (append_rounding).
void inline_into(const Kernel& producer, const Node& store, const std::vector<size_t>& dim_of, bool rounds,
                 ir::DType storage, Kernel& consumer) {
  NodeId next = max_id(consumer) + 1;
  std::map<NodeId, NodeId> replaced;  // consumer load -> the value that replaces it
  std::vector<Node> out;
  auto fresh = [&](Node n) {
    n.id = next++;
    out.push_back(n);
    return n.id;
  };
  for (Node node : consumer.nodes) {
    // Earlier replacements are visible to this node's operands and index symbols.
    SymbolMap renamed;
    for (NodeId& op : node.operands)
      if (replaced.count(op)) op = replaced[op];
    std::set<NodeId> refs;
    for (const sym::Expr& e : node.index) collect_node_refs(e, refs);
    for (NodeId r : refs)
      if (replaced.count(r)) renamed.emplace_back(node_symbol(r), sym::Expr::symbol(node_symbol(replaced[r])));
    if (!renamed.empty()) rename_in_node(node, renamed);

    if (node.op != ScalarOp::Load || node.buffer != store.buffer) {
      out.push_back(node);
      continue;
    }
    const bool masked = !node.operands.empty();
    const NodeId mask = masked ? node.operands[0] : -1;
    SymbolMap subst;
    for (size_t j = 0; j < dim_of.size(); ++j) subst.emplace_back("i" + std::to_string(j), node.index[dim_of[j]]);
    std::map<NodeId, NodeId> copy_of;
    // Producer t-symbols get the copies' ids: reserve them first, so the index substitution
    // and the renaming happen in one simultaneous pass.
    for (const Node& p : producer.nodes) {
      if (p.op == ScalarOp::Store) continue;
      copy_of[p.id] = next++;
    }
    for (const auto& [from, to] : copy_of) subst.emplace_back(node_symbol(from), sym::Expr::symbol(node_symbol(to)));
    loop_ir::VarRanges ranges = var_ranges(consumer, node.loop);
    for (const Node& p : producer.nodes) {
      if (p.op == ScalarOp::Store) continue;
      Node c = p;
      c.loop = node.loop;
      for (NodeId& op : c.operands) op = copy_of.at(op);
      for (sym::Expr& e : c.index) e = loop_ir::simplify(sym::substitute(e, subst), ranges);
      c.bound = sym::substitute(c.bound, subst);
      if (masked && c.op == ScalarOp::Load) {
        if (c.operands.empty()) {
          c.operands = {mask};
          c.constant = zero_of(c.dtype);
        } else {
          Node both;
          both.op = ScalarOp::LogicalAnd;
          both.dtype = ir::DType::Bool;
          both.loop = node.loop;
          both.operands = {mask, c.operands[0]};
          c.operands = {fresh(both)};
        }
      }
      c.id = copy_of.at(p.id);
      out.push_back(c);
    }
    NodeId value = copy_of.at(store.operands[0]);
    if (rounds) value = append_rounding(value, storage, node, next, out);
    if (masked) {
      Node otherwise;
      otherwise.op = ScalarOp::Constant;
      otherwise.dtype = node.dtype;
      otherwise.loop = node.loop;
      otherwise.constant = node.constant;
      Node select;
      select.op = ScalarOp::Where;
      select.dtype = node.dtype;
      select.loop = node.loop;
      select.operands = {mask, value, fresh(otherwise)};
      value = fresh(select);
    }
    replaced[node.id] = value;
  }
  consumer.nodes = std::move(out);
  renumber_nodes(consumer);
}

}  // namespace

// Whether an index check in a loop with ranges reads a value that varies along the loop's last range
// variable, the one the C++ code generator vectorizes: such a gather (Swin's relative-position bias, read
// across a softmax row) makes the loop run one scalar at a time and sum in double. A row index fixed along
// it (an embedding's token id, a position id) is checked once a vector step instead (docs/codegen-cpp.md,
// "check_index").
bool has_index_check(const Kernel& kernel) {
  return std::any_of(kernel.nodes.begin(), kernel.nodes.end(), [](const Node& n) { return n.op == ScalarOp::CheckIndex; });
}

bool scalar_gather_in_reduction(const Kernel& kernel) {
  if (!has_index_check(kernel)) return false;
  std::map<NodeId, const Node*> by_id;
  for (const Node& n : kernel.nodes) by_id[n.id] = &n;
  auto varies = [&](NodeId id, const std::string& var) {
    std::vector<NodeId> todo{id};
    std::set<NodeId> seen;
    while (!todo.empty()) {
      const Node& n = *by_id.at(todo.back());
      todo.pop_back();
      if (!seen.insert(n.id).second) continue;
      std::set<std::string> symbols;
      std::set<NodeId> refs;  // values an index reads (a gather's checked index)
      for (const sym::Expr& e : n.index) {
        sym::free_symbols(e, symbols);
        collect_node_refs(e, refs);
      }
      if (symbols.count(var)) return true;
      todo.insert(todo.end(), n.operands.begin(), n.operands.end());
      todo.insert(todo.end(), refs.begin(), refs.end());
    }
    return false;
  };
  for (const Node& n : kernel.nodes) {
    if (n.op != ScalarOp::CheckIndex || n.loop < 0 || static_cast<size_t>(n.loop) >= kernel.loops.size()) continue;
    const std::vector<sym::Expr>& ranges = kernel.loops[static_cast<size_t>(n.loop)].ranges;
    if (!ranges.empty() && varies(n.operands.at(0), "r" + std::to_string(ranges.size() - 1))) return true;
  }
  return false;
}

void inline_producers(Program& program, std::vector<WorkStep>& steps, const ScheduleOptions& options,
                      std::vector<FusionDecision>& decisions) {
  const std::set<BufferId> pinned = pinned_buffers(program);
  std::map<std::string, int64_t> hints;
  for (const sym::SymbolInfo& s : program.symbols) hints[s.name] = s.hint;
  for (size_t p = steps.size(); p-- > 0;) {
    if (steps[p].kind != loop_ir::Step::Kind::Kernel) continue;
    const Kernel& producer = steps[p].kernel;
    const Node* store = single_store(producer);
    if (!producer.pointwise() || !store) continue;
    const BufferId x = store->buffer;
    const Buffer& buffer = program.buffers[x];
    if (buffer.kind != Buffer::Kind::Temp || pinned.count(x)) continue;
    const std::optional<std::vector<size_t>> dim_of = var_dims(*store, buffer, producer.ranges.size());
    if (!dim_of) continue;

    // Who else touches the buffer: only kernels after the producer may, and only by loading it.
    std::vector<size_t> consumers;
    bool other_writer = false, read_before = false;
    int sites = 0;
    for (size_t s = 0; s < steps.size(); ++s) {
      if (s == p) continue;
      Accesses acc = accesses_of(program, steps[s]);
      if (acc.writes_root(x)) other_writer = true;
      if (!acc.reads_root(x)) continue;
      if (s < p) read_before = true;
      consumers.push_back(s);
      for (const Node& n : steps[s].kernel.nodes)
        if (n.op == ScalarOp::Load && n.buffer == x) ++sites;
    }
    if (other_writer || read_before || consumers.empty()) continue;

    const std::string name = buffer.name();
    std::string consumer_names;
    for (size_t c : consumers) consumer_names += (consumer_names.empty() ? "" : ", ") + steps[c].label;
    auto refuse = [&](const std::string& why) {
      decisions.push_back({FusionDecision::Kind::Refused, name, consumer_names, "inline: " + why});
    };
    const int ops = count_ops(producer);
    if (ops > options.inline_max_ops) {
      refuse(std::to_string(ops) + " ops > inline_max_ops " + std::to_string(options.inline_max_ops));
      continue;
    }
    if (sites > options.inline_max_consumers) {
      refuse(std::to_string(sites) + " loads > inline_max_consumers " + std::to_string(options.inline_max_consumers));
      continue;
    }
    if (const Node* costly = options.inline_max_recompute > 0 ? expensive_op(producer) : nullptr) {
      double recomputed = 0;
      for (size_t c : consumers) {
        const Kernel& consumer = steps[c].kernel;
        for (const Node& n : consumer.nodes)
          if (n.op == ScalarOp::Load && n.buffer == x) recomputed += computations(consumer, n, hints);
      }
      const double times = recomputed / std::max(points_at_hints(producer.ranges, hints), 1.0);
      if (times > options.inline_max_recompute) {
        refuse(std::string(loop_ir::op_info(costly->op).name) + " would run " + std::to_string(std::lround(times)) +
               " times per stored element > inline_max_recompute " + std::to_string(options.inline_max_recompute));
        continue;
      }
    }
    const Accesses produced = accesses_of(program, steps[p]);
    ir::DType stored_dtype = ir::DType::Float32;
    int masked_loads = 0;
    for (const Node& n : producer.nodes) {
      if (n.id == store->operands[0]) stored_dtype = n.dtype;
      if (n.op == ScalarOp::Load && !n.operands.empty()) ++masked_loads;
    }
    std::string why;
    // A store into a bf16/f16 temporary rounds, and so does its recomputation: a cast to the
    // buffer's dtype in registers (append_rounding), so every reader sees the value eager computes
    // (which rounds after every op) -- the stored results of reductions included, which a reader
    // compares with recomputed operands (`where(x.amin(0) - x > 0, ...)`: docs/scheduler.md, "Rounding").
    // Other converting stores (a float into an integer) are not recomputed.
    const bool rounds = buffer.dtype != stored_dtype;
    if (rounds && !(ir::is_floating(buffer.dtype) && ir::is_floating(stored_dtype)))
      why = name + " is " + ir::dtype_name(buffer.dtype) + " and the stored value " + ir::dtype_name(stored_dtype) +
            ": recomputing it would skip the conversion";
    for (size_t ci = 0; ci < consumers.size() && why.empty(); ++ci) {
      const size_t c = consumers[ci];
      const Kernel& consumer = steps[c].kernel;
      // On the CPU (the C++ target bounds recomputation: inline_max_recompute > 0), a gather read across a
      // reduction's rows makes the code generator run it one scalar at a time (and sum in double): a softmax
      // over a gathered bias stays vectorized over a stored gather instead. A LayerNorm over gathered
      // embedding rows reads them in the reduction (cpu bench `embeddings` 150 -> 135 us).
      if (options.inline_max_recompute > 0 && !consumer.pointwise() && has_index_check(producer) &&
          !scalar_gather_in_reduction(consumer)) {
        Kernel trial = consumer;
        inline_into(producer, *store, *dim_of, rounds, buffer.dtype, trial);
        if (scalar_gather_in_reduction(trial))
          why = steps[c].label + " reduces across the rows the producer gathers (its index checks would make the "
                "reduction scalar)";
      }
      // The producer's loads move to the consumer's step: nothing up to and including it may
      // write what they read.
      for (size_t s = p + 1; s <= c && why.empty(); ++s) {
        Accesses acc = accesses_of(program, steps[s]);
        for (BufferId r : produced.reads)
          if (acc.writes_root(r))
            why = steps[s].label + " writes " + program.buffers[r].name() + ", which the producer reads, before " +
                  steps[c].label;
      }
      int extra = 0;
      for (const Node& n : consumer.nodes) {
        if (n.op != ScalarOp::Load || n.buffer != x) continue;
        if (n.dtype != stored_dtype && !rounds && why.empty())
          why = "dtype of the stored value differs from the load in " + steps[c].label;
        const bool masked = !n.operands.empty();
        if (masked && unsafe_under_mask(producer) && why.empty())
          why = steps[c].label + " loads it under a mask and the producer checks indices or divides integers";
        // The copy replaces the load; under a mask, masked producer loads gain an `and` and the
        // result a constant and a `where`.
        extra += static_cast<int>(producer.nodes.size()) - 2 + (rounds ? 2 : 0) + (masked ? masked_loads + 2 : 0);
      }
      const int total = static_cast<int>(consumer.nodes.size()) + extra;
      if (total > options.max_nodes && why.empty())
        why = steps[c].label + " would have " + std::to_string(total) + " nodes > max_nodes " +
              std::to_string(options.max_nodes);
      if (!why.empty()) break;
    }
    if (!why.empty()) {
      refuse(why);
      continue;
    }
    const Node store_copy = *store;
    const Kernel producer_copy = producer;
    for (size_t c : consumers) {
      inline_into(producer_copy, store_copy, *dim_of, rounds, buffer.dtype, steps[c].kernel);
      drop_exact_roundings(program, steps[c].kernel);
    }
    decisions.push_back({FusionDecision::Kind::Inline, name, consumer_names,
                         std::to_string(ops) + (ops == 1 ? " op, " : " ops, ") + std::to_string(sites) +
                             (sites == 1 ? " consumer" : " consumers")});
    steps.erase(steps.begin() + static_cast<std::ptrdiff_t>(p));
  }
}

}  // namespace ember::scheduler::detail
