// split_reductions: a long reduction with few outputs becomes two kernels (scheduler.h, SplitOptions).
//
// Needs: a scheduled program with constant sizes. A kernel it splits has one loop with ranges, its
// first, holding the reductions and no store, followed by loops without ranges (the epilogue):
//   kernel @k [I...] { loop [R0, R...] { body; %a = reduce_sum %x } loop { epilogue(%a) } }
// becomes, with S splits of R0 (chunk = R0 / S):
//   kernel @k  [S, I...] { loop [chunk, R...] { body, r0 -> i0*chunk + r0 } loop { store %p[i0, I...] = %a } }
//   kernel @k' [I...]    { loop [S] { %a' = reduce_sum (load %p[r0, I...]) } loop { epilogue(%a') } }
// When R0 is short (a batch of 8 over [8, 512] rows), S may go past it: S = R0*...*R(k-1) * s with s
// dividing Rk; a partial then reduces a chunk of Rk (and all of the later ranges), and the earlier
// reduction variables are the digits of i0 / s: r(k-1) -> (i0 / s) % R(k-1), ..., rk -> (i0 % s)*chunk + r0.
// The partials %p are Temps of the reduction's own dtype (f32 for f16/bf16 data: kernel bodies
// compute in f32). sum, prod, max and min combine with themselves (max/min keep NaN as the first
// kernel's did). S divides the reduced extent, so no mask is needed and every partial counts R/S
// elements, which keeps Welford's combine (Chan's formula) plain arithmetic: mean = sum(mean_s) / S and
// M2 = sum(M2_s) + (R/S) * sum((mean_s - mean)^2), a loop for the mean and one for the deviations.
//
// The choice is made from sizes only, and every kernel with a reduction longer than two partials
// gets a decision with its reason (EMBER_LOGS=schedule): S is the smallest split (in the order above)
// that gives min_programs programs with partials of at least min_split_rnumel elements
// (min_outer_split_rnumel for an outer reduction), else the largest such split if it at least doubles
// the programs. Why: Inductor splits the same way (ir.py, Reduction.num_splits), for the same reason:
// a reduction over few rows leaves most SMs idle.
// A decision names the kernel as fusion left it ("split k2") and the two it became by their names in
// the result, where kernels are renamed k0, k1, ... in step order again ("into k2 + k3").
#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "scheduler/internal.h"

