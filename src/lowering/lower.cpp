// The lowering driver: graph IR -> loop IR (lowering.h states the contract).
//
// Needs a graph that verifies. Walks the nodes in order, giving each to its op family
// (pointwise, reduction, views, data); a family that refuses a node, or a node no family
// claims, becomes an extern call, so lowering never fails on a valid graph. Then binds the
// graph's outputs to buffers the caller may hold. The resulting program is verified before it
// is returned: a lowering bug is an exception here, never a wrong kernel later.
#include <stdexcept>

#include "lowering/lower_internal.h"
#include "lowering/lowering.h"

namespace ember::lowering {

namespace detail {

Lowerer::Lowerer(const ir::Graph& graph, const LowerOptions& options)
    : graph_(graph),
      options_(options),
      lazy_(graph.values().size()),
      output_position_(graph.values().size(), -1),
      materialized_output_(graph.values().size()),
      view_buffer_(graph.values().size()),
      uses_(graph.values().size(), 0) {
  program_.name = graph.name();
  program_.symbols = graph.symbols;
  const std::vector<ir::ValueId>& outs = graph.outputs();
  for (size_t k = 0; k < outs.size(); ++k) {
    if (output_position_.at(outs[k]) < 0) output_position_[outs[k]] = static_cast<int>(k);
    ++uses_[outs[k]];
  }
  std::function<void(const ir::Arg&)> count = [&](const ir::Arg& a) {
    if (a.kind == ir::Arg::Kind::Value) ++uses_.at(a.value);
    for (const ir::Arg& item : a.items) count(item);
  };
  for (const ir::Node& node : graph.nodes()) {
    if (node.mutates_first_arg()) last_mutation_ = node.id;
    for (const ir::Arg& a : node.args) count(a);
    for (const auto& kw : node.kwargs) count(kw.second);
  }
}

const Lazy& Lowerer::lazy(ir::ValueId v) const {
  const std::optional<Lazy>& l = lazy_.at(v);
  if (!l) throw std::logic_error("lowering: value %" + std::to_string(v) + " used before it was lowered");
  return *l;
}

bool Lowerer::mutation_after(ir::NodeId node) const { return last_mutation_ > node; }

BufferId Lowerer::new_result_buffer(ir::ValueId v) {
  const ir::TensorType& t = type(v);
  loop_ir::Buffer b;
  b.kind = is_output(v) ? loop_ir::Buffer::Kind::Output : loop_ir::Buffer::Kind::Temp;
  b.index = is_output(v) ? output_position_.at(v) : -1;
  b.dtype = t.dtype;
  b.sizes = t.sizes;
  b.strides = t.strides;
  b.device = t.device;
  return program_.add_buffer(std::move(b));
}

void Lowerer::bind_realized(ir::ValueId v, BufferId buffer) {
  Lazy l;
  l.buffer = buffer;
  l.layout = buffer_layout(program_.buffers.at(buffer));
  lazy_.at(v) = std::move(l);
}

loop_ir::NodeId Lowerer::load_value(KernelBuilder& kb, ir::ValueId v, const Index& index) {
  const Lazy& l = lazy(v);
  return kb.load(l.buffer, l.to_buffer_index(index));
}

loop_ir::NodeId Lowerer::load_broadcast(KernelBuilder& kb, ir::ValueId v, const Index& out_index,
                                        const std::vector<Expr>& out_sizes) {
  const std::vector<Expr>& sizes = type(v).sizes;
  if (sizes.size() > out_index.size())
    throw std::logic_error("lowering: operand %" + std::to_string(v) + " has a higher rank than its result");
  size_t lead = out_index.size() - sizes.size();
  Index index;
  for (size_t d = 0; d < sizes.size(); ++d) {
    bool broadcast = sizes[d] == Expr(1) && out_sizes.at(lead + d) != Expr(1);
    index.push_back(broadcast ? Expr(0) : out_index[lead + d]);
  }
  return load_value(kb, v, index);
}

void Lowerer::emit_copy(ir::ValueId v, BufferId buffer) {
  KernelBuilder kb(program_, type(v).sizes);
  Index idx = kb.outer_vars();
  kb.store(buffer, idx, load_value(kb, v, idx));
  kb.finish();
}

BufferId Lowerer::materialize(ir::ValueId v, bool for_output) {
  const Lazy& l = lazy(v);
  const loop_ir::Buffer& base = program_.buffers.at(l.buffer);
  const ir::TensorType& t = type(v);
  bool identity = !l.remap && base.sizes == t.sizes && base.strides == t.strides && base.dtype == t.dtype;
  if (identity && !(for_output && base.kind == loop_ir::Buffer::Kind::Temp)) return l.buffer;

  bool base_escapes = base.kind != loop_ir::Buffer::Kind::Temp;  // a Temp lives in the arena
  if (l.layout && layout_matches(*l.layout, t) && base.dtype == t.dtype && (!for_output || base_escapes)) {
    if (std::optional<BufferId> done = view_buffer_.at(v)) return *done;
    loop_ir::Buffer view;
    view.kind = loop_ir::Buffer::Kind::View;
    view.dtype = t.dtype;
    view.sizes = t.sizes;
    view.strides = t.strides;
    view.offset = l.layout->offset;
    view.base = l.buffer;
    view.device = t.device;
    BufferId id = program_.add_buffer(std::move(view));
    view_buffer_.at(v) = id;
    return id;
  }
  // A copy: into an Output buffer for the caller, a Temp for an extern call (which then reads
  // this copy from now on, so later users need no second copy).
  if (for_output) {
    std::optional<BufferId>& done = materialized_output_.at(v);
    if (done) return *done;
    BufferId out = new_result_buffer(v);
    emit_copy(v, out);
    done = out;
    return out;
  }
  loop_ir::Buffer tmp;
  tmp.kind = loop_ir::Buffer::Kind::Temp;
  tmp.dtype = t.dtype;
  tmp.sizes = t.sizes;
  tmp.strides = t.strides;
  tmp.device = t.device;
  BufferId copy = program_.add_buffer(std::move(tmp));
  emit_copy(v, copy);
  bind_realized(v, copy);
  return copy;
}

namespace {

bool types_lowerable(const ir::Graph& g, const ir::Node& node) {
  for (ir::ValueId r : node.results)
    if (!is_lowerable(g.value(r).type.dtype)) return false;
  std::function<bool(const ir::Arg&)> ok = [&](const ir::Arg& a) {
    if (a.kind == ir::Arg::Kind::Value) return is_lowerable(g.value(a.value).type.dtype);
    for (const ir::Arg& item : a.items)
      if (!ok(item)) return false;
    return true;
  };
  for (const ir::Arg& a : node.args)
    if (!ok(a)) return false;
  for (const auto& kw : node.kwargs)
    if (!ok(kw.second)) return false;
  return true;
}

}  // namespace

loop_ir::Program Lowerer::run(std::vector<std::string>* refusals) {
  for (size_t k = 0; k < graph_.inputs().size(); ++k) {
    const ir::GraphInput& in = graph_.inputs()[k];
    const ir::TensorType& t = type(in.value);
    loop_ir::Buffer b;
    b.kind = loop_ir::Buffer::Kind::Input;
    b.index = static_cast<int>(k);
    b.dtype = t.dtype;
    b.sizes = t.sizes;
    b.strides = t.strides;
    b.device = t.device;
    BufferId id = program_.add_buffer(std::move(b));
    program_.inputs.push_back(id);
    bind_realized(in.value, id);
  }

  for (const ir::Node& node : graph_.nodes()) {
    std::string refusal;
    if (node.mutates_first_arg()) {
      refusal = lower_in_place(*this, node);
    } else if (node.op == ir::Op::TorchCall) {
      refusal = "a torch call";
    } else if (lower_linear_bias(*this, node)) {
      continue;
    } else if (!types_lowerable(graph_, node)) {
      refusal = "a complex or float8 dtype";
    } else {
      switch (ir::op_info(node.op).family) {
        case ir::OpFamily::Pointwise: refusal = lower_pointwise(*this, node); break;
        case ir::OpFamily::Reduction: refusal = lower_reduction(*this, node); break;
        case ir::OpFamily::View: refusal = lower_view(*this, node); break;
        case ir::OpFamily::Data:
        case ir::OpFamily::Factory: refusal = lower_data(*this, node); break;
        case ir::OpFamily::Matmul: refusal = "matmuls run through torch"; break;
        case ir::OpFamily::Normalization:
        case ir::OpFamily::Other: refusal = "not a primitive"; break;
      }
    }
    if (refusal.empty()) continue;
    if (refusals) refusals->push_back("%" + std::to_string(node.id) + " " + std::string(node.callable()) + ": " + refusal);
    lower_extern(*this, node);
  }

  for (ir::ValueId v : graph_.outputs()) program_.outputs.push_back(materialize(v, /*for_output=*/true));
  fold_matmul_batch_dims(program_);
  return std::move(program_);
}

}  // namespace detail

loop_ir::Program lower(const ir::Graph& graph) { return lower(graph, nullptr); }

loop_ir::Program lower(const ir::Graph& graph, std::vector<std::string>* refusals, const LowerOptions& options) {
  std::vector<std::string> problems = ir::verify(graph);
  if (!problems.empty()) throw std::invalid_argument("lowering: the graph does not verify: " + problems.front());
  loop_ir::Program program = detail::Lowerer(graph, options).run(refusals);
  problems = loop_ir::verify(program);
  if (!problems.empty())
    throw std::logic_error("lowering produced a program that does not verify: " + problems.front() + "\n" +
                           loop_ir::print(program));
  return program;
}

}  // namespace ember::lowering
