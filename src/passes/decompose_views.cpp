// decompose, view and data family: view/reshape/flatten/unflatten/unsqueeze/squeeze (and reshape_as/view_as)
// become reshape to the recorded sizes; expand_as an expand; transpose and t become permute; expand gets explicit sizes of its rank;
// (subscripts, slices, narrow, split, chunk and unbind: decompose_subscripts.cpp); stack becomes reshapes and cat; roll a cat of slices; repeat and
// repeat_interleave (an int count) an expand between reshapes; einsum of one or two operands bmm between
// permutes and reshapes; matmul of two batched operands (static sizes) bmm between expands and reshapes;
// cat drops 1-d empty operands (torch's legacy rule); dtype conversions become
// convert; factories become full/arange; linear, addmm and baddbmm become matmul/mm/bmm with a pointwise
// epilogue; dropout that does nothing is removed.
#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>

#include "passes/decompose_rules.h"
#include "shapes/shape_rules.h"
#include "sym/relation.h"

namespace ember::passes::decomp {

namespace {

// The node's one result, as a reshape of `x` to the recorded sizes.
void reshape_to_result(Ctx& c, ValueId x) {
  const ir::TensorType& r = c.result_type();
  if (r.dtype != c.rw.type(x).dtype) refuse();  // x.view(dtype) reinterprets bytes
  c.finish(reshape_symbolic(c.rw, x, r.sizes, true));
}

void view_like(Ctx& c) {
  if (c.node.results.size() != 1 || c.node.args.empty() || c.node.args[0].kind != Arg::Kind::Value) refuse();
  if (!c.bound) refuse();  // unknown argument forms (x.view(dtype) binds, and is refused on dtype)
  reshape_to_result(c, c.tensor(c.node.args[0]));
}

// Flattening one dimension (a 1-d tensor, start_dim == end_dim): torch returns the tensor itself,
// so `x.flatten() is x` for a 1-d x; a reshape would return a new view.
void flatten_rule(Ctx& c) {
  if (!c.bound) refuse();
  ValueId x = c.tensor("input");
  int64_t rank = rank_of(c.rw, x);
  if (rank > 0 && norm_dim(c.int_arg("start_dim"), rank) == norm_dim(c.int_arg("end_dim"), rank)) {
    c.finish(x);
    return;
  }
  view_like(c);
}

void permute_rule(Ctx& c) {
  ValueId x = c.tensor("input");
  auto dims = int_list(c.arg("dims"), false);
  int64_t rank = rank_of(c.rw, x);
  if (!dims || static_cast<int64_t>(dims->size()) != rank) refuse();
  for (int64_t& d : *dims) d = norm_dim(d, rank);
  std::vector<int64_t> sorted = *dims;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != all_dims(rank)) refuse();
  c.finish(permute(c.rw, x, *dims));
}

void transpose_rule(Ctx& c) {
  ValueId x = c.tensor("input");
  int64_t rank = rank_of(c.rw, x);
  if (rank == 0) refuse();
  int64_t a = norm_dim(c.int_arg("dim0"), rank), b = norm_dim(c.int_arg("dim1"), rank);
  std::vector<int64_t> perm = all_dims(rank);
  std::swap(perm[a], perm[b]);
  c.finish(permute(c.rw, x, perm));
}

void t_rule(Ctx& c) {
  ValueId x = c.tensor("input");
  if (rank_of(c.rw, x) != 2) refuse();
  c.finish(permute(c.rw, x, {1, 0}));
}

void expand_rule(Ctx& c) {
  ValueId x = c.tensor("self");
  if (c.bool_arg("implicit")) refuse();
  const std::vector<sym::Expr>& sizes = c.result_type().sizes;
  // Already the primitive: explicit sizes of the input's rank.
  auto given = size_list(c.arg("size"));
  if (given && *given == sizes && c.rw.type(x).sizes.size() == sizes.size() && c.node.args.size() == 2 &&
      c.node.args[1].kind == Arg::Kind::List)
    refuse();
  c.finish(expand_symbolic(c.rw, x, sizes));
}

// The tensors of cat/stack, converted to the result dtype.
std::vector<ValueId> tensor_list(Ctx& c, const Arg& list, DType dt) {
  if (list.kind != Arg::Kind::List && list.kind != Arg::Kind::Tuple) refuse();
  if (list.items.empty()) refuse();
  std::vector<ValueId> out;
  for (const Arg& a : list.items) out.push_back(convert(c.rw, c.tensor(a), dt));
  return out;
}


void cat(Ctx& c) {
  const ir::TensorType& r = c.result_type();
  std::vector<ValueId> xs = tensor_list(c, c.arg("tensors"), r.dtype);
  int64_t rank = static_cast<int64_t>(r.sizes.size());
  // torch skips 1-d empty tensors in a cat of higher rank (a legacy rule), as transformers' caches
  // start: `torch.cat([torch.tensor([]), key_states], dim=-2)`. They go; a tensor of another rank stays with torch.
  const size_t given = xs.size();
  xs.erase(std::remove_if(xs.begin(), xs.end(),
                          [&](ValueId x) {
                            const ir::TensorType& t = c.rw.type(x);
                            return rank != 1 && t.sizes.size() == 1 && t.sizes[0] == sym::Expr(int64_t{0});
                          }),
           xs.end());
  if (xs.empty()) refuse();
  for (ValueId x : xs) {
    if (rank_of(c.rw, x) != rank) refuse();
    const_sizes(c.rw.type(x));
  }
  auto d = int_literal(c.arg("dim"));
  if (!d || rank == 0) refuse();
  int64_t dim = norm_dim(*d, rank);
  const ir::Node& n = c.node;
  bool primitive = xs.size() == given && n.kwargs.empty() && n.args.size() == 2 && int_literal(n.args[1]) == dim;
  for (size_t i = 0; primitive && i < xs.size(); ++i) primitive = xs[i] == c.rw.mapped(n.args[0].items[i].value);
  if (primitive) refuse();
  c.finish(build::cat(c.rw, xs, dim, r));
}

void stack(Ctx& c) {
  const ir::TensorType& r = c.result_type();
  std::vector<ValueId> xs = tensor_list(c, c.arg("tensors"), r.dtype);
  auto d = int_literal(c.arg("dim"));
  if (!d) refuse();
  int64_t rank = static_cast<int64_t>(r.sizes.size());
  int64_t dim = norm_dim(*d, rank);
  std::vector<ValueId> parts;
  for (ValueId x : xs) {
    std::vector<int64_t> s = const_sizes(c.rw.type(x));
    if (static_cast<int64_t>(s.size()) + 1 != rank) refuse();
    s.insert(s.begin() + dim, 1);
    parts.push_back(reshape(c.rw, x, s));
  }
  c.finish(parts.size() == 1 ? parts[0] : build::cat(c.rw, parts, dim, r));
}

void dim_normalizing(Ctx& c, Op op) {
  ValueId x = c.tensor("input");
  int64_t rank = rank_of(c.rw, x);
  int64_t dim = norm_dim(c.int_arg("dim"), rank);
  ValueId index = c.tensor("index");
  if (op == Op::Gather && c.bool_arg("sparse_grad")) refuse();
  if (c.node.kwargs.empty() && c.node.args.size() == 3 && int_literal(c.node.args[1]) == dim) refuse();
  c.finish(c.rw.emit(op, {V(x), Arg::of_literal(dim), V(index)}, {}, c.result_type()));
}

// index_add (alpha 1) and scatter_add with the dim normalized: the core ops.
void accumulating(Ctx& c, Op op, const char* source) {
  ValueId x = c.tensor("input");
  int64_t dim = norm_dim(c.int_arg("dim"), rank_of(c.rw, x));
  if (op == Op::IndexAdd && c.number_arg("alpha") != 1.0) refuse();
  if (c.node.kwargs.empty() && c.node.args.size() == 4 && int_literal(c.node.args[1]) == dim) refuse();
  c.finish(c.rw.emit(op, {V(x), Arg::of_literal(dim), V(c.tensor("index")), V(c.tensor(source))}, {}, c.result_type()));
}

// tril/triu with the diagonal spelled out.
void triangle(Ctx& c, Op op) {
  ValueId x = c.tensor("input");
  int64_t k = c.int_arg("diagonal");
  if (rank_of(c.rw, x) < 2) refuse();
  if (c.node.kwargs.empty() && c.node.args.size() == 2 && int_literal(c.node.args[1]) == k) refuse();
  c.finish(c.rw.emit(op, {V(x), Arg::of_literal(k)}, {}, c.result_type()));
}

void contiguous(Ctx& c) {
  ValueId x = c.tensor("self");
  // Already contiguous: torch returns the tensor itself.
  if (!is_contiguous(c.rw.type(x))) refuse();
  c.finish(x);
}

// x.float(), x.to(dtype), x.type_as(y): a dtype change only.
void to_dtype(Ctx& c, ValueId x) {
  const ir::TensorType& r = c.result_type();
  const ir::TensorType& t = c.rw.type(x);
  if (r.device != t.device || r.sizes != t.sizes) refuse();
  c.finish(convert(c.rw, x, r.dtype));  // the same dtype: torch returns x itself
}

// x.to(dtype), x.to(device, dtype), x.to(device=..., dtype=...): only when the device stays.
void tensor_to(Ctx& c) {
  const ir::Node& n = c.node;
  if (n.args.empty() || n.args[0].kind != Arg::Kind::Value) refuse();
  ValueId x = c.tensor(n.args[0]);
  auto same_device = [&](const Arg& a) {
    if (a.kind != Arg::Kind::Literal) return false;
    std::optional<ir::Device> d;
    if (const ir::Device* dev = std::get_if<ir::Device>(&a.literal)) d = *dev;
    if (const std::string* s = std::get_if<std::string>(&a.literal)) d = ir::device_from_string(*s);
    // "cpu" names the device that a tensor on cpu has; an indexless "cuda" is not checked here.
    return d && *d == c.rw.type(x).device;
  };
  auto is_dtype = [](const Arg& a) { return a.kind == Arg::Kind::Literal && std::holds_alternative<DType>(a.literal); };
  for (size_t i = 1; i < n.args.size(); ++i) {
    const Arg& a = n.args[i];
    bool ok = (i == 1 && (is_dtype(a) || same_device(a))) || (i == 2 && is_dtype(a) && same_device(n.args[1])) ||
              (i >= 2 && bool_literal(a) == false);
    if (!ok) refuse();  // other tensors, other devices, copy=True, memory formats
  }
  for (const auto& [name, value] : n.kwargs) {
    bool ok = (name == "dtype" && is_dtype(value)) || (name == "device" && same_device(value)) ||
              ((name == "non_blocking" || name == "copy") && bool_literal(value) == false);
    if (!ok) refuse();
  }
  to_dtype(c, x);
}

// Factories: full of the recorded type, when only sizes, dtype and device were asked for.
void factory(Ctx& c, std::optional<double> value) {
  const ir::TensorType& r = c.result_type();
  if (r.requires_grad) refuse();
  const Signature* sig = c.bound ? c.bound->signature : nullptr;
  if (!sig) refuse();
  for (const char* name : {"layout", "memory_format", "out"})
    for (const Param& p : sig->params)
      if (p.name == name && !c.none(name)) refuse();
  for (const Param& p : sig->params)
    if (p.name == "pin_memory" && bool_literal(c.arg("pin_memory")) == true) refuse();
  double v = value ? *value : c.number_arg("fill_value");
  if (is_integral(r.dtype) && static_cast<double>(static_cast<int64_t>(v)) != v) refuse();
  if (is_complex(r.dtype)) refuse();
  c.finish(full(c.rw, r.sizes, v, r.dtype, r.device));
}

// F.embedding: the weight's rows at the flattened indices (index_select), reshaped to the indices' sizes
// plus the row. padding_idx, scale_grad_by_freq and sparse change only the gradient (the autograd rule
// reads them before this runs); max_norm renormalizes the weight in place: it stays with torch.
void embedding(Ctx& c) {
  Rewriter& rw = c.rw;
  ValueId indices = c.tensor("input"), weight = c.tensor("weight");
  if (!c.none("max_norm")) refuse();
  const ir::TensorType& r = c.result_type();
  const ir::TensorType& w = rw.type(weight);
  const DType idt = rw.type(indices).dtype;
  if ((idt != DType::Int64 && idt != DType::Int32) || w.sizes.size() != 2 || w.dtype != r.dtype) refuse();
  const sym::Expr count = sym::product(rw.type(indices).sizes);
  ValueId picked = rw.emit(Op::IndexSelect, {V(weight), Arg::of_literal(int64_t{0}), V(reshape_symbolic(rw, indices, {count}))},
                           {}, make_type(w.dtype, {count, w.sizes[1]}, w.device, w.requires_grad));
  c.finish(reshape_symbolic(rw, picked, r.sizes));
}

// torch.diff(input, n, dim, prepend, append): prepend and append joined on by cat, then n times the
// difference of neighbours (a slice from 1 minus a slice to the last). Bools (a logical xor) stay with torch.
void diff(Ctx& c) {
  Rewriter& rw = c.rw;
  ValueId x = c.tensor("input");
  const ir::TensorType& r = c.result_type();
  if (r.dtype == DType::Bool || rw.type(x).dtype != r.dtype) refuse();
  const int64_t rank = rank_of(rw, x);
  if (rank == 0) refuse();
  const int64_t dim = norm_dim(c.int_arg("dim"), rank);
  std::vector<ValueId> parts;
  for (const char* name : {"prepend", "input", "append"}) {
    if (c.none(name)) continue;
    ValueId part = c.tensor(name);
    if (rw.type(part).dtype != r.dtype || rank_of(rw, part) != rank) refuse();  // cat's promotion, 0-d parts
    parts.push_back(part);
  }
  if (parts.size() > 1) x = build::cat(rw, parts, dim, r);
  const int64_t n = c.int_arg("n");
  if (n < 0) refuse();
  for (int64_t k = 0; k < n; ++k) {
    const sym::Expr size = rw.type(x).sizes[static_cast<size_t>(dim)];
    if (size == sym::Expr(0)) break;
    if (!c.provable(1, sym::RelOp::Le, size)) refuse();
    x = binary(rw, Op::Sub, slice_symbolic(rw, x, dim, 1, size, 1), V(slice_symbolic(rw, x, dim, 0, size - 1, 1)));
  }
  if (rw.type(x).sizes != r.sizes) refuse();
  c.finish(x);
}

// F.pad in "constant" mode with non-negative pads: the value's blocks joined on by cat, last dim first.
void constant_pad(Ctx& c) {
  Rewriter& rw = c.rw;
  ValueId x = c.tensor("input");
  const Arg& mode = c.arg("mode");
  const std::string* m = mode.kind == Arg::Kind::Literal ? std::get_if<std::string>(&mode.literal) : nullptr;
  if (!m || *m != "constant") refuse();
  const Arg& pad = c.arg("pad");
  if (pad.kind != Arg::Kind::List && pad.kind != Arg::Kind::Tuple) refuse();
  const ir::TensorType& r = c.result_type();
  const int64_t rank = rank_of(rw, x);
  if (pad.items.size() % 2 != 0 || static_cast<int64_t>(pad.items.size()) > 2 * rank || rw.type(x).dtype != r.dtype) refuse();
  const double value = c.none("value") ? 0.0 : c.number_arg("value");
  if (is_integral(r.dtype) && static_cast<double>(static_cast<int64_t>(value)) != value) refuse();
  for (size_t k = 0; k < pad.items.size(); k += 2) {
    std::optional<int64_t> before = int_literal(pad.items[k]), after = int_literal(pad.items[k + 1]);
    if (!before || !after) refuse();
    x = build::pad(rw, x, rank - 1 - static_cast<int64_t>(k / 2), *before, *after, value);
  }
  if (const_sizes(rw.type(x)) != const_sizes(r)) refuse();
  c.finish(x);
}

void arange(Ctx& c) {
  const ir::TensorType& r = c.result_type();
  if (r.requires_grad || !c.none("out") || !c.none("layout")) refuse();
  std::optional<double> a = number_literal(c.arg("start"));
  if (!a || bool_literal(c.arg("start"))) refuse();
  Arg start = c.arg("start"), end = c.arg("end"), step = c.arg("step");
  if (is_none(end)) {
    end = start;
    start = Arg::of_literal(int64_t{0});
  }
  for (const Arg* x : {&start, &end, &step})
    if (!number_literal(*x) || bool_literal(*x)) refuse();
  const ir::Node& n = c.node;
  if (n.args.size() == 3 && n.kwargs.size() == 2 && n.kwargs[0].first == "dtype" && n.kwargs[1].first == "device") refuse();
  c.finish(c.rw.emit(Op::Arange, {start, end, step},
                     {{"dtype", Arg::of_literal(r.dtype)}, {"device", Arg::of_literal(r.device)}}, r));
}

// torch.roll: along each dim, the last `shift` elements first — a cat of two slices (one per dim
// rolled). Without dims, the flattened tensor is rolled and reshaped back.
void roll(Ctx& c) {
  Rewriter& rw = c.rw;
  ValueId x = c.tensor("input");
  auto shifts = int_list(c.arg("shifts"), true);
  std::optional<std::vector<int64_t>> dims;
  if (!c.none("dims")) dims = int_list(c.arg("dims"), true);
  if (!shifts || (!c.none("dims") && (!dims || dims->size() != shifts->size()))) refuse();
  const std::vector<int64_t> sizes = const_sizes(rw.type(x));
  ValueId cur = x;
  if (!dims) {
    if (shifts->size() != 1) refuse();
    cur = reshape(rw, x, {numel(sizes)});
    dims = std::vector<int64_t>{0};
  }
  bool emitted = false;
  for (size_t i = 0; i < dims->size(); ++i) {
    int64_t dim = norm_dim((*dims)[i], rank_of(rw, cur));
    int64_t n = const_sizes(rw.type(cur))[dim];
    if (n == 0) continue;
    int64_t s = (((*shifts)[i] % n) + n) % n;
    if (s == 0) continue;
    cur = build::cat(rw, {slice(rw, cur, dim, n - s, n, 1), slice(rw, cur, dim, 0, n - s, 1)}, dim, rw.type(cur));
    emitted = true;
  }
  if (!emitted) refuse();  // nothing moves: torch's copy stays with torch
  c.finish(reshape(rw, cur, sizes));
}

// x.repeat(*sizes): the leading dims added as 1s, then each dim d tiled k_d times: x as
// [1, s0, 1, s1, ...] expanded to [k0, s0, k1, s1, ...] and reshaped to [k0 s0, k1 s1, ...]. Sizes and
// counts may be symbolic (BLOOM's `alibi.repeat(batch_size, 1, 1)`).
void repeat(Ctx& c) {
  Rewriter& rw = c.rw;
  ValueId x = c.tensor("self");
  std::optional<std::vector<sym::Expr>> times = size_list(c.arg("sizes"));
  if (!times)
    if (std::optional<sym::Expr> one = size_literal(c.arg("sizes"))) times = std::vector<sym::Expr>{*one};
  std::vector<sym::Expr> sizes = rw.type(x).sizes;
  if (!times || times->size() < sizes.size()) refuse();
  sizes.insert(sizes.begin(), times->size() - sizes.size(), 1);
  std::vector<sym::Expr> ones, wide, out;
  for (size_t d = 0; d < sizes.size(); ++d) {
    const sym::Expr& k = (*times)[d];
    if (k.is_constant() && k.constant() < 0) refuse();
    ones.insert(ones.end(), {1, sizes[d]});
    wide.insert(wide.end(), {k, sizes[d]});
    out.push_back(k * sizes[d]);
  }
  c.finish(reshape_symbolic(rw, expand_symbolic(rw, reshape_symbolic(rw, x, ones), wide), out, true));
}

// repeat_interleave with an int count: each element repeated in place along dim ([.., s, ..] as
// [.., s, 1, ..] expanded to [.., s, k, ..], then merged); without dim, over the flattened tensor.
void repeat_interleave(Ctx& c) {
  Rewriter& rw = c.rw;
  ValueId x = c.tensor("input");
  const Arg& repeats = c.arg("repeats");
  if (repeats.kind == Arg::Kind::Value || bool_literal(repeats)) refuse();  // a tensor of counts
  int64_t k = c.int_arg("repeats");
  if (k < 0) refuse();
  std::vector<sym::Expr> sizes = rw.type(x).sizes;
  int64_t dim = 0;
  if (c.none("dim")) {
    sizes = {sym::product(sizes)};
  } else {
    dim = norm_dim(c.int_arg("dim"), static_cast<int64_t>(sizes.size()));
  }
  std::vector<sym::Expr> one = sizes, wide = sizes, out = sizes;
  one.insert(one.begin() + dim + 1, 1);
  wide.insert(wide.begin() + dim + 1, k);
  out[static_cast<size_t>(dim)] = out[static_cast<size_t>(dim)] * sym::Expr(k);
  c.finish(reshape_symbolic(rw, expand_symbolic(rw, reshape_symbolic(rw, x, one), wide), out, true));
}

void linear(Ctx& c) {
  ValueId x = c.tensor("input"), w = c.tensor("weight");
  Rewriter& rw = c.rw;
  if (rank_of(rw, x) < 1 || rank_of(rw, w) != 2 || rw.type(x).dtype != rw.type(w).dtype) refuse();
  // With a bias in float16/bfloat16, torch adds it inside the matmul (one rounding); a matmul then
  // an add would round twice, so that call stays whole.
  DType dt = rw.type(x).dtype;
  if (!c.none("bias") && (dt == DType::Float16 || dt == DType::BFloat16)) refuse();
  ValueId y = matmul(rw, Op::Matmul, x, permute(rw, w, {1, 0}));
  if (!c.none("bias")) {
    ValueId b = c.tensor("bias");
    if (rw.type(b).dtype != rw.type(x).dtype) refuse();
    y = binary(rw, Op::Add, y, V(b));
  }
  c.finish(y);
}

// beta * input + alpha * (a @ b), a and b of rank `rank` (addmm: mm of 2-d mat1, mat2; baddbmm: bmm of
// 3-d batch1, batch2).
void scaled_product_plus(Ctx& c, const char* a_name, const char* b_name, int64_t rank, Op op) {
  ValueId input = c.tensor("input"), a = c.tensor(a_name), b = c.tensor(b_name);
  Rewriter& rw = c.rw;
  DType dt = rw.type(a).dtype;
  if (rank_of(rw, a) != rank || rank_of(rw, b) != rank || rw.type(b).dtype != dt || rw.type(input).dtype != dt ||
      !is_floating_point(dt))
    refuse();
  double beta = c.number_arg("beta"), alpha = c.number_arg("alpha");
  if (beta != 0.0 && (dt == DType::Float16 || dt == DType::BFloat16)) refuse();  // one rounding in torch, as for linear
  ValueId y = matmul(rw, op, a, b);
  if (alpha != 1.0) y = binary_s(rw, Op::Mul, y, alpha);
  // beta == 0: torch ignores input entirely (NaN in it does not propagate).
  if (beta != 0.0) y = binary(rw, Op::Add, y, V(beta == 1.0 ? input : binary_s(rw, Op::Mul, input, beta)));
  c.finish(y);
}

void addmm(Ctx& c) { scaled_product_plus(c, "mat1", "mat2", 2, Op::Mm); }
void baddbmm(Ctx& c) { scaled_product_plus(c, "batch1", "batch2", 3, Op::Bmm); }

void dropout(Ctx& c) {
  if (c.bool_arg("inplace")) refuse();
  bool training = c.bool_arg("training");
  if (training && c.number_arg("p") != 0.0) refuse();
  c.finish(c.tensor("input"));
}

// torch.matmul of two operands of rank >= 3 as aten's matmul runs it: each expanded to the broadcast
// batch dims, reshaped to [B, M, K] and [B, K, N] (views where the strides allow, else copies that
// lowering makes kernels of), one bmm, its [B, M, N] result reshaped to [..., M, N]. The same GEMMs as
// eager's; what goes is torch.matmul's expand / reshape / clone / _unsafe_view dispatches on every call
// (an attention's q @ k^T and p @ v: four a layer), and a copy torch's reshape would make is a kernel
// fused with the operand's producer. An operand of rank <= 2 stays torch.matmul (lowering folds a
// [..., M, K] @ [K, N] into one mm of 2-d views); so do symbolic sizes, whose copying reshapes index
// through divisions of the flat index ([s1, 2, s0, 4] -> [2*s1, s0, 4]: `(4*i1 + i2 + 4*i0*s0) //
// (8*s0)` and three more a load) where torch's clone is a strided copy.
void batched_matmul(Ctx& c) {
  Rewriter& rw = c.rw;
  ValueId a = c.tensor("input"), b = c.tensor("other");
  const ir::TensorType ta = rw.type(a), tb = rw.type(b);
  const size_t ra = ta.sizes.size(), rb = tb.sizes.size();
  auto constant = [](const std::vector<sym::Expr>& sizes) {
    return std::all_of(sizes.begin(), sizes.end(), [](const sym::Expr& s) { return s.is_constant(); });
  };
  if (!c.node.kwargs.empty() || ra < 3 || rb < 3 || ta.dtype != tb.dtype || !is_floating_point(ta.dtype) || !constant(ta.sizes) ||
      !constant(tb.sizes) || ta.sizes[ra - 1] != tb.sizes[rb - 2])
    refuse();
  const size_t batch_rank = std::max(ra, rb) - 2;
  const sym::Expr one(int64_t{1});
  std::vector<sym::Expr> batch;
  sym::Expr count = one;
  for (size_t k = 0; k < batch_rank; ++k) {  // right-aligned, a missing dim of size 1
    const sym::Expr& sa = k + ra >= batch_rank + 2 ? ta.sizes[k + ra - 2 - batch_rank] : one;
    const sym::Expr& sb = k + rb >= batch_rank + 2 ? tb.sizes[k + rb - 2 - batch_rank] : one;
    if (sa != sb && sa != one && sb != one) refuse();  // torch raises
    batch.push_back(sa == one ? sb : sa);
    count = count * batch.back();
  }
  auto to_3d = [&](ValueId x, const sym::Expr& rows, const sym::Expr& cols) {
    std::vector<sym::Expr> full = batch;
    full.push_back(rows);
    full.push_back(cols);
    if (rw.type(x).sizes != full) x = expand_symbolic(rw, x, full);
    return reshape_symbolic(rw, x, {count, rows, cols});
  };
  const sym::Expr &m = ta.sizes[ra - 2], &k = ta.sizes[ra - 1], &n = tb.sizes[rb - 1];
  std::vector<sym::Expr> out = batch;
  out.push_back(m);
  out.push_back(n);
  c.finish(reshape_symbolic(rw, matmul(rw, Op::Bmm, to_3d(a, m, k), to_3d(b, k, n)), out));
}

// torch.einsum of one or two operands with an explicit or implicit output, no ellipsis and no label
// repeated within an operand: labels only one operand has and the output lacks are summed out first;
// then, as aten's einsum does, the operands are permuted to [batch, free, contracted] and
// [batch, contracted, free], reshaped to 3-d, multiplied by bmm, and the result reshaped and permuted
// to the output's labels (an outer product contracts over one dim of size 1).
void einsum(Ctx& c) {
  Rewriter& rw = c.rw;
  const ir::Node& n = c.node;
  const std::string* eq = !n.args.empty() && n.args[0].kind == Arg::Kind::Literal ? std::get_if<std::string>(&n.args[0].literal) : nullptr;
  if (!eq || !n.kwargs.empty()) refuse();
  std::vector<Arg> operands(n.args.begin() + 1, n.args.end());
  if (operands.size() == 1 && (operands[0].kind == Arg::Kind::List || operands[0].kind == Arg::Kind::Tuple))
    operands = operands[0].items;
  if (operands.empty() || operands.size() > 2) refuse();
  std::string text;
  for (char ch : *eq)
    if (ch != ' ') text += ch;
  if (text.find('.') != std::string::npos) refuse();
  const size_t arrow = text.find("->");
  std::vector<std::string> inputs;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    const size_t stop = std::min(comma, arrow);
    inputs.push_back(text.substr(start, stop - start));
    if (comma == std::string::npos || comma > arrow) break;
    start = comma + 1;
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = text.substr(arrow + 2);
  } else {  // implicit: the labels that appear once, in alphabetical order
    std::string all = std::accumulate(inputs.begin(), inputs.end(), std::string());
    std::sort(all.begin(), all.end());
    for (char ch : all)
      if (std::count(all.begin(), all.end(), ch) == 1) out += ch;
  }
  if (inputs.size() != operands.size()) refuse();
  const DType dt = c.result_type().dtype;
  std::map<char, int64_t> size_of;
  std::vector<ValueId> xs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ValueId x = c.tensor(operands[i]);
    const std::vector<int64_t> sizes = const_sizes(rw.type(x));
    const std::string& labels = inputs[i];
    if (rw.type(x).dtype != dt || labels.size() != sizes.size()) refuse();
    for (size_t d = 0; d < labels.size(); ++d) {
      if (!std::isalpha(static_cast<unsigned char>(labels[d])) || labels.find(labels[d]) != d) refuse();
      auto [it, fresh] = size_of.emplace(labels[d], sizes[d]);
      if (!fresh && it->second != sizes[d]) refuse();  // a broadcast label
    }
    xs.push_back(x);
  }
  for (char ch : out)
    if (!size_of.count(ch) || out.find(ch) != out.rfind(ch)) refuse();
  auto has = [](const std::string& s, char ch) { return s.find(ch) != std::string::npos; };
  // Sums out the labels of operand i that neither the output nor the other operand has.
  auto summed = [&](size_t i) {
    std::string keep;
    std::vector<int64_t> dims;
    const std::string other = inputs.size() == 2 ? inputs[1 - i] : "";
    for (size_t d = 0; d < inputs[i].size(); ++d) {
      const char ch = inputs[i][d];
      if (has(out, ch) || has(other, ch)) {
        keep += ch;
      } else {
        dims.push_back(static_cast<int64_t>(d));
      }
    }
    if (!dims.empty())
      xs[i] = convert(rw, reduce(rw, Op::Sum, convert(rw, xs[i], opmath(dt)), dims, false), dt);
    inputs[i] = keep;
  };
  // x (labels `from`) permuted to the labels `to` (a permutation of them).
  auto arrange = [&](ValueId x, const std::string& from, const std::string& to) {
    std::vector<int64_t> perm;
    for (char ch : to) perm.push_back(static_cast<int64_t>(from.find(ch)));
    return perm == all_dims(static_cast<int64_t>(perm.size())) ? x : permute(rw, x, perm);
  };
  for (size_t i = 0; i < xs.size(); ++i) summed(i);
  if (xs.size() == 1) {
    const ValueId y = arrange(xs[0], inputs[0], out);
    if (!rw.created_since(y, c.mark)) refuse();  // nothing to compute: torch's einsum returns the operand
    return c.finish(y);
  }
  std::string batch, contracted, free_a, free_b;
  for (char ch : inputs[0]) (has(inputs[1], ch) ? (has(out, ch) ? batch : contracted) : free_a) += ch;
  for (char ch : inputs[1])
    if (!has(inputs[0], ch)) free_b += ch;
  auto count = [&](const std::string& labels) {
    int64_t k = 1;
    for (char ch : labels) k *= size_of[ch];
    return k;
  };
  if (!is_floating_point(dt)) refuse();
  ValueId a = reshape(rw, arrange(xs[0], inputs[0], batch + free_a + contracted), {count(batch), count(free_a), count(contracted)});
  ValueId b = reshape(rw, arrange(xs[1], inputs[1], batch + contracted + free_b), {count(batch), count(contracted), count(free_b)});
  ValueId y = matmul(rw, Op::Bmm, a, b);
  const std::string labels = batch + free_a + free_b;
  std::vector<int64_t> sizes;
  for (char ch : labels) sizes.push_back(size_of[ch]);
  c.finish(arrange(reshape(rw, y, sizes), labels, out));
}

}  // namespace