namespace ember::scheduler {

using loop_ir::Buffer;
using loop_ir::ScalarOp;
using namespace detail;

bool outer_reduction(const Program& program, const Kernel& kernel) {
  for (const Node& n : kernel.nodes) {
    if (n.op != ScalarOp::Load || kernel.loops[static_cast<size_t>(n.loop)].ranges.empty()) continue;
    const Buffer& b = program.buffers.at(static_cast<size_t>(n.buffer));
    sym::Expr off = 0;
    for (size_t k = 0; k < n.index.size(); ++k) off = off + n.index[k] * b.strides[k];
    auto step = [&](const std::string& v) {
      sym::Expr d = loop_ir::simplify(sym::substitute(off, {{v, sym::Expr::symbol(v) + 1}}) - off, {});
      return d.is_constant() ? d.constant() : -1;
    };
    const size_t nr = kernel.loops[static_cast<size_t>(n.loop)].ranges.size();
    const int64_t along_r = step("r" + std::to_string(nr - 1));
    const int64_t along_x = kernel.ranges.empty() ? -1 : step("i" + std::to_string(kernel.ranges.size() - 1));
    return along_r != 1 && along_x == 1;
  }
  return false;
}

namespace {

int64_t constant_numel(const std::vector<sym::Expr>& ranges) { return sym::product(ranges).constant(); }

bool constant(const std::vector<sym::Expr>& ranges) {
  return std::all_of(ranges.begin(), ranges.end(), [](const sym::Expr& e) { return e.is_constant(); });
}

Node make_node(ScalarOp op, ir::DType dtype, std::vector<NodeId> operands, int loop) {
  Node n;
  n.op = op;
  n.dtype = dtype;
  n.operands = std::move(operands);
  n.loop = loop;
  return n;
}

// Appends `n` with the next id and returns that id.
NodeId add(Kernel& k, Node n) {
  n.id = static_cast<NodeId>(k.nodes.size());
  k.nodes.push_back(std::move(n));
  return k.nodes.back().id;
}

NodeId add_constant(Kernel& k, ir::DType dtype, double value, int loop) {
  Node n = make_node(ScalarOp::Constant, dtype, {}, loop);
  n.constant = value;
  return add(k, std::move(n));
}

struct Plan {
  int64_t splits = 0;
  size_t range = 0;    // the reduction range that is cut (the ones before it are cut whole)
  std::string reason;  // the decision's, taken or refused
};

std::string extents(const std::vector<sym::Expr>& ranges) {
  std::string out;
  for (const sym::Expr& r : ranges) out += (out.empty() ? "[" : ", ") + r.str();
  return out + "]";
}

// How many splits, from sizes (the header's rule); splits 0 with the reason when none.
Plan choose_splits(const Program& program, const Kernel& k, const SplitOptions& options) {
  const int64_t outputs = constant_numel(k.ranges);
  const int64_t rnumel = constant_numel(k.loops[0].ranges);
  const bool outer = outer_reduction(program, k);
  // An outer reduction's block of columns is capped at next_pow2(points), as the Triton config is.
  auto block_of = [&](int64_t points) {
    int64_t block = 1;
    while (outer && block < options.columns_per_program && block < points) block *= 2;
    return block;
  };
  auto programs = [&](int64_t points) { return (points + block_of(points) - 1) / block_of(points); };
  const int64_t per_program = block_of(outputs);
  const std::string now = std::to_string(programs(outputs)) + " programs (" + std::to_string(outputs) + " outputs" +
                          (outer ? " in blocks of " + std::to_string(per_program) + " columns" : "") + ", " +
                          std::to_string(rnumel) + " elements each)";
  if (programs(outputs) >= options.min_programs)
    return {0, 0, now + " >= " + std::to_string(options.min_programs) + ": not split"};
  const int64_t min_rnumel = outer ? options.min_outer_split_rnumel : options.min_split_rnumel;
  // The splits in increasing order: s | R0, then R0 * s with s | R1, ...
  const std::vector<sym::Expr>& reduced = k.loops[0].ranges;
  Plan smallest, largest;
  int64_t prefix = 1;
  for (size_t r = 0; r < reduced.size() && smallest.splits == 0; ++r) {
    const int64_t extent = reduced[r].constant();
    for (int64_t s = 2; s <= extent; ++s) {
      const int64_t splits = prefix * s;
      if (extent % s != 0 || rnumel / splits < min_rnumel) continue;
      largest = {splits, r, ""};
      if (programs(outputs * splits) >= options.min_programs) {
        smallest = largest;
        break;
      }
    }
    prefix *= extent;
  }
  Plan plan = smallest.splits != 0 ? smallest : largest;
  const std::string partials = "partials of at least " + std::to_string(min_rnumel) + " elements";
  if (plan.splits == 0 || (smallest.splits == 0 && programs(outputs * plan.splits) < 2 * programs(outputs)))
    return {0, 0, now + " < " + std::to_string(options.min_programs) + ", but no split of the reduced extents " +
                      extents(reduced) + " doubles them with " + partials + ": not split"};
  plan.reason = now + " < " + std::to_string(options.min_programs) + ": " + std::to_string(plan.splits) +
                " splits of " + std::to_string(rnumel / plan.splits) + " elements give " +
                std::to_string(programs(outputs * plan.splits)) + " programs";
  return plan;
}

// Why `k` cannot be split whatever the sizes, or "" when it can.
std::string refusal(const Kernel& k) {
  for (size_t l = 1; l < k.loops.size(); ++l)
    if (!k.loops[l].ranges.empty()) return "a second loop with ranges (the epilogue re-reads the row)";
  for (const Node& n : k.nodes)
    if (n.loop == 0 && n.op == ScalarOp::Store) return "a store inside the reduction loop";
  return "";
}

// `k` with a welford_mean beside every welford_m2 that lost its own (DCE drops the mean of a var
// that only needs M2): combining M2 partials needs the partial means.
Kernel with_welford_means(const Kernel& k) {
  std::set<NodeId> has_mean;
  for (const Node& n : k.nodes)
    if (n.op == ScalarOp::WelfordMean) has_mean.insert(n.operands[0]);
  Kernel out = k;
  out.nodes.clear();
  NodeId fresh = 0;
  for (const Node& n : k.nodes) fresh = std::max(fresh, n.id + 1);
  for (const Node& n : k.nodes) {
    out.nodes.push_back(n);
    if (n.op != ScalarOp::WelfordM2 || !has_mean.insert(n.operands[0]).second) continue;
    Node mean = n;
    mean.op = ScalarOp::WelfordMean;
    mean.id = fresh++;
    out.nodes.push_back(mean);
  }
  renumber_nodes(out);
  return out;
}

// The partials kernel: ranges [S, I...], the reduction loop over its chunk, then the stores of
// every reduction's partial into `partials` (one Temp per reduction, in node order).
Kernel partials_kernel(const Kernel& k, const Plan& plan, const std::vector<BufferId>& partials) {
  Kernel a;
  a.ranges.push_back(plan.splits);
  for (const sym::Expr& r : k.ranges) a.ranges.push_back(r);
  const std::vector<sym::Expr>& reduced = k.loops[0].ranges;
  int64_t s = plan.splits;  // the cuts of reduced[plan.range]
  for (size_t r = 0; r < plan.range; ++r) s /= reduced[r].constant();
  const int64_t chunk = reduced[plan.range].constant() / s;
  a.loops.push_back(k.loops[0]);
  a.loops[0].ranges.assign(reduced.begin() + static_cast<std::ptrdiff_t>(plan.range), reduced.end());
  a.loops[0].ranges[0] = chunk;
  a.loops.push_back(loop_ir::Loop{});
  SymbolMap map;
  for (size_t j = 0; j < k.ranges.size(); ++j) map.emplace_back("i" + std::to_string(j), var("i", static_cast<int>(j + 1)));
  const sym::Expr split = var("i", 0);
  int64_t below = s;  // the product of the digits' radices below r
  for (size_t r = plan.range; r-- > 0;) {
    map.emplace_back("r" + std::to_string(r), mod(floordiv(split, sym::Expr(below)), reduced[r]));
    below *= reduced[r].constant();
  }
  map.emplace_back("r" + std::to_string(plan.range), (plan.range == 0 ? split : mod(split, sym::Expr(s))) * chunk + var("r", 0));
  for (size_t r = plan.range + 1; r < reduced.size(); ++r)
    map.emplace_back("r" + std::to_string(r), var("r", static_cast<int>(r - plan.range)));
  std::vector<sym::Expr> at;  // [i0, i1, ...]: a partial's index
  for (size_t j = 0; j < a.ranges.size(); ++j) at.push_back(var("i", static_cast<int>(j)));
  for (const Node& n : k.nodes)
    if (n.loop == 0) {
      a.nodes.push_back(n);
      rename_in_node(a.nodes.back(), map);
    }
  renumber_nodes(a);
  const size_t reductions = a.nodes.size();
  size_t p = 0;
  for (size_t n = 0; n < reductions; ++n) {
    if (!is_reduce(a.nodes[n])) continue;
    Node store = make_node(ScalarOp::Store, a.nodes[n].dtype, {a.nodes[n].id}, 1);
    store.buffer = partials.at(p++);
    store.index = at;
    add(a, std::move(store));
  }
  loop_ir::simplify_indices(a);  // the digits of i0 recombine where the ranges are contiguous
  return a;
}

// The combining kernel: `k`'s ranges, a loop over the splits per reduction kind, then `k`'s epilogue
// reading the combined values.
Kernel combine_kernel(const Kernel& k, int64_t splits, const std::vector<BufferId>& partials) {
  Kernel b;
  b.ranges = k.ranges;
  b.loops.push_back(loop_ir::Loop{{sym::Expr(splits)}});
  std::vector<sym::Expr> at{var("r", 0)};
  for (size_t j = 0; j < k.ranges.size(); ++j) at.push_back(var("i", static_cast<int>(j)));
  auto load = [&](BufferId partial, ir::DType dtype, int loop) {
    Node n = make_node(ScalarOp::Load, dtype, {}, loop);
    n.buffer = partial;
    n.index = at;
    return add(b, std::move(n));
  };
  std::map<NodeId, NodeId> ids;      // k's reductions and epilogue nodes -> b's
  std::map<NodeId, BufferId> partial_of;  // k's reductions -> their partials
  std::map<NodeId, NodeId> mean_of;  // k's welford operand -> its welford_mean node in k
  std::vector<const Node*> welford_m2;
  size_t p = 0;
  for (const Node& n : k.nodes) {
    if (n.loop != 0 || !is_reduce(n)) continue;
    partial_of[n.id] = partials.at(p++);
    const NodeId value = load(partial_of[n.id], n.dtype, 0);
    // sum, prod, max and min combine with themselves; Welford's partial means and M2s are summed
    // here and completed below.
    const bool welford = n.op == ScalarOp::WelfordMean || n.op == ScalarOp::WelfordM2;
    ids[n.id] = add(b, make_node(welford ? ScalarOp::ReduceSum : n.op, n.dtype, {value}, 0));
    if (n.op == ScalarOp::WelfordMean) mean_of[n.operands[0]] = n.id;
    if (n.op == ScalarOp::WelfordM2) welford_m2.push_back(&n);
  }
  int next_loop = 1;
  if (!welford_m2.empty()) {
    // Loop 1: the means; loop 2: the squared deviations of the partial means; loop 3: M2.
    b.loops.push_back(loop_ir::Loop{});
    b.loops.push_back(loop_ir::Loop{{sym::Expr(splits)}});
    b.loops.push_back(loop_ir::Loop{});
    next_loop = 4;
    for (const Node& n : k.nodes) {
      if (n.loop != 0 || n.op != ScalarOp::WelfordMean) continue;
      const NodeId s = add_constant(b, n.dtype, static_cast<double>(splits), 1);
      ids[n.id] = add(b, make_node(ScalarOp::Div, n.dtype, {ids.at(n.id), s}, 1));
    }
    std::vector<NodeId> deviations;  // per welford_m2 (nodes stay in loop order: all of loop 2 first)
    for (const Node* m2 : welford_m2) {
      const NodeId mean_node = mean_of.at(m2->operands[0]);  // with_welford_means made sure of it
      const NodeId mean_s = load(partial_of.at(mean_node), m2->dtype, 2);
      const NodeId d = add(b, make_node(ScalarOp::Sub, m2->dtype, {mean_s, ids.at(mean_node)}, 2));
      const NodeId d2 = add(b, make_node(ScalarOp::Mul, m2->dtype, {d, d}, 2));
      deviations.push_back(add(b, make_node(ScalarOp::ReduceSum, m2->dtype, {d2}, 2)));
    }
    const double count = static_cast<double>(constant_numel(k.loops[0].ranges) / splits);
    for (size_t w = 0; w < welford_m2.size(); ++w) {
      const Node* m2 = welford_m2[w];
      const NodeId chunk = add_constant(b, m2->dtype, count, 3);
      const NodeId scaled = add(b, make_node(ScalarOp::Mul, m2->dtype, {deviations[w], chunk}, 3));
      ids[m2->id] = add(b, make_node(ScalarOp::Add, m2->dtype, {ids.at(m2->id), scaled}, 3));
    }
  }
  for (size_t l = 1; l < k.loops.size(); ++l) b.loops.push_back(k.loops[l]);
  std::vector<Node> epilogue;
  for (const Node& n : k.nodes)
    if (n.loop != 0) {
      ids[n.id] = static_cast<NodeId>(b.nodes.size() + epilogue.size());
      epilogue.push_back(n);
    }
  for (Node& n : epilogue) {
    remap_ids(n, ids);
    n.id = ids.at(n.id);
    n.loop = n.loop - 1 + next_loop;
    b.nodes.push_back(std::move(n));
  }
  return b;
}

}  // namespace

std::vector<FusionDecision> split_reductions(Program& program, const SplitOptions& options) {
  std::vector<FusionDecision> decisions;
  if (options.min_programs <= 0) return decisions;
  std::vector<Kernel> kernels;
  std::vector<loop_ir::Step> steps;
  for (const loop_ir::Step& step : program.steps) {
    if (step.kind == loop_ir::Step::Kind::Extern) {
      steps.push_back(step);
      continue;
    }
    const Kernel& original = program.kernels.at(static_cast<size_t>(step.index));
    auto keep = [&]() {
      steps.push_back({loop_ir::Step::Kind::Kernel, static_cast<int>(kernels.size())});
      kernels.push_back(original);
    };
    if (original.loops.empty() || original.loops[0].ranges.empty()) {
      keep();
      continue;
    }
    // The split count comes from the sizes: a symbolic extent is never split (its hint could choose
    // one, but every value would then need the split's divisibility; not built).
    if (!constant(original.ranges) || !constant(original.loops[0].ranges)) {
      decisions.push_back({FusionDecision::Kind::Refused, original.name, "split", "symbolic extents: not split"});
      keep();
      continue;
    }
    // Only a long reduction is a candidate: a shorter one stays in registers or has nothing to split.
    if (constant_numel(original.loops[0].ranges) < 2 * options.min_split_rnumel) {
      keep();
      continue;
    }
    const std::string why_not = refusal(original);
    Plan plan = why_not.empty() ? choose_splits(program, original, options) : Plan{0, 0, why_not + ": not split"};
    if (plan.splits == 0) {
      decisions.push_back({FusionDecision::Kind::Refused, original.name, "split", plan.reason});
      keep();
      continue;
    }
    const Kernel k = with_welford_means(original);
    // One Temp per reduction, [S, I...] contiguous, on the kernel's device.
    ir::Device device = program.buffers.empty() ? ir::Device{} : program.buffers.front().device;
    std::vector<BufferId> partials;
    std::string names;
    for (const Node& n : k.nodes) {
      if (n.loop != 0 || !is_reduce(n)) continue;
      Buffer t;
      t.kind = Buffer::Kind::Temp;
      t.dtype = n.dtype;
      t.device = device;
      t.sizes.push_back(plan.splits);
      for (const sym::Expr& r : k.ranges) t.sizes.push_back(r);
      t.strides.assign(t.sizes.size(), 1);
      for (size_t d = t.sizes.size() - 1; d-- > 0;) t.strides[d] = t.strides[d + 1] * t.sizes[d + 1];
      partials.push_back(program.add_buffer(t));
      names += (names.empty() ? "%" : ", %") + program.buffers.back().name();
    }
    const std::string first = "k" + std::to_string(kernels.size());
    const std::string second = "k" + std::to_string(kernels.size() + 1);
    steps.push_back({loop_ir::Step::Kind::Kernel, static_cast<int>(kernels.size())});
    kernels.push_back(partials_kernel(k, plan, partials));
    steps.push_back({loop_ir::Step::Kind::Kernel, static_cast<int>(kernels.size())});
    kernels.push_back(combine_kernel(k, plan.splits, partials));
    decisions.push_back({FusionDecision::Kind::Split, k.name, first + " + " + second,
                         plan.reason + "; partials " + names});
  }
  for (size_t i = 0; i < kernels.size(); ++i) kernels[i].name = "k" + std::to_string(i);
  program.kernels = std::move(kernels);
  program.steps = std::move(steps);
  check_verifies(program, "split_reductions");
  return decisions;
}

}  // namespace ember::scheduler
