// The collapse pass: adjacent loop variables that every access walks as one contiguous run
// become one variable, so a 28x28 plane or a [32, 32] pointwise kernel is one 784- or 1024-long
// loop (one vector loop in C++ code instead of a short one per row). Contract in collapse.h.
//
// How. The innermost variables v_k, ..., v_last of one range list (extents E_k, ..., constants or
// symbolic sizes) become j = Σ v_d * P_d < E_k * ... * E_last (P_d: the product of the extents after d):
// every index expression of the scope gets v_k := j // P_k and v_d := (j // P_d) % E_d, so the
// order of points is kept. That substitution is exact for every expression (a bijection), so the
// only question is whether it pays: the pass keeps it only when, after simplify(), every access's
// element offset (flat_offset) and every `index` value of the scope is affine in j with a constant
// coefficient, i.e. simplify's folds (c*k*((j // k) % m) + c*(j % k) -> c*(j % (k*m)), then
// k*(j // k) + j % k -> j) removed every division it introduced. That holds exactly when, for each
// adjacent pair of the run, the coefficient of the outer variable is the inner's extent times that
// of the inner (stride of the outer = size x stride of the inner). The longest run that holds,
// from the innermost pair outwards, is kept; then, before the variable that did not join, the next
// longest run, and so on: [C_out, 3, 3, C_in] (a 3x3 convolution weight copied channels-last, read
// with stride 9 along C_in) becomes [C_out, 9, C_in]. None: the kernel is left as it was.
//
// Scopes: the ranges of each loop with ranges (its nodes), and the outer ranges of a kernel none
// of whose loops has ranges (all its nodes: the last outer variable is the vector variable of such
// a kernel). Outer variables of reduction kernels are left alone (they are not vectorized, and
// the row-wise layouts of code generation, values kept per row, are per outer point), except in
// an outer-reduction candidate, whose last outer variable is the vector one.
#include <algorithm>
#include <optional>
#include <set>
#include <string>

#include "loop_ir/collapse.h"

