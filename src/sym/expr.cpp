// Symbolic integer expressions: simplifying constructors, structural order and the printer.
//
// Canonical form, which every constructor returns and everything else relies on:
//   - Add: two or more terms, never an Add among them; each non-constant term appears once with
//     its coefficient collected (`2*s0`, not `s0 + s0`); terms sorted by the total order of
//     their coefficient-free part; a nonzero constant comes last.
//   - Mul: two or more factors, never a Mul among them; a constant coefficient (never 0 or 1)
//     comes first, the other factors follow sorted. A coefficient is distributed over the first
//     sum among the factors (`2*(s0 + 1)` is `2*s0 + 2`), so linear expressions have one
//     spelling and a product with a sum never carries a coefficient (which keeps the printed
//     form a fixed point of parsing, whatever the association).
//   - FloorDiv, Mod: Python semantics (round toward -inf; the remainder takes the divisor's sign).
//   - Max, Min: two operands, sorted (both are commutative).
// Equal canonical trees are equal expressions; the converse holds for the linear expressions of
// shapes and strides but not for everything (`(s0 + 1)*(s0 + 1)` stays unexpanded).
#include <algorithm>
#include <optional>
#include <utility>

#include "sym/arith.h"
#include "sym/expr.h"

namespace ember::sym {

struct ExprNode {
  ExprKind kind = ExprKind::Constant;
  int64_t value = 0;
  std::string name;
  std::vector<Expr> operands;
};

namespace {

using arith::checked_add;
using arith::checked_floordiv;
using arith::checked_mul;
using arith::py_mod;

bool divides(int64_t d, int64_t n) { return d == -1 || n % d == 0; }

bool is_identifier(std::string_view s) {
  if (s.empty()) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(s[0])) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

}  // namespace

// Every node is created here: the private constructor keeps canonical form an invariant.
struct ExprBuilder {
  static Expr node(ExprKind kind, std::vector<Expr> operands) {
    auto n = std::make_shared<ExprNode>();
    n->kind = kind;
    n->operands = std::move(operands);
    return Expr(std::shared_ptr<const ExprNode>(std::move(n)));
  }

  static int compare(const Expr& a, const Expr& b) {
    if (a.node_ == b.node_) return 0;
    if (a.kind() != b.kind()) return a.kind() < b.kind() ? -1 : 1;
    switch (a.kind()) {
      case ExprKind::Constant:
        return a.constant() < b.constant() ? -1 : (a.constant() > b.constant() ? 1 : 0);
      case ExprKind::Symbol:
        return a.symbol_name().compare(b.symbol_name()) < 0 ? -1 : (a.symbol_name() == b.symbol_name() ? 0 : 1);
      case ExprKind::Add:
      case ExprKind::Mul:
      case ExprKind::FloorDiv:
      case ExprKind::Mod:
      case ExprKind::Max:
      case ExprKind::Min:
        break;
    }
    const auto& x = a.operands();
    const auto& y = b.operands();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (int c = compare(x[i], y[i])) return c;
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }

  static bool less(const Expr& a, const Expr& b) { return compare(a, b) < 0; }

  // A term as coefficient times the rest: `3*s0*s1` is (3, s0*s1), `s0` is (1, s0).
  static std::pair<int64_t, Expr> split_coefficient(const Expr& term) {
    if (term.kind() != ExprKind::Mul || !term.operands()[0].is_constant()) return {1, term};
    std::vector<Expr> rest(term.operands().begin() + 1, term.operands().end());
    if (rest.size() == 1) return {term.operands()[0].constant(), rest[0]};
    return {term.operands()[0].constant(), node(ExprKind::Mul, std::move(rest))};
  }

  static Expr scale(const Expr& rest, int64_t coefficient) {
    return coefficient == 1 ? rest : mul({Expr(coefficient), rest});
  }

