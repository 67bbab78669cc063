// Derivative rules of views, data movement, indexing and the matmul family (rules.h), and the
// rules of generic torch calls by name. A view's gradient is the inverse view; an indexing op's is
// a scatter into zeros, run by torch (`torch.slice_scatter`, `torch.scatter_add`, `torch.index_add`,
// aten's `embedding_dense_backward`) until those have lowerings of their own.
#include <algorithm>
#include <cmath>
#include <map>

#include "autograd/rules.h"

namespace ember::autograd::rules {

namespace {

const Arg& pos(VjpCtx& c, size_t i) {
  if (i >= c.node.args.size()) passes::refuse();
  return c.node.args[i];
}

// Argument `i` or keyword `name` of a call without a signature; nullptr when absent.
const Arg* arg_at(VjpCtx& c, size_t i, std::string_view name) {
  if (i < c.node.args.size()) return &c.node.args[i];
  for (const auto& [key, value] : c.node.kwargs)
    if (key == name) return &value;
  return nullptr;
}


ir::TensorType contiguous_type(Rewriter& rw, ValueId like) {
  const ir::TensorType& t = rw.type(like);
  return passes::make_type(t.dtype, t.sizes, t.device, false);
}

// A scatter of `g` into zeros shaped like `x`, by a torch callable: target(zeros, args...).
ValueId scatter_into_zeros(Rewriter& rw, const char* target, ValueId x, std::vector<Arg> args) {
  args.insert(args.begin(), V(zeros_like(rw, x)));
  return rw.emit_torch(target, std::move(args), {}, contiguous_type(rw, x));
}

// The gradients of a @ b (both of rank >= 2): g @ b^T and a^T @ g; give() sums broadcast batch dims.
void matmul_grads(VjpCtx& c, Op op, const Arg& a, const Arg& b) {
  Rewriter& rw = c.rw;
  ValueId av = c.in(a), bv = c.in(b), g = *c.grad();
  if (rank_of(rw, av) < 2 || rank_of(rw, bv) < 2) passes::refuse();  // vector forms: an island
  if (c.needs(a)) c.give(a, product(rw, op, g, transpose_last(rw, bv)));
  if (c.needs(b)) c.give(b, product(rw, op, transpose_last(rw, av), g));
}

}  // namespace

void reshape_vjp(VjpCtx& c) { c.give(pos(c, 0), reshape(c.rw, *c.grad(), sizes_of(c.rw, c.in(pos(c, 0))))); }

void permute_vjp(VjpCtx& c) {
  auto perm = passes::int_list(c.arg("dims"), false);
  if (!perm) passes::refuse();
  std::vector<int64_t> inverse(perm->size());
  for (size_t i = 0; i < perm->size(); ++i) inverse.at(static_cast<size_t>((*perm)[i])) = static_cast<int64_t>(i);
  c.give("input", permute(c.rw, *c.grad(), inverse));
}

void expand_vjp(VjpCtx& c) { c.give(pos(c, 0), *c.grad()); }  // give() sums the broadcast dims
void contiguous_vjp(VjpCtx& c) { c.give(pos(c, 0), *c.grad()); }

void slice_vjp(VjpCtx& c) {
  const Arg& x = pos(c, 0);
  if (!c.needs(x)) return;
  auto dim = passes::int_literal(pos(c, 1)), start = passes::int_literal(pos(c, 2)), step = passes::int_literal(pos(c, 4));
  if (dim && start && step == 1) return c.give_slice(x, *c.grad(), *dim, *start);
  std::vector<Arg> args{V(*c.grad())};
  for (size_t i = 1; i < 5; ++i) args.push_back(c.rw.map(pos(c, i)));
  c.give(x, scatter_into_zeros(c.rw, "torch.slice_scatter", c.in(x), std::move(args)));
}

void select_vjp(VjpCtx& c) {
  const Arg& x = pos(c, 0);
  if (!c.needs(x)) return;
  c.give(x, scatter_into_zeros(c.rw, "torch.select_scatter", c.in(x), {V(*c.grad()), c.rw.map(pos(c, 1)), c.rw.map(pos(c, 2))}));
}

void cat_vjp(VjpCtx& c) {
  const Arg& list = c.arg("tensors");
  int64_t dim = c.int_arg("dim");
  int64_t offset = 0;
  for (const Arg& t : list.items) {
    int64_t len = sizes_of(c.rw, c.in(t)).at(static_cast<size_t>(dim));
    if (c.needs(t)) c.give(t, slice(c.rw, *c.grad(), dim, offset, offset + len, 1));
    offset += len;
  }
}

void gather_vjp(VjpCtx& c) {
  if (!c.needs("input")) return;
  c.give("input", scatter_into_zeros(c.rw, "torch.scatter_add", c.in("input"), {c.rw.map(c.arg("dim")), V(c.in("index")), V(*c.grad())}));
}

void index_select_vjp(VjpCtx& c) {
  if (!c.needs("input")) return;
  c.give("input", scatter_into_zeros(c.rw, "torch.index_add", c.in("input"), {c.rw.map(c.arg("dim")), V(c.in("index")), V(*c.grad())}));
}

void embedding_vjp(VjpCtx& c) {  // aten's embedding_dense_backward; max_norm writes the weight: refused
  const Arg* indices = arg_at(c, 0, "input");
  const Arg* weight = arg_at(c, 1, "weight");
  if (!indices || !weight || !c.needs(*weight)) return;
  for (auto [i, name] : {std::pair<size_t, const char*>{3, "max_norm"}})
    if (const Arg* a = arg_at(c, i, name); a && !passes::is_none(*a)) passes::refuse();
  if (const Arg* sparse = arg_at(c, 6, "sparse"); sparse && passes::bool_literal(*sparse).value_or(true)) passes::refuse();
  int64_t padding = -1;
  if (const Arg* p = arg_at(c, 2, "padding_idx"); p && !passes::is_none(*p)) {
    auto v = passes::int_literal(*p);
    if (!v) passes::refuse();
    padding = *v;
  }
  bool by_freq = false;
  if (const Arg* s = arg_at(c, 5, "scale_grad_by_freq")) {
    auto v = passes::bool_literal(*s);
    if (!v) passes::refuse();
    by_freq = *v;
  }
  Rewriter& rw = c.rw;
  ValueId w = c.in(*weight);
  int64_t rows = sizes_of(rw, w).at(0);
  if (padding < 0 && padding != -1) padding += rows;
  ValueId g = rw.emit_torch("torch.ops.aten.embedding_dense_backward",
                            {V(*c.grad()), V(c.in(*indices)), Arg::of_literal(rows), Arg::of_literal(padding),
                             Arg::of_literal(by_freq)},
                            {}, contiguous_type(rw, w));
  c.give(*weight, g);
}

void tril_vjp(VjpCtx& c) {
  c.give("input", c.rw.emit(Op::Tril, {V(*c.grad()), c.rw.map(c.arg("diagonal"))}, {}, contiguous_type(c.rw, *c.grad())));
}

void triu_vjp(VjpCtx& c) {
  c.give("input", c.rw.emit(Op::Triu, {V(*c.grad()), c.rw.map(c.arg("diagonal"))}, {}, contiguous_type(c.rw, *c.grad())));
}

void matmul_vjp(VjpCtx& c) { matmul_grads(c, Op::Matmul, pos(c, 0), pos(c, 1)); }
void mm_vjp(VjpCtx& c) { matmul_grads(c, Op::Mm, pos(c, 0), pos(c, 1)); }
void bmm_vjp(VjpCtx& c) { matmul_grads(c, Op::Bmm, pos(c, 0), pos(c, 1)); }

void linear_vjp(VjpCtx& c) {  // y = x @ w^T + b
  Rewriter& rw = c.rw;
  ValueId x = c.in("input"), w = c.in("weight"), g = *c.grad();
  if (rank_of(rw, x) < 2 || rank_of(rw, w) != 2) passes::refuse();
  if (c.needs("input")) c.give("input", product(rw, Op::Matmul, g, w));
  if (c.needs("weight")) {  // g^T @ x over the flattened leading dims
    std::vector<int64_t> gs = sizes_of(rw, g), xs = sizes_of(rw, x);
    ValueId g2 = reshape(rw, g, {passes::numel(gs) / gs.back(), gs.back()});
    ValueId x2 = reshape(rw, x, {passes::numel(xs) / xs.back(), xs.back()});
    c.give("weight", product(rw, Op::Mm, transpose_last(rw, g2), x2));
  }
  if (!c.none("bias")) c.give("bias", g);
}

void native_dropout_vjp(VjpCtx& c) {  // g * mask / (1 - p), as aten's native_dropout_backward
  double p = passes::number_literal(pos(c, 1)).value_or(NAN);
  if (std::isnan(p)) passes::refuse();
  ValueId g = *c.grad(0);
  DType dt = c.rw.type(g).dtype;
  ValueId kept = mul(c.rw, g, convert(c.rw, c.out(1), dt));
  c.give(pos(c, 0), binary_s(c.rw, Op::Mul, kept, p >= 1.0 ? 0.0 : 1.0 / (1.0 - p)));
}

// x.mT and x.T (captured as attribute reads, operator.attrgetter): the gradient is transposed back.
void attr_mT_vjp(VjpCtx& c) { c.give(pos(c, 0), transpose_last(c.rw, *c.grad())); }

void attr_T_vjp(VjpCtx& c) {
  std::vector<int64_t> reversed = all_dims(rank_of(c.rw, *c.grad()));
  std::reverse(reversed.begin(), reversed.end());
  c.give(pos(c, 0), permute(c.rw, *c.grad(), reversed));
}

}  // namespace ember::autograd::rules

namespace ember::autograd {

const VjpRule* torch_call_rule(std::string_view callable) {
  static const std::map<std::string, VjpRule, std::less<>> kRules = {
      {"torch.nn.functional.softmax", rules::softmax_vjp},
      {"torch.nn.functional.log_softmax", rules::log_softmax_vjp},
      {"torch.ops.aten.native_dropout", rules::native_dropout_vjp},
      {"operator.attrgetter('mT')", rules::attr_mT_vjp},
      {"operator.attrgetter('T')", rules::attr_T_vjp},
  };
  auto it = kRules.find(callable);
  return it == kRules.end() ? nullptr : &it->second;
}

}  // namespace ember::autograd
