// Outer reductions: a kernel whose loops reduce along a strided dimension (LayerNorm over the
// channels of an NCHW tensor, a mean over dim 1, GroupNorm's or BatchNorm's statistics over a
// non-innermost dimension) is vectorized along its last outer variable instead of its loops' last
// variables. Each lane is one outer point: its accumulators reduce that point's own elements while
// the loops walk the reduced dimensions as scalar for-loops, a reduction's value is the lane vector
// itself (no horizontal step), and later loops use it lane by lane. Such a kernel ran scalar before:
// its loads had stride 784 along r0, so no loop of it could be a vector loop.
//
// Shape of the code, per point of the outer variables before the last one:
//   for (c < E / kSize) { i_last = c * kSize; <every loop, nodes in VecF lanes> }
//   if (E % kSize) { i_last = E - E % kSize; n = E % kSize; <the same with loads/stores of n lanes> }
// A loop with reductions whose last range is at least kOuterUnrollMin runs kOuterUnroll independent
// accumulators over it (element r goes to accumulator r % 4 in the main part, the rest to the
// first), merged in the fixed tree (0 + 1) + (2 + 3) as inner vector loops do.
//
// Loads and stores strided along the vector variable (an NHWC result of an NCHW LayerNorm) move
// their lanes one element at a time (NodeEnv::strided_lanes); at least one load of a loop with
// ranges must be contiguous along it.
//
// Accuracy: a lane sums its elements sequentially in float, so a sum, product or Welford loop runs
// here only when each accumulator takes at most kOuterMaxPerLane elements (the bound the inner
// vector loops keep per lane without a carry); longer ones stay scalar (double accumulators).
#include "codegen/cpp/emit_internal.h"

namespace ember::codegen::detail {

namespace {

constexpr int kOuterUnroll = 4;
constexpr int64_t kOuterUnrollMin = 8;
constexpr int64_t kOuterMaxPerLane = 128;

bool is_reduction(const Node& n) { return loop_ir::op_info(n.op).cls == loop_ir::OpClass::Reduce; }

bool loop_reduces(const Kernel& k, size_t l) {
  for (const Node& n : k.nodes)
    if (n.loop == static_cast<int>(l) && is_reduction(n)) return true;
  return false;
}

// Accumulators over loop l: kOuterUnroll when its last range is long enough, else one.
int unroll_of(const Kernel& k, size_t l) {
  const std::vector<sym::Expr>& ranges = k.loops[l].ranges;
  if (ranges.empty() || !loop_reduces(k, l) || !ranges.back().is_constant()) return 1;
  return ranges.back().constant() >= kOuterUnrollMin ? kOuterUnroll : 1;
}

std::string suffix(int u) { return u == 0 ? std::string() : "_" + std::to_string(u); }

struct OuterEmitter {
  NodeEnv& env;
  const std::string& var;
  std::string& out;
  const std::function<bool(NodeId)> inside = [](NodeId) { return true; };

  std::string indent(int depth) const { return std::string(2 * static_cast<size_t>(depth), ' '); }
  void line(int depth, const std::string& text) { out += indent(depth) + text + "\n"; }

  void nodes_of(size_t l, Mode mode, int depth) {
    for (const Node& n : env.kernel->nodes)
      if (n.loop == static_cast<int>(l)) emit_vector_node(env, n, var, mode, inside, indent(depth), out);
  }

  void for_each_reduction(size_t l, const std::function<void(const Node&)>& f) {
    for (const Node& n : env.kernel->nodes)
      if (n.loop == static_cast<int>(l) && is_reduction(n)) f(n);
  }

