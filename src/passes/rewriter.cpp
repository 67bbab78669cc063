// The Rewriter and the type helpers of the rewriting passes (rewriter.h).
#include "passes/rewriter.h"

#include <stdexcept>

#include "shapes/shape_rules.h"

namespace ember::passes {

using ir::Arg;
using ir::DType;
using ir::ValueId;

Rewriter::Rewriter(const ir::Graph& source) : source_(source), map_(source.values().size(), -1) {
  for (const ir::GraphInput& in : source.inputs()) {
    map_.at(in.value) = static_cast<ValueId>(types_.size());
    types_.push_back(source.value(in.value).type);
  }
}

ValueId Rewriter::mapped(ValueId source_value) const {
  ValueId v = map_.at(source_value);
  if (v < 0) throw std::logic_error("rewriter: %" + std::to_string(source_value) + " is used before it is defined");
  return v;
}

Arg Rewriter::map(const Arg& a) const {
  Arg out = a;
  if (a.kind == Arg::Kind::Value) out.value = mapped(a.value);
  for (Arg& item : out.items) item = map(item);
  return out;
}

std::vector<ValueId> Rewriter::push(ir::Op op, std::string target, std::vector<Arg> args, Kwargs kwargs,
                                    std::vector<ir::TensorType> types, ir::Node::ResultForm form) {
  Pending p{op, std::move(target), std::move(args), std::move(kwargs), form, types_.size(), types.size()};
  std::vector<ValueId> results;
  for (ir::TensorType& t : types) {
    results.push_back(static_cast<ValueId>(types_.size()));
    types_.push_back(std::move(t));
  }
  nodes_.push_back(std::move(p));
  return results;
}

void Rewriter::copy(const ir::Node& node) {
  std::vector<Arg> args;
  for (const Arg& a : node.args) args.push_back(map(a));
  Kwargs kwargs;
  for (const auto& kw : node.kwargs) kwargs.emplace_back(kw.first, map(kw.second));
  std::vector<ir::TensorType> types;
  for (ValueId r : node.results) types.push_back(source_.value(r).type);
  std::vector<ValueId> results = push(node.op, node.target, std::move(args), std::move(kwargs), std::move(types),
                                      node.result_form);
  for (size_t i = 0; i < results.size(); ++i) map_.at(node.results[i]) = results[i];
}

void Rewriter::bind(ValueId source_value, ValueId v) { map_.at(source_value) = v; }

// Decompose writes each emitted node's dtype, sizes and requires_grad by hand, and takes the strides
// from the op's shape rule where it answers with the same dtype and sizes (a convert of a permuted
// tensor keeps its layout, as torch's .to() does), so the graph it leaves agrees with the rules the
// verifier checks it against (shapes/check_types.h).
void Rewriter::take_rule_strides(ir::Op op, const std::vector<Arg>& args, const Kwargs& kwargs,
                                 std::vector<ir::TensorType>& types) const {
  auto type_of = [this](ValueId v) -> const ir::TensorType& { return types_.at(v); };
  auto ruled = shapes::infer_result_types(op, shapes::operands_of(args, type_of), shapes::operands_of(kwargs, type_of),
                                          /*grad_enabled=*/true, ir::DType::Float32);
  if (!ruled || ruled->size() != types.size()) return;
  for (size_t i = 0; i < types.size(); ++i)
    if ((*ruled)[i].dtype == types[i].dtype && (*ruled)[i].sizes == types[i].sizes) types[i].strides = (*ruled)[i].strides;
}

ValueId Rewriter::emit(ir::Op op, std::vector<Arg> args, Kwargs kwargs, ir::TensorType type) {
  std::vector<ir::TensorType> types{std::move(type)};
  take_rule_strides(op, args, kwargs, types);
  return push(op, "", std::move(args), std::move(kwargs), std::move(types), ir::Node::ResultForm::Single)[0];
}

ValueId Rewriter::emit_torch(std::string target, std::vector<Arg> args, Kwargs kwargs, ir::TensorType type) {
  return push(ir::Op::TorchCall, std::move(target), std::move(args), std::move(kwargs), {std::move(type)},
              ir::Node::ResultForm::Single)[0];
}

std::vector<ValueId> Rewriter::emit_tuple(ir::Op op, std::vector<Arg> args, Kwargs kwargs,
                                          std::vector<ir::TensorType> types) {
  take_rule_strides(op, args, kwargs, types);
  return push(op, "", std::move(args), std::move(kwargs), std::move(types), ir::Node::ResultForm::Tuple);
}

std::vector<ValueId> Rewriter::emit_torch_tuple(std::string target, std::vector<Arg> args, Kwargs kwargs,
                                                std::vector<ir::TensorType> types) {
  return push(ir::Op::TorchCall, std::move(target), std::move(args), std::move(kwargs), std::move(types),
              ir::Node::ResultForm::Tuple);
}

void Rewriter::rollback(Mark m) {
  nodes_.resize(m.nodes);
  types_.resize(m.values);
  for (ValueId& v : map_)
    if (v >= static_cast<ValueId>(m.values)) v = -1;
}

ir::Graph Rewriter::finish() {
  ir::Graph g(source_.name());
  g.symbols = source_.symbols;
  for (const ir::GraphInput& in : source_.inputs()) g.add_input(source_.value(in.value).type, in.source);
  for (Pending& p : nodes_) {
    std::vector<ir::TensorType> types(types_.begin() + p.first_result, types_.begin() + p.first_result + p.result_count);
    g.add_node(p.op, std::move(p.target), std::move(p.args), std::move(p.kwargs), std::move(types), p.form);
  }
  std::vector<ValueId> outputs;
  for (ValueId out : source_.outputs()) outputs.push_back(mapped(out));
  g.set_outputs(std::move(outputs));
  return g;
}

// --- Types -----------------------------------------------------------------------------------

bool is_contiguous(const ir::TensorType& t) { return ir::row_major(t.sizes, t.strides); }

std::vector<int64_t> const_sizes(const ir::TensorType& t) {
  std::vector<int64_t> out;
  for (const sym::Expr& s : t.sizes) {
    if (!s.is_constant()) refuse();
    out.push_back(s.constant());
  }
  return out;
}

int64_t numel(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

std::vector<sym::Expr> to_exprs(const std::vector<int64_t>& xs) { return {xs.begin(), xs.end()}; }

ir::TensorType make_type(DType dt, std::vector<sym::Expr> sizes, const ir::Device& device, bool requires_grad) {
  ir::TensorType t;
  t.dtype = dt;
  t.strides = ir::contiguous_strides(sizes);
  t.sizes = std::move(sizes);
  t.device = device;
  t.requires_grad = requires_grad && ir::is_differentiable(dt);
  return t;
}

std::vector<sym::Expr> broadcast(const std::vector<sym::Expr>& a, const std::vector<sym::Expr>& b) {
  auto out = ir::broadcast_shapes(a, b);
  if (!out) refuse();
  return *out;
}

}  // namespace ember::passes
