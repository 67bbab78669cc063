// canonicalize: one argument form per op, so that decompose (and anything after it) reads each
// call one way.
//
// Needs: a graph that verifies. Guarantees: every node whose callable has a signature
// (signatures.h) and whose arguments bind to it is rewritten to
//   - positional arguments in parameter order, up to the last one that differs from its default
//     (defaults filled in between), keyword-only arguments (and `inplace`) as keywords when they
//     differ from their default;
//   - dims non-negative (`-1` on a rank-3 input is `2`), a `dims` parameter as a sorted list;
//   - sizes as one list (`x.view(2, -1)` is `view(%x, [2, 12])`): -1 resolved from the
//     node's recorded result type;
//   - a sequence of tensors as a list (`cat((a, b), 3)` is `cat([a, b], 3)`);
//   - var/std/var_mean/std_mean with `unbiased` spelled as `correction=` and `keepdim=` keywords.
// A node whose arguments do not bind, or whose dims are out of range, is left as it was: it runs
// through torch, which raises torch's own error. Values and nodes keep their ids.
#include <algorithm>

#include "passes/passes.h"
#include "passes/rewriter.h"
#include "passes/signatures.h"

namespace ember::passes {

namespace {

using ir::Arg;

bool same_arg(const Arg& a, const Arg& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Arg::Kind::Value:
      return a.value == b.value;
    case Arg::Kind::Literal:
      if (a.literal.index() != b.literal.index()) return false;
      if (auto x = int_literal(a)) return *x == *int_literal(b);
      if (auto x = bool_literal(a)) return *x == *bool_literal(b);
      if (const double* x = std::get_if<double>(&a.literal)) return *x == std::get<double>(b.literal);
      if (const std::string* x = std::get_if<std::string>(&a.literal)) return *x == std::get<std::string>(b.literal);
      if (is_none(a)) return true;
      if (const ir::DType* x = std::get_if<ir::DType>(&a.literal)) return *x == std::get<ir::DType>(b.literal);
      return false;  // devices, slices, ellipsis: never defaults, so "different" is safe
    case Arg::Kind::List:
    case Arg::Kind::Tuple:
      if (a.items.size() != b.items.size()) return false;
      for (size_t i = 0; i < a.items.size(); ++i)
        if (!same_arg(a.items[i], b.items[i])) return false;
      return true;
  }
  return false;
}

// Rank of the tensor the dims of a call refer to: its first tensor operand (or the first
// tensor of a leading list, for cat and stack). -1 if there is none.
int rank_of_operand(const ir::Graph& g, const Bound& b) {
  if (b.args.empty()) return -1;
  const Arg& first = b.args[0];
  if (first.kind == Arg::Kind::Value) return static_cast<int>(g.value(first.value).type.sizes.size());
  if ((first.kind == Arg::Kind::List || first.kind == Arg::Kind::Tuple) && !first.items.empty() &&
      first.items[0].kind == Arg::Kind::Value)
    return static_cast<int>(g.value(first.items[0].value).type.sizes.size());
  return -1;
}

int64_t normalize_dim(int64_t d, int rank) {
  int64_t wrap = std::max(rank, 1);
  if (d < -wrap || d >= wrap) refuse();
  return d < 0 ? d + wrap : d;
}

Arg int_list_arg(const std::vector<int64_t>& xs) {
  std::vector<Arg> items;
  for (int64_t x : xs) items.push_back(Arg::of_literal(x));
  return Arg::list(std::move(items));
}

Arg normalize(const Param& p, const Arg& a, int rank, const ir::Node& node, const ir::Graph& g) {
  switch (p.kind) {
    case Param::Kind::Any:
      return a;
    case Param::Kind::Dim:
    case Param::Kind::DimInsert: {
      if (is_none(a)) return a;
      auto d = int_literal(a);
      if (!d || rank < 0) refuse();
      return Arg::of_literal(normalize_dim(*d, p.kind == Param::Kind::DimInsert ? rank + 1 : rank));
    }
    case Param::Kind::Dims:
    case Param::Kind::Perm: {
      if (is_none(a)) return a;
      auto ds = int_list(a, p.kind == Param::Kind::Dims);
      if (!ds || rank < 0) refuse();
      for (int64_t& d : *ds) d = normalize_dim(d, rank);
      if (p.kind == Param::Kind::Dims) std::sort(ds->begin(), ds->end());
      return int_list_arg(*ds);
    }
    case Param::Kind::Sizes: {
      std::optional<std::vector<sym::Expr>> sizes;
      if (auto one = size_literal(a)) sizes = std::vector<sym::Expr>{*one};
      else sizes = size_list(a);
      if (!sizes) refuse();
      const sym::Expr minus_one(-1);
      if (std::find(sizes->begin(), sizes->end(), minus_one) != sizes->end()) {
        // view/reshape/expand: the recorded result has the resolved sizes.
        if (node.results.size() != 1) refuse();
        const ir::TensorType& t = g.value(node.results[0]).type;
        if (t.sizes.size() != sizes->size()) refuse();
        for (size_t i = 0; i < sizes->size(); ++i)
          if ((*sizes)[i] == minus_one) (*sizes)[i] = t.sizes[i];
      }
      std::vector<Arg> items;
      for (const sym::Expr& e : *sizes) items.push_back(Arg::of_size(e));
      return Arg::list(std::move(items));
    }
    case Param::Kind::Tensors:
      return a.kind == Arg::Kind::Tuple ? Arg::list(a.items) : a;
  }
  return a;
}

bool is_var_family(std::string_view callable) {
  return callable == "torch.var" || callable == "torch.var_mean" || callable == "torch.std" ||
         callable == "torch.std_mean" || callable == "torch.Tensor.std";
}

// var(x, unbiased) / var(x, dim, unbiased, keepdim) / var(x, dim, correction=, keepdim=): one form.
void canonical_var(Bound& b, const ir::Graph& g, const ir::Node& node, std::vector<Arg>& args, Kwargs& kwargs) {
  size_t dim = b.index("dim"), unbiased = b.index("unbiased");
  if (bool_literal(b.args[dim])) {
    if (b.given[unbiased]) refuse();
    b.args[unbiased] = b.args[dim];
    b.given[unbiased] = true;
    b.args[dim] = Arg::of_literal(ir::NoneLiteral{});
  }
  int64_t correction = 1;
  if (b.given[unbiased] && !is_none(b.args[unbiased])) {
    auto u = bool_literal(b.args[unbiased]);
    if (!u || b.was_given("correction")) refuse();
    correction = *u ? 1 : 0;
  }
  if (b.was_given("correction") && !is_none(b["correction"])) {
    auto c = int_literal(b["correction"]);
    if (!c) refuse();
    correction = *c;
  }
  auto keepdim = bool_literal(b["keepdim"]);
  if (!keepdim) refuse();
  int rank = rank_of_operand(g, b);
  args = {b.args[0], normalize(b.signature->params[dim], b.args[dim], rank, node, g)};
  kwargs = {{"correction", Arg::of_literal(correction)}, {"keepdim", Arg::of_literal(*keepdim)}};
}

// The canonical arguments of a node, or Refuse.
void canonical_args(const ir::Node& node, const ir::Graph& g, std::vector<Arg>& args, Kwargs& kwargs) {
  std::optional<Bound> bound = bind(node);
  if (!bound) refuse();
  Bound& b = *bound;
  if (is_var_family(node.callable())) return canonical_var(b, g, node, args, kwargs);
  int rank = rank_of_operand(g, b);
  const std::vector<Param>& params = b.signature->params;
  std::vector<Arg> values;
  for (size_t i = 0; i < params.size(); ++i) values.push_back(normalize(params[i], b.args[i], rank, node, g));
  auto is_default = [&](size_t i) { return params[i].default_value && same_arg(values[i], *params[i].default_value); };
  // `inplace=` always travels as a keyword: Node::mutates_first_arg() reads it there, and a pass
  // that misses a mutation (dce) would drop a write the program relies on.
  auto as_keyword = [&](size_t i) { return (params[i].keyword_only && !params[i].varargs) || params[i].name == "inplace"; };
  size_t last = 0;  // one past the last positional parameter to write
  for (size_t i = 0; i < params.size(); ++i)
    if (!as_keyword(i) && !is_default(i)) last = i + 1;
  args.clear();
  kwargs.clear();
  for (size_t i = 0; i < last; ++i)
    if (!as_keyword(i)) args.push_back(values[i]);
  for (size_t i = 0; i < params.size(); ++i)
    if (as_keyword(i) && !is_default(i)) kwargs.emplace_back(params[i].name, values[i]);
}

}  // namespace

bool canonicalize(ir::Graph& graph) {
  bool changed = false;
  for (ir::Node& node : graph.mutable_nodes()) {
    std::vector<Arg> args;
    Kwargs kwargs;
    try {
      canonical_args(node, graph, args, kwargs);
    } catch (Refuse&) {
      continue;
    }
    bool same = args.size() == node.args.size() && kwargs.size() == node.kwargs.size();
    for (size_t i = 0; same && i < args.size(); ++i) same = same_arg(args[i], node.args[i]);
    for (size_t i = 0; same && i < kwargs.size(); ++i)
      same = kwargs[i].first == node.kwargs[i].first && same_arg(kwargs[i].second, node.kwargs[i].second);
    if (same) continue;
    node.args = std::move(args);
    node.kwargs = std::move(kwargs);
    changed = true;
  }
  return changed;
}

}  // namespace ember::passes
