// Ember's graph IR: a straight-line program of tensor operations captured from one Python frame.
//
// Semantics. A Graph has typed inputs (tensors read from the frame through a source such as
// `L['self'].linear.weight`), a list of nodes in execution order, and outputs. Each node applies
// one op to arguments and defines zero or more result values. An op is either a core op of
// ops.def, whose semantics Ember knows (and later lowers), or a `torch` node that names the torch
// callable it applies: every torch callable can be captured, and runs through torch until Ember
// has a lowering for it.
//
// Arguments mirror a torch call: positional arguments and keyword arguments, each a value
// reference, a literal (None, bool, int, float, string, dtype, device, slice, ellipsis) or a
// list/tuple of arguments. Nodes run in order; a node whose target ends in `_` (or that an op
// declares mutating) writes its first tensor argument in place, and the graph keeps that order.
//
// Every value has a TensorType: dtype, symbolic sizes and strides (src/sym), device and
// requires_grad. Value names are their ids (`%0`, `%1`, ...): stable, so printing is
// deterministic.
//
// Text form (print.cpp / parse.cpp; docs/ir.md has the grammar):
//   graph @forward(%0: f32[4, 8]{8, 1} cpu "L['x']", %1: f32[8, 8]{8, 1} cpu grad "L['self'].w") {
//     %2 = matmul(%0, %1) : f32[4, 8]{8, 1} cpu grad
//     %3 = torch "torch.nn.functional.gelu"(%2, approximate="tanh") : f32[4, 8]{8, 1} cpu grad
//     return (%3)
//   }
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ir/types.h"
#include "sym/expr.h"
#include "sym/symbols.h"

namespace ember::ir {

enum class Op : uint16_t {
#define EMBER_OP(Enum, name, target, arity, family) Enum,
#include "ir/ops.def"
#undef EMBER_OP
  TorchCall,  // generic capture: any torch callable, named by Node::target
};

enum class OpFamily : uint8_t { Pointwise, Reduction, View, Matmul, Factory, Normalization, Data, Other };

struct OpInfo {
  const char* name;          // text-form name
  const char* torch_target;  // callable the eager executor applies ("" for TorchCall)
  int arity;                 // leading tensor operands; -1 variadic
  OpFamily family;
};
const OpInfo& op_info(Op op);
std::optional<Op> op_from_name(std::string_view name);

using ValueId = int32_t;
using NodeId = int32_t;

struct Slice {
  std::optional<int64_t> start, stop, step;
};
struct Ellipsis {};
struct NoneLiteral {};

// A constant argument. Strings also carry enum-like torch arguments ("tanh", "mean"). A sym::Expr
// is an integer that depends on the graph's shape symbols (`x.view(B, T, C)` with T dynamic, text
// `sym(s0)`): it is never a constant (constants are int64_t), and its value is known per call once
// the symbols are bound (docs/dynamic-shapes.md).
using Literal = std::variant<NoneLiteral, bool, int64_t, double, std::string, DType, Device, Slice, Ellipsis, sym::Expr>;

struct Arg {
  enum class Kind : uint8_t { Value, Literal, List, Tuple };
  Kind kind = Kind::Literal;
  ValueId value = -1;
  Literal literal;
  std::vector<Arg> items;

  static Arg of_value(ValueId v);
  static Arg of_literal(Literal lit);  // a constant sym::Expr becomes its int64_t
  static Arg of_size(const sym::Expr& e);  // an int literal, symbolic or not
  static Arg list(std::vector<Arg> items);
  static Arg tuple(std::vector<Arg> items);
};

// Literal readers: nullopt when the argument is not a literal of that kind.
std::optional<int64_t> int_literal(const Arg& a);
std::optional<double> number_literal(const Arg& a);  // int, float or bool
std::optional<bool> bool_literal(const Arg& a);
bool is_none(const Arg& a);
// A list/tuple of int literals (or a single int when `allow_single`).
std::optional<std::vector<int64_t>> int_list(const Arg& a, bool allow_single = false);
// A size: an int literal, constant or symbolic; and a list/tuple of them.
std::optional<sym::Expr> size_literal(const Arg& a);
std::optional<std::vector<sym::Expr>> size_list(const Arg& a);

struct Value {
  ValueId id = -1;
  TensorType type;
  NodeId producer = -1;  // -1 for graph inputs
};

struct Node {
  NodeId id = -1;
  Op op = Op::TorchCall;
  std::string target;  // TorchCall only: qualified callable name, e.g. "torch.nn.functional.gelu"
  std::vector<Arg> args;
  std::vector<std::pair<std::string, Arg>> kwargs;
  std::vector<ValueId> results;
  // How results come back from the callable: one tensor, or a tuple/list of `results.size()`.
  enum class ResultForm : uint8_t { Single, Tuple, List, None } result_form = ResultForm::Single;

