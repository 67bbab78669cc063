// One loop IR kernel as an extern "C" C++ function (emit_cpp names it after the hash of its text):
// the loop nest, the choice of scalar or vector code for each loop, and the OpenMP decision
// (docs/codegen-cpp.md, "Kernels"). Buffers are named by parameter position (p0, p1, ...), never by
// id, and check sites are numbered from 0, so kernels that differ only in their buffers print alike.
//
// Shape. For every outer point (variables i0, i1, ...) the kernel runs its loops in order. A loop
// with ranges is a nest of for-loops whose last variable may be vectorized; a loop without ranges
// runs once per outer point. A kernel whose loops have no ranges at all is pointwise: its last
// outer variable is the one vectorized. Vector code steps VecF::kSize lanes at a time and ends
// with one masked tail (loads and stores of the first n lanes), so no lane ever touches memory
// past the end of a row.
//
// Row pipelining (can_pipeline_rows): when loop 0 only reduces loads of unchanging buffers (a
// softmax's row max), the last loop of outer point i0 also runs loop 0 for i0 + 1, one row ahead,
// with the same accumulators in the same order; each thread runs loop 0 itself only for the first
// row of its chunk (`pipe_row`).
//
// A failed check_index reports through ctx and jumps to the end of the current outer point (a
// label after the point's block, so no initialisation is skipped); the entry returns after the
// kernel.
#include <algorithm>
#include <set>

#include "codegen/cpp/emit_internal.h"

namespace ember::codegen::detail {

namespace {

// Below this many parallel outer points a pointwise kernel splits its vector loop across threads
// instead (a [2, 1000000] kernel has two rows but plenty of lanes), when each row holds enough work
// for a parallel region of its own (the threshold): else one region over the rows is cheaper than
// a region per row (a [32, 1024] GELU would fork and join 32 times).
constexpr int64_t kMinParallelRows = 64;

// A vector loop with reductions runs this many independent accumulators when its extent holds at
// least kUnrollMinExtent elements (4 AVX2 vectors): enough to hide an add's latency behind loads.
constexpr int kReductionUnroll = 4;
constexpr int64_t kUnrollMinExtent = 32;

// Float sums and Welford reductions over loops longer than kCarryMinExtent move their accumulators
// into a double carry (ev::SumCarry, ev::WelfordCarry) every kCarryBlock steps of the unrolled loop (4 vectors each): 2,048 elements per
// block with AVX2. A float lane then sums at most 64 elements between carries, where 32 lanes over
// 10^6 elements summed 31,250 each and lost to torch's cascade summation (docs/codegen-cpp.md).
constexpr int64_t kCarryMinExtent = 8192;
constexpr int kCarryBlock = 64;

struct VectorChoice {
  bool vector = false;
  std::string var;
  int64_t extent = 0;       // at the hints when symbolic (heuristics only)
  std::string extent_text;  // its C++ spelling: a constant, or an expression over shape symbols
  bool symbolic = false;
  std::string reason;       // why scalar, when not vector
  bool gathers = false;     // vector with a load lane by lane (gathered_load)
};

struct KernelEmitter {
  const Program& program;
  const Kernel& kernel;
  const CppOptions& options;
  NodeEnv env;
  // Extents of i0, i1, ... and of each loop's r0, r1, ...: symbolic ones at their hints, for
  // heuristics; code and correctness use kernel.ranges and kernel.loops.
  std::vector<int64_t> outer;
  std::vector<std::vector<int64_t>> loops;
  bool symbolic_outer = false;              // some outer extent is symbolic
  bool symbolic_loops = false;              // some loop extent is symbolic
  LoopReuse reuse;                          // values kept in scratch between loops
  // Row pipelining (see can_pipeline_rows): loop 0 of outer point i0 + 1 runs inside the last
  // loop of point i0; `shifted` holds loop 0's nodes with i0 replaced by i0 + 1.
  bool pipelined = false;
  std::map<NodeId, Node> shifted;
  bool emit_shifted = false;                // vector_node takes loop 0's nodes from `shifted`
  std::string parallel_if;                  // " if(<work> >= <threshold>)" when the work is symbolic
  std::string out;

  KernelEmitter(const Program& p, const Kernel& k, const CppOptions& o, std::vector<std::string>* sites)
      : program(p), kernel(k), options(o) {
    env.program = &p;
    env.kernel = &k;
    for (size_t i = 0; i < k.nodes.size(); ++i) env.position[k.nodes[i].id] = i;
    env.symbols.program = &p;
    env.symbols.node_of = [this](const std::string& sym) -> const Node* {
      if (sym.size() < 2 || sym[0] != 't') return nullptr;
      for (size_t c = 1; c < sym.size(); ++c)
        if (sym[c] < '0' || sym[c] > '9') return nullptr;
      auto it = env.position.find(static_cast<NodeId>(std::stol(sym.substr(1))));
      if (it == env.position.end()) return nullptr;
      const Node& n = kernel.nodes[it->second];
      return is_integer(n.dtype) ? &n : nullptr;
    };
    env.next_label = "next_point";  // function-local; one name keeps identical kernels identical
    env.check_sites = sites;
    for (size_t d = 0; d < k.ranges.size(); ++d) {
      outer.push_back(hint_of(p, k.ranges[d], "range i" + std::to_string(d) + " of kernel " + k.name));
      symbolic_outer = symbolic_outer || !k.ranges[d].is_constant();
    }
    for (size_t l = 0; l < k.loops.size(); ++l) {
      loops.emplace_back();
      for (size_t d = 0; d < k.loops[l].ranges.size(); ++d) {
        const sym::Expr& e = k.loops[l].ranges[d];
        loops.back().push_back(
            hint_of(p, e, "range r" + std::to_string(d) + " of loop " + std::to_string(l) + " of kernel " + k.name));
        symbolic_loops = symbolic_loops || !e.is_constant();
      }
    }
  }

