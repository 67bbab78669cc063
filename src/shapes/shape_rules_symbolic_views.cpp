// Shape rules of the view ops and cat over symbolic sizes, written directly over sym::Expr.
//
// Why not the stand-in method of shape_rules_symbolic.cpp: a view's sizes and strides are products
// of its input's (flatten, view(-1, ...), unsqueeze's stride), and a reshape's size list holds
// symbolic ints (`view(%x, [s0, s1, 12, 64])`), which stand-ins cannot read back. These rules
// compare sizes only structurally (equal canonical forms; monomials have one spelling) and never
// ask whether a symbol is smaller than a constant, so they need no range: a question they cannot
// answer that way declines (nullopt, never a guess).
//
// Covered: view and reshape (`-1` resolved when the element count divides exactly as monomials) of
// a tensor with default strides, or of another layout where torch views without a copy, permute, transpose, unsqueeze, squeeze, expand, flatten of a
// tensor with default strides, contiguous, cat of inputs whose memory format is provably
// contiguous, a reshape that copies for every value of the symbols, and split/chunk along a dim of
// constant size. Declines: other view/reshape/flatten of other layouts (whether torch copies
// depends on stride comparisons), getitem (the trace lowers basic subscripts: trace_subscript.cpp),
// split and chunk along a symbolic dim.
#include <algorithm>
#include <functional>
#include <deque>
#include <map>
#include <set>

#include "shapes/shape_rules_internal.h"
#include "sym/relation.h"