  // The callable's qualified name: Node::target for TorchCall, the op table's otherwise.
  std::string_view callable() const;
  // In-place op: the callable's last component ends in '_' (`add_`, not a dunder such as
  // `__getitem__`), or is an in-place operator (`__iadd__`, `__setitem__`, `operator.iadd`, ...),
  // or the call passes `inplace=True`.
  bool mutates_first_arg() const;
};

// Whether torch's `callable` always returns tensors with storage of their own, never an argument or
// a view of one (its aten schema has no alias annotation on the results): the op table's functional
// ops (every family but View, and not `contiguous` or `dropout`, which may return their input) and a
// few generic callables named in graph.cpp. Unknown callables: false (they may alias). An in-place
// call (Node::mutates_first_arg) returns its argument whatever this says. The memory planner frees an
// extern call's temporary arguments after it only when this holds.
bool returns_new_tensors(std::string_view callable);

// Whether torch's `callable` draws random numbers, by its last dotted component: the dropout family,
// rand* (rand, randn, randint, randperm, their _like forms, random_), the distributions and their
// in-place samplers (normal, bernoulli, multinomial, poisson, uniform_, exponential_, ...), rrelu,
// gumbel_softmax and ember.rng.philox_seed. By name only: a dropout in eval mode or attention with
// dropout are the callers' to tell from the arguments.
bool draws_random_numbers(std::string_view callable);

struct GraphInput {
  ValueId value = -1;
  std::string source;  // where the frame reads it, e.g. "L['self'].linear.weight"
};

class Graph {
 public:
  explicit Graph(std::string name = "graph") : name_(std::move(name)) {}

  // Builder.
  ValueId add_input(TensorType type, std::string source);
  // Appends a node and returns its id; its results get fresh values of `result_types`.
  NodeId add_node(Op op, std::string target, std::vector<Arg> args,
                  std::vector<std::pair<std::string, Arg>> kwargs, std::vector<TensorType> result_types,
                  Node::ResultForm form);
  void set_outputs(std::vector<ValueId> outputs) { outputs_ = std::move(outputs); }
  // The shape symbols the types mention (sym/symbols.h); empty for a static graph.
  sym::Symbols symbols;
  // Marks every value as not requiring grad: the graph runs under no_grad (autograd's forward and
  // backward halves, which torch's autograd.Function runs).
  void clear_requires_grad() {
    for (Value& v : values_) v.type.requires_grad = false;
  }
  // Removes the nodes whose `remove[id]` is true, with their result values, then renumbers the
  // remaining values and nodes densely, keeping their order. Throws std::logic_error if a kept
  // node or an output uses a removed value.
  void remove_nodes(const std::vector<bool>& remove);

  // Access.
  const std::string& name() const { return name_; }
  const std::vector<GraphInput>& inputs() const { return inputs_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& mutable_nodes() { return nodes_; }
  // Values' types may be rewritten in place (the trace specializing shape symbols); ids may not.
  std::vector<Value>& mutable_values() { return values_; }
  const std::vector<Value>& values() const { return values_; }
  const Value& value(ValueId id) const { return values_.at(id); }
  const Node& node(NodeId id) const { return nodes_.at(id); }
  const std::vector<ValueId>& outputs() const { return outputs_; }

 private:
  std::string name_;
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<GraphInput> inputs_;
  std::vector<ValueId> outputs_;
  friend class GraphParser;  // builds graphs exactly as written, malformed ones included, for verify()
};

// Text form. print() then parse() gives back an equal graph; parse() throws ParseError with a
// line:column on malformed text.
std::string print(const Graph& graph);
struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
Graph parse(std::string_view text);

// Structural checks: ids dense and in order, every use defined before it, operand counts match
// the op table, results typed, outputs defined. Returns one message per problem (empty: valid).
std::vector<std::string> verify(const Graph& graph);

// Per value of `g`: whether a node writes its storage in place (`z[:, 0] = v` or `z.add_(1)` on it or on
// a view of it, `torch._foreach_add_([z, ...], ...)`; Node::mutates_first_arg; not what a torch call
// writes past its first argument, as batch_norm's running statistics in training). A node that may
// return a view (a View-family op, contiguous, a torch call not known to return new tensors:
// `m.diagonal()`) shares its first argument's storage.
std::vector<bool> written_storage(const Graph& g);

}  // namespace ember::ir