  std::string extent(const sym::Expr& e) const { return c_index(e, env.symbols); }

  bool pointwise() const {
    for (const auto& l : loops)
      if (!l.empty()) return false;
    return true;
  }

  bool has_checks() const {
    for (const Node& n : kernel.nodes)
      if (n.op == ScalarOp::CheckIndex) return true;
    return false;
  }

  static bool is_reduction(const Node& n) { return loop_ir::op_info(n.op).cls == loop_ir::OpClass::Reduce; }

  // A symbolic extent may be anything from 0 up at run time: the masked tail serves every value.
  VectorChoice choose(const std::string& var, const sym::Expr& extent_expr,
                      const std::function<bool(NodeId)>& inside, bool allow_reductions) const {
    VectorChoice c;
    c.var = var;
    c.extent = hint_of(program, extent_expr, var);
    // Parenthesized unless atomic: vector code spells `e % ev::VecF::kSize` and `e - e % ...`.
    const bool atom = extent_expr.kind() == sym::ExprKind::Constant || extent_expr.kind() == sym::ExprKind::Symbol;
    c.extent_text = atom ? extent(extent_expr) : "(" + extent(extent_expr) + ")";
    c.symbolic = !extent_expr.is_constant();
    if (!c.symbolic && c.extent <= 1) {
      c.reason = var + " has extent " + std::to_string(c.extent);
      return c;
    }
    for (const Node& n : kernel.nodes) {
      if (!inside(n.id)) continue;
      if (!allow_reductions && is_reduction(n)) {
        c.reason = "%t" + std::to_string(n.id) + " reduces over a loop without ranges";
        return c;
      }
      std::string why = vector_refusal(env, n, var, inside);
      if (!why.empty()) {
        c.reason = why;
        return c;
      }
      c.gathers = c.gathers || gathered_load(env, n, var);
    }
    c.vector = true;
    return c;
  }

  // ---- pieces of code

  void line(int depth, const std::string& text) { out += std::string(2 * depth, ' ') + text + "\n"; }

  std::string indent(int depth) const { return std::string(2 * depth, ' '); }

  void scalar_nodes(int loop, int depth) {
    for (const Node& n : kernel.nodes)
      if (n.loop == loop) emit_scalar_node(env, n, indent(depth), out);
  }

  void reduction_inits(int loop, bool vector, int depth) {
    for (const Node& n : kernel.nodes)
      if (n.loop == loop && is_reduction(n)) emit_reduction_init(env, n, vector, indent(depth), out);
  }

  void reduction_finals(int loop, bool vector, int depth) {
    for (const Node& n : kernel.nodes)
      if (n.loop == loop && is_reduction(n)) emit_reduction_final(env, n, vector, indent(depth), out);
  }

  bool loop_has_reductions(const std::function<bool(NodeId)>& inside) const {
    for (const Node& n : kernel.nodes)
      if (inside(n.id) && is_reduction(n)) return true;
    return false;
  }

  // One node of a vector region, with the loop-reuse plan applied: a value an earlier loop kept
  // is loaded from its scratch array, one a later loop reuses is stored into it.
  void vector_node(const Node& node, const VectorChoice& v, Mode mode, const std::function<bool(NodeId)>& inside,
                   int depth) {
    auto shifted_node = emit_shifted ? shifted.find(node.id) : shifted.end();
    const Node& n = shifted_node != shifted.end() ? shifted_node->second : node;
    if (reuse.dead.count(n.id)) return;
    const std::string count = mode == Mode::VectorTail ? ", n" : "";
    const std::string at = n.loop >= 0 && static_cast<size_t>(n.loop) < loops.size()
                               ? scratch_offset(loops[static_cast<size_t>(n.loop)])
                               : std::string();
    // A scratch array's element at this point, or the output element that stands in for it.
    auto pointer = [&](const std::string& scratch) {
      auto in_output = reuse.in_output.find(scratch);
      return in_output != reuse.in_output.end() ? in_output->second : scratch + " + " + at;
    };
    auto load = reuse.load_instead.find(n.id);
    if (load != reuse.load_instead.end()) {
      line(depth, "const ev::VecF t" + std::to_string(n.id) + " = ev::VecF::load(" + pointer(load->second) + count + ");");
      return;
    }
    emit_vector_node(env, n, v.var, mode, inside, indent(depth), out);
    auto store = reuse.store_after.find(n.id);
    if (store != reuse.store_after.end())
      line(depth, "t" + std::to_string(n.id) + ".store(" + pointer(store->second) + count + ");");
  }

