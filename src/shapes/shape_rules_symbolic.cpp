// Shape rules over symbolic sizes, for the pointwise and reduction families.
//
// Why this way: the rules of these families decide dtype, requires_grad and device from dtypes,
// ranks and scalars alone, and their result sizes are operand sizes (broadcast, or kept where a
// reduction does not reduce) or constants (a kept reduced dim is 1). So a call with symbolic
// sizes is answered by running the family's rule twice on constant stand-ins (each distinct
// symbolic size replaced by a distinct prime, another one per run, none equal to a constant size
// of the call) and reading each result size back: the same constant in both runs is that
// constant; the stand-ins of one symbolic size in both runs is that size; anything else (a
// product, a size that depends on the symbol otherwise) declines. Symbols stand for sizes >= 2
// (0/1 specialization, notes/dynamic_shapes.md), which the stand-ins are. A symbolic scalar
// (`x * n`, n an int symbol: a sym(...) literal) stands in the same way: its symbols are atoms and
// the literal their stand-ins' value, which these families read for its kind alone (a rule that
// reads it as a dim declines: no stand-in is a valid dim).
//
// Operands and results may have any dense layout (strides that are the products of the sizes in
// some dim order: what views like transpose and permute make): the stand-ins keep each operand's
// order (dense_order below), and a result's order, the same in both runs, gives its symbolic strides.
// A pointwise operand may also have a layout that is not dense but ordered (ordered_layout,
// strict_order: slices, strided slices `x[::k]`).
//
// Declines (nullopt): other families (views and matmuls compute sizes from sizes), an operand
// whose layout is not dense (unless the rule reads no strides), a result whose layout is not
// dense, and runs that disagree.
#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <set>

#include "shapes/shape_rules_internal.h"
#include "sym/relation.h"

