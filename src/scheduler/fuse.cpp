// Fusion: merging two kernels with the same outer iteration space into one, and choosing which
// pairs to merge (vertical: a consumer with its producer; sibling: two readers of one buffer).
//
// Needs: the WorkStep list after inlining. Guarantees: every merge computes, for each outer point,
// the first kernel's loops and then the second's, so a value crosses from one to the other only
// where it never crosses outer points: the second kernel reads what the first wrote only at
// exactly the index the first wrote at that same point (index expressions compared per dimension
// after simplification; a read through a View, or at any other index, refuses the merge). The
// step order stays valid: the pair runs right after the last step between them that the second
// kernel needs, steps before that point that need the first kernel move after the pair, and a step
// that needs the first kernel and is needed by the second (a cycle) refuses.
//
// Shape of a merge (merge_kernels). The outer ranges must be equal, or one kernel is a pointwise
// kernel whose ranges extend the other's: it is first split into the shorter outer ranges and one
// loop over the rest (split_pointwise) -- a reduction epilogue over [R..., r] becomes a loop of
// the reduction's kernel. The second kernel's loops then keep their order but each joins the
// earliest loop of the first kernel, at or after everything it depends on, that has the same
// ranges (one pass over a row for mean and variance), or is appended. A load of a value the first
// kernel stored is replaced by the stored value when the value is visible there (same loop, or
// computed once per outer point); otherwise the load stays and reads memory written earlier in
// the same outer point. A value stored into a bf16/f16 buffer is forwarded through a cast, the
// rounding in registers (the reader sees what memory would hold, as in eager, without a store and
// a reload); other converting stores (into integers) are read back from memory. Identical nodes of a loop are
// then merged, so two reductions of one input share its load (and welford_mean/welford_m2 share one
// accumulator).
//
// Choice (fuse_kernels): candidate pairs share a buffer; they are tried best first -- vertical
// before sibling, then more shared bytes, then closer in program order -- one merge per round,
// until no candidate is left. Refused pairs are remembered by their labels and reported once.
// Siblings share a buffer only when both read it along their loops (an index that varies): two
// kernels that read one scalar (an optimizer's per-step factors) save nothing by running as one, and
// one loop over many unrelated tensors streams them all at once (76 AdamW updates of one shape
// made one loop of 532 streams, 2.3x slower than one loop per tensor).
#include <algorithm>
#include <tuple>

#include "scheduler/internal.h"

