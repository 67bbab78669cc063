// Relations: text form, evaluation and static decision (sym/relation.h).
#include <algorithm>

#include "sym/range.h"
#include "sym/relation.h"

namespace ember::sym {

const char* rel_op_name(RelOp op) {
  switch (op) {
    case RelOp::Eq: return "==";
    case RelOp::Ne: return "!=";
    case RelOp::Lt: return "<";
    case RelOp::Le: return "<=";
  }
  throw std::logic_error("rel_op_name: corrupt RelOp");
}

std::string Rel::str() const { return lhs.str() + " " + rel_op_name(op) + " " + rhs.str(); }

Rel parse_rel(std::string_view text) {
  size_t pos = 0;
  Expr lhs = parse_expr_prefix(text, pos);
  while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos;
  struct Spelling {
    std::string_view text;
    RelOp op;
    bool swap;
  };
  // Two-character spellings first, so `<=` is not read as `<`.
  static constexpr Spelling kSpellings[] = {{"==", RelOp::Eq, false}, {"!=", RelOp::Ne, false}, {"<=", RelOp::Le, false},
                                            {">=", RelOp::Le, true},  {"<", RelOp::Lt, false},  {">", RelOp::Lt, true}};
  const Spelling* found = nullptr;
  for (const Spelling& s : kSpellings)
    if (text.substr(pos, s.text.size()) == s.text) {
      found = &s;
      break;
    }
  if (!found) throw ExprParseError("expected a relation (==, !=, <, <=, >, >=) after the expression", pos);
  pos += found->text.size();
  Expr rhs = parse_expr_prefix(text, pos);
  while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos;
  if (pos != text.size()) throw ExprParseError("unexpected text after the relation", pos);
  return found->swap ? Rel{rhs, found->op, lhs} : Rel{lhs, found->op, rhs};
}

bool evaluate(const Rel& rel, const SymbolLookup& lookup) {
  int64_t a = evaluate(rel.lhs, lookup), b = evaluate(rel.rhs, lookup);
  switch (rel.op) {
    case RelOp::Eq: return a == b;
    case RelOp::Ne: return a != b;
    case RelOp::Lt: return a < b;
    case RelOp::Le: return a <= b;
  }
  throw std::logic_error("evaluate: corrupt RelOp");
}

namespace {

// Whether d == 0 everywhere (true), nowhere (false), or sometimes. Nowhere: the interval excludes
// 0, or d = c + rest with rest always a multiple of g and c not one (`2*s0 - 7`).
std::optional<bool> is_zero(const Expr& d, const Interval& i, const Symbols& symbols) {
  if (i.lo == 0 && i.hi == 0) return true;
  if (i.lo > 0 || i.hi < 0) return false;
  int64_t c = 0;
  Expr rest = d;
  if (d.kind() == ExprKind::Add && d.operands().back().is_constant()) {
    c = d.operands().back().constant();
    rest = d - Expr(c);
  }
  int64_t g = known_multiple(rest, symbols);
  if (g > 1 && c % g != 0) return false;
  return std::nullopt;
}

// `a*p op b*p` is `a op b` where p > 0: each factor both sides' products share whose interval is at
// least 1 (a symbol >= 1, a size expression such as `(s1 + -10) // 5 + 2` over a symbol >= 20) cancels
// once. Intervals alone cannot compare the strides of a layout (`s1 < s1*s1`: the interval of
// s1 - s1*s1 is unbounded both ways, as is that of `8*(f + 2) - (f + 2)`, products of sums staying
// unexpanded; `1 < s1` and `1 < 8` are decided).
Rel cancel_common_factors(const Rel& rel, const Symbols& symbols) {
  auto factors = [](const Expr& e) { return e.kind() == ExprKind::Mul ? e.operands() : std::vector<Expr>{e}; };
  std::vector<Expr> a = factors(rel.lhs), b = factors(rel.rhs);
  bool cancelled = false;
  for (auto it = a.begin(); it != a.end();) {
    auto match = it->is_constant() ? b.end() : std::find(b.begin(), b.end(), *it);
    if (match == b.end() || bound(*it, symbols).lo < 1) {
      ++it;
      continue;
    }
    b.erase(match);
    it = a.erase(it);
    cancelled = true;
  }
  if (!cancelled) return rel;
  auto product = [](const std::vector<Expr>& xs) {
    Expr p = 1;
    for (const Expr& x : xs) p = p * x;
    return p;
  };
  return Rel{product(a), rel.op, product(b)};
}

}  // namespace

std::optional<bool> statically_known(const Rel& rel_in, const Symbols& symbols) {
  const Rel rel = cancel_common_factors(rel_in, symbols);
  if (rel.lhs == rel.rhs) return rel.op == RelOp::Eq || rel.op == RelOp::Le;
  Expr d;
  try {
    d = simplify(rel.lhs - rel.rhs, symbols);
  } catch (const std::overflow_error&) {  // constants that leave int64: no proof from here
    return std::nullopt;
  }
  Interval i = bound(d, symbols);
  switch (rel.op) {
    case RelOp::Eq: return is_zero(d, i, symbols);
    case RelOp::Ne: {
      std::optional<bool> zero = is_zero(d, i, symbols);
      if (!zero) return std::nullopt;
      return !*zero;
    }
    case RelOp::Lt:
      if (i.hi < 0) return true;
      if (i.lo >= 0) return false;
      return std::nullopt;
    case RelOp::Le:
      if (i.hi <= 0) return true;
      if (i.lo > 0) return false;
      return std::nullopt;
  }
  throw std::logic_error("statically_known: corrupt RelOp");
}

bool statically_known_multiple_of(const Expr& e, int64_t k, const Symbols& symbols) {
  if (k < 1) throw std::invalid_argument("statically_known_multiple_of: k must be at least 1, got " + std::to_string(k));
  return known_multiple(simplify(e, symbols), symbols) % k == 0;
}

}  // namespace ember::sym