namespace ember::shapes::rules {

namespace {

// Distinct primes >= 2 for the stand-ins; the second run takes the second half.
constexpr int64_t kStandIns[] = {1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061, 1063, 1069,
                                 1087, 1091, 1093, 1097, 1103, 1109, 1117, 1123, 1129, 1151, 1153, 1163};
constexpr size_t kPerRun = sizeof(kStandIns) / sizeof(kStandIns[0]) / 2;

void visit_tensors(const Operand& o, const std::function<void(const ir::TensorType&)>& fn) {
  if (o.tensor) fn(*o.tensor);
  for (const Operand& item : o.items) visit_tensors(item, fn);
}

// The dims of a dense layout, innermost first: each dim's stride is the product of the sizes of
// the dims before it in this order (structurally; a size-1 dim comes before a larger dim of equal
// stride, as it does in a sort by stride then size). nullopt when the layout is not dense in any
// order, or has a size 0. Why: in a dense layout whose sizes other than 1 are all >= 2 (symbols
// are), the order of the strides is the same for every value of the symbols, so stand-ins with
// strides rebuilt in that order lead a rule through the same stride comparisons as the real sizes.
// A layout with one dim of size other than 1 (`x[:, :1]` of a matrix) steps through memory one way
// whatever its strides: it counts as dense in the default order (its stand-in is contiguous; the
// strides of the results' size-1 dims may then differ from torch's, which nothing steps over).
std::optional<std::vector<size_t>> dense_order(const ir::TensorType& t) {
  size_t rank = t.sizes.size();
  if (t.strides.size() != rank) return std::nullopt;
  std::vector<size_t> order;
  std::vector<bool> placed(rank, false);
  if (std::count_if(t.sizes.begin(), t.sizes.end(), [](const sym::Expr& e) { return e != sym::Expr(1); }) <= 1) {
    for (size_t d = rank; d-- > 0;) order.push_back(d);
    if (std::find(t.sizes.begin(), t.sizes.end(), sym::Expr(0)) != t.sizes.end()) return std::nullopt;
    return order;
  }
  sym::Expr expected = 1;
  while (order.size() < rank) {
    std::optional<size_t> next;
    for (size_t d = 0; d < rank && !next; ++d)  // size-1 dims first: they leave `expected` as it is
      if (!placed[d] && t.sizes[d] == sym::Expr(1) && t.strides[d] == expected) next = d;
    for (size_t d = rank; d-- > 0 && !next;)
      if (!placed[d] && t.strides[d] == expected) next = d;
    if (!next || t.sizes[*next] == sym::Expr(0)) return std::nullopt;
    placed[*next] = true;
    order.push_back(*next);
    expected = expected * t.sizes[*next];
  }
  return order;
}

// Whether every two strides of `t` compare (<, ==) the same way for every value of its symbols
// (each >= 2), so that stand-ins substituted into the strides keep each comparison a rule makes
// between them: a layout that is not dense (`x[..., 8:]` of a transposed tensor) but ordered.
// Only where every symbolic size is a bare symbol (the stand-ins are then symbol values).
bool ordered_layout(const ir::TensorType& t, const sym::Symbols* facts) {
  std::set<std::string> names;
  for (const sym::Expr& e : t.sizes) {
    if (!e.is_constant() && e.kind() != sym::ExprKind::Symbol) return false;
    sym::free_symbols(e, names);
  }
  std::set<std::string> in_strides;  // the stand-ins give values to the sizes' symbols only
  for (const sym::Expr& e : t.strides) sym::free_symbols(e, in_strides);
  if (!std::includes(names.begin(), names.end(), in_strides.begin(), in_strides.end())) return false;
  sym::Symbols symbols = facts_of(names, facts, 2);
  for (size_t a = 0; a < t.strides.size(); ++a)
    for (size_t b = a + 1; b < t.strides.size(); ++b)
      for (sym::RelOp op : {sym::RelOp::Lt, sym::RelOp::Eq, sym::RelOp::Le})
        for (const auto& [x, y] : {std::pair{a, b}, std::pair{b, a}})
          if (!sym::statically_known(sym::Rel{t.strides[x], op, t.strides[y]}, symbols)) return false;
  return true;
}

// The dims of `t` innermost first when every two of its dims whose sizes are not 1 compare their
// strides the same strict way for every value of the symbols (each >= 2; no stride 0): a layout that
// is not dense, and whose sizes may be expressions (`x[::k]`: `(s0 + s1 - 1) // s1` rows of stride
// `4*s1`), but whose dim order is fixed. Why it serves the pointwise rules: TensorIterator lays a
// result out densely in the order of its operands' strides, compared pairwise, so a stand-in dense
// in the same order leads the rule to the same result layout. Equal strides would make the sizes
// decide; a non-overlapping layout has none over dims of size > 1, and size-1 dims are left innermost
// (nothing steps over them).
std::optional<std::vector<size_t>> strict_order(const ir::TensorType& t, const sym::Symbols* facts) {
  if (t.strides.size() != t.sizes.size()) return std::nullopt;
  std::set<std::string> names;
  for (const auto* xs : {&t.sizes, &t.strides})
    for (const sym::Expr& e : *xs) sym::free_symbols(e, names);
  sym::Symbols symbols = facts_of(names, facts, 2);
  std::vector<size_t> order, rest;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    if (t.sizes[d] == sym::Expr(0) || (t.sizes[d] != sym::Expr(1) && t.strides[d] == sym::Expr(0))) return std::nullopt;
    (t.sizes[d] == sym::Expr(1) ? order : rest).push_back(d);
  }
  auto less = [&](size_t a, size_t b) {
    return sym::provable(sym::Rel{t.strides[a], sym::RelOp::Lt, t.strides[b]}, symbols);
  };
  for (size_t i = 0; i < rest.size(); ++i)
    for (size_t j = i + 1; j < rest.size(); ++j)
      if (!less(rest[i], rest[j]) && !less(rest[j], rest[i])) return std::nullopt;
  std::sort(rest.begin(), rest.end(), less);
  order.insert(order.end(), rest.begin(), rest.end());
  return order;
}

// Strides of a dense layout in `order` over `sizes` (constant or symbolic).
std::vector<sym::Expr> strides_in_order(const std::vector<sym::Expr>& sizes, const std::vector<size_t>& order) {
  std::vector<sym::Expr> strides(sizes.size(), sym::Expr(1));
  sym::Expr expected = 1;
  for (size_t d : order) {
    strides[d] = expected;
    expected = expected * sizes[d];
  }
  return strides;
}

// The order of a constant result layout: dims sorted by stride, size-1 dims first among equals;
// nullopt when its strides are not the dense ones of that order.
std::optional<std::vector<size_t>> constant_dense_order(const ir::TensorType& t) {
  std::vector<size_t> order(t.sizes.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    int64_t sa = t.strides[a].constant(), sb = t.strides[b].constant();
    if (sa != sb) return sa < sb;
    bool ua = t.sizes[a] == sym::Expr(1), ub = t.sizes[b] == sym::Expr(1);
    return ua != ub ? ua : a > b;
  });
  if (strides_in_order(t.sizes, order) != t.strides) return std::nullopt;
  return order;
}