namespace ember::loop_ir {

namespace {

using sym::Expr;

bool mentions(const Expr& e, const std::string& var) {
  if (e.kind() == sym::ExprKind::Symbol) return e.symbol_name() == var;
  for (const Expr& o : e.operands())
    if (mentions(o, var)) return true;
  return false;
}

// Which variables a scope names and which nodes it covers.
struct Scope {
  char prefix;          // 'i': the kernel's outer ranges; 'r': loop `loop`'s ranges
  int loop = -1;        // 'r' only
  bool covers(const Node& n) const { return prefix == 'i' || n.loop == loop; }
};

std::string var(char prefix, size_t k) { return std::string(1, prefix) + std::to_string(k); }

// The variable ranges simplify() may use for a node of `kernel` (outer and its loop's).
VarRanges node_ranges(const Kernel& kernel, const Node& n) {
  VarRanges ranges;
  for (size_t d = 0; d < kernel.ranges.size(); ++d) ranges.emplace_back(var('i', d), kernel.ranges[d]);
  if (n.loop >= 0 && static_cast<size_t>(n.loop) < kernel.loops.size())
    for (size_t d = 0; d < kernel.loops[n.loop].ranges.size(); ++d)
      ranges.emplace_back(var('r', d), kernel.loops[n.loop].ranges[d]);
  return ranges;
}

// `kernel` with variables first..last of `scope` made one, j = Σ v_d * P_d (P_d the product of the
// extents after d up to last): v_first := j // P_first, v_d := (j // P_d) % E_d, and the variables
// after `last` renumbered down, so that simplify's folds c*k*((j // k) % m) + c*(j % k) -> c*(j % (k*m))
// recombine a whole run at once (collapsing pair by pair would leave (j % 49) // 7, which it does not
// fold). nullopt when an extent after `first` is a constant below 1 or some access or index value is
// no longer affine in j. A symbolic extent is a size (never negative; where it is 0 there is no point).
std::optional<Kernel> collapse_run(const Program& program, const Kernel& kernel, const Scope& scope, size_t first,
                                   size_t last) {
  const std::vector<Expr>& ranges = scope.prefix == 'i' ? kernel.ranges : kernel.loops[scope.loop].ranges;
  const std::string j = var(scope.prefix, first);
  sym::Replacements rename;
  Expr below = 1;  // P_d
  for (size_t d = last + 1; d-- > first;) {
    if (d > first && ranges[d].is_constant() && ranges[d].constant() < 1) return std::nullopt;
    const Expr quotient = floordiv(Expr::symbol(j), below);
    rename.emplace_back(var(scope.prefix, d), d == first ? quotient : mod(quotient, ranges[d]));
    below = below * ranges[d];
  }
  for (size_t d = last + 1; d < ranges.size(); ++d)
    rename.emplace_back(var(scope.prefix, d), Expr::symbol(var(scope.prefix, d - (last - first))));
  Kernel next = kernel;
  std::vector<Expr>& next_ranges = scope.prefix == 'i' ? next.ranges : next.loops[scope.loop].ranges;
  next_ranges.erase(next_ranges.begin() + static_cast<std::ptrdiff_t>(first) + 1,
                    next_ranges.begin() + static_cast<std::ptrdiff_t>(last) + 1);
  next_ranges[first] = below;
  for (Node& n : next.nodes) {
    if (!scope.covers(n) || n.index.empty()) continue;
    const VarRanges facts = node_ranges(next, n);
    for (Expr& e : n.index) e = simplify(sym::substitute(e, rename), facts);
    const Expr walked = n.op == ScalarOp::Index ? n.index.at(0) : flat_offset(program.buffers.at(n.buffer), n.index);
    if (mentions(walked, j) && !linear_coefficient(walked, j)) return std::nullopt;
  }
  return next;
}

// Collapses, from the innermost variable outwards, each longest run of adjacent variables of `scope`
// that stays affine (the file's comment): the innermost run (one long vector loop), then the runs
// before a variable that did not join (a transposed copy's rows: the tiles' R).
bool collapse_scope(const Program& program, Kernel& kernel, const Scope& scope) {
  const size_t rank = (scope.prefix == 'i' ? kernel.ranges : kernel.loops[scope.loop].ranges).size();
  bool changed = false;
  for (size_t last = rank; last-- > 1;) {
    std::optional<Kernel> best;
    size_t merged = last;  // the run's first variable
    for (size_t first = last; first-- > 0;) {
      std::optional<Kernel> next = collapse_run(program, kernel, scope, first, last);
      if (!next) break;
      best = std::move(next);
      merged = first;
    }
    if (!best) continue;
    kernel = std::move(*best);
    changed = true;
    last = merged;  // the next run ends before the merged variable
  }
  return changed;
}

std::string node_symbol(NodeId id) { return "t" + std::to_string(id); }

// The nodes of a pointwise kernel's single loop that do not change along the last outer variable
// `v`, and whose users along v can take them as f32 scalars: loads and index values that do not
// read v, and what is computed from them only (no stores, index checks or reductions). Loads of
// storage the kernel writes stay in the loop: reading them earlier could miss a store.
std::vector<bool> invariant_nodes(const Program& program, const Kernel& kernel, const std::string& v) {
  const std::vector<Node>& nodes = kernel.nodes;
  std::vector<bool> invariant(nodes.size(), false);
  std::set<BufferId> written;
  for (const Node& n : nodes)
    if (n.op == ScalarOp::Store) written.insert(program.storage_root(n.buffer));
  auto reads = [&](const Node& n, auto&& pred) {
    std::set<std::string> names;
    for (const Expr& e : n.index) sym::free_symbols(e, names);
    for (const std::string& name : names)
      if (pred(name)) return true;
    return false;
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    const OpClass cls = op_info(n.op).cls;
    if (cls == OpClass::Effect || cls == OpClass::Reduce || n.op == ScalarOp::CheckIndex) continue;
    if (n.op == ScalarOp::Load && written.count(program.storage_root(n.buffer))) continue;
    bool ok = !reads(n, [&](const std::string& name) {
      if (name == v) return true;
      for (size_t k = 0; k < i; ++k)
        if (!invariant[k] && node_symbol(nodes[k].id) == name) return true;
      return false;
    });
    for (NodeId o : n.operands) ok = ok && invariant.at(static_cast<size_t>(o));
    invariant[i] = ok;
  }
  // Vector code broadcasts only f32 values from outside its loop: a non-f32 value a varying node
  // reads stays in the loop (and so, next round, may what it reads). A node kept in the loop is
  // varying for every node that reads it: an invariant node reading one stays in the loop too (a
  // guarded load `load %b[0] if %mask`, whose b8 mask a varying load also reads: moving the load out
  // read the mask before it was computed; BEiT's backward).
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < nodes.size(); ++i) {
      auto reads_node = [&](size_t k) {
        for (NodeId o : nodes[i].operands)
          if (static_cast<size_t>(o) == k) return true;
        return reads(nodes[i], [&](const std::string& name) { return name == node_symbol(nodes[k].id); });
      };
      if (invariant[i]) {
        for (size_t k = 0; k < i && invariant[i]; ++k)
          if (!invariant[k] && reads_node(k)) {
            invariant[i] = false;
            changed = true;
          }
        continue;
      }
      for (size_t k = 0; k < i; ++k)
        if (invariant[k] && nodes[k].dtype != DType::Float32 && reads_node(k)) {
          invariant[k] = false;
          changed = true;
        }
    }
  }
  return invariant;
}

