// Index algebra for the loop IR: simplification with range facts and the simplify-indices pass
// (substitution is sym::substitute, sym/expr.h).
//
// Why: lowering composes views as index remaps, so a reshape after a permute leaves expressions
// such as (8*i0 + i1) // 8; fusion compares index expressions dimension by dimension and code
// generation wants the cheapest form, so both need i0 there. sym::Expr's constructors already fold
// what holds for every integer; what needs facts about the variables lives here.
//
// Facts. A variable named in `ranges` lies in [0, extent); every other symbol is assumed
// non-negative (a shape symbol), except `t<n>` (the run-time value of an integer node), about
// which nothing is assumed. Every rewrite below holds at every point where those facts hold; a
// point where some extent is <= 0 is in no iteration space, so nothing is claimed there.
//
// Bounds are symbolic (sym::Expr), so `(s0*i0 + i1) // s0` with i1 < s0 simplifies as well as the
// constant case: a claim "e >= 0" is proved by bounding e from below and showing that bound is
// non-negative syntactically (a constant >= 0, or built from non-negative pieces).
//
// Rules, for a divisor k that is a positive constant or a non-constant expression:
//   (k*q + b) // k  ->  q + m         and   (k*q + b) % k  ->  b - m*k
//       when every value of b lies in [m*k, (m+1)*k) (m = 0 for a symbolic k);
//   (k*q + b) // k  ->  q + b // k    and   (k*q + b) % k  ->  b % k     otherwise;
//   (g*x + y) // k  ->  x // (k/g)    and   (g*x + y) % k  ->  g*(x % (k/g)) + y
//       when g > 1 divides a constant k and every value of y lies in [0, g);
//   (x % a) % b     ->  x % b         when b divides a (positive constants);
//   (x // a) // b   ->  x // (a*b)    (sym::floordiv already does this for positive constants).
// x // n -> 0 and x % n -> x for 0 <= x < n are the first rule with q = 0.
// In sums: c*k*(x // k) + c*(x % k) -> c*x and c*k*((x // k) % m) + c*(x % k) -> c*(x % (k*m))
// for positive k, m, constants or symbolic (true for every integer x).
#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "loop_ir/loop_ir.h"