void add_view_rules(RuleMap& rules) {
  for (const char* name : {"torch.Tensor.view", "torch.reshape", "torch.unsqueeze", "torch.squeeze", "torch.unflatten",
                           "torch.Tensor.unflatten"})
    rules[name] = view_like;
  rules["torch.flatten"] = flatten_rule;
  rules["torch.permute"] = permute_rule;
  rules["torch.transpose"] = transpose_rule;
  rules["torch.t"] = rules["torch.Tensor.t"] = t_rule;
  rules["torch.Tensor.expand"] = expand_rule;
  // x.reshape_as(y), x.view_as(y), x.expand_as(y): y gives only its sizes, which the result records.
  rules["torch.Tensor.reshape_as"] = rules["torch.Tensor.view_as"] = [](Ctx& c) {
    reshape_to_result(c, c.tensor("self"));
  };
  rules["torch.Tensor.expand_as"] = [](Ctx& c) {
    c.finish(expand_symbolic(c.rw, c.tensor("self"), c.result_type().sizes));
  };
  rules["torch.cat"] = cat;
  rules["torch.stack"] = stack;
  rules["torch.gather"] = [](Ctx& c) { dim_normalizing(c, Op::Gather); };
  rules["torch.index_select"] = [](Ctx& c) { dim_normalizing(c, Op::IndexSelect); };
  rules["torch.index_add"] = [](Ctx& c) { accumulating(c, Op::IndexAdd, "source"); };
  rules["torch.scatter_add"] = [](Ctx& c) { accumulating(c, Op::ScatterAdd, "src"); };
  rules["torch.Tensor.contiguous"] = contiguous;
  rules["torch.tril"] = [](Ctx& c) { triangle(c, Op::Tril); };
  rules["torch.triu"] = [](Ctx& c) { triangle(c, Op::Triu); };
  for (const char* name : {"torch.Tensor.float", "torch.Tensor.double", "torch.Tensor.half", "torch.Tensor.bfloat16",
                           "torch.Tensor.long", "torch.Tensor.int", "torch.Tensor.short", "torch.Tensor.bool",
                           "torch.Tensor.byte", "torch.Tensor.char"})
    rules[name] = [](Ctx& c) { to_dtype(c, c.tensor("self")); };
  rules["torch.Tensor.to"] = tensor_to;
  rules["torch.Tensor.type_as"] = [](Ctx& c) {
    if (c.rw.type(c.tensor("other")).dtype != c.result_type().dtype) refuse();
    to_dtype(c, c.tensor("self"));
  };
  rules["torch.zeros"] = rules["torch.zeros_like"] = [](Ctx& c) { factory(c, 0.0); };
  rules["torch.ones"] = rules["torch.ones_like"] = [](Ctx& c) { factory(c, 1.0); };
  rules["torch.full"] = rules["torch.full_like"] = [](Ctx& c) { factory(c, std::nullopt); };
  rules["torch.arange"] = arange;
  rules["torch.Tensor.new_zeros"] = [](Ctx& c) { factory(c, 0.0); };
  rules["torch.Tensor.new_ones"] = [](Ctx& c) { factory(c, 1.0); };
  rules["torch.Tensor.new_full"] = [](Ctx& c) { factory(c, std::nullopt); };
  rules["torch.diff"] = rules["torch.Tensor.diff"] = diff;
  rules["torch.nn.functional.embedding"] = embedding;
  rules["torch.nn.functional.pad"] = constant_pad;
  rules["torch.nn.functional.linear"] = linear;
  rules["torch.addmm"] = addmm;
  rules["torch.baddbmm"] = rules["torch.Tensor.baddbmm"] = baddbmm;
  rules["torch.roll"] = rules["torch.Tensor.roll"] = roll;
  rules["torch.Tensor.repeat"] = repeat;
  rules["torch.einsum"] = einsum;
  rules["torch.matmul"] = batched_matmul;
  rules["torch.repeat_interleave"] = rules["torch.Tensor.repeat_interleave"] = repeat_interleave;
  rules["torch.nn.functional.dropout"] = dropout;
}

}  // namespace ember::passes::decomp
