// The derivative table over the op table, the rule context, and the helpers rules share (rules.h).
#include <iterator>
#include <stdexcept>

#include "autograd/rules.h"

namespace ember::autograd {

namespace {

constexpr Op kTableOrder[] = {
#define EMBER_VJP_RULE(op, function) Op::op,
#define EMBER_VJP_KIND(op, kind) Op::op,
#include "autograd/vjp.def"
#undef EMBER_VJP_RULE
#undef EMBER_VJP_KIND
};

constexpr bool table_in_op_order() {
  for (size_t i = 0; i < std::size(kTableOrder); ++i)
    if (kTableOrder[i] != static_cast<Op>(i)) return false;
  return true;
}
static_assert(std::size(kTableOrder) == static_cast<size_t>(Op::TorchCall) && table_in_op_order(),
              "autograd/vjp.def must list every op of ir/ops.def, in its order");

const VjpEntry kTable[] = {
#define EMBER_VJP_RULE(op, function) {VjpEntry::Kind::Rule, rules::function},
#define EMBER_VJP_KIND(op, kind) {VjpEntry::Kind::kind, nullptr},
#include "autograd/vjp.def"
#undef EMBER_VJP_RULE
#undef EMBER_VJP_KIND
};

}  // namespace

const VjpEntry& vjp_entry(Op op) {
  if (op == Op::TorchCall) throw std::logic_error("vjp_entry: a torch call has no table entry (torch_call_rule)");
  return kTable[static_cast<size_t>(op)];
}

bool differentiates_whole(const ir::Node& node) {
  if (node.op == Op::TorchCall) return torch_call_rule(node.target) != nullptr;
  return vjp_entry(node.op).kind != VjpEntry::Kind::Decomposed;
}

// --- The rule context ------------------------------------------------------------------------

VjpCtx::VjpCtx(Rewriter& rw, const ir::Node& node, std::vector<std::optional<ValueId>> grads_out)
    : rw(rw), node(node), bound(passes::bind(node)), grads_out_(std::move(grads_out)) {}

const Arg& VjpCtx::pos(size_t i) const {
  if (i >= node.args.size()) passes::refuse();
  return node.args[i];
}

const Arg* argument(const ir::Node& node, size_t position, std::string_view name) {
  for (const auto& [key, value] : node.kwargs)
    if (key == name) return &value;
  return position < node.args.size() ? &node.args[position] : nullptr;
}

const Arg& VjpCtx::arg(std::string_view name) const {
  if (!bound) passes::refuse();
  return (*bound)[name];
}

int64_t VjpCtx::int_arg(std::string_view name) const {
  auto v = passes::int_literal(arg(name));
  if (!v) passes::refuse();
  return *v;
}

double VjpCtx::number_arg(std::string_view name) const {
  auto v = passes::number_literal(arg(name));
  if (!v) passes::refuse();
  return *v;
}

bool VjpCtx::bool_arg(std::string_view name) const {
  auto v = passes::bool_literal(arg(name));
  if (!v) passes::refuse();
  return *v;
}

ValueId VjpCtx::in(const Arg& a) const {
  if (a.kind != Arg::Kind::Value) passes::refuse();
  return rw.mapped(a.value);
}

ValueId VjpCtx::out(size_t i) const { return rw.mapped(node.results.at(i)); }

ValueId VjpCtx::grad_or_zeros(size_t i) {
  if (grads_out_.at(i)) return *grads_out_[i];
  return zeros_like(rw, out(i));
}

bool VjpCtx::needs(const Arg& a) const {
  return a.kind == Arg::Kind::Value && rw.source().value(a.value).type.requires_grad;
}

void VjpCtx::give(const Arg& a, ValueId g) {
  if (!needs(a)) return;
  const ir::TensorType& t = rw.source().value(a.value).type;
  g = sum_to_size(rw, g, t.sizes);
  given_.push_back({a.value, convert(rw, g, t.dtype)});
}

void VjpCtx::give_slice(const Arg& a, ValueId g, int64_t dim, int64_t start) {
  if (!needs(a)) return;
  given_.push_back({a.value, convert(rw, g, rw.source().value(a.value).type.dtype), dim, start});
}

// --- Shared helpers --------------------------------------------------------------------------

Sizes sizes_of(Rewriter& rw, ValueId v) { return rw.type(v).sizes; }

int64_t rank_of(Rewriter& rw, ValueId v) { return static_cast<int64_t>(rw.type(v).sizes.size()); }

sym::Expr count(const Sizes& sizes, const std::vector<int64_t>& dims) {
  sym::Expr n = 1;
  for (int64_t d : dims) n = n * sizes.at(static_cast<size_t>(d));
  return n;
}

ValueId sum_to_size(Rewriter& rw, ValueId g, const Sizes& sizes) {
  Sizes have = sizes_of(rw, g);
  if (have == sizes) return g;
  if (have.size() < sizes.size()) passes::refuse();
  size_t lead = have.size() - sizes.size();
  std::vector<int64_t> dims;
  for (size_t d = 0; d < lead; ++d) dims.push_back(static_cast<int64_t>(d));
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == have[lead + d]) continue;
    if (sizes[d] != sym::Expr(1)) passes::refuse();  // not a broadcast of `sizes` (or not provably one)
    dims.push_back(static_cast<int64_t>(lead + d));
  }
  DType dt = rw.type(g).dtype;
  // Half-precision gradients accumulate in float32, as torch's sum does.
  if (!dims.empty()) g = convert(rw, reduce(rw, Op::Sum, convert(rw, g, opmath(dt)), dims, true), dt);
  return reshape_symbolic(rw, g, sizes);
}

