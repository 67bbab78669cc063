// Value ranges of symbolic expressions, and simplification that uses them.
//
// Needs: the symbols' facts (sym/symbols.h: [min, max], divisor), which the frontend's guards hold
// on every call. Guarantees: bound(e) contains the value of e at every assignment of the listed
// symbols inside their facts (and any value of a symbol not listed) where e evaluates at all (no
// division by zero, no int64 overflow); simplify(e) equals e at every such assignment. Why: the
// stages that serve symbolic sizes must decide things (is this max a no-op, does this index
// divide evenly) that hold for every size the graph can be called with, not just the traced one.
//
// Intervals saturate: lo == INT64_MIN means unbounded below, hi == INT64_MAX unbounded above, and
// arithmetic treats them as infinities (never as the numbers), so a bound is never made finite by
// an overflow.
#pragma once

#include <cstdint>
#include <limits>

#include "sym/expr.h"
#include "sym/symbols.h"

namespace ember::sym {
struct Rel;  // sym/relation.h
}  // namespace ember::sym

namespace ember::sym {

struct Interval {
  static constexpr int64_t kNegInf = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
  int64_t lo = kNegInf;
  int64_t hi = kInf;

  static Interval point(int64_t v) { return {v, v}; }
  bool bounded_below() const { return lo != kNegInf; }
  bool bounded_above() const { return hi != kInf; }
  bool operator==(const Interval& o) const { return lo == o.lo && hi == o.hi; }
};

// Exact interval arithmetic over the tree: sign cases of products, floordiv and mod by constants
// and by symbolic divisors of known sign, max, min. A symbol takes [min, max] of its SymbolInfo,
// tightened to multiples of its divisor; a symbol not in `symbols` is unbounded.
Interval bound(const Expr& e, const Symbols& symbols);

// The largest m >= 1 such that e's value is always a multiple of m, from the symbols' divisors and
// e's form (`16*s0 + 32` with s0's divisor 2: 32); 0 when e is the constant 0 (a multiple of
// everything). Never more than the truth; often less (a product whose multiple leaves int64 says 1).
int64_t known_multiple(const Expr& e, const Symbols& symbols);

// Narrows `symbol`'s range to the values at which `holds` (a relation true at the symbol's hint,
// over this one symbol) stays true, where lhs - rhs is monotone in the symbol (sums, products by
// constants and floor divisions by positive constants of it: the output sizes of convs and strided
// slices): `3 <= (s1 + -10) // 5 + 1` raises s1's min to 20. Returns whether the range changed.
// Why: a guard over one symbol then informs every later question about it (`statically_known`), such
// as the order of the strides of a slice of a conv's output.
bool narrow_range(const Rel& holds, SymbolInfo& symbol);

// Rewrites that hold for every value the facts allow, applied bottom-up through the constructors:
//   max(a, b) -> a  and  min(a, b) -> b   when a - b >= 0 is provable (and mirrored);
//   x // x -> 1,  (k*q) // k -> q,  (k*q) % k -> 0     (every term of the dividend a multiple of k);
//   (k*q + b) // k -> q,  (k*q + b) % k -> b          when 0 <= b < k is provable (k may be symbolic);
//   (k*q + b) // k -> q + m,  (k*q + b) % k -> b - m*k  for a constant k > 0 and b in [m*k, (m+1)*k);
//   x % c -> 0   for a constant c dividing known_multiple(x) (s0 % 16 when s0's divisor is 32).
// `s0 // s0 -> 1` holds wherever it evaluates (s0 != 0); the others need the ranges.
Expr simplify(const Expr& e, const Symbols& symbols);

}  // namespace ember::sym