  // The main body (kSize lanes from `var`) and the masked tail of a vector region.
  // `emitted` (default: `inside`) picks the nodes to run; `inside` names operands computed here.
  // `single_range`: the vector loop is its loop's only range, so its accumulators start empty
  // here (Welford steps may then multiply by the reciprocal of the step count).
  void vector_bodies(const VectorChoice& v, const std::function<bool(NodeId)>& inside, int depth, bool chunked,
                     bool parallel_chunks, int unroll, std::function<bool(NodeId)> emitted = nullptr,
                     bool single_range = false) {
    if (!emitted) emitted = inside;
    const std::string& e = v.extent_text;
    const int outer_depth = depth;
    if (unroll > 1) line(depth++, "{");  // scopes the step variable of the unrolled loops
    if (parallel_chunks) line(depth, "#pragma omp parallel for schedule(static)" + parallel_if);
    if (chunked) {
      // A counted loop over whole vectors, so OpenMP can split it.
      line(depth, "for (int64_t c = 0; c < " + e + " / ev::VecF::kSize; ++c) {");
      line(depth + 1, "const int64_t " + v.var + " = c * ev::VecF::kSize;");
    } else if (unroll > 1) {
      // Independent accumulators acc, acc_1, ... take one vector each per step: a reduction's
      // dependency chain then costs one add latency per `unroll` vectors, not per vector.
      const std::string base = v.var + "_u";
      const std::string step = std::to_string(unroll) + " * ev::VecF::kSize";
      line(depth, "int64_t " + base + " = 0;");
      std::vector<const Node*> carried;
      for (const Node& n : kernel.nodes)
        if (emitted(n.id) && env.carried.count(n.id)) carried.push_back(&n);
      if (!carried.empty()) line(depth, "int64_t " + v.var + "_blocks = 0;");
      line(depth, "for (; " + base + " + " + step + " <= " + e + "; " + base + " += " + step + ") {");
      // Every accumulator has taken one vector per step (the carry restarts them all at once):
      // one reciprocal of the count serves each Welford update of the step. Only when this loop
      // is the whole range list: under an enclosing r-loop the accumulators carry on across it.
      bool welford = false;
      for (const Node& n : kernel.nodes)
        welford = welford || (emitted(n.id) && (n.op == ScalarOp::WelfordMean || n.op == ScalarOp::WelfordM2));
      if (welford && single_range) {
        const std::string steps = base + " / (" + step + ")" +
                                  (carried.empty() ? std::string() : " % " + std::to_string(kCarryBlock));
        line(depth + 1, "const ev::VecF wf_inv = ev::VecF::broadcast(1.0f / static_cast<float>(" + steps + " + 1));");
        env.welford_reciprocal = "wf_inv";
      }
      for (int u = 0; u < unroll; ++u) {
        line(depth + 1, "{");
        line(depth + 2, "const int64_t " + v.var + " = " + base +
                            (u == 0 ? std::string() : " + " + std::to_string(u) + " * ev::VecF::kSize") + ";");
        env.acc_suffix = u == 0 ? std::string() : "_" + std::to_string(u);
        for (const Node& n : kernel.nodes)
          if (emitted(n.id)) vector_node(n, v, Mode::Vector, inside, depth + 2);
        env.acc_suffix.clear();
        line(depth + 1, "}");
      }
      env.welford_reciprocal.clear();
      if (!carried.empty()) {
        line(depth + 1, "if (++" + v.var + "_blocks % " + std::to_string(kCarryBlock) + " == 0) {");
        for (const Node* n : carried)
          for (int u = 0; u < unroll; ++u)
            emit_reduction_carry(env, *n, u == 0 ? std::string() : "_" + std::to_string(u), indent(depth + 2), out);
        line(depth + 1, "}");
      }
      line(depth, "}");
      line(depth, "for (; " + base + " + ev::VecF::kSize <= " + e + "; " + base + " += ev::VecF::kSize) {");
      line(depth + 1, "const int64_t " + v.var + " = " + base + ";");
    } else {
      line(depth, "for (int64_t " + v.var + " = 0; " + v.var + " + ev::VecF::kSize <= " + e + "; " + v.var +
                      " += ev::VecF::kSize) {");
    }
    for (const Node& n : kernel.nodes)
      if (emitted(n.id)) vector_node(n, v, Mode::Vector, inside, depth + 1);
    line(depth, "}");
    if (unroll > 1) line(--depth, "}");
    if (depth != outer_depth) throw std::logic_error("vector_bodies: unbalanced blocks");
    line(depth, "if (" + e + " % ev::VecF::kSize != 0) {");
    line(depth + 1, "const int64_t " + v.var + " = " + e + " - " + e + " % ev::VecF::kSize;");
    line(depth + 1, "const int n = static_cast<int>(" + e + " % ev::VecF::kSize);");
    if (loop_has_reductions(emitted))
      line(depth + 1, "const ev::MaskF tail_mask = ev::MaskF::first(n);");
    for (const Node& n : kernel.nodes)
      if (emitted(n.id)) vector_node(n, v, Mode::VectorTail, inside, depth + 1);
    line(depth, "}");
  }

