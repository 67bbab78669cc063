// C++ checks of the IR core that Python cannot reach through the text form: the builder's
// contract, Graph::remove_nodes, verifier checks of graphs that text cannot express, the tables,
// and the sym API. Built and run by test_core_cpp.py against build/py311/libember_core.a.
#include <cstdio>
#include <functional>
#include <string>

#include "ir/graph.h"
#include "passes/passes.h"
#include "sym/expr.h"
#include "check.h"

using namespace ember;
using ir::Arg;
using ir::Node;
using ir::Op;

static ir::TensorType t4() {
  ir::TensorType t;
  t.sizes = {4};
  t.strides = {1};
  return t;
}

static bool contains(const std::vector<std::string>& msgs, const std::string& words) {
  for (const auto& m : msgs)
    if (m.find(words) != std::string::npos) return true;
  for (const auto& m : msgs) std::printf("  message: %s\n", m.c_str());
  return false;
}

static void builder() {
  ir::Graph g("f");
  ir::ValueId x = g.add_input(t4(), "L['x']");
  ir::NodeId n0 = g.add_node(Op::Exp, "", {Arg::of_value(x)}, {}, {t4()}, Node::ResultForm::Single);
  ir::ValueId y = g.add_input(t4(), "L['y']");  // found mid-trace
  ir::NodeId n1 = g.add_node(Op::TorchCall, "torch.nn.functional.gelu", {Arg::of_value(g.node(n0).results[0])},
                             {{"approximate", Arg::of_literal(std::string("tanh"))}}, {t4()}, Node::ResultForm::Single);
  ir::NodeId n2 = g.add_node(Op::Split, "", {Arg::of_value(y), Arg::of_literal(int64_t{2})}, {}, {t4(), t4()},
                             Node::ResultForm::Tuple);
  g.set_outputs({g.node(n1).results[0], g.node(n2).results[1]});
  CHECK(x == 0 && y == 2 && n0 == 0 && n1 == 1 && n2 == 2);
  CHECK(g.value(1).producer == 0 && g.value(2).producer == -1 && g.value(5).producer == 2);
  CHECK(ir::verify(g).empty());
  std::string text = ir::print(g);
  CHECK(text ==
        "graph @f(%0: f32[4]{1} cpu \"L['x']\", %2: f32[4]{1} cpu \"L['y']\") {\n"
        "  %1 = exp(%0) : f32[4]{1} cpu\n"
        "  %3 = torch \"torch.nn.functional.gelu\"(%1, approximate=\"tanh\") : f32[4]{1} cpu\n"
        "  %4, %5 = split(%2, 2) : tuple(f32[4]{1} cpu, f32[4]{1} cpu)\n"
        "  return (%3, %5)\n}\n");
  CHECK(ir::print(ir::parse(text)) == text);
  ir::Graph back = ir::parse(text);
  CHECK(back.values().size() == g.values().size());
  for (size_t i = 0; i < g.values().size(); ++i)
    CHECK(back.values()[i].type == g.values()[i].type && back.values()[i].producer == g.values()[i].producer);

  auto add = [&](Op op, std::string target, std::vector<Arg> args, size_t types, Node::ResultForm form) {
    return [&g, op, target, args, types, form] {
      g.add_node(op, target, args, {}, std::vector<ir::TensorType>(types, t4()), form);
    };
  };
  CHECK(throws<std::invalid_argument>(add(Op::Neg, "", {Arg::of_value(0)}, 2, Node::ResultForm::Single), "one result type"));
  CHECK(throws<std::invalid_argument>(add(Op::Neg, "", {Arg::of_value(0)}, 1, Node::ResultForm::None), "no result types"));
  CHECK(throws<std::invalid_argument>(add(Op::TorchCall, "", {}, 1, Node::ResultForm::Single), "qualified name"));
  CHECK(throws<std::invalid_argument>(add(Op::Neg, "torch.neg", {}, 1, Node::ResultForm::Single), "takes no target"));
  CHECK(throws<std::invalid_argument>(add(Op::Cat, "", {Arg::list({Arg::of_value(0), Arg::of_value(99)})}, 1,
                                          Node::ResultForm::Single), "%99 is not a value"));
  CHECK(g.nodes().size() == 3 && g.values().size() == 6);  // refused calls add nothing
}

