// KernelBuilder and lowering's dtype and literal helpers. The builder enforces the loop IR's
// dtype rules at the point nodes are made (f16/bf16 loads yield f32, binary operands share one
// dtype, stores take their buffer's computation dtype), so the op-family files cannot forget a
// cast.
#include <cmath>
#include <stdexcept>

#include "lowering/lower_internal.h"

namespace ember::lowering::detail {

using loop_ir::Node;
using loop_ir::NodeId;
using loop_ir::Scalar;

bool is_lowerable(DType dt) { return dt == DType::Bool || ir::is_integral(dt) || ir::is_floating(dt); }

DType compute_dtype(DType dt) {
  return dt == DType::Float16 || dt == DType::BFloat16 ? DType::Float32 : dt;
}

std::optional<Scalar> scalar_of(const ir::Literal& lit, DType dt) {
  std::optional<double> as_double;
  std::optional<int64_t> as_int;
  if (const bool* b = std::get_if<bool>(&lit)) {
    as_int = *b ? 1 : 0;
    as_double = *b ? 1.0 : 0.0;
  } else if (const int64_t* i = std::get_if<int64_t>(&lit)) {
    as_int = *i;
    as_double = static_cast<double>(*i);
  } else if (const double* d = std::get_if<double>(&lit)) {
    as_double = *d;
    if (std::isfinite(*d) && std::trunc(*d) == *d && std::fabs(*d) < 9.0e18) as_int = static_cast<int64_t>(*d);
  } else {
    return std::nullopt;
  }
  if (dt == DType::Bool) return Scalar{*as_double != 0.0};
  if (ir::is_integral(dt)) {
    if (!as_int) return std::nullopt;
    return Scalar{*as_int};
  }
  if (ir::is_floating(dt)) {
    if (std::get_if<int64_t>(&lit)) return Scalar{static_cast<double>(*as_int)};
    return Scalar{*as_double};
  }
  return std::nullopt;
}

KernelBuilder::KernelBuilder(loop_ir::Program& program, std::vector<Expr> ranges) : program_(program) {
  kernel_.name = "k" + std::to_string(program.kernels.size());
  kernel_.ranges = std::move(ranges);
  kernel_.loops.push_back(loop_ir::Loop{});
}

Index KernelBuilder::outer_vars() const {
  Index vars;
  for (size_t k = 0; k < kernel_.ranges.size(); ++k) vars.push_back(Expr::symbol("i" + std::to_string(k)));
  return vars;
}

Index KernelBuilder::loop_vars() const {
  Index vars;
  for (size_t k = 0; k < kernel_.loops.back().ranges.size(); ++k) vars.push_back(Expr::symbol("r" + std::to_string(k)));
  return vars;
}

void KernelBuilder::add_loop(std::vector<Expr> ranges) {
  // The builder opens with an empty loop; a kernel whose first real loop has ranges reuses it
  // when nothing was put in it yet.
  if (kernel_.nodes.empty() && kernel_.pointwise()) {
    kernel_.loops[0].ranges = std::move(ranges);
    return;
  }
  kernel_.loops.push_back(loop_ir::Loop{std::move(ranges)});
}

DType KernelBuilder::dtype(NodeId n) const { return kernel_.nodes.at(n).dtype; }

NodeId KernelBuilder::add(Node node) {
  node.id = static_cast<NodeId>(kernel_.nodes.size());
  node.loop = static_cast<int>(kernel_.loops.size()) - 1;
  kernel_.nodes.push_back(std::move(node));
  return kernel_.nodes.back().id;
}

NodeId KernelBuilder::load(BufferId buffer, Index index) {
  Node n;
  n.op = ScalarOp::Load;
  n.buffer = buffer;
  n.index = std::move(index);
  n.dtype = compute_dtype(program_.buffers.at(buffer).dtype);
  return add(std::move(n));
}

NodeId KernelBuilder::masked_load(BufferId buffer, Index index, NodeId mask, Scalar other) {
  Node n;
  n.op = ScalarOp::Load;
  n.buffer = buffer;
  n.index = std::move(index);
  n.dtype = compute_dtype(program_.buffers.at(buffer).dtype);
  n.operands = {mask};
  n.constant = other;
  return add(std::move(n));
}

NodeId KernelBuilder::constant(Scalar value, DType dt) {
  Node n;
  n.op = ScalarOp::Constant;
  n.dtype = compute_dtype(dt);
  n.constant = value;
  return add(std::move(n));
}

NodeId KernelBuilder::index_value(Expr e) {
  Node n;
  n.op = ScalarOp::Index;
  n.dtype = DType::Int64;
  n.index = {std::move(e)};
  return add(std::move(n));
}

NodeId KernelBuilder::philox_rand(NodeId seed, NodeId counter) {
  Node n;
  n.op = ScalarOp::PhiloxRand;
  n.dtype = DType::Float32;
  n.operands = {cast(seed, DType::Int64), cast(counter, DType::Int64)};
  return add(std::move(n));
}

NodeId KernelBuilder::cast(NodeId x, DType dt) {
  dt = compute_dtype(dt);
  if (dtype(x) == dt) return x;
  Node n;
  n.op = ScalarOp::Cast;
  n.dtype = dt;
  n.operands = {x};
  return add(std::move(n));
}

NodeId KernelBuilder::unary(ScalarOp op, NodeId x) {
  Node n;
  n.op = op;
  n.dtype = loop_ir::op_info(op).cls == loop_ir::OpClass::Compare ? DType::Bool : dtype(x);
  n.operands = {x};
  return add(std::move(n));
}

NodeId KernelBuilder::binary(ScalarOp op, NodeId a, NodeId b, DType dt) {
  dt = compute_dtype(dt);
  a = cast(a, dt);
  b = cast(b, dt);
  Node n;
  n.op = op;
  n.dtype = loop_ir::op_info(op).cls == loop_ir::OpClass::Compare ? DType::Bool : dt;
  n.operands = {a, b};
  return add(std::move(n));
}

NodeId KernelBuilder::where(NodeId cond, NodeId a, NodeId b, DType dt) {
  dt = compute_dtype(dt);
  cond = cast(cond, DType::Bool);
  a = cast(a, dt);
  b = cast(b, dt);
  Node n;
  n.op = ScalarOp::Where;
  n.dtype = dt;
  n.operands = {cond, a, b};
  return add(std::move(n));
}

NodeId KernelBuilder::reduce(ScalarOp op, NodeId x) {
  Node n;
  n.op = op;
  n.dtype = dtype(x);
  n.operands = {x};
  return add(std::move(n));
}

NodeId KernelBuilder::check_index(NodeId x, Expr bound) {
  x = cast(x, DType::Int64);
  Node n;
  n.op = ScalarOp::CheckIndex;
  n.dtype = DType::Int64;
  n.operands = {x};
  n.bound = std::move(bound);
  return add(std::move(n));
}

void KernelBuilder::store(BufferId buffer, Index index, NodeId value) {
  value = cast(value, program_.buffers.at(buffer).dtype);
  Node n;
  n.op = ScalarOp::Store;
  n.dtype = dtype(value);
  n.buffer = buffer;
  n.index = std::move(index);
  n.operands = {value};
  add(std::move(n));
}

void KernelBuilder::accumulate(BufferId buffer, Index index, NodeId value) {
  store(buffer, std::move(index), value);
  kernel_.nodes.back().accumulate = true;  // the store just added
}

void KernelBuilder::finish() {
  program_.steps.push_back(loop_ir::Step{loop_ir::Step::Kind::Kernel, static_cast<int>(program_.kernels.size())});
  program_.kernels.push_back(std::move(kernel_));
}

}  // namespace ember::lowering::detail