  // A loop with ranges, at the scope of one outer point.
  // with_loop0: the last loop also runs loop 0's nodes for outer point i0 + 1 (row pipelining):
  // their accumulators are declared here, their loads read row i0 + 1 (`shifted`), and their
  // merged values go to pipe_t<n> for the next point, which then skips loop 0.
  void ranged_loop(int l, const VectorChoice& v, std::set<NodeId>& broadcasts, std::set<NodeId>& divisors,
                   int depth, bool with_loop0 = false) {
    // `inside`: values computed in this region (loop 0's reductions are the scalars of the current
    // point to the last loop's nodes); `emitted`: nodes the region runs (loop 0's updates too).
    auto inside = [this, l, with_loop0](NodeId id) {
      const Node& n = env.node(id);
      return n.loop == l || (with_loop0 && n.loop == 0 && !is_reduction(n));
    };
    auto emitted = [this, l, with_loop0](NodeId id) {
      const int nl = env.node(id).loop;
      return nl == l || (with_loop0 && nl == 0);
    };
    // A symbolic extent unrolls and carries: its run-time value may be long (the unrolled loop and
    // the carry cost nothing on short rows, and the carry is what keeps long sums accurate).
    const std::vector<sym::Expr>& ext = kernel.loops[static_cast<size_t>(l)].ranges;
    const int unroll = v.vector && loop_has_reductions(emitted) && (v.symbolic || v.extent >= kUnrollMinExtent)
                           ? kReductionUnroll
                           : 1;
    if (unroll > 1 && (v.symbolic || v.extent >= kCarryMinExtent))
      for (const Node& n : kernel.nodes)
        if (emitted(n.id) && (n.op == ScalarOp::ReduceSum || n.op == ScalarOp::WelfordMean ||
                              n.op == ScalarOp::WelfordM2))
          env.carried.insert(n.id);
    for (int loop : with_loop0 ? std::vector<int>{l, 0} : std::vector<int>{l}) {
      reduction_inits(loop, v.vector, depth);
      for (int u = 1; u < unroll; ++u) {
        env.acc_suffix = "_" + std::to_string(u);
        reduction_inits(loop, v.vector, depth);
      }
      env.acc_suffix.clear();
    }
    emit_shifted = with_loop0;
    if (v.vector) {
      // Scalars from earlier loops: a broadcast for each use, an ev::DivisorF where one divides
      // (emit_vector_node spells a division by it ev::divide).
      for (const Node& n : kernel.nodes) {
        if (n.loop != l) continue;
        for (size_t k = 0; k < n.operands.size(); ++k) {
          const NodeId o = n.operands[k];
          if (inside(o)) continue;
          const bool divisor = n.op == ScalarOp::Div && k == 1;
          if (!(divisor ? divisors : broadcasts).insert(o).second) continue;
          if (divisor) {
            line(depth, "const ev::DivisorF " + divisor_name(o) + "(t" + std::to_string(o) + ");");
          } else {
            line(depth, "const ev::VecF " + vector_operand_name(o, false) + " = ev::VecF::broadcast(t" +
                            std::to_string(o) + ");");
          }
        }
      }
    }
    const size_t nest = v.vector ? ext.size() - 1 : ext.size();
    for (size_t d = 0; d < nest; ++d) {
      const std::string r = "r" + std::to_string(d);
      line(depth + static_cast<int>(d),
           "for (int64_t " + r + " = 0; " + r + " < " + extent(ext[d]) + "; ++" + r + ") {");
    }
    const int inner = depth + static_cast<int>(nest);
    if (v.vector) {
      vector_bodies(v, inside, inner, false, false, unroll, emitted, ext.size() == 1);
    } else {
      scalar_nodes(l, inner);
    }
    for (size_t d = nest; d-- > 0;) line(depth + static_cast<int>(d), "}");
    emit_shifted = false;
    if (with_loop0) {
      // Row i0 + 1's loop 0 values, merged as loop 0 itself merges them, for the next point.
      line(depth, "{");
      merges_and_finals(0, unroll, true, depth + 1);
      for (const Node& n : kernel.nodes)
        if (n.loop == 0 && is_reduction(n))
          line(depth + 1, "pipe_t" + std::to_string(n.id) + " = t" + std::to_string(n.id) + ";");
      line(depth + 1, "pipe_row = i0 + 1;");
      line(depth, "}");
    }
    merges_and_finals(l, unroll, v.vector, depth);
  }

