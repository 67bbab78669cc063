// Derivative rules of views, data movement, indexing and the matmul family (rules.h), and the
// rules of generic torch calls by name. A view's gradient is the inverse view; a gather's
// (index_select, gather, embedding, topk) an index_add or scatter_add into zeros, which lowering
// turns into accumulating stores; a strided slice's a slice_scatter into zeros (one kernel); other
// indexing ops' a scatter into zeros run by torch (`torch.select_scatter` with a tensor index, aten's
// `index_put`); convolutions' by torch.nn.grad.
#include <algorithm>
#include <cmath>
#include <map>

#include "autograd/rules.h"

namespace ember::autograd::rules {

namespace {

ir::TensorType contiguous_type(Rewriter& rw, ValueId like) {
  const ir::TensorType& t = rw.type(like);
  return passes::make_type(t.dtype, t.sizes, t.device, false);
}

// A scatter of `g` into zeros shaped like `x`, by a torch callable: target(zeros, args...).
ValueId scatter_into_zeros(Rewriter& rw, const char* target, ValueId x, std::vector<Arg> args) {
  args.insert(args.begin(), V(zeros_like(rw, x)));
  return rw.emit_torch(target, std::move(args), {}, contiguous_type(rw, x));
}

// `g` added into zeros shaped like `x` along `dim` where `index` sends it: index_add or scatter_add.
ValueId add_into_zeros(Rewriter& rw, Op op, ValueId x, Arg dim, ValueId index, ValueId g) {
  return rw.emit(op, {V(zeros_like(rw, x)), std::move(dim), V(index), V(g)}, {}, contiguous_type(rw, x));
}

// The gradients of a @ b: g @ b^T and a^T @ g; give() sums broadcast batch dims. torch.matmul's
// vector forms are the matrix forms with a size-1 dim that the result drops: a 1-D `a` is a row
// ([1, K]; g gains a dim before its last), a 1-D `b` a column ([K, 1]; g gains a last dim).
void matmul_grads(VjpCtx& c, Op op, const Arg& a, const Arg& b) {
  Rewriter& rw = c.rw;
  ValueId av = c.in(a), bv = c.in(b), g = *c.grad();
  bool row = rank_of(rw, av) == 1, column = rank_of(rw, bv) == 1;
  if ((row || column) && op != Op::Matmul) passes::refuse();
  if (row || column) {
    Sizes gs = sizes_of(rw, g);
    if (row) {
      gs.insert(gs.end() - (column ? 0 : 1), 1);
      av = reshape_symbolic(rw, av, {1, sizes_of(rw, av)[0]});
    }
    if (column) {
      gs.push_back(1);
      bv = reshape_symbolic(rw, bv, {sizes_of(rw, bv)[0], 1});
    }
    g = reshape_symbolic(rw, g, gs);
  }
  if (c.needs(a)) c.give(a, product(rw, op, g, transpose_last(rw, bv)));
  if (c.needs(b)) {
    ValueId gb = product(rw, op, transpose_last(rw, av), g);
    if (column) {  // [..., K, 1] -> [..., K]
      Sizes sizes = sizes_of(rw, gb);
      sizes.pop_back();
      gb = reshape_symbolic(rw, gb, sizes);
    }
    c.give(b, gb);
  }
}

}  // namespace

void reshape_vjp(VjpCtx& c) { c.give(c.pos(0), reshape_symbolic(c.rw, *c.grad(), sizes_of(c.rw, c.in(c.pos(0))))); }

void permute_vjp(VjpCtx& c) {
  auto perm = passes::int_list(c.arg("dims"), false);
  if (!perm) passes::refuse();
  std::vector<int64_t> inverse(perm->size());
  for (size_t i = 0; i < perm->size(); ++i) inverse.at(static_cast<size_t>((*perm)[i])) = static_cast<int64_t>(i);
  c.give("input", permute(c.rw, *c.grad(), inverse));
}

void expand_vjp(VjpCtx& c) { c.give(c.pos(0), *c.grad()); }  // give() sums the broadcast dims
void contiguous_vjp(VjpCtx& c) { c.give(c.pos(0), *c.grad()); }

void slice_vjp(VjpCtx& c) {
  const Arg& x = c.pos(0);
  if (!c.needs(x)) return;
  // By name: canonicalize leaves out a step of 1.
  auto dim = passes::int_literal(c.arg("dim")), start = passes::int_literal(c.arg("start")),
       step = passes::int_literal(c.arg("step"));
  // A piece joined by the joint's cat needs a constant extent (its bounds are compared there).
  if (dim && start && step == 1) {
    int64_t d = norm_dim(*dim, rank_of(c.rw, *c.grad()));
    if (sizes_of(c.rw, *c.grad()).at(static_cast<size_t>(d)).is_constant()) return c.give_slice(x, *c.grad(), d, *start);
  }
  std::vector<Arg> args{V(zeros_like(c.rw, c.in(x))), V(*c.grad())};
  for (const char* name : {"dim", "start", "end", "step"}) args.push_back(c.rw.map(c.arg(name)));
  c.give(x, c.rw.emit(Op::SliceScatter, std::move(args), {}, contiguous_type(c.rw, c.in(x))));
}

// x's gradient is the gradient with the slice zeroed (a slice_scatter of zeros); src's the slice of it.
void slice_scatter_vjp(VjpCtx& c) {
  Rewriter& rw = c.rw;
  const ValueId g = *c.grad(), src = c.in("src");
  std::vector<Arg> bounds;
  for (const char* name : {"dim", "start", "end", "step"}) bounds.push_back(rw.map(c.arg(name)));
  if (c.needs("input")) {
    std::vector<Arg> args{V(g), V(zeros_like(rw, src))};
    args.insert(args.end(), bounds.begin(), bounds.end());
    c.give("input", rw.emit(Op::SliceScatter, std::move(args), {}, contiguous_type(rw, g)));
  }
  if (!c.needs("src")) return;
  const std::optional<int64_t> dim = passes::int_literal(bounds[0]), step = passes::int_literal(bounds[3]);
  if (!dim || !step) passes::refuse();
  ir::TensorType t = rw.type(g);  // the slice view of g: src's sizes, the dim's stride times the step
  const size_t d = static_cast<size_t>(norm_dim(*dim, rank_of(rw, g)));
  t.sizes = sizes_of(rw, src);
  t.strides.at(d) = t.strides.at(d) * sym::Expr(*step);
  std::vector<Arg> args{V(g)};
  args.insert(args.end(), bounds.begin(), bounds.end());
  c.give("src", rw.emit(Op::Slice, std::move(args), {}, std::move(t)));
}

// x[i], x[:, i], x[i, j] with integer tensors i, j and full slices: eager's IndexBackward, a sum into
// zeros where repeated indices add up. Index tensors on adjacent dims of constant sizes (a
// relative-position table's `table[index]`: timm Swin, LeViT, CoAtNet, MaxViT; transformers Swin) are an
// index_add of the gradient's rows along those dims merged, lowered into Ember's kernels: each index
// wrapped (getitem takes -n..n-1; the forward raised on any other), the indices broadcast together into
// one row-major flat index. Tensors on dims apart (whose result dims lead, numpy's rule) are aten's
// index_put with accumulate, None standing for each `:`. Other items (ints, strided slices, None,
// Ellipsis, bool masks) are refused: an island.
void getitem_index_vjp(VjpCtx& c) {
  const Arg& x = c.pos(0);
  if (!c.needs(x)) return;
  const Arg& index = c.pos(1);
  std::vector<Arg> items = index.kind == Arg::Kind::Tuple ? index.items : std::vector<Arg>{index};
  std::vector<Arg> indices;
  bool tensor = false;
  for (const Arg& item : items) {
    if (item.kind == Arg::Kind::Value) {
      const ir::DType dt = c.rw.type(c.in(item)).dtype;
      if (dt != ir::DType::Int64 && dt != ir::DType::Int32) passes::refuse();
      indices.push_back(V(c.in(item)));
      tensor = true;
      continue;
    }
    const ir::Slice* all = item.kind == Arg::Kind::Literal ? std::get_if<ir::Slice>(&item.literal) : nullptr;
    if (!all || all->start || all->stop || all->step) passes::refuse();
    indices.push_back(Arg::of_literal(ir::NoneLiteral{}));
  }
  if (!tensor || indices.size() > static_cast<size_t>(rank_of(c.rw, c.in(x)))) passes::refuse();
  std::vector<size_t> tensors;
  for (size_t d = 0; d < indices.size(); ++d)
    if (indices[d].kind == Arg::Kind::Value) tensors.push_back(d);
  Rewriter& rw = c.rw;
  const Sizes sizes = sizes_of(rw, c.in(x));
  const size_t first = tensors.front(), k = tensors.size();
  const bool adjacent = tensors.back() - first + 1 == k;
  bool constant = true;
  for (size_t d : tensors) constant = constant && sizes.at(d).is_constant();
  if (adjacent && constant) {
    // The flat index into the indexed dims merged (row-major), each index wrapped, broadcast together.
    std::optional<ValueId> flat;
    int64_t stride = 1;
    for (size_t m = k; m-- > 0;) {
      const int64_t n = sizes[first + m].constant();
      ValueId index = convert(rw, indices[first + m].value, DType::Int64);
      const ValueId negative = binary(rw, Op::Lt, index, scalar(0.0, DType::Int64));
      const ValueId wrapped = binary(rw, Op::Add, index, scalar(static_cast<double>(n), DType::Int64));
      index = pointwise(rw, Op::Where, {V(negative), V(wrapped), V(index)}, DType::Int64);
      if (stride != 1) index = binary(rw, Op::Mul, index, scalar(static_cast<double>(stride), DType::Int64));
      flat = flat ? pointwise(rw, Op::Add, {V(*flat), V(index)}, DType::Int64) : index;
      stride *= n;
    }
    const Sizes index_sizes = sizes_of(rw, *flat);
    const sym::Expr count_n = count(index_sizes, all_dims(static_cast<int64_t>(index_sizes.size())));
    const ValueId flat_index = reshape_symbolic(rw, *flat, {count_n});
    Sizes merged(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(first));
    merged.push_back(stride);
    merged.insert(merged.end(), sizes.begin() + static_cast<std::ptrdiff_t>(first + k), sizes.end());
    Sizes rows_sizes = merged;
    rows_sizes[first] = count_n;
    const ValueId rows = reshape_symbolic(rw, *c.grad(), rows_sizes);
    const ir::TensorType& xt = rw.type(c.in(x));
    const ValueId zeros = filled(rw, merged, 0.0, xt.dtype, xt.device);
    const ValueId sum = rw.emit(Op::IndexAdd, {V(zeros), Arg::of_literal(static_cast<int64_t>(first)), V(flat_index), V(rows)},
                                {}, contiguous_type(rw, zeros));
    return c.give(x, reshape_symbolic(rw, sum, sizes));
  }
  c.give(x, scatter_into_zeros(c.rw, "torch.ops.aten.index_put", c.in(x),
                               {Arg::list(std::move(indices)), V(*c.grad()), Arg::of_literal(true)}));
}

// A literal index: the gradient is the piece [index, index + 1) of the gradient with the dim put back,
// joined with the other pieces of x by one cat (unbind's, a class token's x[:, 0]) and lowered, not a
// select_scatter into zeros per piece run by torch. A negative index needs a constant dim size.
void select_vjp(VjpCtx& c) {
  const Arg& x = c.pos(0);
  if (!c.needs(x)) return;
  auto dim = passes::int_literal(c.pos(1)), index = passes::int_literal(c.pos(2));
  if (dim && index) {
    const Sizes sizes = sizes_of(c.rw, c.in(x));
    const int64_t d = norm_dim(*dim, static_cast<int64_t>(sizes.size()));
    const sym::Expr& n = sizes.at(static_cast<size_t>(d));
    const int64_t i = *index < 0 && n.is_constant() ? *index + n.constant() : *index;
    if (i >= 0) {
      Sizes kept = sizes_of(c.rw, *c.grad());
      kept.insert(kept.begin() + d, sym::Expr(1));
      return c.give_slice(x, reshape_symbolic(c.rw, *c.grad(), kept), d, i);
    }
  }
  c.give(x, scatter_into_zeros(c.rw, "torch.select_scatter", c.in(x), {V(*c.grad()), c.rw.map(c.pos(1)), c.rw.map(c.pos(2))}));
}

// The dim wraps by the result's rank, not the first tensor's: torch's cat skips 1-D empty tensors
// (a legacy rule), and transformers' DynamicCache starts from one (`torch.cat([torch.tensor([]), k],
// dim=-2)`), which canonicalize cannot normalize the dim against, so the dim arrives as written.
// Such a tensor holds no part of the result: its gradient is its zeros.
void cat_vjp(VjpCtx& c) {
  Rewriter& rw = c.rw;
  ValueId g = *c.grad();
  int64_t rank = rank_of(rw, g);
  int64_t dim = norm_dim(c.int_arg("dim"), rank);
  int64_t offset = 0;
  for (const Arg& t : c.arg("tensors").items) {
    ValueId x = c.in(t);
    if (rank_of(rw, x) != rank) {
      if (c.needs(t)) c.give(t, zeros_like(rw, x));
      continue;
    }
    // A slice's bounds are constants: a piece of dynamic length along the dim refuses (an island).
    sym::Expr len = sizes_of(rw, x).at(static_cast<size_t>(dim));
    if (!len.is_constant()) passes::refuse();
    if (c.needs(t)) c.give(t, slice(rw, g, dim, offset, offset + len.constant(), 1));
    offset += len.constant();
  }
}

// gather(x, dim, index) picking one element per row along dim (index.size(dim) == 1, its other sizes
// x's: nll_loss's pick of each target's log-probability): its gradient is where(arange == index, g, 0),
// pointwise, so it fuses into the consumers (log_softmax's backward) instead of a scatter_add into a
// zeroed tensor of x's size (on the H200, a [4096, 8192] float32 zero fill and torch's clone of it per
// language-model step). Other gathers: the scatter_add into zeros, run by torch.
void gather_vjp(VjpCtx& c) {
  if (!c.needs("input")) return;
  Rewriter& rw = c.rw;
  const ValueId x = c.in("input"), index = c.in("index"), g = *c.grad();
  const Sizes xs = sizes_of(rw, x), is = sizes_of(rw, index);
  const std::optional<int64_t> d = passes::int_literal(c.arg("dim"));
  const int64_t dim = d ? norm_dim(*d, std::max<int64_t>(1, rank_of(rw, x))) : -1;
  bool one_per_row = dim >= 0 && !xs.empty() && xs.size() == is.size() && is[static_cast<size_t>(dim)] == sym::Expr(1) &&
                     xs[static_cast<size_t>(dim)].is_constant();
  for (size_t k = 0; one_per_row && k < xs.size(); ++k)
    one_per_row = k == static_cast<size_t>(dim) || is[k] == xs[k];
  if (!one_per_row) {
    c.give("input", add_into_zeros(rw, Op::ScatterAdd, x, rw.map(c.arg("dim")), index, g));
    return;
  }
  const int64_t n = xs[static_cast<size_t>(dim)].constant();
  const ir::Device device = rw.type(x).device;
  const DType it = rw.type(index).dtype;
  ValueId iota = rw.emit(Op::Arange, {Arg::of_literal(int64_t{0}), Arg::of_literal(n), Arg::of_literal(int64_t{1})},
                         {{"dtype", Arg::of_literal(it)}, {"device", Arg::of_literal(device)}},
                         passes::make_type(it, {sym::Expr(n)}, device, false));
  std::vector<int64_t> column(xs.size(), 1);
  column[static_cast<size_t>(dim)] = n;
  ValueId hit = binary(rw, Op::Eq, reshape(rw, iota, column), V(index));
  const DType dt = rw.type(g).dtype;
  c.give("input", pointwise(rw, Op::Where, {V(hit), V(g), scalar(0.0, dt)}, dt));
}

// torch.topk(x, k, dim, ...) and torch.max/min(x, dim, keepdim) return (values, indices): the values'
// gradient scattered into zeros at the indices, as aten's value_selecting_reduction_backward (topk's
// indices are distinct, so scatter_add is scatter). torch.max/min(x) over every element (one result):
// the gradient shared evenly among the elements equal to the extremum, as amax's; max/min(a, b) are
// maximum/minimum.
void selected_values_vjp(VjpCtx& c) {
  Rewriter& rw = c.rw;
  const Arg* input = argument(c.node, 0, "input");
  if (!input || input->kind != Arg::Kind::Value) passes::refuse();
  ValueId x = c.in(*input);
  const int64_t rank = rank_of(rw, x);
  const bool topk = c.node.target == "torch.topk" || c.node.target == "torch.Tensor.topk";
  if (!topk && c.node.results.size() == 1 && c.node.args.size() == 2 && c.node.kwargs.empty() &&
      c.node.args[1].kind == Arg::Kind::Value) {  // max(a, b) / min(a, b): maximum / minimum
    const std::string_view name = c.node.target;
    return name.substr(name.size() - 3) == "max" ? maximum_vjp(c) : minimum_vjp(c);
  }
  if (!topk && c.node.results.size() == 1) {  // max(x) / min(x)
    if (c.node.args.size() != 1 || !c.node.kwargs.empty() || rank == 0) passes::refuse();
    const Sizes sizes = sizes_of(rw, x);
    const std::vector<int64_t> dims = all_dims(rank);
    ValueId g = *c.grad();
    DType dt = rw.type(g).dtype;
    ValueId hit = convert(rw, binary(rw, Op::Eq, x, V(unreduce(rw, c.out(), dims, false, sizes))), dt);
    ValueId count = reduce(rw, Op::Sum, hit, dims, true);
    c.give(*input, mul(rw, binary(rw, Op::Div, unreduce(rw, g, dims, false, sizes), V(expand_symbolic(rw, count, sizes))), hit));
    return;
  }
  if (c.node.results.size() != 2 || rank == 0) passes::refuse();
  const Arg* dim_arg = argument(c.node, topk ? 2 : 1, "dim");
  int64_t dim = topk ? -1 : 0;
  if (dim_arg || !topk) {
    std::optional<int64_t> d = dim_arg ? passes::int_literal(*dim_arg) : std::nullopt;
    if (!d) passes::refuse();
    dim = *d;
  }
  dim = norm_dim(dim, rank);
  bool keepdim = topk;
  if (!topk)
    if (const Arg* k = argument(c.node, 2, "keepdim")) {
      std::optional<bool> b = passes::bool_literal(*k);
      if (!b) passes::refuse();
      keepdim = *b;
    }
  ValueId g = c.grad_or_zeros(0), index = c.out(1);
  if (!keepdim) {
    Sizes kept = sizes_of(rw, g);
    kept.insert(kept.begin() + dim, 1);
    g = reshape_symbolic(rw, g, kept);
    index = reshape_symbolic(rw, index, kept);
  }
  c.give(*input, add_into_zeros(rw, Op::ScatterAdd, x, Arg::of_literal(dim), index, g));
}

void index_select_vjp(VjpCtx& c) {
  if (!c.needs("input")) return;
  c.give("input", add_into_zeros(c.rw, Op::IndexAdd, c.in("input"), c.rw.map(c.arg("dim")), c.in("index"), *c.grad()));
}

// x's gradient passes through; the source's is the gradient read where the index sent each element:
// index_select's and gather's forward. A scatter_add source larger than its index (elements that add
// nowhere) is refused: an island.
void index_add_vjp(VjpCtx& c) {
  Rewriter& rw = c.rw;
  if (c.needs("input")) c.give("input", *c.grad());
  if (!c.needs("source")) return;
  const ValueId source = c.in("source");
  if (rank_of(rw, source) == 0) passes::refuse();
  c.give("source", rw.emit(Op::IndexSelect, {V(*c.grad()), rw.map(c.arg("dim")), V(c.in("index"))}, {}, contiguous_type(rw, source)));
}

void scatter_add_vjp(VjpCtx& c) {
  Rewriter& rw = c.rw;
  if (c.needs("input")) c.give("input", *c.grad());
  if (!c.needs("src")) return;
  const ValueId src = c.in("src"), index = c.in("index");
  if (sizes_of(rw, src) != sizes_of(rw, index)) passes::refuse();
  c.give("src", rw.emit(Op::Gather, {V(*c.grad()), rw.map(c.arg("dim")), V(index)}, {}, contiguous_type(rw, src)));
}

// The weight's gradient: each row of the output's gradient added into the row its index names (an
// index_add of [N, D] rows, N the indices' count), rows of padding_idx left out (their gradient
// rows zeroed), as aten's embedding_dense_backward computes it. scale_grad_by_freq divides by each
// index's count: aten's call. max_norm writes the weight: refused.
void embedding_vjp(VjpCtx& c) {
  const Arg* indices = argument(c.node, 0, "input");
  const Arg* weight = argument(c.node, 1, "weight");
  if (!indices || !weight || !c.needs(*weight)) return;
  for (auto [i, name] : {std::pair<size_t, const char*>{3, "max_norm"}})
    if (const Arg* a = argument(c.node, i, name); a && !passes::is_none(*a)) passes::refuse();
  if (const Arg* sparse = argument(c.node, 6, "sparse"); sparse && passes::bool_literal(*sparse).value_or(true)) passes::refuse();
  std::optional<int64_t> padding;  // F.embedding's index (negative from the end); aten's -1 means none
  if (const Arg* p = argument(c.node, 2, "padding_idx"); p && !passes::is_none(*p)) {
    padding = passes::int_literal(*p);
    if (!padding) passes::refuse();
  }
  bool by_freq = false;
  if (const Arg* s = argument(c.node, 5, "scale_grad_by_freq")) {
    auto v = passes::bool_literal(*s);
    if (!v) passes::refuse();
    by_freq = *v;
  }
  Rewriter& rw = c.rw;
  ValueId w = c.in(*weight);
  int64_t rows = passes::const_sizes(rw.type(w)).at(0);
  if (padding && *padding < 0) *padding += rows;
  if (by_freq) {
    c.give(*weight, rw.emit_torch("torch.ops.aten.embedding_dense_backward",
                                  {V(*c.grad()), V(c.in(*indices)), Arg::of_literal(rows),
                                   Arg::of_literal(padding.value_or(-1)), Arg::of_literal(by_freq)},
                                  {}, contiguous_type(rw, w)));
    return;
  }
  const ValueId index = c.in(*indices);
  const Sizes index_sizes = sizes_of(rw, index);
  const sym::Expr n = count(index_sizes, all_dims(static_cast<int64_t>(index_sizes.size())));
  const ValueId flat = reshape_symbolic(rw, index, {n});
  ValueId g = reshape_symbolic(rw, *c.grad(), {n, sizes_of(rw, w).at(1)});
  if (padding) {
    const ValueId hit = reshape_symbolic(rw, binary(rw, Op::Eq, flat, Arg::of_literal(*padding)), {n, sym::Expr(1)});
    g = pointwise(rw, Op::Where, {V(hit), scalar(0.0, rw.type(g).dtype), V(g)}, rw.type(g).dtype);
  }
  c.give(*weight, add_into_zeros(rw, Op::IndexAdd, w, Arg::of_literal(int64_t{0}), flat, g));
}

void tril_vjp(VjpCtx& c) {
  c.give("input", c.rw.emit(Op::Tril, {V(*c.grad()), c.rw.map(c.arg("diagonal"))}, {}, contiguous_type(c.rw, *c.grad())));
}

void triu_vjp(VjpCtx& c) {
  c.give("input", c.rw.emit(Op::Triu, {V(*c.grad()), c.rw.map(c.arg("diagonal"))}, {}, contiguous_type(c.rw, *c.grad())));
}

namespace {

// F.conv1d / F.conv2d (captured as torch.conv1d / torch.conv2d): the input's and the weight's
// gradients by aten's convolution_backward — one call for both when both are needed
// (ember.autograd.conv_grads: two calls redo oneDNN's shared reorders), else torch.nn.grad's
// convNd_input or convNd_weight, asked for that one gradient (an input that needs none costs
// nothing) — the bias's the gradient summed over every dim but the channels. String padding
// ("same", "valid") is refused: an island.
void conv_vjp(VjpCtx& c, const std::string& dims) {
  Rewriter& rw = c.rw;
  const Arg* input = argument(c.node, 0, "input");
  const Arg* weight = argument(c.node, 1, "weight");
  if (!input || !weight) passes::refuse();
  passes::Kwargs options;
  const char* kOptions[] = {"stride", "padding", "dilation", "groups"};
  for (size_t i = 0; i < std::size(kOptions); ++i) {
    const Arg* a = argument(c.node, 3 + i, kOptions[i]);
    if (!a) continue;
    if (a->kind == Arg::Kind::Value || (a->kind == Arg::Kind::Literal && std::holds_alternative<std::string>(a->literal)))
      passes::refuse();
    options.emplace_back(kOptions[i], rw.map(*a));
  }
  auto sizes = [&rw](ValueId v) {
    std::vector<Arg> items;
    for (int64_t n : passes::const_sizes(rw.type(v))) items.push_back(Arg::of_literal(n));
    return Arg::list(std::move(items));
  };
  ValueId x = c.in(*input), w = c.in(*weight), g = *c.grad();
  if (c.needs(*input) && c.needs(*weight)) {
    std::vector<ValueId> grads = rw.emit_torch_tuple(
        "ember.autograd.conv_grads", {Arg::of_literal(static_cast<int64_t>(dims[0] - '0')), V(g), V(x), V(w)},
        options, {contiguous_type(rw, x), contiguous_type(rw, w)});
    c.give(*input, grads[0]);
    c.give(*weight, grads[1]);
  } else if (c.needs(*input)) {
    c.give(*input, rw.emit_torch("torch.nn.grad.conv" + dims + "_input", {sizes(x), V(w), V(g)}, options,
                                 contiguous_type(rw, x)));
  } else if (c.needs(*weight)) {
    c.give(*weight, rw.emit_torch("torch.nn.grad.conv" + dims + "_weight", {V(x), sizes(w), V(g)}, options,
                                  contiguous_type(rw, w)));
  }
  if (const Arg* bias = argument(c.node, 2, "bias"); bias && c.needs(*bias)) {
    std::vector<int64_t> over = all_dims(rank_of(rw, g));
    over.erase(over.begin() + 1);
    DType dt = rw.type(g).dtype;
    c.give(*bias, reduce(rw, Op::Sum, convert(rw, g, opmath(dt)), over, false));
  }
}

}  // namespace

void mse_loss_vjp(VjpCtx& c) {  // 2 (x - y) g, divided by the element count for 'mean'
  Rewriter& rw = c.rw;
  const Arg* input = argument(c.node, 0, "input");
  const Arg* target = argument(c.node, 1, "target");
  if (!input || !target) passes::refuse();
  for (auto [i, name] : {std::pair<size_t, const char*>{2, "size_average"}, {3, "reduce"}})
    if (const Arg* a = argument(c.node, i, name); a && !passes::is_none(*a)) passes::refuse();
  std::string reduction = "mean";
  if (const Arg* r = argument(c.node, 4, "reduction")) {
    const std::string* s = r->kind == Arg::Kind::Literal ? std::get_if<std::string>(&r->literal) : nullptr;
    if (!s || (*s != "mean" && *s != "sum" && *s != "none")) passes::refuse();
    reduction = *s;
  }
  ValueId g = convert(rw, *c.grad(), opmath(rw.type(*c.grad()).dtype));
  DType dt = rw.type(g).dtype;
  ValueId diff = binary(rw, Op::Sub, convert(rw, c.in(*input), dt), V(convert(rw, c.in(*target), dt)));
  std::vector<int64_t> sizes = passes::const_sizes(rw.type(diff));
  double scale = 2.0;
  if (reduction != "none") {
    g = expand(rw, reshape(rw, g, std::vector<int64_t>(sizes.size(), 1)), sizes);
    if (reduction == "mean") scale /= static_cast<double>(passes::numel(sizes));
  }
  ValueId d = mul(rw, binary_s(rw, Op::Mul, diff, scale), g);
  c.give(*input, d);
  if (c.needs(*target)) c.give(*target, unary(rw, Op::Neg, d));
}

// A fused attention kernel (training_forms.cpp emits it): its backward, from q, k, v, the output and
// the logsumexp the forward returned. The CPU's aten kernel takes its mask and scale by keyword (and
// reads the gradient through its strides: a transposed or expanded one gives the bits of a contiguous
// copy, measured); CUDA's (ember.autograd.cuda_attention_backward) takes the forward's arguments as
// they were.
void fused_attention_vjp(VjpCtx& c) {
  Rewriter& rw = c.rw;
  const Arg *q = argument(c.node, 0, "query"), *k = argument(c.node, 1, "key"), *v = argument(c.node, 2, "value");
  const Arg* causal = argument(c.node, 4, "is_causal");
  if (!q || !k || !v || !causal) passes::refuse();
  const ir::Device device = rw.type(c.in(*q)).device;
  std::vector<ir::TensorType> types;
  for (const Arg* x : {q, k, v}) {
    const ir::TensorType& t = rw.type(c.in(*x));
    types.push_back(fused_attention_result_type(AttentionResult::Gradient, t.dtype, t.sizes, t));
  }
  std::vector<ValueId> grads;
  if (device.type == "cpu") {
    passes::Kwargs kwargs;  // attn_mask and scale, as the forward gave them
    for (const auto& [key, a] : c.node.kwargs) kwargs.emplace_back(key, rw.map(a));
    grads = rw.emit_torch_tuple(
        "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward",
        {V(c.grad_or_zeros(0)), V(c.in(*q)), V(c.in(*k)), V(c.in(*v)), V(c.out(0)), V(c.out(1)), Arg::of_literal(0.0), rw.map(*causal)},
        std::move(kwargs), std::move(types));
  } else {
    const Arg *mask = argument(c.node, 3, "attn_mask"), *scale = argument(c.node, 5, "scale");
    if (!mask || !scale) passes::refuse();
    grads = rw.emit_torch_tuple("ember.autograd.cuda_attention_backward",
                                {V(c.grad_or_zeros(0)), V(c.in(*q)), V(c.in(*k)), V(c.in(*v)), rw.map(*mask),
                                 V(c.out(0)), V(c.out(1)), rw.map(*causal), rw.map(*scale)},
                                {}, std::move(types));
  }
  const Arg* args[] = {q, k, v};
  for (size_t i = 0; i < 3; ++i)
    if (c.needs(*args[i])) c.give(*args[i], grads[i]);
}

void conv1d_vjp(VjpCtx& c) { conv_vjp(c, "1d"); }
void conv2d_vjp(VjpCtx& c) { conv_vjp(c, "2d"); }
void conv3d_vjp(VjpCtx& c) { conv_vjp(c, "3d"); }

// F.unfold (im2col): its adjoint F.fold (col2im, summing overlapping patches) onto the input's spatial
// size, with the forward's kernel_size, dilation, padding and stride.
void unfold_vjp(VjpCtx& c) {
  const Arg* input = argument(c.node, 0, "input");
  if (!input || input->kind != Arg::Kind::Value) passes::refuse();
  ValueId x = c.in(*input);
  const std::vector<int64_t> sizes = passes::const_sizes(c.rw.type(x));
  if (sizes.size() < 3) passes::refuse();
  passes::Kwargs options;
  const char* kOptions[] = {"kernel_size", "dilation", "padding", "stride"};
  for (size_t i = 0; i < std::size(kOptions); ++i) {
    const Arg* a = argument(c.node, 1 + i, kOptions[i]);
    if (!a) continue;
    if (a->kind == Arg::Kind::Value) passes::refuse();
    options.emplace_back(kOptions[i], *a);
  }
  if (options.empty() || options[0].first != "kernel_size") passes::refuse();
  Arg output_size = Arg::list({Arg::of_literal(sizes[sizes.size() - 2]), Arg::of_literal(sizes.back())});
  c.give(*input, c.rw.emit_torch("torch.nn.functional.fold", {V(*c.grad()), output_size}, std::move(options),
                                 contiguous_type(c.rw, x)));
}

void matmul_vjp(VjpCtx& c) { matmul_grads(c, Op::Matmul, c.pos(0), c.pos(1)); }
void mm_vjp(VjpCtx& c) { matmul_grads(c, Op::Mm, c.pos(0), c.pos(1)); }
void bmm_vjp(VjpCtx& c) { matmul_grads(c, Op::Bmm, c.pos(0), c.pos(1)); }

void linear_vjp(VjpCtx& c) {  // y = x @ w^T + b
  Rewriter& rw = c.rw;
  ValueId x = c.in("input"), w = c.in("weight"), g = *c.grad();
  if (rank_of(rw, x) < 2 || rank_of(rw, w) != 2) passes::refuse();
  if (c.needs("input")) c.give("input", product(rw, Op::Matmul, g, w));
  if (c.needs("weight")) {  // g^T @ x over the flattened leading dims
    auto rows = [&rw](ValueId v) {  // v as a matrix: its leading dims flattened
      Sizes s = sizes_of(rw, v);
      std::vector<int64_t> leading = all_dims(static_cast<int64_t>(s.size()) - 1);
      return reshape_symbolic(rw, v, {count(s, leading), s.back()});
    };
    ValueId g2 = rows(g), x2 = rows(x);
    c.give("weight", product(rw, Op::Mm, transpose_last(rw, g2), x2));
  }
  if (!c.none("bias")) c.give("bias", g);
}

// addmm(input, mat1, mat2, beta, alpha) where decompose keeps it whole (float16/bfloat16 with a bias, one
// rounding in torch; GPT-2's Conv1D): as aten's backward, beta * g to input (summed to its
// broadcast shape by give), alpha * g @ mat2^T to mat1 and alpha * mat1^T @ g to mat2, in the call's dtype.
void addmm_vjp(VjpCtx& c) {
  Rewriter& rw = c.rw;
  ValueId g = *c.grad();
  const double beta = c.number_arg("beta"), alpha = c.number_arg("alpha");
  auto scaled = [&rw](ValueId v, double s) { return s == 1.0 ? v : binary_s(rw, Op::Mul, v, s); };
  if (c.needs("input")) c.give("input", scaled(g, beta));
  if (c.needs("mat1")) c.give("mat1", scaled(product(rw, Op::Mm, g, transpose_last(rw, c.in("mat2"))), alpha));
  if (c.needs("mat2")) c.give("mat2", scaled(product(rw, Op::Mm, transpose_last(rw, c.in("mat1")), g), alpha));
}

void native_dropout_vjp(VjpCtx& c) {  // g * mask / (1 - p), as aten's native_dropout_backward
  double p = passes::number_literal(c.pos(1)).value_or(NAN);
  if (std::isnan(p)) passes::refuse();
  ValueId g = *c.grad(0);
  DType dt = c.rw.type(g).dtype;
  ValueId kept = mul(c.rw, g, convert(c.rw, c.out(1), dt));
  c.give(c.pos(0), binary_s(c.rw, Op::Mul, kept, p >= 1.0 ? 0.0 : 1.0 / (1.0 - p)));
}

namespace {

// Adaptive average pooling over the last `dims` (2 or 1) dimensions: to one value per channel (every
// CNN's head; Swin's pooler in transformers) the gradient spread evenly, pointwise and saving nothing;
// to other sizes aten's _adaptive_avg_pool2d_backward, which reads the input (saved, as eager saves
// it), the 1-d pool over a height of 1 as aten computes it.
void adaptive_avg_pool_vjp(VjpCtx& c, size_t dims) {
  Rewriter& rw = c.rw;
  const Arg* input = argument(c.node, 0, "input");
  if (!input || input->kind != Arg::Kind::Value) passes::refuse();
  ValueId x = c.in(*input), g = *c.grad();
  std::vector<int64_t> sizes = passes::const_sizes(rw.type(x)), out = passes::const_sizes(rw.type(g));
  if (sizes.size() < 2 || out.size() != sizes.size()) passes::refuse();
  int64_t area = 1;
  bool to_one = true;
  for (size_t d = sizes.size() - dims; d < sizes.size(); ++d) {
    area *= sizes[d];
    to_one = to_one && out[d] == 1;
  }
  if (to_one) {
    c.give(*input, expand(rw, binary_s(rw, Op::Mul, g, 1.0 / static_cast<double>(area)), sizes));
    return;
  }
  auto as_2d = [&rw, dims](ValueId v, std::vector<int64_t> s) {
    if (dims == 2) return v;
    s.insert(s.end() - 1, 1);
    return reshape(rw, v, s);
  };
  ValueId x2 = as_2d(x, sizes);
  ValueId gx = rw.emit_torch("torch.ops.aten._adaptive_avg_pool2d_backward", {V(as_2d(g, out)), V(x2)}, {},
                             contiguous_type(rw, x2));
  c.give(*input, dims == 2 ? gx : reshape(rw, gx, sizes));
}

}  // namespace

void adaptive_avg_pool2d_vjp(VjpCtx& c) { adaptive_avg_pool_vjp(c, 2); }
void adaptive_avg_pool1d_vjp(VjpCtx& c) { adaptive_avg_pool_vjp(c, 1); }

// aten's max_pool2d_with_indices (F.max_pool2d's training form): aten's backward over the saved
// indices, with the forward's own pooling arguments.
void max_pool2d_with_indices_vjp(VjpCtx& c) {
  if (c.node.args.size() != 6) passes::refuse();
  ValueId x = c.in(c.node.args[0]);
  std::vector<Arg> args = {V(*c.grad(0)), V(x)};
  for (size_t i = 1; i < 6; ++i) args.push_back(c.rw.map(c.node.args[i]));
  args.push_back(V(c.out(1)));
  c.give(c.node.args[0], c.rw.emit_torch("torch.ops.aten.max_pool2d_with_indices_backward", std::move(args), {},
                                         contiguous_type(c.rw, x)));
}

// F.avg_pool2d: aten's avg_pool2d_backward with the forward's arguments (it reads the input's sizes).
void avg_pool2d_vjp(VjpCtx& c) {
  const Arg* input = argument(c.node, 0, "input");
  std::optional<std::vector<Arg>> args = pool_arguments(
      c.node, {{"kernel_size", std::nullopt}, {"stride", Arg::list({})}, {"padding", Arg::of_literal(int64_t{0})},
               {"ceil_mode", Arg::of_literal(false)}, {"count_include_pad", Arg::of_literal(true)},
               {"divisor_override", Arg::of_literal(ir::NoneLiteral{})}});
  if (!input || input->kind != Arg::Kind::Value || !args) passes::refuse();
  ValueId x = c.in(*input);
  args->insert(args->begin(), {V(*c.grad()), V(x)});
  c.give(*input, c.rw.emit_torch("torch.ops.aten.avg_pool2d_backward", std::move(*args), {}, contiguous_type(c.rw, x)));
}

// F.pad in "constant" mode: the gradient cropped back, by F.pad with the widths negated.
void pad_vjp(VjpCtx& c) {
  const Arg* input = argument(c.node, 0, "input");
  const Arg* pad = argument(c.node, 1, "pad");
  if (!input || !pad || (pad->kind != Arg::Kind::List && pad->kind != Arg::Kind::Tuple)) passes::refuse();
  if (const Arg* mode = argument(c.node, 2, "mode")) {
    const std::string* m = mode->kind == Arg::Kind::Literal ? std::get_if<std::string>(&mode->literal) : nullptr;
    if (!m || *m != "constant") passes::refuse();
  }
  std::vector<Arg> crop;
  for (const Arg& width : pad->items) {
    std::optional<int64_t> w = passes::int_literal(width);
    if (!w) passes::refuse();
    crop.push_back(Arg::of_literal(-*w));
  }
  ValueId x = c.in(*input);
  c.give(*input, c.rw.emit_torch("torch.nn.functional.pad", {V(*c.grad()), Arg::list(std::move(crop))}, {},
                                 contiguous_type(c.rw, x)));
}

// x.clone(): the gradient passes unchanged (a copy in storage of its own; decompose keeps it, as returning
// x itself would alias what the clone must not).
void clone_vjp(VjpCtx& c) { c.give(c.pos(0), *c.grad()); }

// x.mT and x.T (captured as attribute reads, operator.attrgetter): the gradient is transposed back.
void attr_mT_vjp(VjpCtx& c) { c.give(c.pos(0), transpose_last(c.rw, *c.grad())); }

void attr_T_vjp(VjpCtx& c) {
  std::vector<int64_t> reversed = all_dims(rank_of(c.rw, *c.grad()));
  std::reverse(reversed.begin(), reversed.end());
  c.give(c.pos(0), permute(c.rw, *c.grad(), reversed));
}

}  // namespace ember::autograd::rules