static void remove_nodes() {
  ir::Graph g = ir::parse(
      "graph @g(%0: f32[4]{1} cpu \"x\") {\n"
      "  %1 = exp(%0) : f32[4]{1} cpu\n"
      "  %2 = neg(%1) : f32[4]{1} cpu\n"
      "  %3 = abs(%0) : f32[4]{1} cpu\n"
      "  return (%3)\n}\n");
  std::string before = ir::print(g);
  CHECK(throws<std::logic_error>([&] { g.remove_nodes({true, false, false}); }, "node 1 uses %1"));
  CHECK(throws<std::logic_error>([&] { g.remove_nodes({false, false, true}); }, "outputs use %3"));
  CHECK(throws<std::invalid_argument>([&] { g.remove_nodes({true}); }, "1 flags for 3 nodes"));
  CHECK(ir::print(g) == before);  // a refused removal changes nothing
  g.remove_nodes({true, true, false});
  CHECK(ir::print(g) == "graph @g(%0: f32[4]{1} cpu \"x\") {\n  %1 = abs(%0) : f32[4]{1} cpu\n  return (%1)\n}\n");
  CHECK(ir::verify(g).empty() && g.value(1).producer == 0 && g.node(0).id == 0);
  CHECK(!passes::dce(g));  // nothing left to remove: reports no change
}

static void verifier_beyond_text() {
  const char* text =
      "graph @g(%0: f32[4]{1} cpu \"x\") {\n"
      "  %1 = exp(%0) : f32[4]{1} cpu\n"
      "  %2 = neg(%1) : f32[4]{1} cpu\n"
      "  return (%2)\n}\n";
  {
    ir::Graph g = ir::parse(text);
    g.mutable_nodes()[1].results = {1};  // node 1 claims node 0's result
    auto msgs = ir::verify(g);
    CHECK(contains(msgs, "node 1 (neg) defines %1 again"));
    CHECK(contains(msgs, "%2 is neither a graph input nor a node's result"));
  }
  {
    ir::Graph g = ir::parse(text);
    g.mutable_nodes().erase(g.mutable_nodes().begin());  // erased without remove_nodes
    auto msgs = ir::verify(g);
    CHECK(contains(msgs, "the node at position 0 has id 1"));
    CHECK(contains(msgs, "argument 0 uses %1, which is never defined"));
    CHECK(contains(msgs, "%1 is neither a graph input nor a node's result"));
  }
  {
    ir::Graph g = ir::parse(text);
    g.mutable_nodes()[0].result_form = Node::ResultForm::None;
    g.mutable_nodes()[1].op = Op::TorchCall;  // no target
    g.mutable_nodes()[0].target = "torch.exp";
    auto msgs = ir::verify(g);
    CHECK(contains(msgs, "node 0 (exp): a core op has no target"));
    CHECK(contains(msgs, "a node without results has 1"));
    CHECK(contains(msgs, "node 1 (torch \"\"): a torch node needs the callable's qualified name"));
  }
  {
    ir::Graph g = ir::parse(text);
    g.mutable_nodes()[1].results.push_back(7);
    CHECK(contains(ir::verify(g), "node 1 (neg) defines %7, which has no value entry"));
    CHECK(contains(ir::verify(g), "a single-result node has 2 results"));
  }
}

static void node_queries() {
  auto node = [](Op op, std::string target) {
    Node n;
    n.op = op;
    n.target = std::move(target);
    return n;
  };
  CHECK(node(Op::Relu, "").callable() == "torch.relu");
  CHECK(node(Op::Gelu, "").callable() == "torch.nn.functional.gelu");
  CHECK(node(Op::TorchCall, "torch.Tensor.add_").callable() == "torch.Tensor.add_");
  CHECK(node(Op::TorchCall, "torch.Tensor.add_").mutates_first_arg());
  CHECK(node(Op::TorchCall, "torch.nn.init.normal_").mutates_first_arg());
  CHECK(node(Op::TorchCall, "torch.Tensor.__iadd__").mutates_first_arg());
  CHECK(node(Op::TorchCall, "torch.Tensor.__setitem__").mutates_first_arg());
  CHECK(node(Op::TorchCall, "operator.iadd").mutates_first_arg());
  CHECK(node(Op::TorchCall, "operator.setitem").mutates_first_arg());
  CHECK(!node(Op::TorchCall, "torch.Tensor.__getitem__").mutates_first_arg());
  CHECK(!node(Op::TorchCall, "torch.Tensor.__add__").mutates_first_arg());
  CHECK(!node(Op::TorchCall, "operator.index").mutates_first_arg());
  CHECK(!node(Op::TorchCall, "torch.relu").mutates_first_arg());
  CHECK(!node(Op::Getitem, "").mutates_first_arg());
  CHECK(ir::op_from_name("layer_norm") == Op::LayerNorm && !ir::op_from_name("nope"));
  CHECK(ir::op_info(Op::Cat).arity == -1 && std::string(ir::op_info(Op::Addmm).torch_target) == "torch.addmm");
}