  // The accumulators merge in a fixed tree, (0 + 1) + (2 + 3), then each reduction's value.
  void merges_and_finals(int l, int unroll, bool vector, int depth) {
    for (int width = 1; width < unroll; width *= 2)
      for (int u = 0; u + width < unroll; u += 2 * width)
        for (const Node& n : kernel.nodes)
          if (n.loop == l && is_reduction(n))
            emit_reduction_merge(env, n, u == 0 ? std::string() : "_" + std::to_string(u),
                                 "_" + std::to_string(u + width), indent(depth), out);
    reduction_finals(l, vector, depth);
  }
};

// i0 -> i0 + 1 in an index expression (rebuilt through the simplifying constructors).
sym::Expr next_row(const sym::Expr& e) {
  switch (e.kind()) {
    case sym::ExprKind::Constant: return e;
    case sym::ExprKind::Symbol: return e.symbol_name() == "i0" ? e + sym::Expr(1) : e;
    case sym::ExprKind::Add:
    case sym::ExprKind::Mul: {
      sym::Expr acc = next_row(e.operands()[0]);
      for (size_t k = 1; k < e.operands().size(); ++k)
        acc = e.kind() == sym::ExprKind::Add ? acc + next_row(e.operands()[k]) : acc * next_row(e.operands()[k]);
      return acc;
    }
    case sym::ExprKind::FloorDiv: return floordiv(next_row(e.operands()[0]), next_row(e.operands()[1]));
    case sym::ExprKind::Mod: return mod(next_row(e.operands()[0]), next_row(e.operands()[1]));
    case sym::ExprKind::Max: return max(next_row(e.operands()[0]), next_row(e.operands()[1]));
    case sym::ExprKind::Min: return min(next_row(e.operands()[0]), next_row(e.operands()[1]));
  }
  return e;
}

// Row pipelining. Softmax's first loop (the row max) streams its row from L3 at ~1.4 cycles per
// vector while the last loop (out *= 1/sum) is bound by its stores with FP pipes to spare; so
// loop 0 of row i0 + 1 runs inside the last loop of row i0, with the same accumulators in the
// same order (the same bits), and row i0 + 1 skips its own loop 0. Each thread runs loop 0 alone
// for the first row of its chunk (pipe_row says which row's accumulators are carried).
// Needs: one outer loop; loop 0 and the last loop both vector loops of equal extents; loop 0 only
// loads (unmasked, of buffers the kernel never writes, nothing stored into an input or extern
// result), computes and reduces (sum, prod, max, min), none of it kept for a later loop; the last
// loop reduces nothing itself; no index checks. Index values of loop 0 shift with its loads.
// A symbolic row count may be 1 at run time: the branch for the last row (no next row) serves it.
bool can_pipeline_rows(const NodeEnv& env, const std::vector<bool>& vector_loop, const LoopReuse& reuse) {
  const Kernel& k = *env.kernel;
  const Program& p = *env.program;
  const std::vector<sym::Expr>& outer = k.ranges;
  const size_t last = k.loops.size() - 1;
  if (outer.size() != 1 || (outer[0].is_constant() && outer[0].constant() < 2) || k.loops.size() < 2 ||
      k.loops[0].ranges.empty() || k.loops[0].ranges != k.loops[last].ranges)
    return false;
  if (!vector_loop[0] || !vector_loop[last]) return false;
  for (const Node& n : k.nodes) {
    if (n.op == ScalarOp::Store) {
      Buffer::Kind kind = p.buffers.at(p.storage_root(n.buffer)).kind;
      if (kind == Buffer::Kind::Input || kind == Buffer::Kind::Extern) return false;
    }
    if (n.op == ScalarOp::CheckIndex) return false;
    if (static_cast<size_t>(n.loop) == last && loop_ir::op_info(n.op).cls == loop_ir::OpClass::Reduce) return false;
    if (n.loop != 0) continue;
    if (reuse.store_after.count(n.id) || reuse.dead.count(n.id)) return false;
    for (NodeId o : n.operands)
      if (env.node(o).loop != 0) return false;
    switch (loop_ir::op_info(n.op).cls) {
      case loop_ir::OpClass::Leaf:
        if (n.op == ScalarOp::Constant) break;
        if (n.op == ScalarOp::Index) {
          if (reads_node_values(n.index.at(0))) return false;
          break;
        }
        if (n.op != ScalarOp::Load || !n.operands.empty()) return false;
        for (const Node& w : k.nodes)
          if (w.op == ScalarOp::Store && p.storage_root(w.buffer) == p.storage_root(n.buffer)) return false;
        for (const sym::Expr& e : n.index)
          if (reads_node_values(e)) return false;
        break;
      case loop_ir::OpClass::Unary:
      case loop_ir::OpClass::Binary:
      case loop_ir::OpClass::Compare:
      case loop_ir::OpClass::Ternary: break;
      case loop_ir::OpClass::Reduce:
        if (n.op != ScalarOp::ReduceSum && n.op != ScalarOp::ReduceProd && n.op != ScalarOp::ReduceMax &&
            n.op != ScalarOp::ReduceMin)
          return false;
        break;
      case loop_ir::OpClass::Effect: return false;
    }
  }
  return true;
}


std::string ranges_text(const std::vector<sym::Expr>& ext, char var) {
  std::string s = "[";
  for (size_t d = 0; d < ext.size(); ++d) s += (d ? ", " : "") + std::string(1, var) + std::to_string(d) + " < " + ext[d].str();
  return s + "]";
}

// Outer points × the trip counts of the loops run at each point (at least 1 when constant; a
// symbolic trip count of 0 means no work, rightly serial): the work the parallel threshold is
// measured against.
sym::Expr work_of(const Kernel& kernel) {
  sym::Expr points = 1, per_point = 0;
  for (const sym::Expr& e : kernel.ranges) points = points * e;
  for (const loop_ir::Loop& l : kernel.loops) {
    sym::Expr trip = 1;
    for (const sym::Expr& e : l.ranges) trip = trip * e;
    per_point = per_point + trip;
  }
  return points * (per_point.is_constant() ? sym::Expr(std::max<int64_t>(per_point.constant(), 1)) : per_point);
}

// The shape symbols a kernel's code reads: its extents, index expressions and check bounds, and
// the sizes and strides of the buffers it addresses.
std::vector<std::string> kernel_symbols(const Program& program, const Kernel& kernel,
                                        const std::vector<KernelParam>& params) {
  std::set<std::string> names;
  for (const sym::Expr& e : kernel.ranges) collect_shape_symbols(program, e, names);
  for (const loop_ir::Loop& l : kernel.loops)
    for (const sym::Expr& e : l.ranges) collect_shape_symbols(program, e, names);
  for (const Node& n : kernel.nodes) {
    for (const sym::Expr& e : n.index) collect_shape_symbols(program, e, names);
    collect_shape_symbols(program, n.bound, names);
  }
  for (const KernelParam& p : params) {
    const Buffer& b = program.buffers.at(static_cast<size_t>(p.buffer));
    for (const sym::Expr& e : b.sizes) collect_shape_symbols(program, e, names);
    for (const sym::Expr& e : b.strides) collect_shape_symbols(program, e, names);
  }
  std::vector<std::string> ordered;
  for (const sym::SymbolInfo& s : program.symbols)
    if (names.count(s.name)) ordered.push_back(s.name);
  return ordered;
}

}  // namespace

std::vector<KernelParam> kernel_params(const Kernel& kernel) {
  std::vector<KernelParam> params;
  for (const Node& n : kernel.nodes) {
    if (n.op != ScalarOp::Load && n.op != ScalarOp::Store) continue;
    auto it = std::find_if(params.begin(), params.end(), [&](const KernelParam& p) { return p.buffer == n.buffer; });
    if (it == params.end()) {
      params.push_back(KernelParam{n.buffer, false});
      it = params.end() - 1;
    }
    if (n.op == ScalarOp::Store) it->written = true;
  }
  return params;  // in order of first access, so two kernels identical up to buffer ids list them alike
}

KernelCode emit_kernel(const Program& program, const Kernel& kernel, const CppOptions& options, bool restrict_ok,
                       std::vector<std::string>* check_sites) {
  KernelEmitter k(program, kernel, options, check_sites);
  KernelCode code;
  code.params = kernel_params(kernel);
  for (size_t p = 0; p < code.params.size(); ++p) k.env.param_position[code.params[p].buffer] = p;
  code.uses_ctx = k.has_checks();
  code.symbols = kernel_symbols(program, kernel, code.params);
  for (const KernelParam& p : code.params) require_supported(program.buffers.at(p.buffer).dtype, "buffer %b" + std::to_string(p.buffer));

  // Vectorization: one choice for a pointwise kernel, one per loop with ranges otherwise.
  const bool pointwise = k.pointwise();
  const size_t rank = k.outer.size();
  VectorChoice point_choice;
  std::vector<VectorChoice> loop_choice(k.loops.size());
  if (pointwise) {
    if (rank == 0) {
      point_choice.reason = "no outer loop";
    } else {
      point_choice = k.choose("i" + std::to_string(rank - 1), kernel.ranges.back(), [](NodeId) { return true; }, false);
    }
  } else {
    for (size_t l = 0; l < k.loops.size(); ++l) {
      if (k.loops[l].empty()) continue;
      auto inside = [&k, l](NodeId id) { return k.env.node(id).loop == static_cast<int>(l); };
      loop_choice[l] = k.choose("r" + std::to_string(k.loops[l].size() - 1), kernel.loops[l].ranges.back(), inside, true);
    }
  }

  // An outer reduction (emit_outer.cpp) where some loop with ranges cannot be a vector loop (its
  // loads walk a strided dimension) or loads lane by lane, and every node can take the last outer
  // variable's lanes.
  VectorChoice outer_choice;
  bool scalar_loop = false;
  for (size_t l = 0; l < k.loops.size(); ++l)
    scalar_loop = scalar_loop || (!k.loops[l].empty() && (!loop_choice[l].vector || loop_choice[l].gathers));
  if (!pointwise && scalar_loop && rank > 0) {
    k.env.strided_lanes = true;
    outer_choice = k.choose("i" + std::to_string(rank - 1), kernel.ranges.back(), [](NodeId) { return true; }, true);
    const std::string why = outer_choice.vector ? outer_reduction_refusal(program, kernel) : std::string();
    if (!why.empty()) outer_choice = VectorChoice{};
    k.env.strided_lanes = outer_choice.vector;
  }
  const bool outer_reduction = outer_choice.vector;

  // Tiled transposes (emit_tile.cpp) where the pointwise vector is refused, or loads lane by lane,
  // for strided loads that are contiguous along the variable before the last.
  bool tiled = false;
  if (pointwise && rank >= 2 && (!point_choice.vector || point_choice.gathers)) {
    k.env.strided_lanes = true;
    VectorChoice tile_choice =
        k.choose("i" + std::to_string(rank - 1), kernel.ranges.back(), [](NodeId) { return true; }, false);
    tiled = tile_choice.vector && tile_refusal(k.env).empty();
    if (tiled) point_choice = tile_choice;
    k.env.strided_lanes = tiled;
  }

  if (!pointwise && !outer_reduction) {
    std::vector<bool> vector_loop;
    for (const VectorChoice& c : loop_choice) vector_loop.push_back(c.vector);
    k.reuse = plan_loop_reuse(k.env, k.loops, vector_loop);
    k.pipelined = can_pipeline_rows(k.env, vector_loop, k.reuse);
    if (k.pipelined)
      for (const Node& n : kernel.nodes)
        if (n.loop == 0) {
          Node copy = n;
          for (sym::Expr& e : copy.index) e = next_row(e);
          k.shifted.emplace(n.id, std::move(copy));
        }
  }

  // Parallelism: outer points × the trip counts of the loops run at each point. With symbolic
  // extents the layout (over outer points or over vector chunks) is chosen at the hints and the
  // threshold is tested at run time (an OpenMP if clause), where a static kernel decides here.
  const sym::Expr work_expr = work_of(kernel);
  const bool symbolic_work = !work_expr.is_constant();
  const int64_t work = hint_of(program, work_expr, "the work of kernel " + kernel.name);
  // The last outer variable is a vector one (pointwise, or the lanes of an outer reduction).
  const bool vector_points = (pointwise && point_choice.vector) || outer_reduction;
  const size_t parallel_dims = tiled ? rank - 2 : vector_points ? rank - 1 : rank;
  int64_t parallel_points = 1;
  for (size_t d = 0; d < parallel_dims; ++d) parallel_points *= k.outer[d];
  // A symbolic vector extent makes each outer point's work unbounded: a few points ([2, 1024*s0])
  // would then keep most threads idle at large sizes, so the vector chunks are split instead.
  const bool unbounded_points = vector_points && !kernel.ranges.back().is_constant();
  bool parallel_outer = false, parallel_chunks = false;
  std::string parallel_note;
  const auto accumulating = std::find_if(kernel.nodes.begin(), kernel.nodes.end(), [](const Node& n) { return n.accumulate; });
  if (!options.openmp) {
    parallel_note = "serial: OpenMP off";
  } else if (accumulating != kernel.nodes.end()) {
    parallel_note = "serial: %t" + std::to_string(accumulating->id) + " adds into a buffer where points may share an element";
  } else if (!symbolic_work && work < options.parallel_threshold) {
    parallel_note = "serial: work " + std::to_string(work) + " < " + std::to_string(options.parallel_threshold);
  } else if (parallel_points >= kMinParallelRows || (!vector_points && parallel_points >= 2) ||
             (parallel_points >= 2 && !unbounded_points && work / parallel_points < options.parallel_threshold)) {
    parallel_outer = true;
    parallel_note = "parallel over " + std::to_string(parallel_dims) + " outer loop(s), " +
                    std::to_string(parallel_points) + " points";
  } else if (vector_points) {
    parallel_chunks = true;
    parallel_note = tiled ? "parallel over the rows of tiles" : "parallel over the vector chunks of i" + std::to_string(rank - 1);
  } else {
    parallel_note = "serial: one outer point (a parallel reduction is not implemented)";
  }
  std::string parallel_if;
  if (symbolic_work && (parallel_outer || parallel_chunks)) {
    const std::string test = k.extent(work_expr) + " >= " + std::to_string(options.parallel_threshold);
    parallel_if = " if(" + test + ")";
    parallel_note += ", when " + test;
    k.parallel_if = parallel_if;
  }

  // The comment block: decisions, then the kernel's loop IR.
  std::string& out = k.out;
  out += std::string("// kernel ") + kFunctionPlaceholder + ": outer " + ranges_text(kernel.ranges, 'i') + "; " + parallel_note + "\n";
  if (outer_reduction) {
    out += "//   outer reduction: vector over " + outer_choice.var + " (each lane reduces its own outer point)\n";
  } else if (pointwise) {
    out += "//   pointwise: " +
           (point_choice.vector ? "vector over " + point_choice.var : "scalar (" + point_choice.reason + ")") +
           (tiled ? ", in transposed tiles of i" + std::to_string(rank - 2) + " x " + point_choice.var : "") + "\n";
  } else {
    for (size_t l = 0; l < k.loops.size(); ++l) {
      std::string what = k.loops[l].empty() ? "once per outer point"
                         : loop_choice[l].vector ? "vector over " + loop_choice[l].var
                                                 : "scalar (" + loop_choice[l].reason + ")";
      for (const auto& [id, scratch] : k.reuse.load_instead)
        if (k.env.node(id).loop == static_cast<int>(l)) what += "; %t" + std::to_string(id) + " loaded from " + scratch;
      for (const auto& [id, scratch] : k.reuse.store_after)
        if (k.env.node(id).loop == static_cast<int>(l))
          what += "; %t" + std::to_string(id) + " kept in " + scratch +
                  (k.reuse.in_output.count(scratch) ? " (the output row)" : "");
      if (k.pipelined && l + 1 == k.loops.size()) what += "; also runs loop 0 for i0 + 1";
      out += "//   loop " + std::to_string(l) + " " + ranges_text(kernel.loops[l].ranges, 'r') + ": " + what + "\n";
    }
  }
  {
    // The loop IR as the function sees it: its name, and buffers by parameter position (%p0).
    Kernel canonical = kernel;
    canonical.name = kFunctionPlaceholder;
    for (Node& n : canonical.nodes)
      if (n.op == ScalarOp::Load || n.op == ScalarOp::Store) n.buffer = static_cast<BufferId>(k.env.param_position.at(n.buffer));
    std::string ir = loop_ir::print(canonical);
    for (size_t at = 0; (at = ir.find("%b", at)) != std::string::npos; at += 2) ir[at + 1] = 'p';
    size_t start = 0;
    while (start < ir.size()) {
      size_t end = ir.find('\n', start);
      if (end == std::string::npos) end = ir.size();
      out += "//   | " + ir.substr(start, end - start) + "\n";
      start = end + 1;
    }
  }

  // Signature.
  std::string sig = std::string("extern \"C\" void ") + kFunctionPlaceholder + "(", types;
  auto add = [&sig, &types](const std::string& type, const std::string& declaration) {
    sig += std::string(sig.back() == '(' ? "" : ", ") + declaration;
    types += std::string(types.empty() ? "" : ", ") + type;
  };
  for (const KernelParam& p : code.params) {
    const Buffer& b = program.buffers.at(p.buffer);
    const std::string type = std::string(p.written ? "" : "const ") + storage_type(b.dtype) + "*";
    add(type, type + (restrict_ok ? " __restrict " : " ") + k.env.buffer_name(p.buffer));
  }
  for (const std::string& name : code.symbols) add("int64_t", "const int64_t " + name);
  if (code.uses_ctx) add("ember_ctx*", "ember_ctx* ctx");
  code.pointer_type = "void (*)(" + types + ")";
  out += sig + ") {\n";

  // Outer loops.
  int depth = 1;
  const size_t nested = parallel_dims;
  if (k.pipelined) {
    // Per thread: the row whose loop 0 values were computed ahead, and those values.
    if (parallel_outer) k.line(depth, "#pragma omp parallel" + parallel_if);
    k.line(depth++, "{");
    k.line(depth, "int64_t pipe_row = -1;");
    for (const Node& n : kernel.nodes)
      if (n.loop == 0 && loop_ir::op_info(n.op).cls == loop_ir::OpClass::Reduce)
        k.line(depth, std::string(value_type(n.dtype)) + " pipe_t" + std::to_string(n.id) + " = 0;");
    if (parallel_outer) k.line(depth, "#pragma omp for schedule(static)");
  } else if (parallel_outer) {
    k.line(depth, "#pragma omp parallel for schedule(static)" +
                      (nested > 1 ? " collapse(" + std::to_string(nested) + ")" : std::string()) + parallel_if);
  }
  for (size_t d = 0; d < nested; ++d) {
    const std::string i = "i" + std::to_string(d);
    k.line(depth++, "for (int64_t " + i + " = 0; " + i + " < " + k.extent(kernel.ranges[d]) + "; ++" + i + ") {");
  }
  k.line(depth, "{");
  ++depth;
  if (outer_reduction) {
    emit_outer_reduction(k.env, outer_choice.var, outer_choice.extent_text,
                         parallel_chunks ? "#pragma omp parallel for schedule(static)" + parallel_if : std::string(),
                         depth, out);
  } else if (tiled) {
    emit_tiled_points(k.env, parallel_chunks ? "#pragma omp parallel for schedule(static)" + parallel_if : std::string(),
                      depth, out);
  } else if (vector_points) {
    k.vector_bodies(point_choice, [](NodeId) { return true; }, depth, true, parallel_chunks, 1);
  } else if (pointwise) {
    for (size_t l = 0; l < k.loops.size(); ++l) {
      k.reduction_inits(static_cast<int>(l), false, depth);
      k.scalar_nodes(static_cast<int>(l), depth);
      k.reduction_finals(static_cast<int>(l), false, depth);
    }
  } else {
    int slot = 0;  // per-thread arrays: one slot per scratch of this kernel (kernels run one at a time)
    for (const auto& [scratch, elements] : k.reuse.scratch) {
      if (k.reuse.in_output.count(scratch)) continue;
      auto sized = k.reuse.run_time_sized.find(scratch);
      if (sized == k.reuse.run_time_sized.end()) {
        k.line(depth, "alignas(64) float " + scratch + "[" + std::to_string(elements) + "];");
      } else {
        k.line(depth, "float* const " + scratch + " = ember::rt::thread_scratch<" + std::to_string(slot++) + ">(" +
                          k.extent(sized->second) + ");");
      }
    }
    std::set<NodeId> broadcasts, divisors;
    for (size_t l = 0; l < k.loops.size(); ++l) {
      if (k.loops[l].empty()) {
        k.reduction_inits(static_cast<int>(l), false, depth);
        k.scalar_nodes(static_cast<int>(l), depth);
        k.reduction_finals(static_cast<int>(l), false, depth);
      } else if (k.pipelined && l == 0) {
        // Loop 0 runs here only for the first point of a thread's rows; otherwise the previous
        // point computed its values.
        k.line(depth, "if (pipe_row != i0) {");
        k.ranged_loop(0, loop_choice[0], broadcasts, divisors, depth + 1);
        for (const Node& n : kernel.nodes)
          if (n.loop == 0 && loop_ir::op_info(n.op).cls == loop_ir::OpClass::Reduce)
            k.line(depth + 1, "pipe_t" + std::to_string(n.id) + " = t" + std::to_string(n.id) + ";");
        k.line(depth, "}");
        for (const Node& n : kernel.nodes)
          if (n.loop == 0 && loop_ir::op_info(n.op).cls == loop_ir::OpClass::Reduce)
            k.line(depth, "const " + std::string(value_type(n.dtype)) + " t" + std::to_string(n.id) + " = pipe_t" +
                              std::to_string(n.id) + ";");
      } else if (k.pipelined && l + 1 == k.loops.size()) {
        // The last row of all has no next row to read.
        std::set<NodeId> b2 = broadcasts, d2 = divisors;
        k.line(depth, "if (i0 + 1 < " + k.extent(kernel.ranges[0]) + ") {");
        k.ranged_loop(static_cast<int>(l), loop_choice[l], broadcasts, divisors, depth + 1, true);
        k.line(depth, "} else {");
        k.ranged_loop(static_cast<int>(l), loop_choice[l], b2, d2, depth + 1);
        k.line(depth, "}");
      } else {
        k.ranged_loop(static_cast<int>(l), loop_choice[l], broadcasts, divisors, depth);
      }
    }
  }
  --depth;
  k.line(depth, "}");
  if (code.uses_ctx) k.line(depth, k.env.next_label + ":;");
  while (depth > 1) k.line(--depth, "}");
  out += "}\n";
  code.text = std::move(out);
  return code;
}

}  // namespace ember::codegen::detail