namespace ember::loop_ir {

namespace {

using sym::Expr;
using sym::ExprKind;

bool is_node_value(const std::string& name) {
  if (name.size() < 2 || name[0] != 't') return false;
  for (size_t i = 1; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return false;
  return true;
}

struct Bounds {
  std::optional<Expr> lo, hi;
};

class Simplifier {
 public:
  explicit Simplifier(const VarRanges& ranges) {
    for (const auto& [name, extent] : ranges) extent_.emplace(name, extent);
  }

  Expr simplify(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::Constant:
      case ExprKind::Symbol:
        return e;
      case ExprKind::Add: {
        std::vector<Expr> terms;
        for (const Expr& o : e.operands()) {
          Expr so = simplify(o);
          if (so.kind() == ExprKind::Add) {
            terms.insert(terms.end(), so.operands().begin(), so.operands().end());
          } else {
            terms.push_back(so);
          }
        }
        fold_div_mod(terms);
        Expr sum = 0;
        for (const Expr& t : terms) sum = sum + t;
        return sum;
      }
      case ExprKind::Mul: {
        Expr product = 1;
        for (const Expr& o : e.operands()) product = product * simplify(o);
        return product;
      }
      case ExprKind::FloorDiv: return divide(simplify(e.operands()[0]), simplify(e.operands()[1]), false);
      case ExprKind::Mod: return divide(simplify(e.operands()[0]), simplify(e.operands()[1]), true);
      case ExprKind::Max: return max(simplify(e.operands()[0]), simplify(e.operands()[1]));
      case ExprKind::Min: return min(simplify(e.operands()[0]), simplify(e.operands()[1]));
    }
    throw std::logic_error("simplify: corrupt ExprKind");
  }

 private:
  // ---- Sums.
  // c*k*(x // k) + c*(x % k) -> c*x: floor division and its remainder recombine for every integer
  // x; likewise c*k*((x // k) % m) + c*(x % k) -> c*(x % (k*m)), so a flat index split into three or
  // more dimensions folds pair by pair. k and m are positive (positive_form: a constant, or an
  // expression of non-negative symbols such as a symbolic extent, positive wherever the division
  // is evaluated); c is any product of constants and factors. A reshape that splits a flat index
  // and a layout that joins it again leave this shape (group_norm's [N, G, C/G] view of [N, C]),
  // and so does the collapse pass over a symbolic extent ((j % s1) + s1*(j // s1) is j); folding it
  // makes the access contiguous again.
  void fold_div_mod(std::vector<Expr>& terms) const {
    auto factors = [](const Expr& t) { return t.kind() == ExprKind::Mul ? t.operands() : std::vector<Expr>{t}; };
    auto product_without = [](const std::vector<Expr>& fs, size_t skip) {
      Expr p = 1;
      for (size_t f = 0; f < fs.size(); ++f)
        if (f != skip) p = p * fs[f];
      return p;
    };
    for (bool again = true; again;) {
      again = false;
      std::vector<std::vector<Expr>> term_factors;
      for (const Expr& t : terms) term_factors.push_back(factors(t));
      for (size_t i = 0; i < terms.size() && !again; ++i) {
        const std::vector<Expr>& fi = term_factors[i];
        for (size_t q = 0; q < fi.size() && !again; ++q) {
          // x // k, or (x // k) % m, times c*k.
          std::optional<Expr> m;
          Expr quotient = fi[q];
          if (quotient.kind() == ExprKind::Mod && positive_form(quotient.operands()[1])) {
            m = quotient.operands()[1];
            quotient = quotient.operands()[0];
          }
          if (quotient.kind() != ExprKind::FloorDiv || !positive_form(quotient.operands()[1])) continue;
          const Expr& x = quotient.operands()[0];
          const Expr& k = quotient.operands()[1];
          const Expr scale = product_without(fi, q);
          for (size_t j = 0; j < terms.size() && !again; ++j) {
            if (j == i) continue;
            const std::vector<Expr>& fj = term_factors[j];
            for (size_t r = 0; r < fj.size(); ++r) {
              // c*(x % k)
              if (fj[r].kind() != ExprKind::Mod || fj[r].operands()[0] != x || fj[r].operands()[1] != k) continue;
              const Expr c = product_without(fj, r);
              if (scale != k * c) continue;
              terms[i] = (m ? mod(x, k * *m) : x) * c;
              terms.erase(terms.begin() + static_cast<std::ptrdiff_t>(j));
              again = true;
              break;
            }
          }
        }
      }
    }
  }

  // ---- Proofs and bounds.
  // e >= 0 at every point, shown from e's form alone.
  bool nonneg_form(const Expr& e) const {
    switch (e.kind()) {
      case ExprKind::Constant: return e.constant() >= 0;
      case ExprKind::Symbol: return extent_.count(e.symbol_name()) || !is_node_value(e.symbol_name());
      case ExprKind::Add:
      case ExprKind::Mul:
        for (const Expr& o : e.operands())
          if (!nonneg_form(o)) return false;
        return true;
      case ExprKind::FloorDiv: return nonneg_form(e.operands()[0]) && positive_form(e.operands()[1]);
      case ExprKind::Mod: return positive_form(e.operands()[1]);
      case ExprKind::Max: return nonneg_form(e.operands()[0]) || nonneg_form(e.operands()[1]);
      case ExprKind::Min: return nonneg_form(e.operands()[0]) && nonneg_form(e.operands()[1]);
    }
    return false;
  }
  // A divisor that is a positive constant or a non-negative expression (division by zero is
  // undefined, so a non-negative divisor is positive wherever the division is evaluated).
  bool positive_form(const Expr& e) const { return e.is_constant() ? e.constant() > 0 : nonneg_form(e); }

  bool nonneg(const Expr& e) {
    Bounds b = bounds(e);
    return b.lo && nonneg_form(*b.lo);
  }

  Bounds bounds(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::Constant: return {e, e};
      case ExprKind::Symbol: {
        auto it = extent_.find(e.symbol_name());
        if (it != extent_.end()) return {Expr(0), it->second - 1};
        if (is_node_value(e.symbol_name())) return {};
        return {e, e};
      }
      case ExprKind::Add: {
        Bounds out{Expr(0), Expr(0)};
        for (const Expr& o : e.operands()) {
          Bounds b = bounds(o);
          out.lo = out.lo && b.lo ? std::optional<Expr>(*out.lo + *b.lo) : std::nullopt;
          out.hi = out.hi && b.hi ? std::optional<Expr>(*out.hi + *b.hi) : std::nullopt;
        }
        return out;
      }
      case ExprKind::Mul: {
        // A constant coefficient scales (and for a negative one, swaps) the bounds of the rest;
        // other factors multiply only when all are non-negative.
        int64_t coefficient = 1;
        Bounds out{Expr(1), Expr(1)};
        for (const Expr& o : e.operands()) {
          if (o.is_constant()) {
            coefficient = o.constant();
            continue;
          }
          Bounds b = bounds(o);
          if (!b.lo || !nonneg_form(*b.lo)) return {};
          out.lo = *out.lo * *b.lo;
          out.hi = out.hi && b.hi ? std::optional<Expr>(*out.hi * *b.hi) : std::nullopt;
        }
        if (coefficient >= 0) return {*out.lo * coefficient, out.hi ? std::optional<Expr>(*out.hi * coefficient) : std::nullopt};
        return {out.hi ? std::optional<Expr>(*out.hi * coefficient) : std::nullopt, *out.lo * coefficient};
      }
      case ExprKind::FloorDiv: {
        const Expr& k = e.operands()[1];
        if (!k.is_constant() || k.constant() <= 0) return {};
        Bounds b = bounds(e.operands()[0]);
        return {b.lo ? std::optional<Expr>(floordiv(*b.lo, k)) : std::nullopt,
                b.hi ? std::optional<Expr>(floordiv(*b.hi, k)) : std::nullopt};
      }
      case ExprKind::Mod: {
        const Expr& k = e.operands()[1];
        if (!positive_form(k)) return {};
        return {Expr(0), k - 1};
      }
      case ExprKind::Max:
      case ExprKind::Min: {
        Bounds a = bounds(e.operands()[0]), b = bounds(e.operands()[1]);
        auto both = [&](const std::optional<Expr>& x, const std::optional<Expr>& y) -> std::optional<Expr> {
          if (!x || !y) return std::nullopt;
          return e.kind() == ExprKind::Max ? max(*x, *y) : min(*x, *y);
        };
        return {both(a.lo, b.lo), both(a.hi, b.hi)};
      }
    }
    return {};
  }