// A reduction kernel that code generation may vectorize along its last outer variable (an outer
// reduction, docs/codegen-cpp.md): some load of a loop with ranges is strided along that loop's
// last variable, so the loop cannot be a vector loop, and some access is contiguous along the last
// outer variable. Its outer variables then collapse as a pointwise kernel's do: a [2, 28, 28]
// LayerNorm over the channels of an NCHW tensor gets 784-lane rows instead of 28-lane ones.
bool outer_reduction_candidate(const Program& program, const Kernel& kernel) {
  if (kernel.ranges.empty()) return false;
  const std::string last = var('i', kernel.ranges.size() - 1);
  bool strided = false, contiguous = false;
  for (const Node& n : kernel.nodes) {
    if (n.op != ScalarOp::Load && n.op != ScalarOp::Store) continue;
    const Expr offset = flat_offset(program.buffers.at(n.buffer), n.index);
    contiguous = contiguous || linear_coefficient(offset, last) == std::optional<int64_t>(1);
    const std::vector<Expr>& ranges = kernel.loops.at(static_cast<size_t>(n.loop)).ranges;
    if (ranges.empty()) continue;
    const std::optional<int64_t> c = linear_coefficient(offset, var('r', ranges.size() - 1));
    strided = strided || !c || (*c != 0 && *c != 1);
  }
  return strided && contiguous;
}

// How many loads and stores of `kernel` walk memory contiguously along outer variable `v`.
int contiguous_along(const Program& program, const Kernel& kernel, const std::string& v) {
  int n = 0;
  for (const Node& node : kernel.nodes)
    if (node.op == ScalarOp::Load || node.op == ScalarOp::Store)
      n += linear_coefficient(flat_offset(program.buffers.at(node.buffer), node.index), v) == 1;
  return n;
}

}  // namespace

bool order_outer_by_stores(const Program& program, Kernel& kernel) {
  const size_t rank = kernel.ranges.size();
  if (rank < 2 || !kernel.pointwise()) return false;
  // The order every store walks memory in: its variables by their stride, largest first.
  std::optional<std::vector<size_t>> order;
  for (const Node& n : kernel.nodes) {
    if (n.op != ScalarOp::Store) continue;
    const Expr offset = flat_offset(program.buffers.at(n.buffer), n.index);
    std::vector<std::pair<int64_t, size_t>> strides;
    for (size_t d = 0; d < rank; ++d) {
      std::optional<int64_t> c = linear_coefficient(offset, var('i', d));
      if (!c || *c <= 0) return false;  // not affine, or a point that does not store its own element
      strides.emplace_back(-*c, d);
    }
    std::sort(strides.begin(), strides.end());
    std::vector<size_t> mine;
    for (size_t k = 0; k < rank; ++k) {
      if (k > 0 && strides[k].first == strides[k - 1].first) return false;
      mine.push_back(strides[k].second);
    }
    if (order && *order != mine) return false;
    order = std::move(mine);
  }
  if (!order || order->back() == rank - 1) return false;
  Kernel next = kernel;
  sym::Replacements rename;  // old variable -> its new name
  for (size_t k = 0; k < rank; ++k) {
    rename.emplace_back(var('i', (*order)[k]), Expr::symbol(var('i', k)));
    next.ranges[k] = kernel.ranges[(*order)[k]];
  }
  for (Node& n : next.nodes) {
    for (Expr& e : n.index) e = sym::substitute(e, rename);
    n.bound = sym::substitute(n.bound, rename);
  }
  const std::string innermost = var('i', rank - 1);
  if (contiguous_along(program, next, innermost) <= contiguous_along(program, kernel, innermost)) return false;
  kernel = std::move(next);
  return true;
}