static void tables() {
  CHECK(std::string(ir::dtype_name(ir::DType::BFloat16)) == "bf16");
  CHECK(std::string(ir::dtype_torch_name(ir::DType::Float8E4M3FN)) == "float8_e4m3fn");
  CHECK(ir::dtype_from_name("c128") == ir::DType::Complex128 && !ir::dtype_from_name("float32"));
  CHECK(ir::dtype_from_torch_name("float32") == ir::DType::Float32 && !ir::dtype_from_torch_name("f32"));
  CHECK(ir::dtype_from_torch_name("long") == ir::DType::Int64 && ir::dtype_from_torch_name("half") == ir::DType::Float16);
  int sizes[] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16, 1, 1};
  for (int i = 0; i <= static_cast<int>(ir::DType::Float8E5M2); ++i) {
    auto dt = static_cast<ir::DType>(i);
    CHECK(ir::dtype_itemsize(dt) == sizes[i]);
    CHECK(ir::dtype_from_name(ir::dtype_name(dt)) == dt && ir::dtype_from_torch_name(ir::dtype_torch_name(dt)) == dt);
  }
  CHECK(ir::device_from_string("cpu")->str() == "cpu" && ir::device_from_string("cpu")->index == -1);
  CHECK(ir::device_from_string("cuda:0")->index == 0 && ir::device_from_string("cuda:12")->str() == "cuda:12");
  CHECK(ir::device_from_string("meta")->type == "meta");
  for (const char* bad : {"", ":0", "cuda:", "cuda:-1", "cuda:01", "cuda:0:1", "CUDA", "0cpu", "cu da", "cuda:x"})
    CHECK(!ir::device_from_string(bad));
  ir::TensorType t;
  t.dtype = ir::DType::Int64;
  t.sizes = {sym::Expr::symbol("s0"), 3};
  t.strides = {3, 1};
  t.device = *ir::device_from_string("cuda:1");
  t.requires_grad = true;
  CHECK(t.str() == "i64[s0, 3]{3, 1} cuda:1 grad");
  ir::TensorType u = t;
  CHECK(u == t);
  u.strides = {sym::Expr(1) * 3, 1};
  CHECK(u == t);
  u.requires_grad = false;
  CHECK(!(u == t));
}

static void sym_api() {
  sym::Expr s0 = sym::Expr::symbol("s0"), s1 = sym::Expr::symbol("s1");
  CHECK((s0 - s0) == 0);
  CHECK((s0 + s1) == (s1 + s0));
  CHECK((s0 * 2 + s0).str() == "3*s0");
  CHECK(floordiv(s0 * 6, 3) == s0 * 2);
  CHECK(mod(s0 * 6 + 3, 3) == 0);
  CHECK(max(s0, s1) == max(s1, s0) && min(sym::Expr(2), sym::Expr(-2)) == -2);
  CHECK(sym::Expr(5) < s0 && !(s0 < s0) && (s0 < s1) != (s1 < s0));
  CHECK((s0 * s1).kind() == sym::ExprKind::Mul && (s0 * s1).operands().size() == 2);
  CHECK(sym::parse_expr((s0 * 2 + floordiv(s1, 4)).str()) == s0 * 2 + floordiv(s1, 4));
  CHECK(throws<std::invalid_argument>([] { sym::Expr::symbol("1x"); }, "not an identifier"));
  CHECK(throws<std::logic_error>([&] { s0.constant(); }, "non-constant"));
  CHECK(throws<std::domain_error>([&] { mod(s0, 0); }, "mod by zero"));
  CHECK(throws<std::overflow_error>([] { sym::Expr(INT64_MAX) + 1; }, "overflow"));
  size_t pos = 4;
  CHECK(sym::parse_expr_prefix("f32[s0 // 2, 8]", pos) == floordiv(s0, 2) && pos == 11);
  try {
    sym::parse_expr("s0 + ");
    CHECK(false);
  } catch (const sym::ExprParseError& e) {
    CHECK(e.offset == 5 && e.reason.find("expected an integer") == 0);
  }
}

int main() {
  builder();
  remove_nodes();
  verifier_beyond_text();
  node_queries();
  tables();
  sym_api();
  return finish();
}
