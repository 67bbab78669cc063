// C++-only checks of the loop IR API that ember-opt cannot reach: simplify with
// explicit ranges, programs built in memory (add_buffer, print/parse equality, verify), op table.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "loop_ir/loop_ir.h"
#include "../../ir/cpp/check.h"

using namespace ember;
using namespace ember::loop_ir;

static sym::Expr E(const char* text) { return sym::parse_expr(text); }

int main() {
  // Op table.
  CHECK(op_from_name("reduce_sum") == ScalarOp::ReduceSum);
  CHECK(!op_from_name("frobnicate"));
  CHECK(op_info(ScalarOp::Where).arity == 3 && op_info(ScalarOp::Where).cls == OpClass::Ternary);
  for (int i = 0; i <= static_cast<int>(ScalarOp::Store); ++i)
    CHECK(op_from_name(op_info(static_cast<ScalarOp>(i)).name) == static_cast<ScalarOp>(i));

  // simplify with explicit ranges; substitute then simplify, as a view remap composes.
  VarRanges r = {{"i0", E("4")}, {"i1", E("8")}};
  CHECK_EQ_STR(simplify(E("(8*i0 + i1) // 8"), r).str(), "i0");
  CHECK_EQ_STR(simplify(E("(8*i0 + i1) % 8"), r).str(), "i1");
  CHECK_EQ_STR(simplify(E("(8*i0 + i1) // 16"), r).str(), "i0 // 2");
  CHECK_EQ_STR(simplify(E("(8*i0 + i1) % 16"), r).str(), "i1 + 8*(i0 % 2)");
  CHECK_EQ_STR(simplify(E("(8*i0 + i1) // 8"), {}).str(), "i0 + i1 // 8");  // no facts: only the exact part
  CHECK_EQ_STR(simplify(E("t0 % 4"), {}).str(), "t0 % 4");                  // nothing known about t<n>
  CHECK_EQ_STR(simplify(E("t0 % 4"), {{"t0", E("3")}}).str(), "t0");
  CHECK_EQ_STR(simplify(E("(s0*i0 + i1) // s0"), {{"i1", E("s0")}}).str(), "i0");
  CHECK_EQ_STR(simplify(E("(s0*i0 + i1) // s0"), {{"i1", E("s0 + 1")}}).str(), "i0 + i1 // s0");
  sym::Expr flat = sym::substitute(E("8*i0 + i1"), {{"i0", E("x // 8")}, {"i1", E("x % 8")}});
  CHECK_EQ_STR(simplify(flat, {{"x", E("32")}}).str(), "x");  // k*(x // k) + x % k recombines
  CHECK_EQ_STR(simplify(E("8*(x // 8) + x % 4"), {}).str(), "8*(x // 8) + x % 4");  // not a pair

  // A program built in memory prints, parses back equal (by printing), and verifies.
  Program p;
  p.name = "built";
  Buffer in;
  in.kind = Buffer::Kind::Input;
  in.index = 0;
  in.sizes = {4, 8};
  in.strides = {8, 1};
  BufferId b0 = p.add_buffer(in);
  Buffer out = in;
  out.kind = Buffer::Kind::Output;
  out.sizes = {4};
  out.strides = {1};
  BufferId b1 = p.add_buffer(out);
  CHECK(b0 == 0 && b1 == 1 && p.buffers[1].id == 1);
  p.inputs = {b0};
  p.outputs = {b1};
  Kernel k;
  k.name = "k0";
  k.ranges = {4};
  k.loops = {Loop{{8}}, Loop{}};
  Node load;
  load.id = 0;
  load.op = ScalarOp::Load;
  load.buffer = b0;
  load.index = {E("i0"), E("r0")};
  Node sum;
  sum.id = 1;
  sum.op = ScalarOp::ReduceSum;
  sum.operands = {0};
  Node store;
  store.id = 2;
  store.op = ScalarOp::Store;
  store.loop = 1;
  store.buffer = b1;
  store.index = {E("i0")};
  store.operands = {1};
  k.nodes = {load, sum, store};
  p.kernels.push_back(k);
  p.steps.push_back(Step{Step::Kind::Kernel, 0});
  CHECK(verify(p).empty());
  std::string text = print(p);
  CHECK_EQ_STR(print(parse(text)), text);
  CHECK_EQ_STR(print(p.kernels[0]),
               "kernel @k0 [i0 < 4] {\n  loop [r0 < 8] {\n    %t0 = load %b0[i0, r0] : f32\n"
               "    %t1 = reduce_sum %t0 : f32\n  }\n  loop {\n    store %b1[i0] = %t1\n  }\n}\n");

  // Breakages the text form cannot express: steps that run a kernel twice or never, a node
  // whose id is not its position, a node listed out of loop order.
  Program twice = p;
  twice.steps.push_back(Step{Step::Kind::Kernel, 0});
  CHECK(!verify(twice).empty());
  Program never = p;
  never.steps.clear();
  CHECK(!verify(never).empty());
  Program bad_id = p;
  bad_id.kernels[0].nodes[1].id = 7;
  CHECK(!verify(bad_id).empty());
  Program bad_order = p;
  bad_order.kernels[0].nodes[2].loop = 0;
  bad_order.kernels[0].nodes[1].loop = 1;
  CHECK(!verify(bad_order).empty());
  Program bad_inputs = p;
  bad_inputs.inputs = {b1};
  CHECK(!verify(bad_inputs).empty());

  bool parse_threw = false;
  try {
    parse("program @x {\n  retrun ()\n}\n");
  } catch (const ParseError& e) {
    parse_threw = std::string(e.what()).rfind("2:3: ", 0) == 0;
  }
  CHECK(parse_threw);

  return finish();
}