  static Expr add(const std::vector<Expr>& terms) {
    int64_t constant = 0;
    std::vector<std::pair<Expr, int64_t>> scaled;
    auto take = [&](const Expr& t) {
      if (t.is_constant()) {
        constant = checked_add(constant, t.constant());
      } else {
        auto [c, rest] = split_coefficient(t);
        scaled.emplace_back(rest, c);
      }
    };
    for (const Expr& t : terms) {
      if (t.kind() == ExprKind::Add)
        for (const Expr& inner : t.operands()) take(inner);
      else
        take(t);
    }
    std::stable_sort(scaled.begin(), scaled.end(), [](const auto& x, const auto& y) { return less(x.first, y.first); });
    std::vector<Expr> out;
    for (size_t i = 0; i < scaled.size();) {
      int64_t coefficient = 0;
      size_t j = i;
      for (; j < scaled.size() && compare(scaled[j].first, scaled[i].first) == 0; ++j)
        coefficient = checked_add(coefficient, scaled[j].second);
      if (coefficient != 0) out.push_back(scale(scaled[i].first, coefficient));
      i = j;
    }
    if (constant != 0) out.push_back(Expr(constant));
    if (out.empty()) return Expr(0);
    if (out.size() == 1) return out[0];
    return node(ExprKind::Add, std::move(out));
  }

  static Expr mul(const std::vector<Expr>& factors) {
    std::vector<Expr> flat;
    for (const Expr& f : factors) {
      if (f.kind() == ExprKind::Mul)
        flat.insert(flat.end(), f.operands().begin(), f.operands().end());
      else
        flat.push_back(f);
    }
    // Zero first: `huge * huge * 0` is 0, not an overflow.
    for (const Expr& f : flat)
      if (f.is_constant() && f.constant() == 0) return Expr(0);
    int64_t coefficient = 1;
    std::vector<Expr> rest;
    for (const Expr& f : flat) {
      if (f.is_constant())
        coefficient = checked_mul(coefficient, f.constant());
      else
        rest.push_back(f);
    }
    if (rest.empty()) return Expr(coefficient);
    std::stable_sort(rest.begin(), rest.end(), less);
    auto sum = std::find_if(rest.begin(), rest.end(), [](const Expr& f) { return f.kind() == ExprKind::Add; });
    if (coefficient != 1 && sum != rest.end()) {
      std::vector<Expr> terms;
      for (const Expr& t : sum->operands()) terms.push_back(mul({Expr(coefficient), t}));
      *sum = add(terms);
      coefficient = 1;
      std::stable_sort(rest.begin(), rest.end(), less);
    }
    if (coefficient == 1 && rest.size() == 1) return rest[0];
    if (coefficient != 1) rest.insert(rest.begin(), Expr(coefficient));
    return node(ExprKind::Mul, std::move(rest));
  }

  // a / d when every term of `a` is a multiple of d, so the division is exact (and thus equal to
  // both floordiv and the quotient of mod being zero).
  static std::optional<Expr> exact_quotient(const Expr& a, int64_t d) {
    std::vector<Expr> terms = a.kind() == ExprKind::Add ? a.operands() : std::vector<Expr>{a};
    std::vector<Expr> out;
    for (const Expr& t : terms) {
      auto [c, rest] = t.is_constant() ? std::pair<int64_t, Expr>{t.constant(), Expr(1)} : split_coefficient(t);
      if (!divides(d, c)) return std::nullopt;
      out.push_back(mul({Expr(checked_floordiv(c, d)), rest}));
    }
    return add(out);
  }

  static Expr floordiv(const Expr& a, const Expr& b) {
    if (b.is_constant()) {
      int64_t d = b.constant();
      if (d == 0) throw std::domain_error("floordiv by zero: (" + a.str() + ") // 0");
      if (a.is_constant()) return Expr(checked_floordiv(a.constant(), d));
      if (d == 1) return a;
      if (auto q = exact_quotient(a, d)) return *q;
      // (x // c1) // c2 == x // (c1*c2) for positive divisors.
      if (d > 0 && a.kind() == ExprKind::FloorDiv && a.operands()[1].is_constant() && a.operands()[1].constant() > 0) {
        int64_t product;
        if (!__builtin_mul_overflow(a.operands()[1].constant(), d, &product))
          return floordiv(a.operands()[0], Expr(product));
      }
    }
    if (a.is_constant() && a.constant() == 0) return Expr(0);
    return node(ExprKind::FloorDiv, {a, b});
  }

  static Expr mod(const Expr& a, const Expr& b) {
    if (b.is_constant()) {
      int64_t d = b.constant();
      if (d == 0) throw std::domain_error("mod by zero: (" + a.str() + ") % 0");
      if (a.is_constant()) return Expr(py_mod(a.constant(), d));
      if (d == 1 || d == -1 || exact_quotient(a, d)) return Expr(0);
    }
    if (a.is_constant() && a.constant() == 0) return Expr(0);
    return node(ExprKind::Mod, {a, b});
  }