namespace ember::shapes::rules {

namespace {

using sym::Expr;
using Exprs = std::vector<Expr>;

Result one(ir::TensorType t) { return std::vector<ir::TensorType>{std::move(t)}; }

const ir::TensorType* tensor_of(const Operand* p) {
  return p && p->kind == Operand::Kind::Tensor ? p->tensor : nullptr;
}

int64_t rank(const ir::TensorType& t) { return static_cast<int64_t>(t.sizes.size()); }

// A view of `x`: same dtype and device, requires grad exactly when x does.
ir::TensorType view_type(const ir::TensorType& x, Exprs sizes, Exprs strides) {
  ir::TensorType t = x;
  t.sizes = std::move(sizes);
  t.strides = std::move(strides);
  return t;
}

// A size: an int literal (constant or symbolic).
std::optional<Expr> as_size(const Operand* p) {
  if (!p || p->kind != Operand::Kind::Literal) return std::nullopt;
  if (const int64_t* v = std::get_if<int64_t>(&p->literal)) return Expr(*v);
  if (const Expr* e = std::get_if<Expr>(&p->literal)) return *e;
  return std::nullopt;
}

std::optional<Exprs> as_size_list(const Operand* p) {
  if (!p || p->kind != Operand::Kind::Sequence) return std::nullopt;
  Exprs out;
  for (const Operand& item : p->items) {
    auto e = as_size(&item);
    if (!e) return std::nullopt;
    out.push_back(*e);
  }
  return out;
}

// sizes_operand (shape_rules.cpp) over symbolic ints: one sequence or several ints after the tensor.
std::optional<Exprs> size_list(const Call& call, const char* keyword, const Operand** implicit = nullptr) {
  const Operand* named = nullptr;
  for (const auto& [name, operand] : call.kwargs) {
    if (name == keyword && !named) {
      named = &operand;
    } else if (implicit && name == "implicit" && !*implicit) {
      *implicit = &operand;
    } else {
      return std::nullopt;
    }
  }
  if (named) return call.args.size() == 1 ? as_size_list(named) : std::nullopt;
  if (call.args.size() < 2) return std::nullopt;
  if (call.args.size() == 2)
    if (auto list = as_size_list(&call.args[1])) return list;
  Exprs out;
  for (size_t i = 1; i < call.args.size(); ++i) {
    auto e = as_size(&call.args[i]);
    if (!e) return std::nullopt;
    out.push_back(*e);
  }
  return out;
}

bool is_constant(const Expr& e, int64_t v) { return e.is_constant() && e.constant() == v; }
// A size a shape may hold: a constant >= 0 or a symbolic size (symbols stand for sizes >= 2).
bool is_size(const Expr& e) { return !e.is_constant() || e.constant() >= 0; }


// A monomial as coefficient times sorted factors: `12*s0*s1` is (12, [s0, s1]); nullopt for sums.
std::optional<std::pair<int64_t, Exprs>> monomial(const Expr& e) {
  if (e.is_constant()) return std::make_pair(e.constant(), Exprs{});
  if (e.kind() != sym::ExprKind::Mul) return std::make_pair(int64_t{1}, Exprs{e});
  Exprs factors = e.operands();
  int64_t c = 1;
  if (factors[0].is_constant()) {
    c = factors[0].constant();
    factors.erase(factors.begin());
  }
  return std::make_pair(c, factors);
}

// a / b when b divides a as monomials (exactly, for every symbol value); nullopt otherwise.
std::optional<Expr> exact_quotient(const Expr& a, const Expr& b) {
  auto ma = monomial(a), mb = monomial(b);
  if (!ma || !mb || mb->first == 0 || ma->first % mb->first != 0) return std::nullopt;
  Exprs rest = ma->second;
  for (const Expr& f : mb->second) {
    auto at = std::find(rest.begin(), rest.end(), f);
    if (at == rest.end()) return std::nullopt;
    rest.erase(at);
  }
  Expr q = sym::product(rest) * Expr(ma->first / mb->first);
  if (q * b != a) return std::nullopt;
  return q;
}

// Products of monomials are canonical (one spelling each); a product with a sum is not expanded,
// so sizes holding sums (a cat's) would compare unequal to an equal spelling: such views decline.
bool all_monomials(const Exprs& xs) {
  return std::all_of(xs.begin(), xs.end(), [](const Expr& e) {
    auto m = monomial(e);
    return m && std::none_of(m->second.begin(), m->second.end(),
                             [](const Expr& f) { return f.kind() != sym::ExprKind::Symbol; });
  });
}

bool has_default_layout(const ir::TensorType& t) { return t.strides == ir::contiguous_strides(t.sizes); }

// The call with every factor of its sizes, strides and int arguments that holds a floor division (the
// length after a conv front end, `(s1 + -10) // 5 + 1`, and the strides of its slices; also a mod, max
// or min) replaced by a fresh symbol, so that the monomial rules treat it as one opaque size; `rule`'s
// answer then gets the originals back. Why it is exact: a product identity over independent atoms holds
// for every value of them, so for the originals' values too; atoms the rule cannot relate (an atom and
// an equal spelling of it) only make it decline.
Result with_atoms(const Call& call, Result (*rule)(const Call&)) {
  std::vector<std::pair<Expr, Expr>> atoms;  // original -> its symbol
  sym::Replacements back;
  // Only factors with a floor division, mod, max or min: a polynomial factor (`4*s1 + 4`) keeps its spelling
  // (the rules decline it, as the trace's types spell such products expanded).
  std::function<bool(const Expr&)> opaque = [&](const Expr& e) {
    sym::ExprKind k = e.kind();
    if (k == sym::ExprKind::FloorDiv || k == sym::ExprKind::Mod || k == sym::ExprKind::Max || k == sym::ExprKind::Min) return true;
    return std::any_of(e.operands().begin(), e.operands().end(), opaque);
  };
  std::function<Expr(const Expr&)> atomize = [&](const Expr& e) -> Expr {
    if (e.is_constant() || e.kind() == sym::ExprKind::Symbol || !opaque(e)) return e;
    if (e.kind() == sym::ExprKind::Mul) {
      Expr p = 1;
      for (const Expr& f : e.operands()) p = p * atomize(f);
      return p;
    }
    // An atom times a constant, which the constructors distribute over its sum (`8*(f + 1)` is `8*f + 8`):
    // a stride over an atomized size.
    auto constant_term = [](const Expr& x) {
      return x.kind() == sym::ExprKind::Add && x.operands().back().is_constant() ? x.operands().back().constant() : 0;
    };
    for (const auto& [original, atom] : atoms) {
      if (original == e) return atom;
      int64_t c0 = constant_term(original), c1 = constant_term(e);
      if (c0 != 0 && c1 % c0 == 0 && Expr(c1 / c0) * original == e) return Expr(c1 / c0) * atom;
    }
    Expr atom = Expr::symbol("__atom" + std::to_string(atoms.size()));
    atoms.emplace_back(e, atom);
    back.emplace_back(atom.symbol_name(), e);
    return atom;
  };
  std::deque<ir::TensorType> types;
  std::function<Operand(const Operand&)> operand = [&](const Operand& o) {
    Operand out = o;
    if (o.tensor) {
      ir::TensorType& t = types.emplace_back(*o.tensor);
      for (auto* xs : {&t.sizes, &t.strides})
        for (Expr& e : *xs) e = atomize(e);
      out.tensor = &t;
    }
    if (const Expr* e = o.kind == Operand::Kind::Literal ? std::get_if<Expr>(&o.literal) : nullptr) out.literal = atomize(*e);
    for (Operand& item : out.items) item = operand(item);
    return out;
  };
  std::vector<Operand> args;
  std::vector<std::pair<std::string, Operand>> kwargs;
  for (const Operand& a : call.args) args.push_back(operand(a));
  for (const auto& [k, v] : call.kwargs) kwargs.emplace_back(k, operand(v));
  if (atoms.empty()) return rule(call);
  Result r = rule(Call{call.op, args, kwargs, call.grad_enabled, call.default_dtype, call.facts});
  if (!r) return r;
  for (ir::TensorType& t : *r)
    for (auto* xs : {&t.sizes, &t.strides})
      for (Expr& e : *xs) e = sym::substitute(e, back);
  return r;
}

// torch's is_contiguous(): strides as contiguous_strides gives them, size-1 dims ignored.
bool is_contiguous(const ir::TensorType& t) {
  Expr expected = 1;
  for (size_t d = t.sizes.size(); d-- > 0;) {
    if (is_constant(t.sizes[d], 1)) continue;
    if (t.strides[d] != expected) return false;
    expected = expected * t.sizes[d];
  }
  return true;
}

std::optional<size_t> wrap(int64_t dim, int64_t n) {
  auto w = wrap_dim(dim, n);
  return w ? std::optional<size_t>(static_cast<size_t>(*w)) : std::nullopt;
}

// The strides of `x` viewed as `shape` without a copy (torch's computeStride over monomials): dims
// are grouped into chunks that are contiguous among themselves, and each chunk's elements are
// regrouped as the new sizes; nullopt when that needs a copy or when a comparison of sizes cannot
// be decided as monomials (a quotient that is not exact). `*copies` is set when nullopt means
// torch copies for every value of the symbols: a chunk of constant sizes that the new sizes, also
// constant there, do not regroup (repeat_kv's reshape of an expanded dim).
std::optional<Exprs> view_strides(const ir::TensorType& x, const Exprs& shape, bool* copies = nullptr) {
  const Exprs& sizes = x.sizes;
  const Exprs& strides = x.strides;
  Exprs out(shape.size());
  if (sizes.empty()) return shape.empty() ? std::optional<Exprs>(out) : std::nullopt;
  auto smaller = [](const Expr& a, const Expr& b) { return a != b && exact_quotient(b, a).has_value(); };
  std::ptrdiff_t view_d = static_cast<std::ptrdiff_t>(shape.size()) - 1;
  Expr chunk_stride = strides.back(), tensor_numel = 1, view_numel = 1;
  for (std::ptrdiff_t d = static_cast<std::ptrdiff_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel = tensor_numel * sizes[d];
    bool chunk_ends = d == 0 || (!is_constant(sizes[d - 1], 1) && strides[d - 1] != tensor_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (smaller(view_numel, tensor_numel) || is_constant(shape[view_d], 1))) {
      out[view_d] = view_numel * chunk_stride;
      view_numel = view_numel * shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) {
      if (copies) *copies = view_numel.is_constant() && tensor_numel.is_constant();
      return std::nullopt;
    }
    if (d > 0) {
      chunk_stride = strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Result view_reshape(const Call& call) {
  const ir::TensorType* x = tensor_of(call.args.empty() ? nullptr : &call.args[0]);
  auto shape = size_list(call, call.op == ir::Op::View ? "size" : "shape");
  if (!x || !shape || !all_monomials(x->sizes) || !all_monomials(*shape) || !all_monomials(x->strides)) return std::nullopt;
  Expr count = sym::product(x->sizes);
  std::optional<size_t> unknown;
  Expr known = 1;
  for (size_t i = 0; i < shape->size(); ++i) {
    const Expr& s = (*shape)[i];
    if (is_constant(s, -1) && !unknown) {
      unknown = i;
    } else if (is_size(s)) {
      known = known * s;
    } else {
      return std::nullopt;
    }
  }
  if (unknown) {
    auto q = exact_quotient(count, known);
    if (!q) return std::nullopt;
    (*shape)[*unknown] = *q;
  } else if (known != count) {
    return std::nullopt;
  }
  if (has_default_layout(*x)) return one(view_type(*x, *shape, ir::contiguous_strides(*shape)));
  // Another layout: a view where torch makes one; a reshape that copies for every value of the
  // symbols makes a contiguous tensor (a copy: it requires grad only in grad mode).
  bool copies = false;
  std::optional<Exprs> strides = view_strides(*x, *shape, &copies);
  if (!strides && copies && call.op == ir::Op::Reshape) {
    ir::TensorType t = view_type(*x, *shape, ir::contiguous_strides(*shape));
    t.requires_grad = call.grad_enabled && x->requires_grad;
    return one(t);
  }
  if (!strides) return std::nullopt;
  return one(view_type(*x, *shape, *strides));
}

Result permute(const Call& call) {
  const ir::TensorType* x = tensor_of(call.args.empty() ? nullptr : &call.args[0]);
  auto dims = sizes_operand(call, "dims");
  if (!x || !dims || static_cast<int64_t>(dims->size()) != rank(*x)) return std::nullopt;
  Exprs sizes, strides;
  std::vector<bool> used(dims->size(), false);
  for (int64_t d : *dims) {
    auto w = wrap(d, rank(*x));
    if (!w || used[*w]) return std::nullopt;
    used[*w] = true;
    sizes.push_back(x->sizes[*w]);
    strides.push_back(x->strides[*w]);
  }
  return one(view_type(*x, sizes, strides));
}

Result transpose(const Call& call) {
  auto b = bind(call, {"input", "dim0", "dim1"});
  if (!b) return std::nullopt;
  const ir::TensorType* x = tensor_of((*b)[0]);
  auto d0 = as_int((*b)[1]), d1 = as_int((*b)[2]);
  if (!x || !d0 || !d1 || rank(*x) == 0) return std::nullopt;
  auto w0 = wrap(*d0, rank(*x)), w1 = wrap(*d1, rank(*x));
  if (!w0 || !w1) return std::nullopt;
  Exprs sizes = x->sizes, strides = x->strides;
  std::swap(sizes[*w0], sizes[*w1]);
  std::swap(strides[*w0], strides[*w1]);
  return one(view_type(*x, sizes, strides));
}

Result unsqueeze(const Call& call) {
  auto b = bind(call, {"input", "dim"});
  if (!b) return std::nullopt;
  const ir::TensorType* x = tensor_of((*b)[0]);
  auto dim = as_int((*b)[1]);
  if (!x || !dim) return std::nullopt;
  auto d = wrap(*dim, rank(*x) + 1);
  if (!d) return std::nullopt;
  Exprs sizes = x->sizes, strides = x->strides;
  Expr stride = *d < sizes.size() ? sizes[*d] * strides[*d] : Expr(1);
  sizes.insert(sizes.begin() + static_cast<std::ptrdiff_t>(*d), 1);
  strides.insert(strides.begin() + static_cast<std::ptrdiff_t>(*d), stride);
  return one(view_type(*x, sizes, strides));
}

// A symbolic size is never 1, so squeeze keeps it.
Result squeeze(const Call& call) {
  auto b = bind(call, {"input", "dim"});
  if (!b) return std::nullopt;
  const ir::TensorType* x = tensor_of((*b)[0]);
  if (!x) return std::nullopt;
  std::vector<bool> drop(x->sizes.size(), false);
  if (!(*b)[1]) {
    for (size_t i = 0; i < drop.size(); ++i) drop[i] = is_constant(x->sizes[i], 1);
  } else {
    auto dims = as_int_or_list((*b)[1]);
    if (!dims) return std::nullopt;
    for (int64_t dim : *dims) {
      auto w = wrap(dim, rank(*x));
      if (!w) return std::nullopt;
      if (rank(*x) > 0) drop[*w] = is_constant(x->sizes[*w], 1);
    }
  }
  Exprs sizes, strides;
  for (size_t i = 0; i < drop.size(); ++i)
    if (!drop[i]) {
      sizes.push_back(x->sizes[i]);
      strides.push_back(x->strides[i]);
    }
  return one(view_type(*x, sizes, strides));
}

Result expand(const Call& call) {
  const ir::TensorType* x = tensor_of(call.args.empty() ? nullptr : &call.args[0]);
  const Operand* implicit = nullptr;
  auto target = size_list(call, "size", &implicit);
  if (!x || !target || (implicit && !as_bool(implicit))) return std::nullopt;
  size_t n = target->size(), old = x->sizes.size();
  if (n < old) return std::nullopt;
  Exprs sizes(n), strides(n);
  for (size_t i = n; i-- > 0;) {
    const Expr& want = (*target)[i];
    if (i < n - old) {  // a new leading dim: broadcast, or an unsqueeze's stride when of size 1
      if (!is_size(want)) return std::nullopt;
      sizes[i] = want;
      strides[i] = is_constant(want, 1) && i + 1 < n ? sizes[i + 1] * strides[i + 1] : Expr(0);
      continue;
    }
    size_t d = i - (n - old);
    const Expr& have = x->sizes[d];
    if (is_constant(want, -1) || want == have) {
      sizes[i] = have;
      strides[i] = x->strides[d];
    } else if (is_constant(have, 1) && is_size(want)) {
      sizes[i] = want;
      strides[i] = 0;
    } else {
      return std::nullopt;
    }
  }
  return one(view_type(*x, sizes, strides));
}

Result flatten(const Call& call) {
  auto b = bind(call, {"input", "start_dim", "end_dim"});
  if (!b) return std::nullopt;
  const ir::TensorType* x = tensor_of((*b)[0]);
  int64_t start = (*b)[1] ? as_int((*b)[1]).value_or(INT64_MIN) : 0;
  int64_t end = (*b)[2] ? as_int((*b)[2]).value_or(INT64_MIN) : -1;
  if (!x || start == INT64_MIN || end == INT64_MIN || rank(*x) == 0) return std::nullopt;
  auto s = wrap(start, rank(*x)), e = wrap(end, rank(*x));
  if (!s || !e || *s > *e) return std::nullopt;
  if (*s == *e) return one(*x);  // flatten(x, d, d) returns x itself
  if (!has_default_layout(*x) || !all_monomials(x->sizes)) return std::nullopt;
  Exprs sizes(x->sizes.begin(), x->sizes.begin() + static_cast<std::ptrdiff_t>(*s));
  sizes.push_back(sym::product(Exprs(x->sizes.begin() + static_cast<std::ptrdiff_t>(*s),
                                x->sizes.begin() + static_cast<std::ptrdiff_t>(*e) + 1)));
  sizes.insert(sizes.end(), x->sizes.begin() + static_cast<std::ptrdiff_t>(*e) + 1, x->sizes.end());
  return one(view_type(*x, sizes, ir::contiguous_strides(sizes)));
}

// contiguous() returns x itself when torch deems it contiguous, else a contiguous copy.
Result contiguous(const Call& call) {
  auto b = bind(call, {"input", "*memory_format"});
  if (!b || (*b)[1]) return std::nullopt;
  const ir::TensorType* x = tensor_of((*b)[0]);
  if (!x) return std::nullopt;
  if (is_contiguous(*x)) return one(*x);
  ir::TensorType t = view_type(*x, x->sizes, ir::contiguous_strides(x->sizes));
  t.requires_grad = call.grad_enabled && x->requires_grad;
  return one(t);
}

// Whether torch's suggest_memory_format() of `t` is contiguous for every value of its symbols
// (cat lays out its result in its inputs' memory format): default strides; a rank other than 4
// and 5; or a rank-4 layout that fails torch's channels-last test at its dim 3 (the stride of
// dim 3 below that of dim 1 times its size: heads transposed out of `[B, T, H, D]`).
bool suggests_contiguous(const ir::TensorType& t) {
  if (has_default_layout(t) || (rank(t) != 4 && rank(t) != 5)) return true;
  if (rank(t) == 5 || t.strides[1] == Expr(0)) return false;
  Expr c = is_constant(t.sizes[1], 1) ? t.strides[1] : t.strides[1] * t.sizes[1];
  sym::Symbols symbols;  // each symbol >= 2
  std::set<std::string> names;
  for (const Expr& e : {t.strides[1], t.strides[3], t.sizes[1]}) sym::free_symbols(e, names);
  for (const std::string& n : names) symbols.push_back(sym::SymbolInfo{n});
  return sym::provable(sym::Rel{t.strides[3], sym::RelOp::Lt, c}, symbols);
}

// cat of tensors of one dtype and device whose memory format is contiguous; the cat dim's sizes
// add up, and the result is contiguous.
Result cat(const Call& call) {
  auto b = bind(call, {"tensors", "dim"});
  if (!b || !(*b)[0] || (*b)[0]->kind != Operand::Kind::Sequence || (*b)[0]->items.empty()) return std::nullopt;
  int64_t dim = (*b)[1] ? as_int((*b)[1]).value_or(INT64_MIN) : 0;
  std::vector<const ir::TensorType*> xs, legacy_empty;
  for (const Operand& item : (*b)[0]->items) {
    const ir::TensorType* t = tensor_of(&item);
    if (!t || !suggests_contiguous(*t) || rank(*t) == 0) return std::nullopt;
    // cat skips 1-D empty tensors whatever the others' rank (a legacy rule transformers'
    // DynamicCache relies on: its first torch.cat joins torch.tensor([]) and the keys).
    bool skipped = rank(*t) == 1 && t->sizes[0] == 0;
    (skipped ? legacy_empty : xs).push_back(t);
  }
  if (xs.empty()) return std::nullopt;
  const ir::TensorType& first = *xs[0];
  bool requires_grad = false;
  for (const ir::TensorType* t : legacy_empty) {
    if (t->dtype != first.dtype || t->device != first.device) return std::nullopt;
    requires_grad = requires_grad || t->requires_grad;
  }
  auto d = wrap(dim, rank(first));
  if (dim == INT64_MIN || !d) return std::nullopt;
  Exprs sizes = first.sizes;
  sizes[*d] = 0;
  for (const ir::TensorType* t : xs) {
    if (t->dtype != first.dtype || t->device != first.device || t->sizes.size() != first.sizes.size())
      return std::nullopt;
    for (size_t i = 0; i < sizes.size(); ++i)
      if (i != *d && t->sizes[i] != sizes[i]) return std::nullopt;
    sizes[*d] = sizes[*d] + t->sizes[*d];
    requires_grad = requires_grad || t->requires_grad;
  }
  ir::TensorType t = view_type(first, sizes, ir::contiguous_strides(sizes));
  t.requires_grad = call.grad_enabled && requires_grad && ir::is_differentiable(first.dtype);
  return one(t);
}

// split/chunk along a dimension of constant size (qkv.split(C, dim=2) with B and T symbolic): the
// pieces are as for static sizes, every other dim and every stride kept as x's.
Result split_chunk(const Call& call) {
  bool is_split = call.op == ir::Op::Split;
  auto b = is_split ? bind(call, {"input|tensor", "split_size|split_size_or_sections", "dim"})
                    : bind(call, {"input", "chunks", "dim"});
  if (!b) return std::nullopt;
  const ir::TensorType* x = tensor_of((*b)[0]);
  int64_t dim = (*b)[2] ? as_int((*b)[2]).value_or(INT64_MIN) : 0;
  if (!x || dim == INT64_MIN || rank(*x) == 0) return std::nullopt;
  auto d = wrap(dim, rank(*x));
  if (!d || !x->sizes[*d].is_constant()) return std::nullopt;
  int64_t size = x->sizes[*d].constant();
  std::vector<int64_t> pieces;
  std::optional<int64_t> step = as_int((*b)[1]);
  if (!is_split && step) {
    if (*step <= 0 || size == 0) return std::nullopt;
    step = (size + *step - 1) / *step;
  }
  if (step) {
    if (*step <= 0 || size == 0 || size / *step > 1024) return std::nullopt;
    for (int64_t at = 0; at < size; at += *step) pieces.push_back(std::min(*step, size - at));
  } else if (is_split) {
    auto sections = as_int_list((*b)[1]);
    if (!sections) return std::nullopt;
    int64_t total = 0;
    for (int64_t p : *sections) {
      if (p < 0) return std::nullopt;
      total += p;
    }
    if (total != size) return std::nullopt;
    pieces = *sections;
  } else {
    return std::nullopt;
  }
  std::vector<ir::TensorType> out;
  for (int64_t p : pieces) {
    Exprs sizes = x->sizes;
    sizes[*d] = p;
    out.push_back(view_type(*x, sizes, x->strides));
  }
  return out;
}

}  // namespace

// Tensor.repeat(*repeats) / repeat(repeats): a contiguous copy whose sizes are x's (padded with leading
// 1s to the number of repeats) times the repeats, each a constant >= 0 or a symbolic size (BLOOM's
// `alibi.repeat(batch_size, 1, 1)`). Written over expressions, constant or not: a size is a product.
Result infer_repeat(const Call& call) {
  const ir::TensorType* x = tensor_of(call.args.empty() ? nullptr : &call.args[0]);
  auto repeats = size_list(call, "repeats");
  if (!x || !repeats || repeats->size() < x->sizes.size()) return std::nullopt;
  if (!std::all_of(repeats->begin(), repeats->end(), is_size)) return std::nullopt;
  size_t lead = repeats->size() - x->sizes.size();
  Exprs sizes(repeats->size());
  for (size_t i = 0; i < sizes.size(); ++i) sizes[i] = (i < lead ? Expr(1) : x->sizes[i - lead]) * (*repeats)[i];
  ir::TensorType t = view_type(*x, sizes, ir::contiguous_strides(sizes));
  t.requires_grad = call.grad_enabled && x->requires_grad;
  return one(t);
}

// narrow(x, dim, start, length) with start and length ints or sizes: a view of x whose dim is `length` long,
// when the symbols' facts place [start, start + length) inside the dim (a negative int start counts from the
// end); otherwise the meta kernel answers (a symbolic call pins, a static one raises there).
Result infer_narrow(const Call& call) {
  auto b = bind(call, {"input|self", "dim", "start", "length"});
  if (!b || !(*b)[0] || !(*b)[3]) return std::nullopt;
  const ir::TensorType* x = tensor_of((*b)[0]);
  std::optional<int64_t> dim = as_int((*b)[1]);
  std::optional<Expr> start = as_size((*b)[2]), length = as_size((*b)[3]);
  std::optional<int64_t> d = x && dim ? wrap(*dim, rank(*x)) : std::nullopt;
  if (!d || !start || !length) return std::nullopt;
  const Expr& size = x->sizes[static_cast<size_t>(*d)];
  if (start->is_constant() && start->constant() < 0) start = size + *start;
  auto known = [&](const Expr& a, const Expr& b) { return sym::provable(sym::Rel{a, sym::RelOp::Le, b}, call.symbols()); };
  if (!known(0, *start) || !known(0, *length) || !known(*start + *length, size)) return std::nullopt;
  Exprs sizes = x->sizes;
  sizes[static_cast<size_t>(*d)] = *length;
  ir::TensorType t = view_type(*x, sizes, x->strides);
  t.requires_grad = call.grad_enabled && x->requires_grad;
  return one(t);
}

// repeat_interleave(x, repeats, dim) with an int count k >= 0: x's sizes with dim's times k, or without dim
// one dim of numel times k; contiguous. Sizes constant or symbolic. Tensor counts (data) and output_size
// go to the meta kernel.
Result infer_repeat_interleave(const Call& call) {
  auto b = bind(call, {"input|self", "repeats", "dim", "*output_size"});
  if (!b || !(*b)[0] || (*b)[3]) return std::nullopt;
  const ir::TensorType* x = tensor_of((*b)[0]);
  std::optional<int64_t> k = as_int((*b)[1]);
  if (!x || !k || *k < 0) return std::nullopt;
  Exprs sizes = x->sizes;
  if (is_none((*b)[2])) {
    sizes = {sym::product(sizes) * Expr(*k)};
  } else {
    std::optional<int64_t> dim = as_int((*b)[2]);
    std::optional<int64_t> d = dim ? wrap(*dim, rank(*x)) : std::nullopt;
    if (!d) return std::nullopt;
    sizes[static_cast<size_t>(*d)] = sizes[static_cast<size_t>(*d)] * Expr(*k);
  }
  ir::TensorType t = view_type(*x, sizes, ir::contiguous_strides(sizes));
  t.requires_grad = call.grad_enabled && x->requires_grad;
  return one(t);
}

// x[idx] where idx holds advanced indices (int64/int32 tensors, lists of ints) beside full slices `:` and
// at most one Ellipsis: the indices' broadcast shape replaces the dims they index, where those dims are
// adjacent, else leads; the other dims follow in order. A list's ints must fall inside their dim (a
// relation for a symbolic one); a tensor's values are data, which torch checks when it runs.
std::optional<SizeLists> advanced_index_sizes(const Call& call, Assumptions* assumed) {
  if (call.args.size() != 2 || !call.kwargs.empty() || !call.args[0].tensor) return std::nullopt;
  const ir::TensorType& x = *call.args[0].tensor;
  const Operand& index = call.args[1];
  std::vector<const Operand*> items;
  if (index.kind == Operand::Kind::Sequence && index.tuple) {
    for (const Operand& item : index.items) items.push_back(&item);
  } else {
    items.push_back(&index);
  }
  auto is_list = [](const Operand& o) {
    return o.kind == Operand::Kind::Sequence && !o.tuple && !o.items.empty() &&
           std::all_of(o.items.begin(), o.items.end(), [](const Operand& i) { return as_int(&i).has_value(); });
  };
  auto is_full_slice = [](const Operand& o) {
    const ir::Slice* s = o.kind == Operand::Kind::Literal ? std::get_if<ir::Slice>(&o.literal) : nullptr;
    return s && !s->start && !s->stop && !s->step;
  };
  auto is_ellipsis = [](const Operand& o) {
    return o.kind == Operand::Kind::Literal && std::holds_alternative<ir::Ellipsis>(o.literal);
  };
  auto is_index_tensor = [](const Operand& o) {
    return o.kind == Operand::Kind::Tensor && (o.tensor->dtype == ir::DType::Int64 || o.tensor->dtype == ir::DType::Int32);
  };
  int64_t consumed = 0, ellipses = 0;
  bool advanced = false;
  for (const Operand* item : items) {
    if (is_ellipsis(*item)) {
      ++ellipses;
      continue;
    }
    if (!is_full_slice(*item) && !is_list(*item) && !is_index_tensor(*item)) return std::nullopt;
    advanced = advanced || !is_full_slice(*item);
    ++consumed;
  }
  if (!advanced || ellipses > 1 || consumed > rank(x)) return std::nullopt;
  Exprs shape;  // the indices' broadcast shape
  std::vector<size_t> indexed;
  size_t dim = 0;
  for (const Operand* item : items) {
    if (is_ellipsis(*item)) {
      dim += static_cast<size_t>(rank(x) - consumed);
      continue;
    }
    if (!is_full_slice(*item)) {
      Exprs sizes{Expr(static_cast<int64_t>(item->items.size()))};
      if (item->tensor) {
        sizes = item->tensor->sizes;
      } else {
        for (const Operand& i : item->items) {
          int64_t v = *as_int(&i);
          sym::Rel inside = v >= 0 ? sym::Rel{Expr(v), sym::RelOp::Lt, x.sizes[dim]} : sym::Rel{Expr(-v), sym::RelOp::Le, x.sizes[dim]};
          if (!holds_or_assumed(inside, assumed, call.facts)) return std::nullopt;  // torch's IndexError
        }
      }
      auto b = ir::broadcast_shapes(shape, sizes);
      if (!b) return std::nullopt;
      shape = std::move(*b);
      indexed.push_back(dim);
    }
    ++dim;
  }
  bool adjacent = indexed.back() - indexed.front() + 1 == indexed.size();
  Exprs out;
  if (!adjacent) out = shape;
  for (size_t d = 0; d < x.sizes.size(); ++d) {
    if (adjacent && d == indexed.front()) out.insert(out.end(), shape.begin(), shape.end());
    if (std::find(indexed.begin(), indexed.end(), d) == indexed.end()) out.push_back(x.sizes[d]);
  }
  return SizeLists{std::move(out)};
}

Result infer_symbolic_view(const Call& call) {
  static constexpr std::pair<ir::Op, Result (*)(const Call&)> kRules[] = {
      {ir::Op::View, view_reshape}, {ir::Op::Reshape, view_reshape}, {ir::Op::Permute, permute},
      {ir::Op::Transpose, transpose}, {ir::Op::Unsqueeze, unsqueeze}, {ir::Op::Squeeze, squeeze},
      {ir::Op::Expand, expand},     {ir::Op::Flatten, flatten},       {ir::Op::Contiguous, contiguous},
      {ir::Op::Cat, cat},           {ir::Op::Split, split_chunk},     {ir::Op::Chunk, split_chunk}};
  for (const auto& [op, rule] : kRules) {
    if (op != call.op) continue;
    // Sizes that are floor divisions or sums are opaque factors to the rules that regroup sizes.
    return op == ir::Op::View || op == ir::Op::Reshape || op == ir::Op::Flatten ? with_atoms(call, rule) : rule(call);
  }
  return std::nullopt;
}

}  // namespace ember::shapes::rules
