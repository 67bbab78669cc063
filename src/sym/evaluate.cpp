// Operations over an expression tree (sym/expr.h): evaluate, substitute, free_symbols.
#include <algorithm>

#include "sym/arith.h"
#include "sym/expr.h"

namespace ember::sym {

namespace {

// Rebuilds e bottom-up through the constructors, each symbol mapped by `leaf`.
template <typename Leaf>
Expr rebuild(const Expr& e, const Leaf& leaf) {
  const auto& ops = e.operands();
  switch (e.kind()) {
    case ExprKind::Constant: return e;
    case ExprKind::Symbol: return leaf(e);
    case ExprKind::Add: {
      Expr sum = 0;
      for (const Expr& o : ops) sum = sum + rebuild(o, leaf);
      return sum;
    }
    case ExprKind::Mul: {
      Expr product = 1;
      for (const Expr& o : ops) product = product * rebuild(o, leaf);
      return product;
    }
    case ExprKind::FloorDiv: return floordiv(rebuild(ops[0], leaf), rebuild(ops[1], leaf));
    case ExprKind::Mod: return mod(rebuild(ops[0], leaf), rebuild(ops[1], leaf));
    case ExprKind::Max: return max(rebuild(ops[0], leaf), rebuild(ops[1], leaf));
    case ExprKind::Min: return min(rebuild(ops[0], leaf), rebuild(ops[1], leaf));
  }
  throw std::logic_error("sym: corrupt ExprKind");
}

// Straight int64 arithmetic, no Expr built: the runtime evaluates sizes on every call.
int64_t eval(const Expr& e, const SymbolLookup& lookup) {
  const auto& ops = e.operands();
  auto divisor = [&](const char* what) {
    int64_t d = eval(ops[1], lookup);
    if (d == 0) throw std::domain_error(std::string(what) + " by zero evaluating " + e.str());
    return d;
  };
  switch (e.kind()) {
    case ExprKind::Constant: return e.constant();
    case ExprKind::Symbol: {
      std::optional<int64_t> v = lookup(e.symbol_name());
      if (!v) throw std::invalid_argument("evaluate: the symbol " + e.symbol_name() + " has no value");
      return *v;
    }
    case ExprKind::Add: {
      int64_t sum = 0;
      for (const Expr& o : ops) sum = arith::checked_add(sum, eval(o, lookup));
      return sum;
    }
    case ExprKind::Mul: {
      int64_t product = 1;
      for (const Expr& o : ops) product = arith::checked_mul(product, eval(o, lookup));
      return product;
    }
    case ExprKind::FloorDiv: {
      int64_t a = eval(ops[0], lookup);
      return arith::checked_floordiv(a, divisor("floordiv"));
    }
    case ExprKind::Mod: {
      int64_t a = eval(ops[0], lookup);
      return arith::py_mod(a, divisor("mod"));
    }
    case ExprKind::Max: return std::max(eval(ops[0], lookup), eval(ops[1], lookup));
    case ExprKind::Min: return std::min(eval(ops[0], lookup), eval(ops[1], lookup));
  }
  throw std::logic_error("sym: corrupt ExprKind");
}

}  // namespace

int64_t evaluate(const Expr& e, const SymbolLookup& lookup) { return eval(e, lookup); }

int64_t evaluate(const Expr& e, const std::map<std::string, int64_t>& values) {
  return evaluate(e, [&](const std::string& name) -> std::optional<int64_t> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  });
}

Expr substitute(const Expr& e, const Replacements& replacements) {
  std::map<std::string, Expr> with;
  for (const auto& [name, value] : replacements)
    if (!with.emplace(name, value).second) throw std::invalid_argument("substitute: " + name + " is replaced twice");
  return rebuild(e, [&](const Expr& s) {
    auto it = with.find(s.symbol_name());
    return it == with.end() ? s : it->second;
  });
}

std::optional<Expr> term_quotient(const Expr& t, const Expr& k) {
  auto factors = [](const Expr& x, int64_t& coefficient) {
    coefficient = 1;
    std::vector<Expr> out;
    for (const Expr& f : x.kind() == ExprKind::Mul ? x.operands() : std::vector<Expr>{x}) {
      if (f.is_constant())
        coefficient = f.constant();
      else
        out.push_back(f);
    }
    return out;
  };
  int64_t tc, kc;
  std::vector<Expr> tf = factors(t, tc), kf = factors(k, kc);
  if (kc == 0 || (kc != -1 && tc % kc != 0)) return std::nullopt;
  for (const Expr& f : kf) {
    auto it = std::find(tf.begin(), tf.end(), f);
    if (it == tf.end()) return std::nullopt;
    tf.erase(it);
  }
  Expr q = kc == -1 ? Expr(arith::checked_mul(tc, -1)) : Expr(tc / kc);
  for (const Expr& f : tf) q = q * f;
  return q;
}

void free_symbols(const Expr& e, std::set<std::string>& out) {
  if (e.kind() == ExprKind::Symbol) out.insert(e.symbol_name());
  for (const Expr& o : e.operands()) free_symbols(o, out);
}

}  // namespace ember::sym
