// Views as index remaps: reshape (and view, flatten, squeeze, unsqueeze, which are reshapes to
// their result's sizes), permute (and transpose), expand, slice, select. Nothing is computed: the
// value keeps its base buffer and composes one more remap onto the way its index reaches it.
//
// Alongside the remap each view tracks where torch puts its elements in the base's storage
// (strides and offset), so that a view an extern call or the caller sees can become a View
// buffer that aliases exactly as eager's does. A reshape torch cannot express as a view copies
// in torch; it has no layout here, and if anything later writes a buffer in place it is copied
// at once, so the mutation cannot show through it.
//
// Reshape remaps dims in groups whose sizes multiply to the same extent (size-1 dims aside), so
// splitting or merging dims gives short div/mod expressions rather than one flat index.
#include "lowering/lower_internal.h"
#include "sym/relation.h"

namespace ember::lowering::detail {

Layout buffer_layout(const loop_ir::Buffer& buffer) { return Layout{buffer.strides, buffer.offset}; }

bool layout_matches(const Layout& layout, const ir::TensorType& type) {
  if (layout.strides.size() != type.sizes.size()) return false;
  for (const Expr& s : type.sizes)
    if (s == Expr(0)) return true;  // an empty tensor: every layout holds it
  for (size_t d = 0; d < type.sizes.size(); ++d)
    if (type.sizes[d] != Expr(1) && layout.strides[d] != type.strides[d]) return false;
  return true;
}

namespace {

struct Group {
  std::vector<size_t> in, out;  // dims of size != 1, outer to inner
};

bool has_zero(const std::vector<Expr>& sizes) {
  for (const Expr& s : sizes)
    if (s == Expr(0)) return true;
  return false;
}

// Pairs up runs of input and output dims with equal products. Dims of size 1 belong to no
// group. Falls back to one group of everything when symbolic sizes stop the pairing.
std::vector<Group> reshape_groups(const std::vector<Expr>& in_sizes, const std::vector<Expr>& out_sizes) {
  std::vector<size_t> in, out;
  for (size_t d = 0; d < in_sizes.size(); ++d)
    if (in_sizes[d] != Expr(1)) in.push_back(d);
  for (size_t d = 0; d < out_sizes.size(); ++d)
    if (out_sizes[d] != Expr(1)) out.push_back(d);
  std::vector<Group> groups;
  size_t i = 0, j = 0;
  bool ok = true;
  while (ok && i < in.size() && j < out.size()) {
    Group g{{in[i]}, {out[j]}};
    Expr pin = in_sizes[in[i++]], pout = out_sizes[out[j++]];
    while (pin != pout) {
      if (!pin.is_constant() || !pout.is_constant()) {
        ok = false;
        break;
      }
      if (pin.constant() < pout.constant()) {
        if (i == in.size()) { ok = false; break; }
        g.in.push_back(in[i]);
        pin = pin * in_sizes[in[i++]];
      } else {
        if (j == out.size()) { ok = false; break; }
        g.out.push_back(out[j]);
        pout = pout * out_sizes[out[j++]];
      }
    }
    groups.push_back(std::move(g));
  }
  if (ok && i == in.size() && j == out.size()) return groups;
  return {Group{in, out}};
}

Index reshape_index(const std::vector<Group>& groups, const std::vector<Expr>& in_sizes,
                    const std::vector<Expr>& out_sizes, const Index& out_index) {
  Index in_index(in_sizes.size(), Expr(0));
  for (const Group& g : groups) {
    Expr flat = 0, inner = 1;
    for (size_t k = g.out.size(); k-- > 0;) {
      flat = flat + out_index.at(g.out[k]) * inner;
      inner = inner * out_sizes[g.out[k]];
    }
    Expr in_inner = 1;
    for (size_t k = g.in.size(); k-- > 0;) {
      Expr e = floordiv(flat, in_inner);
      if (k > 0) e = mod(e, in_sizes[g.in[k]]);  // the outermost dim needs no wrap: flat < extent
      in_index[g.in[k]] = e;
      in_inner = in_inner * in_sizes[g.in[k]];
    }
  }
  return in_index;
}

// torch's view rule: the merged input dims of each group must be one strided block.
std::optional<Layout> reshape_layout(const std::vector<Group>& groups, const std::vector<Expr>& in_sizes,
                                     const Layout& in, const ir::TensorType& out_type) {
  Layout result{out_type.strides, in.offset};
  for (const Group& g : groups) {
    for (size_t k = 0; k + 1 < g.in.size(); ++k)
      if (in.strides[g.in[k]] != in.strides[g.in[k + 1]] * in_sizes[g.in[k + 1]]) return std::nullopt;
    Expr stride = g.in.empty() ? Expr(1) : in.strides[g.in.back()];
    for (size_t k = g.out.size(); k-- > 0;) {
      result.strides[g.out[k]] = stride;
      stride = stride * out_type.sizes[g.out[k]];
    }
  }
  return result;
}

std::optional<int64_t> normalize_dim(int64_t d, size_t rank) {
  int64_t n = d < 0 ? d + static_cast<int64_t>(rank) : d;
  if (n < 0 || n >= static_cast<int64_t>(rank)) return std::nullopt;
  return n;
}

// A new view of `x`: its remap composes `f` (view index -> x's index) onto x's.
void bind_view(Lowerer& L, ir::ValueId result, ir::ValueId x, std::function<Index(const Index&)> f,
               std::optional<Layout> layout) {
  const Lazy& base = L.lazy(x);
  Lazy v;
  v.buffer = base.buffer;
  std::function<Index(const Index&)> prev = base.remap;
  v.remap = prev ? [prev, f](const Index& i) { return prev(f(i)); } : std::move(f);
  v.layout = std::move(layout);
  L.set_lazy(result, std::move(v));
}

std::string lower_reshape(Lowerer& L, const ir::Node& node, ir::ValueId x, ir::ValueId r) {
  const std::vector<Expr> in_sizes = L.type(x).sizes;
  const std::vector<Expr> out_sizes = L.type(r).sizes;
  std::optional<Layout> layout;
  if (has_zero(in_sizes) || has_zero(out_sizes)) {
    // No element is ever read; keep index expressions free of divisions by zero.
    Index zeros(in_sizes.size(), Expr(0));
    if (L.lazy(x).layout) layout = Layout{L.type(r).strides, L.lazy(x).layout->offset};
    bind_view(L, r, x, [zeros](const Index&) { return zeros; }, layout);
    return "";
  }
  std::vector<Group> groups = reshape_groups(in_sizes, out_sizes);
  if (L.lazy(x).layout) layout = reshape_layout(groups, in_sizes, *L.lazy(x).layout, L.type(r));
  bind_view(L, r, x, [groups, in_sizes, out_sizes](const Index& i) { return reshape_index(groups, in_sizes, out_sizes, i); },
            layout);
  if (!layout && L.mutation_after(node.id)) {
    // torch copied here; a later in-place write to the base must not show through this value.
    BufferId copy = L.new_result_buffer(r);
    L.emit_copy(r, copy);
    L.bind_realized(r, copy);
  }
  return "";
}

std::string lower_permute(Lowerer& L, ir::ValueId x, ir::ValueId r, std::vector<int64_t> dims) {
  size_t rank = L.type(x).sizes.size();
  if (dims.size() != rank) return "permutation of the wrong length";
  std::vector<bool> seen(rank, false);
  for (int64_t& d : dims) {
    std::optional<int64_t> n = normalize_dim(d, rank);
    if (!n || seen[*n]) return "not a permutation";
    seen[*n] = true;
    d = *n;
  }
  std::optional<Layout> layout;
  if (const std::optional<Layout>& in = L.lazy(x).layout) {
    layout = Layout{std::vector<Expr>(rank), in->offset};
    for (size_t j = 0; j < rank; ++j) layout->strides[j] = in->strides[dims[j]];
  }
  bind_view(L, r, x, [dims](const Index& i) {
      Index in(dims.size());
      for (size_t j = 0; j < dims.size(); ++j) in[dims[j]] = i[j];
      return in;
    }, layout);
  return "";
}

std::string lower_expand(Lowerer& L, ir::ValueId x, ir::ValueId r) {
  const std::vector<Expr> in_sizes = L.type(x).sizes, out_sizes = L.type(r).sizes;
  if (out_sizes.size() < in_sizes.size()) return "expand to a lower rank";
  size_t lead = out_sizes.size() - in_sizes.size();
  std::vector<bool> broadcast(in_sizes.size());
  for (size_t d = 0; d < in_sizes.size(); ++d) {
    broadcast[d] = in_sizes[d] != out_sizes[lead + d];
    if (broadcast[d] && in_sizes[d] != Expr(1)) return "expand of a dim that is not 1";
  }
  std::optional<Layout> layout;
  if (const std::optional<Layout>& in = L.lazy(x).layout) {
    layout = Layout{std::vector<Expr>(out_sizes.size(), Expr(0)), in->offset};
    for (size_t d = 0; d < in_sizes.size(); ++d)
      if (!broadcast[d]) layout->strides[lead + d] = in->strides[d];
  }
  bind_view(L, r, x, [lead, broadcast](const Index& i) {
      Index in;
      for (size_t d = 0; d < broadcast.size(); ++d) in.push_back(broadcast[d] ? Expr(0) : i[lead + d]);
      return in;
    }, layout);
  return "";
}

std::string lower_slice(Lowerer& L, const ir::Node& node, ir::ValueId x, ir::ValueId r) {
  // canonicalize leaves out a step of 1 (its default)
  if (node.args.size() < 4 || node.args.size() > 5 || !node.kwargs.empty()) return "expects slice(x, dim, start, end, step)";
  std::optional<int64_t> dim = int_literal(node.args[1]), step = node.args.size() == 5 ? int_literal(node.args[4]) : 1;
  std::optional<Expr> start = size_literal(node.args[2]), end = size_literal(node.args[3]);
  if (!dim || !start || !end || !step) return "expects int or size literals";
  size_t rank = L.type(x).sizes.size();
  std::optional<int64_t> d = normalize_dim(*dim, rank);
  if (!d || *step < 1) return "a slice outside the canonical form";
  // The canonical form for every size the graph serves: 0 <= start <= end <= size. torch clamps
  // bounds the symbols' facts cannot place (the extern call does the same).
  const Expr& size = L.type(x).sizes[*d];
  auto known = [&](const Expr& a, const Expr& b) {
    return sym::provable(sym::Rel{a, sym::RelOp::Le, b}, L.graph().symbols);
  };
  if (!known(0, *start) || !known(*start, *end) || !known(*end, size)) return "bounds not known to lie within the size";
  const int64_t dd = *d, st = *step;
  const Expr s0 = *start;
  std::optional<Layout> layout;
  if (const std::optional<Layout>& in = L.lazy(x).layout) {
    layout = *in;
    layout->offset = in->offset + in->strides[dd] * s0;
    layout->strides[dd] = in->strides[dd] * Expr(st);
  }
  bind_view(L, r, x, [dd, s0, st](const Index& i) {
      Index in = i;
      in[dd] = s0 + Expr(st) * i[dd];
      return in;
    }, layout);
  return "";
}

std::string lower_select(Lowerer& L, const ir::Node& node, ir::ValueId x, ir::ValueId r) {
  if (node.args.size() != 3 || !node.kwargs.empty()) return "expects select(x, dim, index)";
  std::optional<int64_t> dim = int_literal(node.args[1]), index = int_literal(node.args[2]);
  if (!dim || !index) return "expects int literals";
  size_t rank = L.type(x).sizes.size();
  std::optional<int64_t> d = normalize_dim(*dim, rank);
  if (!d) return "dim out of range";
  const Expr& size = L.type(x).sizes[*d];
  int64_t at = *index;
  if (at < 0) {
    if (!size.is_constant()) return "a negative index into a symbolic size";
    at += size.constant();
  }
  if (at < 0 || (size.is_constant() && at >= size.constant())) return "index out of range";
  int64_t dd = *d;
  std::optional<Layout> layout;
  if (const std::optional<Layout>& in = L.lazy(x).layout) {
    layout = *in;
    layout->offset = in->offset + in->strides[dd] * Expr(at);
    layout->strides.erase(layout->strides.begin() + dd);
  }
  bind_view(L, r, x, [dd, at](const Index& i) {
      Index in = i;
      in.insert(in.begin() + dd, Expr(at));
      return in;
    }, layout);
  return "";
}

}  // namespace

std::string lower_view(Lowerer& L, const ir::Node& node) {
  if (node.results.size() != 1 || node.args.empty() || node.args[0].kind != ir::Arg::Kind::Value)
    return "expects one tensor operand and one result";
  ir::ValueId x = node.args[0].value, r = node.results[0];
  if (L.type(x).dtype != L.type(r).dtype) return "a view that changes the dtype";
  switch (node.op) {
    case ir::Op::Reshape: case ir::Op::View: case ir::Op::Flatten: case ir::Op::Squeeze: case ir::Op::Unsqueeze:
      return lower_reshape(L, node, x, r);
    case ir::Op::Permute: {
      std::optional<std::vector<int64_t>> dims =
          node.args.size() == 2 ? int_list(node.args[1]) : std::nullopt;
      if (!dims || !node.kwargs.empty()) return "expects permute(x, [dims])";
      return lower_permute(L, x, r, *dims);
    }
    case ir::Op::Transpose: {
      size_t rank = L.type(x).sizes.size();
      if (node.args.size() != 3 || !node.kwargs.empty()) return "expects transpose(x, d0, d1)";
      std::optional<int64_t> a = int_literal(node.args[1]), b = int_literal(node.args[2]);
      std::optional<int64_t> da = a ? normalize_dim(*a, rank) : std::nullopt;
      std::optional<int64_t> db = b ? normalize_dim(*b, rank) : std::nullopt;
      if (!da || !db) return "expects transpose(x, d0, d1) with dims in range";
      std::vector<int64_t> dims;
      for (size_t k = 0; k < rank; ++k) dims.push_back(static_cast<int64_t>(k));
      std::swap(dims[static_cast<size_t>(*da)], dims[static_cast<size_t>(*db)]);
      return lower_permute(L, x, r, dims);
    }
    case ir::Op::Expand: return lower_expand(L, x, r);
    case ir::Op::Slice: return lower_slice(L, node, x, r);
    case ir::Op::Select: return lower_select(L, node, x, r);
    default: return "not a view primitive";  // getitem, split, chunk: the decompose pass expands them
  }
}

}  // namespace ember::lowering::detail