namespace ember::scheduler::detail {

using loop_ir::ScalarOp;

namespace {

bool is_prefix(const std::vector<sym::Expr>& shorter, const std::vector<sym::Expr>& longer) {
  if (shorter.size() >= longer.size()) return false;
  return std::equal(shorter.begin(), shorter.end(), longer.begin());
}

std::vector<sym::Expr> simplified(const std::vector<sym::Expr>& index, const loop_ir::VarRanges& ranges) {
  std::vector<sym::Expr> out;
  for (const sym::Expr& e : index) out.push_back(loop_ir::simplify(e, ranges));
  return out;
}

std::string join(const std::set<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// A load of the second kernel that reads a value the first kernel stored at the same index.
struct Link {
  const Node* store;  // in the first kernel
  bool ranged;        // the store lies in a loop with ranges
  bool masked;        // the load is masked: it stays a load
  bool converted;     // the store rounds a conversion the program asked for (f32 into bf16) ...
  bool float_conversion;  // ... between float dtypes: the load becomes casts of the stored value
};

}  // namespace

MergeResult merge_kernels(const Program& program, const WorkStep& step_a, const WorkStep& step_b,
                          const ScheduleOptions& options) {
  MergeResult result;
  Kernel a = step_a.kernel, b = step_b.kernel;
  const std::string& la = step_a.label;
  const std::string& lb = step_b.label;
  std::vector<std::string> notes;
  if (a.ranges != b.ranges) {
    // A split into no outer range at all would run the whole pointwise kernel on one thread.
    if (a.ranges.empty() || b.ranges.empty()) {
      result.refusal = "outer ranges differ: " + ranges_str(step_a.kernel.ranges) + " vs " +
                       ranges_str(step_b.kernel.ranges) + " (no outer range would be left to run in parallel)";
      return result;
    }
    if (is_prefix(a.ranges, b.ranges) && b.pointwise()) {
      b = split_pointwise(b, a.ranges.size());
      notes.push_back(lb + " split into " + ranges_str(b.ranges) + " x loop " + ranges_str(b.loops[0].ranges));
    } else if (is_prefix(b.ranges, a.ranges) && a.pointwise()) {
      a = split_pointwise(a, b.ranges.size());
      notes.push_back(la + " split into " + ranges_str(a.ranges) + " x loop " + ranges_str(a.loops[0].ranges));
    } else {
      result.refusal = "outer ranges differ: " + ranges_str(step_a.kernel.ranges) + " vs " + ranges_str(step_b.kernel.ranges);
      return result;
    }
  }
  renumber_nodes(a);
  renumber_nodes(b);
  shift_ids(b, static_cast<NodeId>(a.nodes.size()));

  // Stores of the first kernel, by root buffer.
  std::map<BufferId, std::vector<const Node*>> a_stores;
  std::set<BufferId> a_reads;
  for (const Node& n : a.nodes) {
    if (n.op == ScalarOp::Store) a_stores[program.storage_root(n.buffer)].push_back(&n);
    if (n.op == ScalarOp::Load) a_reads.insert(program.storage_root(n.buffer));
  }
  std::map<NodeId, Link> links;
  std::map<BufferId, int> b_store_loop;  // root -> first loop of b storing it
  std::set<std::string> read_as_written;
  for (const Node& n : b.nodes) {
    if (n.op != ScalarOp::Load && n.op != ScalarOp::Store) continue;
    const BufferId root = program.storage_root(n.buffer);
    if (n.op == ScalarOp::Store) {
      const std::string name = program.buffers[root].name();
      if (a_reads.count(root)) {
        result.refusal = lb + " writes " + name + ", which " + la + " reads";
        return result;
      }
      if (a_stores.count(root)) {
        result.refusal = lb + " writes " + name + ", which " + la + " also writes";
        return result;
      }
      b_store_loop.emplace(root, n.loop);
      continue;
    }
    if (n.op != ScalarOp::Load || !a_stores.count(root)) continue;
    const std::string name = program.buffers[root].name();
    const std::vector<const Node*>& stores = a_stores[root];
    if (stores.size() != 1) {
      result.refusal = la + " stores " + name + " more than once";
      return result;
    }
    const Node& s = *stores[0];
    if (s.accumulate) {
      result.refusal = la + " adds into " + name + ", whose elements are final only after it";
      return result;
    }
    if (n.buffer != root || s.buffer != root) {
      result.refusal = name + " is accessed through a view";
      return result;
    }
    const bool ranged = !a.loops[s.loop].ranges.empty();
    const std::vector<sym::Expr> read = simplified(n.index, var_ranges(b, n.loop));
    const std::vector<sym::Expr> written = simplified(s.index, var_ranges(a, s.loop));
    const bool same_loop_shape = !ranged || a.loops[s.loop].ranges == b.loops[n.loop].ranges;
    if (read != written || !same_loop_shape) {
      result.refusal = "index mismatch: " + lb + " reads " + name + index_str(read) + ", " + la + " writes " + name +
                       index_str(written);
      if (read == written) result.refusal += " in a loop over " + ranges_str(a.loops[s.loop].ranges);
      return result;
    }
    ir::DType value_dtype = program.buffers[root].dtype;
    for (const Node& v : a.nodes)
      if (v.id == s.operands[0]) value_dtype = v.dtype;
    // A converting store is forwarded through a cast (bf16/f16: the rounding, in registers).
    const bool converted = value_dtype != program.buffers[root].dtype;
    const bool float_conversion = ir::is_floating(value_dtype) && ir::is_floating(program.buffers[root].dtype);
    links[n.id] = Link{&s, ranged, !n.operands.empty(), converted, float_conversion};
    read_as_written.insert(name);
  }

  // Place b's loops: each at the earliest loop at or after what it depends on with equal ranges.
  std::map<NodeId, int> b_loop_of;  // b node -> its loop in b
  for (const Node& n : b.nodes) b_loop_of[n.id] = n.loop;
  std::vector<loop_ir::Loop> loops = a.loops;
  std::vector<int> place(b.loops.size(), -1);
  for (size_t j = 0; j < b.loops.size(); ++j) {
    int lower = j ? place[j - 1] : 0;
    for (const Node& n : b.nodes) {
      if (n.loop != static_cast<int>(j)) continue;
      auto link = links.find(n.id);
      if (link != links.end()) lower = std::max(lower, link->second.store->loop);
      if (n.op == ScalarOp::Load) {
        auto own = b_store_loop.find(program.storage_root(n.buffer));
        if (own != b_store_loop.end() && own->second < static_cast<int>(j)) lower = std::max(lower, place[own->second]);
      }
      std::set<NodeId> refs(n.operands.begin(), n.operands.end());
      for (const sym::Expr& e : n.index) collect_node_refs(e, refs);
      collect_node_refs(n.bound, refs);
      for (NodeId r : refs) {
        auto it = b_loop_of.find(r);
        if (it == b_loop_of.end() || it->second == static_cast<int>(j)) continue;
        const int from = it->second;
        const Node& used = b.nodes[r - static_cast<NodeId>(a.nodes.size())];
        lower = std::max(lower, place[from] + (is_reduce(used) ? 1 : 0));
      }
    }
    int chosen = -1;
    for (int p = lower; p < static_cast<int>(loops.size()) && chosen < 0; ++p)
      if (loops[p].ranges == b.loops[j].ranges) chosen = p;
    if (chosen < 0) {
      chosen = static_cast<int>(loops.size());
      loops.push_back(b.loops[j]);
    }
    place[j] = chosen;
  }

  // Build: a's nodes by loop, then b's appended to the loops they joined.
  std::vector<std::vector<Node>> by_loop(loops.size());
  for (const Node& n : a.nodes) by_loop[n.loop].push_back(n);
  std::map<NodeId, NodeId> forwarded;
  int kept_loads = 0;
  NodeId next_id = static_cast<NodeId>(a.nodes.size() + b.nodes.size());  // for new casts
  for (Node n : b.nodes) {
    remap_ids(n, forwarded);
    const int target = place[n.loop];
    auto link = links.find(n.id);
    if (link != links.end()) {
      const Link& l = link->second;
      const bool visible = !l.ranged || target == l.store->loop;
      if (visible && !l.masked && !l.converted) {
        forwarded[n.id] = l.store->operands[0];
        continue;
      }
      if (visible && !l.masked && l.float_conversion) {
        // Rounded where the value is computed (once per outer point when that loop has no ranges, so
        // the consumer's loop reads a fixed f32 value: a divisor stays one), in the load's dtype.
        n.loop = l.store->loop;
        forwarded[n.id] = append_rounding(l.store->operands[0], program.buffers[n.buffer].dtype, n, next_id,
                                          by_loop[l.store->loop]);
        continue;
      }
      ++kept_loads;
    }
    n.loop = target;
    by_loop[target].push_back(n);
  }
  Kernel merged;
  merged.name = a.name;
  merged.ranges = a.ranges;
  merged.loops = loops;
  for (auto& group : by_loop)
    for (Node& n : group) merged.nodes.push_back(std::move(n));
  renumber_nodes(merged);
  merge_duplicates(program, merged);
  drop_exact_roundings(program, merged);
  if (static_cast<int>(merged.nodes.size()) > options.max_nodes) {
    result.refusal = "size cap: " + la + "+" + lb + " would have " + std::to_string(merged.nodes.size()) +
                     " nodes > max_nodes " + std::to_string(options.max_nodes);
    return result;
  }
  if (!read_as_written.empty()) notes.insert(notes.begin(), "reads " + join(read_as_written) + " as written");
  if (kept_loads) notes.push_back(std::to_string(kept_loads) + " load(s) read back from memory");
  notes.push_back(std::to_string(merged.loops.size()) + (merged.loops.size() == 1 ? " loop" : " loops"));
  for (size_t k = 0; k < notes.size(); ++k) result.detail += (k ? "; " : "") + notes[k];
  result.merged = std::move(merged);
  return result;
}

namespace {

struct Candidate {
  size_t a, b;
  bool vertical;
  int64_t bytes;
  std::string shared;  // the buffers that make them candidates, for the decision's reason
};

// The steps strictly between a and b that b needs (directly or through another such step), in
// order; empty with `cycle` set when one of them also needs a.
std::vector<size_t> needed_between(const Program& program, const std::vector<WorkStep>& steps,
                                   const std::vector<Accesses>& acc, size_t a, size_t b, std::string& cycle) {
  std::vector<bool> needed(steps.size(), false);
  needed[b] = true;
  for (size_t c = b; c-- > a + 1;) {
    for (size_t d = c + 1; d <= b && !needed[c]; ++d)
      if (needed[d] && depends_on(acc[c], acc[d])) needed[c] = true;
  }
  std::vector<size_t> out;
  for (size_t c = a + 1; c < b; ++c) {
    if (!needed[c]) continue;
    BufferId what = -1;
    if (depends_on(acc[a], acc[c], &what)) {
      const WorkStep& s = steps[c];
      const std::string name = program.buffers[what].name();
      if (s.kind == loop_ir::Step::Kind::Extern && !program.externs[s.extern_index].written_args().empty()) {
        cycle = "in-place extern " + s.label + " between them writes " + name + ", which " + steps[a].label +
                " also uses";
      } else {
        cycle = "cycle: " + steps[a].label + " -> " + s.label + " -> " + steps[b].label + " (" + s.label +
                " uses " + name + ")";
      }
      return {};
    }
    out.push_back(c);
  }
  return out;
}

// Roots a kernel loads at an index that varies over its loops (not a single element).
std::vector<BufferId> read_along(const Program& program, const WorkStep& step) {
  std::vector<BufferId> out;
  if (step.kind != loop_ir::Step::Kind::Kernel) return out;
  for (const Node& n : step.kernel.nodes) {
    if (n.op != ScalarOp::Load) continue;
    std::set<std::string> names;
    for (const sym::Expr& e : n.index) sym::free_symbols(e, names);
    if (!names.empty()) out.push_back(program.storage_root(n.buffer));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

void fuse_kernels(Program& program, std::vector<WorkStep>& steps, const ScheduleOptions& options,
                  std::vector<FusionDecision>& decisions) {
  std::set<std::string> refused_pairs;
  std::set<std::string> reported;
  auto report = [&](FusionDecision d) {
    if (reported.insert(d.str()).second) decisions.push_back(std::move(d));
  };
  for (;;) {
    std::vector<Accesses> acc;
    std::vector<std::vector<BufferId>> along;
    for (const WorkStep& s : steps) {
      acc.push_back(accesses_of(program, s));
      along.push_back(read_along(program, s));
    }
    std::vector<Candidate> candidates;
    for (size_t a = 0; a < steps.size(); ++a) {
      if (steps[a].kind != loop_ir::Step::Kind::Kernel) continue;
      for (size_t b = a + 1; b < steps.size(); ++b) {
        if (steps[b].kind != loop_ir::Step::Kind::Kernel) continue;
        std::set<BufferId> produced, shared;
        for (BufferId r : acc[b].reads) {
          if (acc[a].writes_root(r)) produced.insert(r);
          if (std::binary_search(along[a].begin(), along[a].end(), r) && std::binary_search(along[b].begin(), along[b].end(), r))
            shared.insert(r);
        }
        if (produced.empty() && shared.empty()) continue;
        Candidate c{a, b, !produced.empty(), 0, ""};
        std::set<std::string> names;
        for (BufferId r : produced.empty() ? shared : produced) {
          c.bytes += buffer_bytes(program.buffers[r]).value_or(0);
          names.insert(program.buffers[r].name());
        }
        c.shared = join(names);
        candidates.push_back(c);
      }
    }
    std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& x, const Candidate& y) {
      return std::make_tuple(!x.vertical, -x.bytes, x.b - x.a, x.a) < std::make_tuple(!y.vertical, -y.bytes, y.b - y.a, y.a);
    });
    bool merged_one = false;
    for (const Candidate& c : candidates) {
      const std::string pair = steps[c.a].label + "|" + steps[c.b].label;
      if (refused_pairs.count(pair)) continue;
      const char* kind = c.vertical ? "vertical: " : "sibling: ";
      auto refuse = [&](const std::string& why) {
        refused_pairs.insert(pair);
        // Siblings in different iteration spaces are the common case, not a decision worth a line.
        if (!c.vertical && why.rfind("outer ranges differ", 0) == 0) return;
        report({FusionDecision::Kind::Refused, steps[c.a].label, steps[c.b].label, kind + why});
      };
      std::string cycle;
      std::vector<size_t> before = needed_between(program, steps, acc, c.a, c.b, cycle);
      if (!cycle.empty()) {
        refuse(cycle);
        continue;
      }
      MergeResult m = merge_kernels(program, steps[c.a], steps[c.b], options);
      if (!m.merged) {
        refuse(m.refusal);
        continue;
      }
      // On the CPU (inline_max_recompute > 0 there), a gather read across a reduction's rows makes that
      // loop scalar, as in inline.cpp.
      if (options.inline_max_recompute > 0 && scalar_gather_in_reduction(*m.merged) &&
          !scalar_gather_in_reduction(steps[c.a].kernel) && !scalar_gather_in_reduction(steps[c.b].kernel)) {
        refuse("a gather would be read across the rows of a reduction (its index checks would make it scalar)");
        continue;
      }
      WorkStep fused;
      fused.kind = loop_ir::Step::Kind::Kernel;
      fused.kernel = std::move(*m.merged);
      fused.label = steps[c.a].label + "+" + steps[c.b].label;
      const std::string what = c.vertical ? "reads " + c.shared + " from " + steps[c.a].label : "both read " + c.shared;
      report({c.vertical ? FusionDecision::Kind::Vertical : FusionDecision::Kind::Sibling, steps[c.a].label,
              steps[c.b].label, (c.vertical ? m.detail : what + "; " + m.detail)});
      // The fused kernel goes right after the last step between that b needs (at a's place if none); of
      // the steps before that point, those that need a (directly or through another such step; none is
      // one b needs, or the cycle check refused) move after it; every other step keeps its place. Moving
      // every step b does not need after the pair instead pushed them, merge after merge, to the end of
      // the program: a backward's weight-gradient matmuls, each keeping its layer's incoming gradient
      // alive in the arena until then (docs/scheduler.md, "Step order and legality").
      const size_t last_needed = before.empty() ? c.a : before.back();
      std::vector<bool> needs_a(steps.size(), false);
      needs_a[c.a] = true;
      for (size_t s = c.a + 1; s <= last_needed; ++s)
        for (size_t d = c.a; d < s && !needs_a[s]; ++d)
          if (needs_a[d] && depends_on(acc[d], acc[s])) needs_a[s] = true;
      std::vector<WorkStep> order(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(c.a));
      for (size_t s = c.a + 1; s <= last_needed; ++s)
        if (!needs_a[s]) order.push_back(steps[s]);
      order.push_back(std::move(fused));
      for (size_t s = c.a + 1; s < c.b; ++s)
        if (s > last_needed || needs_a[s]) order.push_back(steps[s]);
      for (size_t s = c.b + 1; s < steps.size(); ++s) order.push_back(steps[s]);
      steps = std::move(order);
      merged_one = true;
      break;
    }
    if (!merged_one) return;
  }
}

}  // namespace ember::scheduler::detail