namespace ember::autograd {

std::optional<std::vector<Arg>> pool_arguments(const ir::Node& node,
                                               const std::vector<std::pair<const char*, std::optional<Arg>>>& params) {
  std::vector<Arg> out;
  for (size_t i = 0; i < params.size(); ++i) {
    const Arg* a = argument(node, i + 1, params[i].first);
    if (a && a->kind == Arg::Kind::Value) return std::nullopt;
    if (a && !passes::is_none(*a)) {
      out.push_back(*a);
    } else if (params[i].second) {
      out.push_back(*params[i].second);
    } else {
      return std::nullopt;
    }
  }
  return out;
}

const VjpRule* torch_call_rule(std::string_view callable) {
  static const std::map<std::string, VjpRule, std::less<>> kRules = {
      {"torch.nn.functional.softmax", rules::softmax_vjp},
      {"torch.nn.functional.log_softmax", rules::log_softmax_vjp},
      {"torch.ops.aten.native_dropout", rules::native_dropout_vjp},
      {"operator.attrgetter('mT')", rules::attr_mT_vjp},
      {"operator.attrgetter('T')", rules::attr_T_vjp},
      {"torch.clone", rules::clone_vjp},
      {"torch.topk", rules::selected_values_vjp},
      {"torch.Tensor.topk", rules::selected_values_vjp},
      {"torch.max", rules::selected_values_vjp},
      {"torch.Tensor.max", rules::selected_values_vjp},
      {"torch.min", rules::selected_values_vjp},
      {"torch.Tensor.min", rules::selected_values_vjp},
      {"torch.Tensor.clone", rules::clone_vjp},
      {"torch.nn.functional.mse_loss", rules::mse_loss_vjp},
      {"torch.nn.functional.adaptive_avg_pool2d", rules::adaptive_avg_pool2d_vjp},
      {"torch.adaptive_avg_pool1d", rules::adaptive_avg_pool1d_vjp},
      {"torch.nn.functional.pad", rules::pad_vjp},
      {"torch.ops.aten.max_pool2d_with_indices", rules::max_pool2d_with_indices_vjp},
      {"torch.nn.functional.avg_pool2d", rules::avg_pool2d_vjp},
      {"torch.nn.functional.interpolate", rules::interpolate_vjp},
      {"torch.nn.functional.normalize", rules::normalize_vjp},
      {"torch._C._linalg.linalg_vector_norm", rules::vector_norm_vjp},
      {"torch.Tensor.norm", rules::vector_norm_vjp},
      {"torch.conv1d", rules::conv1d_vjp},
      {"torch.conv2d", rules::conv2d_vjp},
      {"torch.conv3d", rules::conv3d_vjp},
      {"torch.nn.functional.unfold", rules::unfold_vjp},
      {"torch.ops.aten._scaled_dot_product_flash_attention_for_cpu", rules::fused_attention_vjp},
      {"ember.autograd.cuda_attention", rules::fused_attention_vjp},
      // `s / x` and `s ** x` with a Python number first, which decompose leaves to torch.
      {"operator.truediv", rules::div_vjp},
      {"operator.pow", rules::pow_vjp},
      {"torch.pow", rules::pow_vjp},
  };
  auto it = kRules.find(callable);
  return it == kRules.end() ? nullptr : &it->second;
}

}  // namespace ember::autograd