// The call with every symbolic size replaced by its stand-in; types live in `storage`. A dense
// operand keeps its order of strides; another (only where the rule reads no strides) gets default ones.
class StandIn {
 public:
  StandIn(const std::vector<sym::Expr>& atoms, const std::vector<int64_t>& values, const sym::Symbols* facts)
      : facts_(facts) {
    for (size_t i = 0; i < atoms.size(); ++i) {
      value_.emplace(atoms[i], values[i]);
      if (atoms[i].kind() == sym::ExprKind::Symbol) symbol_value_.emplace(atoms[i].str(), values[i]);
    }
  }
  Operand operand(const Operand& o) {
    Operand out = o;
    if (const sym::Expr* e = o.kind == Operand::Kind::Literal ? std::get_if<sym::Expr>(&o.literal) : nullptr)
      out.literal = sym::evaluate(*e, symbol_value_);
    if (o.tensor) {
      ir::TensorType t = *o.tensor;
      for (sym::Expr& s : t.sizes)
        if (!s.is_constant()) s = value_.at(s);
      std::optional<std::vector<size_t>> order = dense_order(*o.tensor);
      if (order) {
        t.strides = strides_in_order(t.sizes, *order);
      } else if (ordered_layout(*o.tensor, facts_)) {
        for (sym::Expr& e : t.strides) e = sym::evaluate(e, symbol_value_);
      } else if ((order = strict_order(*o.tensor, facts_))) {
        t.strides = strides_in_order(t.sizes, *order);
      } else {
        t.strides = ir::contiguous_strides(t.sizes);
      }
      storage_.push_back(std::move(t));
      out.tensor = &storage_.back();
    }
    for (Operand& item : out.items) item = operand(item);
    return out;
  }

 private:
  std::map<sym::Expr, int64_t> value_;
  std::map<std::string, int64_t> symbol_value_;  // the atoms that are bare symbols
  const sym::Symbols* facts_;
  std::deque<ir::TensorType> storage_;
};

bool is_symbolic(const Operand& o) {
  if (o.tensor) {
    for (const sym::Expr& e : o.tensor->sizes)
      if (!e.is_constant()) return true;
    for (const sym::Expr& e : o.tensor->strides)
      if (!e.is_constant()) return true;
  }
  if (o.kind == Operand::Kind::Literal && std::holds_alternative<sym::Expr>(o.literal)) return true;
  return std::any_of(o.items.begin(), o.items.end(), is_symbolic);
}

// Adds the symbols of `o`'s symbolic literals to `atoms` (as bare symbols, once each).
void literal_symbols(const Operand& o, std::vector<sym::Expr>& atoms) {
  if (const sym::Expr* e = o.kind == Operand::Kind::Literal ? std::get_if<sym::Expr>(&o.literal) : nullptr) {
    std::set<std::string> names;
    sym::free_symbols(*e, names);
    for (const std::string& name : names)
      if (std::find(atoms.begin(), atoms.end(), sym::Expr::symbol(name)) == atoms.end()) atoms.push_back(sym::Expr::symbol(name));
  }
  for (const Operand& item : o.items) literal_symbols(item, atoms);
}

// The calls whose result types never read their operands' strides (they allocate contiguous
// results): their operands may have any layout. Embedding is index_select of the weight's rows,
// viewed: its indices may be expanded (BERT's token_type_ids buffer, `expand(B, T)`).
bool reads_no_strides(ir::Op op) {
  return ir::op_info(op).family == ir::OpFamily::Matmul || op == ir::Op::Embedding || op == ir::Op::IndexSelect ||
         op == ir::Op::Gather;  // its index's layout: gather_sizes_hold
}

}  // namespace