  // One loop of the kernel for the current lanes of `var`.
  void loop(size_t l, Mode mode, int depth) {
    const Kernel& k = *env.kernel;
    const std::vector<sym::Expr>& ranges = k.loops[l].ranges;
    const int unroll = unroll_of(k, l);
    for (int u = 0; u < unroll; ++u) {
      env.acc_suffix = suffix(u);
      for_each_reduction(l, [&](const Node& n) { emit_reduction_init(env, n, true, indent(depth), out); });
    }
    env.acc_suffix.clear();
    const size_t nest = unroll > 1 ? ranges.size() - 1 : ranges.size();
    for (size_t d = 0; d < nest; ++d) {
      const std::string r = "r" + std::to_string(d);
      line(depth + static_cast<int>(d), "for (int64_t " + r + " = 0; " + r + " < " +
                                            c_index(ranges[d], env.symbols) + "; ++" + r + ") {");
    }
    int inner = depth + static_cast<int>(nest);
    if (unroll == 1) {
      nodes_of(l, mode, inner);
    } else {
      const std::string r = "r" + std::to_string(ranges.size() - 1), base = r + "_u";
      const std::string e = std::to_string(ranges.back().constant()), step = std::to_string(unroll);
      // Scoped: a later unrolled loop of the same kernel (LayerNorm twice, Swin's patch embedding)
      // declares its own step variable of the same name.
      line(inner++, "{");
      line(inner, "int64_t " + base + " = 0;");
      line(inner, "for (; " + base + " + " + step + " <= " + e + "; " + base + " += " + step + ") {");
      // With one range every accumulator's count is the step's number: one reciprocal serves all
      // Welford updates of the step (the tail's masked updates divide).
      const bool reciprocal = ranges.size() == 1 && mode == Mode::Vector;
      if (reciprocal) {
        line(inner + 1, "const ev::VecF wf_inv = ev::VecF::broadcast(1.0f / static_cast<float>(" + base + " / " + step +
                            " + 1));");
        env.welford_reciprocal = "wf_inv";
      }
      for (int u = 0; u < unroll; ++u) {
        line(inner + 1, "{");
        line(inner + 2, "const int64_t " + r + " = " + base + (u == 0 ? std::string() : " + " + std::to_string(u)) + ";");
        env.acc_suffix = suffix(u);
        nodes_of(l, mode, inner + 2);
        line(inner + 1, "}");
      }
      env.acc_suffix.clear();
      env.welford_reciprocal.clear();
      line(inner, "}");
      line(inner, "for (; " + base + " < " + e + "; ++" + base + ") {");
      line(inner + 1, "const int64_t " + r + " = " + base + ";");
      nodes_of(l, mode, inner + 1);
      line(inner, "}");
      line(--inner, "}");
    }
    for (size_t d = nest; d-- > 0;) line(depth + static_cast<int>(d), "}");
    for (int width = 1; width < unroll; width *= 2)
      for (int u = 0; u + width < unroll; u += 2 * width)
        for_each_reduction(l, [&](const Node& n) {
          emit_reduction_merge(env, n, suffix(u), suffix(u + width), indent(depth), out);
        });
    // Each lane's value is its own: the accumulator (Welford: its mean or m2 lanes) is the value.
    for_each_reduction(l, [&](const Node& n) {
      std::string acc = "acc_t" + std::to_string(n.id);
      if (n.op == ScalarOp::WelfordMean || n.op == ScalarOp::WelfordM2)
        acc = "wf_t" + std::to_string(welford_leader(env, n)) + (n.op == ScalarOp::WelfordMean ? ".mean" : ".m2");
      line(depth, "const ev::VecF t" + std::to_string(n.id) + " = " + acc + ";");
    });
  }

  void body(Mode mode, int depth) {
    for (size_t l = 0; l < env.kernel->loops.size(); ++l) loop(l, mode, depth);
  }
};

}  // namespace

std::string outer_reduction_refusal(const Program& program, const Kernel& kernel) {
  // Some load of a loop with ranges walks the points contiguously: else the lanes would gather
  // everything one element at a time, no better than scalar code.
  const std::string last = "i" + std::to_string(kernel.ranges.size() - 1);
  bool contiguous = false;
  for (const Node& n : kernel.nodes)
    contiguous = contiguous || (n.op == ScalarOp::Load && !kernel.loops[static_cast<size_t>(n.loop)].ranges.empty() &&
                                linear_coefficient(element_offset(program.buffers.at(n.buffer), n.index), last) ==
                                    std::optional<int64_t>(1));
  if (!contiguous) return "no load of a loop with ranges is contiguous along " + last;
  bool reduces = false;
  for (size_t l = 0; l < kernel.loops.size(); ++l) reduces = reduces || loop_reduces(kernel, l);
  if (!reduces) return "no reduction (a transposing copy: its loops keep their reason)";
  for (size_t l = 0; l < kernel.loops.size(); ++l) {
    int64_t trip = 1;
    for (const sym::Expr& e : kernel.loops[l].ranges) {
      if (!e.is_constant()) return "loop " + std::to_string(l) + " has a symbolic extent";
      trip *= e.constant();
    }
    bool accumulates = false;
    for (const Node& n : kernel.nodes)
      accumulates = accumulates || (n.loop == static_cast<int>(l) && is_reduction(n) && n.op != ScalarOp::ReduceMax &&
                                    n.op != ScalarOp::ReduceMin);
    const int64_t per_lane = (trip + unroll_of(kernel, l) - 1) / unroll_of(kernel, l);
    if (accumulates && per_lane > kOuterMaxPerLane)
      return "loop " + std::to_string(l) + " accumulates " + std::to_string(per_lane) + " elements per lane";
  }
  return "";
}

void emit_outer_reduction(NodeEnv& env, const std::string& var, const std::string& extent, const std::string& pragma,
                          int depth, std::string& out) {
  OuterEmitter o{env, var, out};
  bool reduces = false;
  for (size_t l = 0; l < env.kernel->loops.size(); ++l) reduces = reduces || loop_reduces(*env.kernel, l);
  if (!pragma.empty()) o.line(depth, pragma);
  o.line(depth, "for (int64_t c = 0; c < " + extent + " / ev::VecF::kSize; ++c) {");
  o.line(depth + 1, "const int64_t " + var + " = c * ev::VecF::kSize;");
  o.body(Mode::Vector, depth + 1);
  o.line(depth, "}");
  o.line(depth, "if (" + extent + " % ev::VecF::kSize != 0) {");
  o.line(depth + 1, "const int64_t " + var + " = " + extent + " - " + extent + " % ev::VecF::kSize;");
  o.line(depth + 1, "const int n = static_cast<int>(" + extent + " % ev::VecF::kSize);");
  if (reduces) o.line(depth + 1, "const ev::MaskF tail_mask = ev::MaskF::first(n);");
  o.body(Mode::VectorTail, depth + 1);
  o.line(depth, "}");
}

}  // namespace ember::codegen::detail
