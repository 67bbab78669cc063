// decompose, subscript family: getitem with ints, slices, None, Ellipsis and one list of evenly spaced ints,
// getitem by integer index tensors (index_select of the merged indexed dims), slice and slice_scatter, select,
// narrow, split, chunk and unbind become canonical slice and select (0 <= start <= end <= size for every
// value of the shape symbols, `Ctx::provable`; bounds the symbols' facts cannot place stay with torch).
#include <algorithm>

#include "passes/decompose_rules.h"

namespace ember::passes::decomp {

namespace {

// A slice bound (an int or a size; a negative int counts from the end) placed in [0, size] as Python
// clamps it, when the symbols' facts decide where it falls for every size (a constant size always);
// Refuse otherwise (torch clamps at run time, an extern call).
sym::Expr clamp_bound(Ctx& c, const sym::Expr& bound, const sym::Expr& size) {
  using sym::RelOp;
  sym::Expr k = bound;
  if (bound.is_constant() && bound.constant() < 0) {
    k = size + bound;
  } else if (!c.provable(0, RelOp::Le, bound)) {
    refuse();  // a symbolic int of either sign
  }
  if (c.provable(0, RelOp::Le, k) && c.provable(k, RelOp::Le, size)) return k;
  if (c.provable(k, RelOp::Le, 0)) return 0;
  if (c.provable(size, RelOp::Le, k)) return size;
  refuse();
}

// Python's [start:end] of a dim of `size` (a bound absent: the dim's start or end), clamped by clamp_bound
// and emptied when it ends before it starts: 0 <= start <= end <= size for every value of the symbols.
std::pair<sym::Expr, sym::Expr> clamped_range(Ctx& c, const std::optional<sym::Expr>& start_at,
                                              const std::optional<sym::Expr>& end_at, const sym::Expr& size) {
  const sym::Expr start = start_at ? clamp_bound(c, *start_at, size) : sym::Expr(0);
  const sym::Expr end = end_at ? clamp_bound(c, *end_at, size) : size;
  if (c.provable(start, sym::RelOp::Le, end)) return {start, end};
  if (!c.provable(end, sym::RelOp::Le, start)) refuse();
  return {start, start};  // empty
}

// A graph that writes nothing in place: an advanced index makes a new tensor, where a slice would alias,
// so a write into the result (or into a view of it) must not be one that reaches x.
void refuse_if_graph_writes_in_place(Ctx& c) {
  for (const ir::Node& other : c.rw.source().nodes())
    if (other.mutates_first_arg()) refuse();
}

// The least and greatest value an integer tensor of the source graph can hold, when its producers say: an
// arange of ints or sizes, shifted by int adds and subs, seen through views and selections (which pick a
// subset of the values). nullopt when they do not (a graph input, anything computed otherwise).
std::optional<std::pair<sym::Expr, sym::Expr>> index_values(const ir::Graph& g, ValueId v, int depth = 0) {
  const ir::NodeId producer = g.value(v).producer;
  if (producer < 0 || depth > 32) return std::nullopt;
  const ir::Node& n = g.node(producer);
  if (n.args.empty() || n.results.size() != 1) return std::nullopt;
  switch (n.op) {
    case Op::Arange: {
      std::vector<sym::Expr> bounds;
      for (const Arg& a : n.args) {
        std::optional<sym::Expr> k = size_literal(a);
        if (!k) return std::nullopt;
        bounds.push_back(*k);
      }
      if (bounds.empty() || bounds.size() > 3) return std::nullopt;
      const sym::Expr start = bounds.size() == 1 ? 0 : bounds[0], end = bounds.size() == 1 ? bounds[0] : bounds[1];
      const sym::Expr step = bounds.size() == 3 ? bounds[2] : 1;
      if (!step.is_constant() || step.constant() <= 0 ||
          !sym::provable(sym::Rel{start, sym::RelOp::Lt, end}, g.symbols))
        return std::nullopt;
      return std::make_pair(start, start + floordiv(end - start - 1, step) * step);
    }
    case Op::Add:
    case Op::Sub: {
      std::optional<int64_t> k = n.args.size() == 2 && n.kwargs.empty() ? int_literal(n.args[1]) : std::nullopt;
      if (!k || bool_literal(n.args[1]) || n.args[0].kind != Arg::Kind::Value) return std::nullopt;
      auto r = index_values(g, n.args[0].value, depth + 1);
      if (!r) return std::nullopt;
      const sym::Expr shift = n.op == Op::Add ? *k : -*k;
      return std::make_pair(r->first + shift, r->second + shift);
    }
    case Op::Getitem: case Op::Reshape: case Op::Unsqueeze: case Op::Squeeze: case Op::Expand: case Op::Permute:
    case Op::Transpose: case Op::Flatten: case Op::Slice: case Op::Select: case Op::Contiguous:
      if (n.args[0].kind != Arg::Kind::Value) return std::nullopt;
      return index_values(g, n.args[0].value, depth + 1);
    default:
      return std::nullopt;
  }
}

// x[i0, i1, ...] with integer index tensors beside full slices and Ellipsis (numpy's advanced indexing;
// transformers' masks index position ids by broadcast aranges: position_ids[batch_idx, q_idx]), when
// every index is known to lie in its dim for every size (index_values): the indexed dims are moved first
// and merged, the indices become one flat index into them, and index_select gathers the rows. The
// broadcast index dims take the place of the indexed dims when those are adjacent, else they lead
// (numpy's rule). Indices that may be negative or out of range stay with torch, which wraps the one and
// raises its own error for the other (a flat index would not see an index out of its dim but inside the
// merged rows).
void getitem_by_tensors(Ctx& c, ValueId x, const std::vector<Arg>& items) {
  Rewriter& rw = c.rw;
  const std::vector<sym::Expr> in = rw.type(x).sizes;
  const int64_t rank = static_cast<int64_t>(in.size());
  int64_t given = 0;
  for (const Arg& it : items) given += it.kind == Arg::Kind::Value || !std::holds_alternative<ir::Ellipsis>(it.literal);
  if (given > rank) refuse();
  std::vector<std::pair<int64_t, ValueId>> indexed;  // (dim of x, index tensor)
  int64_t dim = 0, ellipses = 0;
  for (const Arg& it : items) {
    if (it.kind == Arg::Kind::Value) {
      ValueId t = c.tensor(it);
      if (!ir::is_integral(rw.type(t).dtype) || rw.type(t).dtype == DType::UInt8) refuse();
      auto values = index_values(rw.source(), it.value);
      if (!values || !c.provable(0, sym::RelOp::Le, values->first) ||
          !c.provable(values->second, sym::RelOp::Lt, in[static_cast<size_t>(dim)]))
        refuse();
      indexed.emplace_back(dim++, t);
    } else if (it.kind == Arg::Kind::Literal && std::holds_alternative<ir::Ellipsis>(it.literal)) {
      if (++ellipses > 1) refuse();
      dim += rank - given;
    } else if (const ir::Slice* s = it.kind == Arg::Kind::Literal ? std::get_if<ir::Slice>(&it.literal) : nullptr;
               s && !s->start && !s->stop && s->step.value_or(1) == 1) {
      ++dim;  // a full slice: the dim is kept
    } else {
      refuse();  // ints, None and partial slices beside index tensors stay with torch
    }
  }
  refuse_if_graph_writes_in_place(c);
  std::vector<int64_t> perm;
  std::vector<sym::Expr> rest;
  sym::Expr rows = 1;
  for (const auto& [d, t] : indexed) {
    perm.push_back(d);
    rows = rows * in[static_cast<size_t>(d)];
  }
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(perm.begin(), perm.end(), d) == perm.end()) {
      perm.push_back(d);
      rest.push_back(in[static_cast<size_t>(d)]);
    }
  const std::vector<sym::Expr>& out = c.result_type().sizes;
  const size_t broadcast_rank = out.size() - rest.size();
  bool adjacent = true;
  for (size_t k = 1; k < indexed.size(); ++k) adjacent &= indexed[k].first == indexed[k - 1].first + 1;
  const size_t at = adjacent ? static_cast<size_t>(indexed.front().first) : 0;  // where the broadcast dims go
  const std::vector<sym::Expr> broadcast(out.begin() + static_cast<std::ptrdiff_t>(at),
                                         out.begin() + static_cast<std::ptrdiff_t>(at + broadcast_rank));
  // The flat index: sum of index_k * (product of the sizes of the indexed dims after k).
  ValueId flat = -1;
  std::vector<sym::Expr> after;  // sizes of the indexed dims after k
  for (size_t k = indexed.size(); k-- > 1;) after.insert(after.begin(), in[static_cast<size_t>(indexed[k].first)]);
  for (size_t k = 0; k < indexed.size(); ++k) {
    const sym::Expr scale = sym::product(std::vector<sym::Expr>(after.begin() + static_cast<std::ptrdiff_t>(k), after.end()));
    ValueId i = convert(rw, indexed[k].second, DType::Int64);
    if (scale != sym::Expr(1)) i = pointwise(rw, Op::Mul, {V(i), Arg::of_size(scale)}, DType::Int64);
    flat = flat < 0 ? i : binary(rw, Op::Add, flat, V(i));
  }
  if (rw.type(flat).sizes != broadcast) flat = expand_symbolic(rw, flat, broadcast);
  flat = reshape_symbolic(rw, flat, {sym::product(broadcast)});
  std::vector<sym::Expr> merged = {rows};
  merged.insert(merged.end(), rest.begin(), rest.end());
  bool moved = false;
  for (size_t k = 0; k < perm.size(); ++k) moved |= perm[k] != static_cast<int64_t>(k);
  ValueId source = reshape_symbolic(rw, moved ? permute(rw, x, perm) : x, merged);
  std::vector<sym::Expr> gathered = {sym::product(broadcast)};
  gathered.insert(gathered.end(), rest.begin(), rest.end());
  const ir::TensorType& xt = rw.type(x);
  ValueId rows_of = rw.emit(Op::IndexSelect, {V(source), Arg::of_literal(int64_t{0}), V(flat)}, {},
                            make_type(xt.dtype, gathered, xt.device, xt.requires_grad));
  std::vector<sym::Expr> unflat = broadcast;
  unflat.insert(unflat.end(), rest.begin(), rest.end());
  ValueId r = reshape_symbolic(rw, rows_of, unflat);
  if (at > 0) {  // [B..., rest...] -> [rest[:at], B..., rest[at:]]
    std::vector<int64_t> order;
    for (size_t k = 0; k < at; ++k) order.push_back(static_cast<int64_t>(broadcast_rank + k));
    for (size_t k = 0; k < broadcast_rank; ++k) order.push_back(static_cast<int64_t>(k));
    for (size_t k = at; k < rest.size(); ++k) order.push_back(static_cast<int64_t>(broadcast_rank + k));
    r = permute(rw, r, order);
  }
  c.finish(r);
}

// x[index] with ints, slices, None and Ellipsis; with index tensors: getitem_by_tensors.
void getitem(Ctx& c) {
  if (c.node.args.size() != 2 || !c.node.kwargs.empty() || c.node.args[0].kind != Arg::Kind::Value) refuse();
  ValueId x = c.tensor(c.node.args[0]);
  const Arg& index = c.node.args[1];
  std::vector<Arg> items = index.kind == Arg::Kind::Tuple ? index.items : std::vector<Arg>{index};
  if (std::any_of(items.begin(), items.end(), [](const Arg& it) { return it.kind == Arg::Kind::Value; })) {
    getitem_by_tensors(c, x, items);
    return;
  }
  const int64_t rank = rank_of(c.rw, x);
  int64_t consumed = 0, ellipses = 0, lists = 0;
  for (const Arg& it : items) {
    if (it.kind == Arg::Kind::List) {  // ints: one index array (below)
      ++consumed;
      ++lists;
      continue;
    }
    if (it.kind != Arg::Kind::Literal) refuse();
    if (std::holds_alternative<int64_t>(it.literal) || std::holds_alternative<ir::Slice>(it.literal)) {
      ++consumed;
    } else if (std::holds_alternative<ir::Ellipsis>(it.literal)) {
      ++ellipses;
    } else if (!std::holds_alternative<ir::NoneLiteral>(it.literal)) {
      refuse();  // bool, tensor and list indices stay with torch
    }
  }
  const bool ints = std::any_of(items.begin(), items.end(), [](const Arg& it) {
    return it.kind == Arg::Kind::Literal && std::holds_alternative<int64_t>(it.literal);
  });
  // An int beside a list is a second index array (numpy's rules may move the indexed dims first).
  if (ellipses > 1 || consumed > rank || lists > 1 || (lists > 0 && ints)) refuse();
  // A list index is advanced indexing: a new tensor, which a slice would alias.
  if (lists > 0) refuse_if_graph_writes_in_place(c);
  Rewriter& rw = c.rw;
  ValueId cur = x;
  int64_t dim = 0;  // dim of `cur` the next index applies to
  bool emitted = false;
  for (const Arg& it : items) {
    if (it.kind == Arg::Kind::List) {
      // One list of ints [k0, k0 + s, ...] with s > 0 (Falcon's `qkv[..., [-2], :]`) selects what
      // slice(k0, k_last + 1, s) does, in place of the dim (a single index array keeps its position).
      const sym::Expr size = rw.type(cur).sizes[static_cast<size_t>(dim)];
      std::vector<sym::Expr> ks;
      for (const Arg& item : it.items) {
        std::optional<int64_t> k = int_literal(item);
        if (!k || bool_literal(item)) refuse();
        const sym::Expr at = *k < 0 ? size + sym::Expr(*k) : sym::Expr(*k);
        if (!c.provable(0, sym::RelOp::Le, at) || !c.provable(at, sym::RelOp::Lt, size)) refuse();  // torch's IndexError
        ks.push_back(at);
      }
      if (ks.empty()) refuse();
      // Evenly spaced as the indices land: k and k - size mix only when the size is constant.
      const sym::Expr step = ks.size() > 1 ? ks[1] - ks[0] : sym::Expr(1);
      if (!step.is_constant() || step.constant() <= 0) refuse();
      for (size_t j = 1; j < ks.size(); ++j)
        if (ks[j] - ks[j - 1] != step) refuse();
      cur = slice_symbolic(rw, cur, dim, ks.front(), ks.back() + 1, step.constant());
      emitted = true;
      ++dim;
    } else if (const int64_t* i = std::get_if<int64_t>(&it.literal)) {
      const sym::Expr size = rw.type(cur).sizes[static_cast<size_t>(dim)];
      if (!size.is_constant()) refuse();  // select's index is an int: x[-1] of a symbolic size is not
      const int64_t n = size.constant(), k = *i < 0 ? *i + n : *i;
      if (k < 0 || k >= n) refuse();
      cur = select(rw, cur, dim, k);
      emitted = true;
    } else if (const ir::Slice* s = std::get_if<ir::Slice>(&it.literal)) {
      const sym::Expr size = rw.type(cur).sizes[static_cast<size_t>(dim)];
      const int64_t step = s->step.value_or(1);
      if (step <= 0) refuse();
      auto bound = [](const std::optional<int64_t>& v) { return v ? std::optional<sym::Expr>(*v) : std::nullopt; };
      const auto [start, end] = clamped_range(c, bound(s->start), bound(s->stop), size);
      if (!(start == sym::Expr(0) && end == size && step == 1)) {
        cur = slice_symbolic(rw, cur, dim, start, end, step);
        emitted = true;
      }
      ++dim;
    } else if (std::holds_alternative<ir::Ellipsis>(it.literal)) {
      dim += rank - consumed;
    }
    // None: a new dim of size 1, added by the final reshape.
  }
  const std::vector<sym::Expr>& want = c.result_type().sizes;
  if (!emitted || rw.type(cur).sizes != want) cur = reshape_symbolic(rw, cur, want, true);
  c.finish(cur);
}

// A slice's (dim, start, end, step) of input `x` normalized as the primitive takes them: dim in range,
// 0 <= start <= end <= size for every value of the symbols, step >= 1 (Refuse otherwise).
struct SliceBounds {
  int64_t dim;
  sym::Expr start, end;
  int64_t step;
};
SliceBounds slice_bounds(Ctx& c, ValueId x) {
  int64_t rank = rank_of(c.rw, x);
  if (rank == 0) refuse();
  const int64_t dim = norm_dim(c.int_arg("dim"), rank);
  const sym::Expr size = c.rw.type(x).sizes[static_cast<size_t>(dim)];
  const int64_t step = c.int_arg("step");
  if (step <= 0) refuse();
  auto bound = [&](std::string_view name) -> std::optional<sym::Expr> {
    if (c.none(name)) return std::nullopt;
    std::optional<sym::Expr> v = size_literal(c.arg(name));
    if (!v) refuse();
    return v;
  };
  const auto [start, end] = clamped_range(c, bound("start"), bound("end"), size);
  return {dim, start, end, step};
}

// Whether the call already spells the bounds as the primitive takes them, after `first` arguments.
bool spells_bounds(const ir::Node& n, size_t first, const SliceBounds& b) {
  return n.kwargs.empty() && n.args.size() == first + 4 && int_literal(n.args[first]) == b.dim &&
         size_literal(n.args[first + 1]) == b.start && size_literal(n.args[first + 2]) == b.end &&
         int_literal(n.args[first + 3]) == b.step;
}

void slice_rule(Ctx& c) {
  ValueId x = c.tensor("input");
  const SliceBounds b = slice_bounds(c, x);
  if (spells_bounds(c.node, 1, b)) refuse();
  c.finish(slice_symbolic(c.rw, x, b.dim, b.start, b.end, b.step));
}

void slice_scatter_rule(Ctx& c) {
  ValueId x = c.tensor("input");
  const SliceBounds b = slice_bounds(c, x);
  if (spells_bounds(c.node, 2, b)) refuse();
  c.finish(c.rw.emit(Op::SliceScatter,
                     {V(x), V(c.tensor("src")), Arg::of_literal(b.dim), Arg::of_size(b.start), Arg::of_size(b.end),
                      Arg::of_literal(b.step)},
                     {}, c.result_type()));
}

void select_rule(Ctx& c) {
  ValueId x = c.tensor("input");
  int64_t rank = rank_of(c.rw, x);
  if (rank == 0) refuse();
  int64_t dim = norm_dim(c.int_arg("dim"), rank);
  int64_t size = const_sizes(c.rw.type(x))[dim];
  int64_t i = c.int_arg("index");
  int64_t k = i < 0 ? i + size : i;
  if (k < 0 || k >= size) refuse();
  if (c.node.kwargs.empty() && int_literal(c.node.args.at(1)) == dim && i == k) refuse();
  c.finish(select(c.rw, x, dim, k));
}

// narrow(x, dim, start, length): slice(start, start + length) when it lies inside the dim for every value of the
// symbols (start and length ints or sizes; a negative int start counts from the end); else torch raises.
void narrow(Ctx& c) {
  ValueId x = c.tensor("input");
  int64_t rank = rank_of(c.rw, x);
  if (rank == 0) refuse();
  int64_t dim = norm_dim(c.int_arg("dim"), rank);
  const sym::Expr size = c.rw.type(x).sizes[static_cast<size_t>(dim)];
  std::optional<sym::Expr> start = size_literal(c.arg("start")), length = size_literal(c.arg("length"));
  if (!start || !length) refuse();
  if (start->is_constant() && start->constant() < 0) start = size + *start;
  if (!c.provable(0, sym::RelOp::Le, *start) || !c.provable(0, sym::RelOp::Le, *length) ||
      !c.provable(*start + *length, sym::RelOp::Le, size))
    refuse();
  c.finish(slice_symbolic(c.rw, x, dim, *start, *start + *length, 1));
}

// split, chunk: consecutive slices whose lengths are the recorded results' sizes along dim.
void pieces(Ctx& c, ValueId x, const Arg& dim_arg) {
  int64_t rank = rank_of(c.rw, x);
  if (rank == 0 || c.node.results.empty()) refuse();
  auto d = int_literal(dim_arg);
  if (!d) refuse();
  int64_t dim = norm_dim(*d, rank);
  int64_t start = 0;
  std::vector<ValueId> out;
  for (size_t i = 0; i < c.node.results.size(); ++i) {
    const ir::TensorType& r = c.result_type(i);
    if (r.sizes.size() != static_cast<size_t>(rank) || !r.sizes[dim].is_constant()) refuse();
    int64_t len = r.sizes[dim].constant();
    out.push_back(slice(c.rw, x, dim, start, start + len, 1));
    start += len;
  }
  if (sym::Expr(start) != c.rw.type(x).sizes[static_cast<size_t>(dim)]) refuse();  // a symbolic dim refuses
  for (size_t i = 0; i < out.size(); ++i) c.finish(out[i], i);
}

void unbind(Ctx& c) {
  ValueId x = c.tensor("input");
  int64_t rank = rank_of(c.rw, x);
  if (rank == 0) refuse();
  int64_t dim = norm_dim(c.int_arg("dim"), rank);
  if (static_cast<int64_t>(c.node.results.size()) != const_sizes(c.rw.type(x))[dim]) refuse();
  std::vector<ValueId> out;
  for (size_t i = 0; i < c.node.results.size(); ++i) out.push_back(select(c.rw, x, dim, static_cast<int64_t>(i)));
  for (size_t i = 0; i < out.size(); ++i) c.finish(out[i], i);
}

}  // namespace

void add_subscript_rules(RuleMap& rules) {
  rules["operator.getitem"] = getitem;
  rules["torch.ops.aten.slice"] = slice_rule;
  rules["torch.slice_scatter"] = slice_scatter_rule;
  rules["torch.select"] = select_rule;
  rules["torch.narrow"] = rules["torch.Tensor.narrow"] = narrow;
  rules["torch.split"] = [](Ctx& c) { pieces(c, c.tensor("tensor"), c.arg("dim")); };
  rules["torch.chunk"] = [](Ctx& c) { pieces(c, c.tensor("input"), c.arg("dim")); };
  rules["torch.unbind"] = rules["torch.Tensor.unbind"] = unbind;
}

}  // namespace ember::passes::decomp