  // ---- Division (sym::term_quotient splits off the exact part).
  // b = g*big + small with g a proper divisor of d (g > 1) and every value of small in [0, g):
  // then b // d == big // (d/g). The largest such g wins.
  // (8*i0 + i1) // 16 with i1 < 8 is i0 // 2.
  std::optional<std::tuple<int64_t, Expr, Expr>> split_by_divisor(const Expr& b, int64_t d) {
    std::vector<int64_t> divisors;
    for (int64_t f = 2; f <= d / f; ++f)
      if (d % f == 0) divisors.insert(divisors.end(), {f, d / f});
    std::sort(divisors.rbegin(), divisors.rend());
    for (int64_t g : divisors) {
      Expr big = 0, small = 0;
      for (const Expr& t : b.kind() == ExprKind::Add ? b.operands() : std::vector<Expr>{b}) {
        if (t.is_constant()) {
          big = big + floordiv(t, g);
          small = small + mod(t, g);
        } else if (auto part = sym::term_quotient(t, Expr(g))) {
          big = big + *part;
        } else {
          small = small + t;
        }
      }
      if (big == Expr(0)) continue;
      Bounds sb = bounds(small);
      if (sb.lo && sb.hi && nonneg_form(*sb.lo) && nonneg(Expr(g - 1) - *sb.hi)) return std::make_tuple(g, big, small);
    }
    return std::nullopt;
  }