bool has_symbolic_tensor(const std::vector<Operand>& args, const std::vector<std::pair<std::string, Operand>>& kwargs) {
  return std::any_of(args.begin(), args.end(), is_symbolic) ||
         std::any_of(kwargs.begin(), kwargs.end(), [](const auto& kv) { return is_symbolic(kv.second); });
}

namespace {

// Runs `rule` twice on stand-ins (see the file comment) and reads the result sizes back. `any_layout`:
// the rule reads no strides; `ordered`: it reads only their order (an ordered_layout operand is served).
Result with_stand_ins(const std::vector<Operand>& args, const std::vector<std::pair<std::string, Operand>>& kwargs,
                      bool any_layout, bool ordered, const sym::Symbols* facts, const std::function<Result(const std::vector<Operand>&,
                                                                  const std::vector<std::pair<std::string, Operand>>&)>& rule) {
  // The distinct symbolic sizes (atoms) and the constant sizes the stand-ins must avoid.
  std::vector<sym::Expr> atoms;
  std::set<int64_t> constants;
  bool default_layouts = true;
  auto scan = [&](const ir::TensorType& t) {
    default_layouts = default_layouts && (dense_order(t).has_value() || (ordered && (ordered_layout(t, facts) || strict_order(t, facts))));
    for (const sym::Expr& s : t.sizes) {
      if (s.is_constant()) {
        constants.insert(s.constant());
      } else if (std::find(atoms.begin(), atoms.end(), s) == atoms.end()) {
        atoms.push_back(s);
      }
    }
  };
  for (const Operand& a : args) visit_tensors(a, scan);
  for (const auto& kv : kwargs) visit_tensors(kv.second, scan);
  if (!default_layouts && !any_layout) return std::nullopt;
  for (const Operand& a : args) literal_symbols(a, atoms);
  for (const auto& kv : kwargs) literal_symbols(kv.second, atoms);
  std::vector<int64_t> values;
  for (int64_t v : kStandIns)
    if (!constants.count(v)) values.push_back(v);
  if (atoms.size() > std::min(kPerRun, values.size() / 2)) return std::nullopt;
  std::vector<int64_t> first(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(atoms.size()));
  std::vector<int64_t> second(values.end() - static_cast<std::ptrdiff_t>(atoms.size()), values.end());

  Result runs[2];
  std::vector<int64_t>* stand_ins[2] = {&first, &second};
  for (int r = 0; r < 2; ++r) {
    StandIn stand_in(atoms, *stand_ins[r], facts);
    std::vector<Operand> a;
    std::vector<std::pair<std::string, Operand>> kw;
    for (const Operand& o : args) a.push_back(stand_in.operand(o));
    for (const auto& [name, o] : kwargs) kw.emplace_back(name, stand_in.operand(o));
    runs[r] = rule(a, kw);
    if (!runs[r]) return std::nullopt;
  }
  if (runs[0]->size() != runs[1]->size()) return std::nullopt;

  std::vector<ir::TensorType> out;
  for (size_t i = 0; i < runs[0]->size(); ++i) {
    const ir::TensorType &a = (*runs[0])[i], &b = (*runs[1])[i];
    if (a.dtype != b.dtype || a.device != b.device || a.requires_grad != b.requires_grad ||
        a.sizes.size() != b.sizes.size())
      return std::nullopt;
    std::optional<std::vector<size_t>> order = constant_dense_order(a);
    if (!order || order != constant_dense_order(b)) return std::nullopt;
    ir::TensorType t = a;
    for (size_t d = 0; d < a.sizes.size(); ++d) {
      int64_t x = a.sizes[d].constant(), y = b.sizes[d].constant();
      if (x == y) continue;  // a constant (the stand-ins of the two runs differ)
      auto at = std::find(first.begin(), first.end(), x);
      if (at == first.end() || second[static_cast<size_t>(at - first.begin())] != y) return std::nullopt;
      t.sizes[d] = atoms[static_cast<size_t>(at - first.begin())];
    }
    t.strides = strides_in_order(t.sizes, *order);
    out.push_back(std::move(t));
  }
  return out;
}

// gather needs index.size(d) <= input.size(d) for every d but `dim`; the stand-ins answer that for their
// values only, so here it must hold for every value of the symbols (each >= 2): the same size, two
// constants, or a constant <= 2 against a symbol. Otherwise the rule would claim sizes torch refuses.
// Its result is contiguous whatever the input's layout (an expanded buffer: RoBERTa's token_type_ids),
// but only for an index with default strides, which the index must have here (its stand-in is
// contiguous: the call runs with any_layout).
bool gather_sizes_hold(const Call& call) {
  auto b = bind(call, {"input", "dim", "index", "*sparse_grad"});
  if (!b || !(*b)[0] || !(*b)[2] || !(*b)[0]->tensor || !(*b)[2]->tensor) return false;
  const ir::TensorType &x = *(*b)[0]->tensor, &index = *(*b)[2]->tensor;
  std::optional<std::vector<size_t>> order = dense_order(index);
  if (!order) return false;
  for (size_t i = 0; i < order->size(); ++i)
    if ((*order)[i] != order->size() - 1 - i) return false;
  auto dim = as_int((*b)[1]);
  auto w = dim ? wrap_dim(*dim, static_cast<int64_t>(x.sizes.size())) : std::nullopt;
  if (!w || index.sizes.size() != x.sizes.size()) return false;
  for (size_t d = 0; d < x.sizes.size(); ++d) {
    const sym::Expr &i = index.sizes[d], &n = x.sizes[d];
    if (d == static_cast<size_t>(*w) || i == n || (i.is_constant() && n.is_constant())) continue;
    if (!(i.is_constant() && i.constant() <= 2)) return false;
  }
  return true;
}

}  // namespace