ValueId unreduce(Rewriter& rw, ValueId x, const std::vector<int64_t>& dims, bool keepdim, const Sizes& sizes) {
  if (!keepdim) {
    Sizes kept = sizes;
    for (int64_t d : dims) kept.at(static_cast<size_t>(d)) = 1;
    x = reshape_symbolic(rw, x, kept);
  }
  return expand_symbolic(rw, x, sizes);
}

const char* fused_attention_callable(const ir::Device& device) {
  if (device.type == "cpu") return "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu";
  if (device.type == "cuda") return "ember.autograd.cuda_attention";
  return nullptr;
}

namespace {

// `t` (its sizes set) made dense with `order`'s dims outermost first.
void dense_in_order(ir::TensorType& t, const std::vector<size_t>& order) {
  sym::Expr step = int64_t{1};
  for (size_t k = order.size(); k-- > 0;) {
    t.strides[order[k]] = step;
    step = step * t.sizes[order[k]];
  }
}

}  // namespace

ir::TensorType fused_attention_result_type(AttentionResult which, DType dt, const Sizes& sizes, const ir::TensorType& like) {
  ir::TensorType t = passes::make_type(dt, sizes, like.device, false);
  const std::string& device = like.device.type;
  if (device != "cpu" && device != "cuda") return t;
  if (which == AttentionResult::LogSumExp) {
    if (device == "cpu" && sizes.size() == 3) dense_in_order(t, {0, 2, 1});
    return t;
  }
  if (sizes.size() != 4 || like.strides.size() != 4) return t;
  if (device == "cpu" && which == AttentionResult::Gradient) {
    dense_in_order(t, {0, 2, 1, 3});
    return t;
  }
  // Dense in `like`'s dimension order, outermost first (the largest stride; ties keep the dims' order).
  std::vector<size_t> order{0, 1, 2, 3};
  for (const sym::Expr& s : like.strides)
    if (!s.is_constant()) return t;  // symbolic strides: the declared contiguous layout, copied into
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return like.strides[a].constant() > like.strides[b].constant(); });
  dense_in_order(t, order);
  return t;
}

ValueId filled(Rewriter& rw, const Sizes& sizes, double value, DType dt, const ir::Device& device) {
  std::vector<Arg> items;
  for (const sym::Expr& s : sizes) items.push_back(Arg::of_size(s));
  return rw.emit(Op::Full, {Arg::list(std::move(items)), scalar(value, dt)},
                 {{"dtype", Arg::of_literal(dt)}, {"device", Arg::of_literal(device)}},
                 passes::make_type(dt, sizes, device, false));
}

ValueId mul(Rewriter& rw, ValueId a, ValueId b) { return binary(rw, Op::Mul, a, V(b)); }

ValueId transpose_last(Rewriter& rw, ValueId x) {
  std::vector<int64_t> perm = all_dims(rank_of(rw, x));
  if (perm.size() < 2) passes::refuse();
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return permute(rw, x, perm);
}

ValueId product(Rewriter& rw, Op op, ValueId a, ValueId b) {
  const ir::TensorType& ta = rw.type(a);
  const ir::TensorType& tb = rw.type(b);
  std::vector<sym::Expr> batch_a(ta.sizes.begin(), ta.sizes.end() - 2), batch_b(tb.sizes.begin(), tb.sizes.end() - 2);
  std::vector<sym::Expr> sizes = passes::broadcast(batch_a, batch_b);
  sizes.push_back(ta.sizes[ta.sizes.size() - 2]);
  sizes.push_back(tb.sizes.back());
  return rw.emit(op, {V(a), V(b)}, {}, passes::make_type(ta.dtype, std::move(sizes), ta.device, ta.requires_grad || tb.requires_grad));
}

ValueId zeros_like(Rewriter& rw, ValueId like) {
  const ir::TensorType& t = rw.type(like);
  return filled(rw, t.sizes, 0.0, t.dtype, t.device);
}

}  // namespace ember::autograd