  Expr divide(const Expr& a, const Expr& k, bool remainder) {
    auto rebuild = [&](const Expr& x) { return remainder ? mod(x, k) : floordiv(x, k); };
    bool constant_divisor = k.is_constant();
    if (constant_divisor && k.constant() <= 0) return rebuild(a);  // the rules below need k > 0
    if (!constant_divisor && !positive_form(k)) return rebuild(a);

    // (x % c1) % c2 -> x % c2 when c2 divides c1.
    if (remainder && constant_divisor && a.kind() == ExprKind::Mod && a.operands()[1].is_constant() &&
        a.operands()[1].constant() > 0 && a.operands()[1].constant() % k.constant() == 0)
      return divide(a.operands()[0], k, true);

    // Split a = k*q + b.
    Expr q = 0, b = 0;
    for (const Expr& t : a.kind() == ExprKind::Add ? a.operands() : std::vector<Expr>{a}) {
      if (t.is_constant() && constant_divisor) {  // c = k*(c // k) + c % k
        q = q + floordiv(t, k);
        b = b + mod(t, k);
        continue;
      }
      std::optional<Expr> part = t.is_constant() ? std::nullopt : sym::term_quotient(t, k);
      if (part)
        q = q + *part;
      else
        b = b + t;
    }
    Bounds bb = bounds(b);
    if (constant_divisor && bb.lo && bb.hi && bb.lo->is_constant() && bb.hi->is_constant()) {
      int64_t c = k.constant();
      Expr m_lo = floordiv(*bb.lo, c), m_hi = floordiv(*bb.hi, c);
      if (m_lo == m_hi) return remainder ? b - m_lo * c : q + m_lo;
    }
    if (bb.lo && bb.hi && nonneg_form(*bb.lo) && nonneg(k - 1 - *bb.hi)) return remainder ? b : q;
    // The remainder's split form g*(big % (k/g)) + small costs a multiply and an add more, but
    // it is affine in `small`'s variables (a vector loop can use it) and lets an enclosing
    // division fold: ((256*i1 + 16*i2 + i3) % 2048) // 256 with i2, i3 < 16 is i1 % 8.
    if (constant_divisor)
      if (auto split = split_by_divisor(b, k.constant())) {
        auto [g, big, small] = *split;
        if (remainder) return Expr(g) * mod(big, Expr(k.constant() / g)) + small;
        return q + floordiv(big, Expr(k.constant() / g));
      }
    if (q == Expr(0)) return rebuild(a);
    return remainder ? rebuild(b) : q + rebuild(b);
  }

  std::map<std::string, Expr> extent_;
};

}  // namespace

Expr simplify(const Expr& e, const VarRanges& ranges) {
  Simplifier s(ranges);
  // A rewrite can expose another (pulling q out of a sum leaves a smaller division); iterate to a
  // fixed point, which every rule approaches since each strictly shrinks the tree.
  Expr current = e;
  for (int round = 0; round < 8; ++round) {
    Expr next = s.simplify(current);
    if (next == current) return next;
    current = next;
  }
  return current;
}

bool simplify_indices(Kernel& k) {
  bool changed = false;
  VarRanges outer;
  for (size_t d = 0; d < k.ranges.size(); ++d) outer.emplace_back("i" + std::to_string(d), k.ranges[d]);
  // t<n> of a check_index node lies in [0, bound): the check stops the kernel otherwise.
  VarRanges checked;
  for (const Node& n : k.nodes)
    if (n.op == ScalarOp::CheckIndex) checked.emplace_back("t" + std::to_string(n.id), n.bound);
  for (Node& n : k.nodes) {
    VarRanges ranges = outer;
    if (n.loop >= 0 && static_cast<size_t>(n.loop) < k.loops.size())
      for (size_t d = 0; d < k.loops[n.loop].ranges.size(); ++d)
        ranges.emplace_back("r" + std::to_string(d), k.loops[n.loop].ranges[d]);
    for (const auto& c : checked) ranges.push_back(c);
    for (Expr& e : n.index) {
      Expr s = simplify(e, ranges);
      if (s != e) {
        e = s;
        changed = true;
      }
    }
  }
  return changed;
}

bool simplify_indices(Program& program) {
  bool changed = false;
  for (Kernel& k : program.kernels) changed = simplify_indices(k) || changed;
  return changed;
}

}  // namespace ember::loop_ir