std::optional<int64_t> linear_coefficient(const Expr& e, const std::string& var) {
  switch (e.kind()) {
    case sym::ExprKind::Constant: return 0;
    case sym::ExprKind::Symbol: return e.symbol_name() == var ? 1 : 0;
    case sym::ExprKind::Add: {
      int64_t sum = 0;
      for (const Expr& term : e.operands()) {
        std::optional<int64_t> c = linear_coefficient(term, var);
        if (!c) return std::nullopt;
        sum += *c;
      }
      return sum;
    }
    case sym::ExprKind::Mul: {
      // Affine in var only as constants times one factor affine in var; a var-free symbol as a
      // further factor makes the coefficient symbolic.
      if (!mentions(e, var)) return 0;
      int64_t scale = 1;
      const Expr* with_var = nullptr;
      for (const Expr& f : e.operands()) {
        if (f.is_constant()) {
          scale *= f.constant();
        } else if (with_var != nullptr || !mentions(f, var)) {
          return std::nullopt;
        } else {
          with_var = &f;
        }
      }
      std::optional<int64_t> inner = linear_coefficient(*with_var, var);
      if (!inner) return std::nullopt;
      return scale * *inner;
    }
    case sym::ExprKind::FloorDiv:
    case sym::ExprKind::Mod:
    case sym::ExprKind::Max:
    case sym::ExprKind::Min:
      if (mentions(e, var)) return std::nullopt;
      return 0;
  }
  return std::nullopt;
}

Expr flat_offset(const Buffer& buffer, const std::vector<Expr>& index) {
  Expr offset = 0;
  for (size_t k = 0; k < index.size() && k < buffer.strides.size(); ++k) {
    // A dimension of size 1 is always read at index 0, whatever its stride says.
    if (buffer.sizes[k].is_constant() && buffer.sizes[k].constant() == 1) continue;
    offset = offset + index[k] * buffer.strides[k];
  }
  // Per-dimension indices that split one flat index recombine here: 5*((10*i1 + r0) // 5) +
  // (10*i1 + r0) % 5 is 10*i1 + r0, contiguous along r0. Loop variables are non-negative, which
  // is all simplify assumes of a variable without a range.
  return simplify(offset, {});
}

bool hoist_invariants(const Program& program, Kernel& kernel) {
  if (kernel.ranges.size() < 2 || !kernel.pointwise()) return false;
  const size_t last = kernel.ranges.size() - 1;
  const std::string v = var('i', last);
  const std::vector<bool> invariant = invariant_nodes(program, kernel, v);
  bool worth = false;
  for (size_t i = 0; i < kernel.nodes.size(); ++i) worth = worth || (invariant[i] && is_expensive(kernel.nodes[i].op));
  if (!worth) return false;
  // Invariant nodes first (loop 0), the rest after (loop 1, v renamed r0); ids are positions.
  std::vector<size_t> order;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < kernel.nodes.size(); ++i)
      if (invariant[i] == (pass == 0)) order.push_back(i);
  std::vector<NodeId> new_id(kernel.nodes.size());
  sym::Replacements renumber;
  for (size_t p = 0; p < order.size(); ++p) {
    new_id[order[p]] = static_cast<NodeId>(p);
    renumber.emplace_back(node_symbol(kernel.nodes[order[p]].id), Expr::symbol(node_symbol(static_cast<NodeId>(p))));
  }
  sym::Replacements in_loop = renumber;
  in_loop.emplace_back(v, Expr::symbol("r0"));
  std::vector<Node> nodes;
  for (size_t p = 0; p < order.size(); ++p) {
    Node n = kernel.nodes[order[p]];
    n.id = static_cast<NodeId>(p);
    n.loop = invariant[order[p]] ? 0 : 1;
    for (NodeId& o : n.operands) o = new_id.at(static_cast<size_t>(o));
    for (Expr& e : n.index) e = sym::substitute(e, n.loop == 0 ? renumber : in_loop);
    nodes.push_back(std::move(n));
  }
  kernel.nodes = std::move(nodes);
  kernel.loops = {Loop{}, Loop{{kernel.ranges[last]}}};
  kernel.ranges.pop_back();
  return true;
}

bool collapse_pointwise(const Program& program, Kernel& kernel) {
  if (!kernel.pointwise()) return false;
  const bool ordered = order_outer_by_stores(program, kernel);
  return collapse_scope(program, kernel, Scope{'i'}) || ordered;
}

bool collapse_loops(Program& program) {
  bool changed = false;
  for (Kernel& kernel : program.kernels) {
    if (kernel.pointwise()) {
      changed |= collapse_pointwise(program, kernel);
      changed |= hoist_invariants(program, kernel);
      continue;
    }
    for (size_t l = 0; l < kernel.loops.size(); ++l)
      if (!kernel.loops[l].ranges.empty()) changed |= collapse_scope(program, kernel, Scope{'r', static_cast<int>(l)});
    if (outer_reduction_candidate(program, kernel)) changed |= collapse_scope(program, kernel, Scope{'i'});
  }
  return changed;
}

}  // namespace ember::loop_ir