Result infer_symbolic(ir::Op op, const std::vector<Operand>& args,
                      const std::vector<std::pair<std::string, Operand>>& kwargs, bool grad_enabled,
                      ir::DType default_dtype, const sym::Symbols* facts) {
  ir::OpFamily family = ir::op_info(op).family;
  if (family == ir::OpFamily::View || op == ir::Op::Contiguous || op == ir::Op::Cat)
    return infer_symbolic_view(Call{op, args, kwargs, grad_enabled, default_dtype, facts});
  // arange reads symbolic bounds itself: its extent is an expression of them.
  if (op == ir::Op::Arange) return infer_arange(Call{op, args, kwargs, grad_enabled, default_dtype, facts});
  bool stand_ins = family == ir::OpFamily::Pointwise || family == ir::OpFamily::Reduction ||
                   family == ir::OpFamily::Normalization || family == ir::OpFamily::Matmul ||
                   op == ir::Op::Embedding || op == ir::Op::Gather || op == ir::Op::IndexSelect ||
                   op == ir::Op::IndexAdd || op == ir::Op::Tril || op == ir::Op::Triu || op == ir::Op::Dropout;
  if (!stand_ins) return std::nullopt;
  if (op == ir::Op::Gather && !gather_sizes_hold(Call{op, args, kwargs, grad_enabled, default_dtype})) return std::nullopt;
  // TensorIterator lays out a pointwise result from the order of its operands' strides alone.
  bool ordered = family == ir::OpFamily::Pointwise;
  return with_stand_ins(args, kwargs, reads_no_strides(op), ordered, facts, [&](const auto& a, const auto& kw) {
    return infer_result_types(op, a, kw, grad_enabled, default_dtype);
  });
}

Result infer_symbolic_torch_call(std::string_view qualified_name, const std::vector<Operand>& args,
                                 const std::vector<std::pair<std::string, Operand>>& kwargs, bool grad_enabled,
                                 ir::DType default_dtype, const sym::Symbols* facts) {
  // Attention allocates its result contiguous whatever its operands' layouts (checked on meta tensors).
  bool any_layout = qualified_name == "torch.nn.functional.scaled_dot_product_attention";
  return with_stand_ins(args, kwargs, any_layout, false, facts, [&](const auto& a, const auto& kw) {
    return infer_torch_call_types(qualified_name, a, kw, grad_enabled, default_dtype);
  });
}

}  // namespace ember::shapes::rules