  static Expr extremum(ExprKind kind, const Expr& a, const Expr& b) {
    if (a.is_constant() && b.is_constant()) {
      bool take_a = kind == ExprKind::Max ? a.constant() >= b.constant() : a.constant() <= b.constant();
      return take_a ? a : b;
    }
    int c = compare(a, b);
    if (c == 0) return a;
    return c < 0 ? node(kind, {a, b}) : node(kind, {b, a});
  }
};

Expr::Expr(int64_t value) {
  auto n = std::make_shared<ExprNode>();
  n->value = value;
  node_ = std::move(n);
}

Expr Expr::symbol(std::string name) {
  if (!is_identifier(name))
    throw std::invalid_argument("symbol name '" + name + "' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprKind::Symbol;
  n->name = std::move(name);
  return Expr(std::shared_ptr<const ExprNode>(std::move(n)));
}

ExprKind Expr::kind() const { return node_->kind; }

int64_t Expr::constant() const {
  if (!is_constant()) throw std::logic_error("Expr::constant() on the non-constant expression " + str());
  return node_->value;
}

const std::string& Expr::symbol_name() const {
  if (kind() != ExprKind::Symbol) throw std::logic_error("Expr::symbol_name() on the non-symbol " + str());
  return node_->name;
}

const std::vector<Expr>& Expr::operands() const { return node_->operands; }

bool Expr::operator==(const Expr& other) const { return ExprBuilder::compare(*this, other) == 0; }
bool Expr::operator<(const Expr& other) const { return ExprBuilder::compare(*this, other) < 0; }

Expr operator+(const Expr& a, const Expr& b) { return ExprBuilder::add({a, b}); }
Expr operator-(const Expr& a, const Expr& b) { return ExprBuilder::add({a, ExprBuilder::mul({Expr(-1), b})}); }
Expr operator*(const Expr& a, const Expr& b) { return ExprBuilder::mul({a, b}); }
Expr floordiv(const Expr& a, const Expr& b) { return ExprBuilder::floordiv(a, b); }
Expr mod(const Expr& a, const Expr& b) { return ExprBuilder::mod(a, b); }
Expr max(const Expr& a, const Expr& b) { return ExprBuilder::extremum(ExprKind::Max, a, b); }
Expr min(const Expr& a, const Expr& b) { return ExprBuilder::extremum(ExprKind::Min, a, b); }

Expr product(const std::vector<Expr>& xs) {
  Expr p = 1;
  for (const Expr& x : xs) p = p * x;
  return p;
}

// Printing. Sums bind loosest; the operands of `*`, `//` and `%` are parenthesized unless they
// are atoms, so `(2*s0) // 3` never needs the reader to recall Python's left associativity.
namespace {

bool is_atom(const Expr& e) {
  switch (e.kind()) {
    case ExprKind::Constant:
    case ExprKind::Symbol:
    case ExprKind::Max:
    case ExprKind::Min:
      return true;
    case ExprKind::Add:
    case ExprKind::Mul:
    case ExprKind::FloorDiv:
    case ExprKind::Mod:
      return false;
  }
  throw std::logic_error("is_atom: corrupt ExprKind");
}

std::string operand(const Expr& e) { return is_atom(e) ? e.str() : "(" + e.str() + ")"; }

std::string join(const std::vector<Expr>& xs, const char* sep, bool parenthesize) {
  std::string out;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) out += sep;
    out += parenthesize ? operand(xs[i]) : xs[i].str();
  }
  return out;
}

}  // namespace

std::string Expr::str() const {
  const auto& ops = operands();
  switch (kind()) {
    case ExprKind::Constant: return std::to_string(node_->value);
    case ExprKind::Symbol: return node_->name;
    case ExprKind::Add: return join(ops, " + ", false);
    case ExprKind::Mul: return join(ops, "*", true);
    case ExprKind::FloorDiv: return operand(ops[0]) + " // " + operand(ops[1]);
    case ExprKind::Mod: return operand(ops[0]) + " % " + operand(ops[1]);
    case ExprKind::Max: return "max(" + join(ops, ", ", false) + ")";
    case ExprKind::Min: return "min(" + join(ops, ", ", false) + ")";
  }
  throw std::logic_error("Expr::str: corrupt ExprKind");
}

}  // namespace ember::sym
