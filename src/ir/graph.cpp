// Graph IR basics: arguments, nodes and the builder (dtypes and tensor types: types.cpp).
//
// The builder keeps the invariants the verifier checks (dense ids in definition order, every
// value with a producer, arguments that name existing values) and throws std::invalid_argument
// on a call that would break one, so a frontend bug surfaces where it happens.
#include <algorithm>
#include <array>
#include <climits>
#include <map>

#include "ir/graph.h"

namespace ember::ir {

namespace {

void check_value_args(const Arg& arg, size_t value_count, std::string_view op) {
  switch (arg.kind) {
    case Arg::Kind::Value:
      if (arg.value < 0 || static_cast<size_t>(arg.value) >= value_count)
        throw std::invalid_argument("add_node(" + std::string(op) + "): argument %" + std::to_string(arg.value) +
                                    " is not a value of this graph");
      return;
    case Arg::Kind::Literal:
      return;
    case Arg::Kind::List:
    case Arg::Kind::Tuple:
      for (const Arg& item : arg.items) check_value_args(item, value_count, op);
      return;
  }
}

}  // namespace

Arg Arg::of_value(ValueId v) {
  Arg a;
  a.kind = Kind::Value;
  a.value = v;
  return a;
}

Arg Arg::of_literal(Literal lit) {
  Arg a;
  a.kind = Kind::Literal;
  a.literal = std::move(lit);
  if (const sym::Expr* e = std::get_if<sym::Expr>(&a.literal); e && e->is_constant()) a.literal = e->constant();
  return a;
}

Arg Arg::of_size(const sym::Expr& e) { return of_literal(e); }

Arg Arg::list(std::vector<Arg> items) {
  Arg a;
  a.kind = Kind::List;
  a.items = std::move(items);
  return a;
}

Arg Arg::tuple(std::vector<Arg> items) {
  Arg a;
  a.kind = Kind::Tuple;
  a.items = std::move(items);
  return a;
}

std::optional<int64_t> int_literal(const Arg& a) {
  if (a.kind != Arg::Kind::Literal) return std::nullopt;
  if (const int64_t* v = std::get_if<int64_t>(&a.literal)) return *v;
  return std::nullopt;
}

std::optional<double> number_literal(const Arg& a) {
  if (a.kind != Arg::Kind::Literal) return std::nullopt;
  if (const int64_t* v = std::get_if<int64_t>(&a.literal)) return static_cast<double>(*v);
  if (const double* v = std::get_if<double>(&a.literal)) return *v;
  if (const bool* v = std::get_if<bool>(&a.literal)) return *v ? 1.0 : 0.0;
  return std::nullopt;
}

std::optional<bool> bool_literal(const Arg& a) {
  if (a.kind != Arg::Kind::Literal) return std::nullopt;
  if (const bool* v = std::get_if<bool>(&a.literal)) return *v;
  return std::nullopt;
}

bool is_none(const Arg& a) {
  return a.kind == Arg::Kind::Literal && std::holds_alternative<NoneLiteral>(a.literal);
}

std::optional<std::vector<int64_t>> int_list(const Arg& a, bool allow_single) {
  if (allow_single) {
    if (auto v = int_literal(a)) return std::vector<int64_t>{*v};
  }
  if (a.kind != Arg::Kind::List && a.kind != Arg::Kind::Tuple) return std::nullopt;
  std::vector<int64_t> out;
  for (const Arg& item : a.items) {
    auto v = int_literal(item);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

std::optional<sym::Expr> size_literal(const Arg& a) {
  if (auto v = int_literal(a)) return sym::Expr(*v);
  if (a.kind != Arg::Kind::Literal) return std::nullopt;
  if (const sym::Expr* e = std::get_if<sym::Expr>(&a.literal)) return *e;
  return std::nullopt;
}

std::optional<std::vector<sym::Expr>> size_list(const Arg& a) {
  if (a.kind != Arg::Kind::List && a.kind != Arg::Kind::Tuple) return std::nullopt;
  std::vector<sym::Expr> out;
  for (const Arg& item : a.items) {
    auto v = size_literal(item);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

std::string_view Node::callable() const {
  if (op == Op::TorchCall) return target;
  return op_info(op).torch_target;
}

bool Node::mutates_first_arg() const {
  // Python's in-place operators, as dunders (`torch.Tensor.__iadd__`) or in module operator.
  static constexpr std::array<std::string_view, 15> kInPlaceOperators = {
      "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "imatmul",
      "iand", "ior",  "ixor", "ilshift",  "irshift",   "setitem", "delitem"};
  auto in_place_operator = [](std::string_view name) {
    return std::find(kInPlaceOperators.begin(), kInPlaceOperators.end(), name) != kInPlaceOperators.end();
  };
  for (const auto& [key, value] : kwargs) {
    // F.relu(x, inplace=True) and friends write their input although their name has no '_'.
    const bool* flag = value.kind == Arg::Kind::Literal ? std::get_if<bool>(&value.literal) : nullptr;
    if (key == "inplace" && flag && *flag) return true;
  }
  std::string_view name = callable();
  size_t dot = name.rfind('.');
  std::string_view last = dot == std::string_view::npos ? name : name.substr(dot + 1);
  std::string_view module = dot == std::string_view::npos ? std::string_view() : name.substr(0, dot);
  bool dunder = last.size() > 4 && last.substr(0, 2) == "__" && last.substr(last.size() - 2) == "__";
  if (dunder) return in_place_operator(last.substr(2, last.size() - 4));
  if (module == "operator") return in_place_operator(last);
  return !last.empty() && last.back() == '_';
}

bool returns_new_tensors(std::string_view callable) {
  // Generic captures whose aten ops return new tensors; core ops are judged by their family.
  static constexpr std::array<std::string_view, 25> kGeneric = {
      "torch.nn.functional.scaled_dot_product_attention",
      // attention's training form and its backward (autograd/training_forms.cpp)
      "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
      "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward", "ember.autograd.cuda_attention",
      "ember.autograd.cuda_attention_backward",
      "torch.nn.functional.max_pool2d", "torch.nn.functional.avg_pool2d", "torch.nn.functional.adaptive_avg_pool2d",
      "torch.conv1d", "torch.conv2d", "torch.conv3d",
      "torch.nn.functional.conv1d", "torch.nn.functional.conv2d", "torch.nn.functional.conv3d",
      "torch.nn.functional.conv_transpose2d", "torch.nn.functional.group_norm",
      "torch.nn.functional.batch_norm", "torch.nn.functional.instance_norm", "torch.baddbmm",
      "torch.topk", "torch.Tensor.topk", "torch.sort", "torch.Tensor.sort", "torch.clone", "torch.Tensor.clone"};
  if (std::find(kGeneric.begin(), kGeneric.end(), callable) != kGeneric.end()) return true;
  static const std::map<std::string_view, Op> by_target = [] {
    std::map<std::string_view, Op> m;
    for (int k = 0; k < static_cast<int>(Op::TorchCall); ++k)
      m.emplace(op_info(static_cast<Op>(k)).torch_target, static_cast<Op>(k));
    return m;
  }();
  auto it = by_target.find(callable);
  if (it == by_target.end()) return false;
  switch (op_info(it->second).family) {
    case OpFamily::View:
    case OpFamily::Other: return false;
    case OpFamily::Data: return it->second != Op::Contiguous;
    case OpFamily::Pointwise:
    case OpFamily::Reduction:
    case OpFamily::Matmul:
    case OpFamily::Factory:
    case OpFamily::Normalization: return true;
  }
  return false;
}

bool draws_random_numbers(std::string_view callable) {
  const size_t dot = callable.rfind('.');
  const std::string_view name = dot == std::string_view::npos ? callable : callable.substr(dot + 1);
  static constexpr std::array<std::string_view, 15> kNamed = {
      "normal",  "normal_",     "bernoulli", "bernoulli_", "multinomial",    "poisson",    "uniform_", "exponential_",
      "geometric_", "cauchy_", "log_normal_", "rrelu",     "rrelu_",         "gumbel_softmax", "philox_seed"};
  return name.find("dropout") != std::string_view::npos || name.rfind("rand", 0) == 0 ||
         std::find(kNamed.begin(), kNamed.end(), name) != kNamed.end();
}

ValueId Graph::add_input(TensorType type, std::string source) {
  ValueId id = static_cast<ValueId>(values_.size());
  values_.push_back(Value{id, std::move(type), -1});
  inputs_.push_back(GraphInput{id, std::move(source)});
  return id;
}

NodeId Graph::add_node(Op op, std::string target, std::vector<Arg> args,
                       std::vector<std::pair<std::string, Arg>> kwargs, std::vector<TensorType> result_types,
                       Node::ResultForm form) {
  std::string_view op_name = op == Op::TorchCall ? std::string_view(target) : op_info(op).name;
  if (op == Op::TorchCall && target.empty())
    throw std::invalid_argument("add_node: a torch node needs the qualified name of its callable");
  if (op != Op::TorchCall && !target.empty())
    throw std::invalid_argument("add_node: core op '" + std::string(op_name) + "' takes no target (got '" + target + "')");
  if (form == Node::ResultForm::Single && result_types.size() != 1)
    throw std::invalid_argument("add_node(" + std::string(op_name) + "): ResultForm::Single needs one result type, got " +
                                std::to_string(result_types.size()));
  if (form == Node::ResultForm::None && !result_types.empty())
    throw std::invalid_argument("add_node(" + std::string(op_name) + "): ResultForm::None takes no result types, got " +
                                std::to_string(result_types.size()));
  for (const Arg& a : args) check_value_args(a, values_.size(), op_name);
  for (const auto& kw : kwargs) check_value_args(kw.second, values_.size(), op_name);

  Node node;
  node.id = static_cast<NodeId>(nodes_.size());
  node.op = op;
  node.target = std::move(target);
  node.args = std::move(args);
  node.kwargs = std::move(kwargs);
  node.result_form = form;
  for (TensorType& type : result_types) {
    ValueId id = static_cast<ValueId>(values_.size());
    values_.push_back(Value{id, std::move(type), node.id});
    node.results.push_back(id);
  }
  nodes_.push_back(std::move(node));
  return nodes_.back().id;
}

void Graph::remove_nodes(const std::vector<bool>& remove) {
  if (remove.size() != nodes_.size())
    throw std::invalid_argument("remove_nodes: " + std::to_string(remove.size()) + " flags for " +
                                std::to_string(nodes_.size()) + " nodes");
  std::vector<bool> value_removed(values_.size(), false);
  for (const Node& n : nodes_)
    if (remove[n.id])
      for (ValueId r : n.results) value_removed.at(r) = true;

  std::vector<ValueId> new_value(values_.size(), -1);
  ValueId next_value = 0;
  for (const Value& v : values_)
    if (!value_removed[v.id]) new_value[v.id] = next_value++;
  std::vector<NodeId> new_node(nodes_.size(), -1);
  NodeId next_node = 0;
  for (const Node& n : nodes_)
    if (!remove[n.id]) new_node[n.id] = next_node++;

  // Check every use first, so a refused call leaves the graph as it was.
  auto check = [&](const Arg& arg, const std::string& user, auto& self) -> void {
    if (arg.kind == Arg::Kind::Value && new_value.at(arg.value) < 0)
      throw std::logic_error("remove_nodes: " + user + " uses %" + std::to_string(arg.value) + ", whose node is removed");
    for (const Arg& item : arg.items) self(item, user, self);
  };
  for (const Node& n : nodes_) {
    if (remove[n.id]) continue;
    for (const Arg& a : n.args) check(a, "node " + std::to_string(n.id), check);
    for (const auto& kw : n.kwargs) check(kw.second, "node " + std::to_string(n.id), check);
  }
  for (ValueId out : outputs_)
    if (new_value.at(out) < 0)
      throw std::logic_error("remove_nodes: the graph's outputs use %" + std::to_string(out) + ", whose node is removed");

  auto renumber = [&](Arg& arg, auto& self) -> void {
    if (arg.kind == Arg::Kind::Value) arg.value = new_value[arg.value];
    for (Arg& item : arg.items) self(item, self);
  };
  std::vector<Node> kept_nodes;
  for (Node& n : nodes_) {
    if (remove[n.id]) continue;
    for (Arg& a : n.args) renumber(a, renumber);
    for (auto& kw : n.kwargs) renumber(kw.second, renumber);
    for (ValueId& r : n.results) r = new_value[r];
    n.id = new_node[n.id];
    kept_nodes.push_back(std::move(n));
  }
  for (ValueId& out : outputs_) out = new_value[out];
  for (GraphInput& in : inputs_) in.value = new_value.at(in.value);

  std::vector<Value> kept_values;
  for (Value& v : values_) {
    if (value_removed[v.id]) continue;
    v.id = new_value[v.id];
    if (v.producer >= 0) v.producer = new_node.at(v.producer);
    kept_values.push_back(std::move(v));
  }
  nodes_ = std::move(kept_nodes);
  values_ = std::move(kept_values);
}

std::vector<bool> written_storage(const Graph& g) {
  std::vector<ValueId> base(g.values().size());
  for (size_t v = 0; v < base.size(); ++v) base[v] = static_cast<ValueId>(v);
  std::vector<bool> root_written(base.size(), false);
  for (const Node& node : g.nodes()) {
    if (node.args.empty()) continue;
    const Arg& first = node.args.front();
    if ((first.kind == Arg::Kind::List || first.kind == Arg::Kind::Tuple) && node.mutates_first_arg()) {
      // `_foreach_add_(xs, ...)` writes every x; its results, when it has them, are the xs.
      for (size_t i = 0; i < first.items.size(); ++i) {
        if (first.items[i].kind != Arg::Kind::Value) continue;
        const ValueId root = base[static_cast<size_t>(first.items[i].value)];
        root_written[static_cast<size_t>(root)] = true;
        if (node.results.size() == first.items.size()) base[static_cast<size_t>(node.results[i])] = root;
      }
    }
    if (first.kind != Arg::Kind::Value) continue;
    const ValueId x = first.value;
    if (!returns_new_tensors(node.callable()))
      for (ValueId r : node.results) base[static_cast<size_t>(r)] = base[static_cast<size_t>(x)];
    if (node.mutates_first_arg()) root_written[static_cast<size_t>(base[static_cast<size_t>(x)])] = true;
  }
  std::vector<bool> written(base.size(), false);
  for (size_t v = 0; v < base.size(); ++v) written[v] = root_written[static_cast<size_t>(base[v])];
  return written;
}

}  // namespace ember::ir
