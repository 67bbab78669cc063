// Interval bounds of expressions and range-aware simplification (sym/range.h).
//
// Arithmetic on endpoints is done in __int128 with infinities as ±2^100, so a product of two
// finite int64 endpoints is exact and an infinite endpoint stays infinite through every
// operation; results clamp back to int64, where clamping is always sound in the direction of the
// endpoint (a lower bound only moves down, an upper bound only up).
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "sym/arith.h"
#include "sym/range.h"
#include "sym/relation.h"

namespace ember::sym {

namespace {

using Wide = __int128;
constexpr Wide kWideInf = Wide{1} << 100;

Wide lo_in(int64_t v) { return v == Interval::kNegInf ? -kWideInf : Wide{v}; }
Wide hi_in(int64_t v) { return v == Interval::kInf ? kWideInf : Wide{v}; }
bool infinite(Wide v) { return v >= kWideInf || v <= -kWideInf; }

int64_t clamp(Wide v) {
  if (v >= Interval::kInf) return Interval::kInf;
  if (v <= Interval::kNegInf) return Interval::kNegInf;
  return static_cast<int64_t>(v);
}

// The wide endpoints of an interval.
struct Span {
  Wide lo, hi;
  explicit Span(Interval i) : lo(lo_in(i.lo)), hi(hi_in(i.hi)) {}
  Span(Wide l, Wide h) : lo(l), hi(h) {}
  Interval narrow() const { return {clamp(lo), clamp(hi)}; }
};

// Endpoint product with 0 * inf = 0 (the other corner products carry the infinity).
Wide times(Wide a, Wide b) {
  if (a == 0 || b == 0) return 0;
  if (infinite(a) || infinite(b)) return ((a < 0) != (b < 0)) ? -kWideInf : kWideInf;
  return a * b;
}

Wide plus(Wide a, Wide b, bool lower) {
  if (infinite(a) || infinite(b)) {
    if (lower) return (a <= -kWideInf || b <= -kWideInf) ? -kWideInf : kWideInf;
    return (a >= kWideInf || b >= kWideInf) ? kWideInf : -kWideInf;
  }
  return a + b;
}

Wide floor_div(Wide a, Wide d) {  // d > 0
  if (infinite(a)) return a;
  if (infinite(d)) return a >= 0 ? 0 : -1;
  Wide q = a / d;
  if (a % d != 0 && a < 0) --q;
  return q;
}

Span join(const Span& a, const Span& b) { return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)}; }

Span mul(const Span& a, const Span& b) {
  Wide c[] = {times(a.lo, b.lo), times(a.lo, b.hi), times(a.hi, b.lo), times(a.hi, b.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

// x // d for d >= 1 throughout: monotone in x, and in d for each sign of x, so the corners bound it.
Span div_positive(const Span& x, const Span& d) {
  Wide c[] = {floor_div(x.lo, d.lo), floor_div(x.lo, d.hi), floor_div(x.hi, d.lo), floor_div(x.hi, d.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

Span negate(const Span& s) { return {-s.hi, -s.lo}; }

// Applies `positive` (which requires a divisor >= 1) to the parts of d's range above and below
// zero; x // d == (-x) // (-d) and x % d == -((-x) % (-d)) reach the negative part.
template <typename F>
std::optional<Span> by_divisor_sign(const Span& x, const Span& d, bool negate_result, F positive) {
  std::optional<Span> out;
  if (d.hi >= 1) out = positive(x, Span{std::max<Wide>(d.lo, 1), d.hi});
  if (d.lo <= -1) {
    Span neg = positive(negate(x), Span{std::max<Wide>(-d.hi, 1), -d.lo});
    if (negate_result) neg = negate(neg);
    out = out ? join(*out, neg) : neg;
  }
  return out;  // nullopt: d is 0, so e never evaluates
}

// x % d for d >= 1 throughout.
Span mod_positive(const Span& x, const Span& d) {
  if (!infinite(d.hi) && d.lo == d.hi && !infinite(x.lo) && !infinite(x.hi)) {
    Wide q = floor_div(x.lo, d.lo);
    if (q == floor_div(x.hi, d.lo)) return {x.lo - q * d.lo, x.hi - q * d.lo};  // one period
  }
  Wide hi = infinite(d.hi) ? kWideInf : d.hi - 1;
  if (x.lo >= 0) return {0, std::min(hi, x.hi)};
  return {0, hi};
}

class Bounder {
 public:
  explicit Bounder(const Symbols& symbols) {
    for (const SymbolInfo& s : symbols) {
      Interval i{s.min, s.max};
      if (s.divisor > 1) {  // round inward to multiples of the divisor (finite ends only)
        if (i.bounded_below()) i.lo = clamp(-floor_div(-Wide{i.lo}, s.divisor) * s.divisor);
        if (i.bounded_above()) i.hi = clamp(floor_div(Wide{i.hi}, s.divisor) * s.divisor);
      }
      facts_.emplace(s.name, i);
    }
  }

  // Every result is narrowed to int64 endpoints, so the next operation's int128 products of
  // finite endpoints cannot overflow.
  Span span(const Expr& e) const { return Span{raw_span(e).narrow()}; }

  Interval bound(const Expr& e) const { return span(e).narrow(); }

 private:
  Span raw_span(const Expr& e) const {
    const auto& ops = e.operands();
    switch (e.kind()) {
      case ExprKind::Constant: return Span{Interval::point(e.constant())};
      case ExprKind::Symbol: {
        auto it = facts_.find(e.symbol_name());
        return Span{it == facts_.end() ? Interval{} : it->second};
      }
      case ExprKind::Add: {
        Span out{0, 0};
        for (const Expr& o : ops) {
          Span s = span(o);
          out = Span{Span{plus(out.lo, s.lo, true), plus(out.hi, s.hi, false)}.narrow()};
        }
        return out;
      }
      case ExprKind::Mul: {
        Span out{1, 1};
        for (const Expr& o : ops) out = Span{mul(out, span(o)).narrow()};
        return out;
      }
      case ExprKind::FloorDiv: {
        auto q = by_divisor_sign(span(ops[0]), span(ops[1]), false, div_positive);
        return q ? *q : Span{-kWideInf, kWideInf};
      }
      case ExprKind::Mod: {
        auto r = by_divisor_sign(span(ops[0]), span(ops[1]), true, mod_positive);
        return r ? *r : Span{-kWideInf, kWideInf};
      }
      case ExprKind::Max: {
        Span a = span(ops[0]), b = span(ops[1]);
        return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
      }
      case ExprKind::Min: {
        Span a = span(ops[0]), b = span(ops[1]);
        return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
      }
    }
    throw std::logic_error("sym::bound: corrupt ExprKind");
  }

  std::map<std::string, Interval> facts_;
};

int64_t gcd(int64_t a, int64_t b) {  // of non-negative values; gcd(0, b) == b
  while (b != 0) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// known_multiple's recursion; `divisor` maps a symbol to its divisor.
int64_t multiple(const Expr& e, const std::map<std::string, int64_t>& divisor) {
  const auto& ops = e.operands();
  switch (e.kind()) {
    case ExprKind::Constant:
      return e.constant() == Interval::kNegInf ? int64_t{1} << 62 : (e.constant() < 0 ? -e.constant() : e.constant());
    case ExprKind::Symbol: {
      auto it = divisor.find(e.symbol_name());
      return it == divisor.end() ? 1 : it->second;
    }
    case ExprKind::Add: {
      int64_t g = 0;
      for (const Expr& o : ops) g = gcd(g, multiple(o, divisor));
      return g;
    }
    case ExprKind::Mul: {
      // A product of multiples; when it leaves int64, the largest factor's alone is still true.
      int64_t m = 1, largest = 1;
      bool overflow = false;
      for (const Expr& o : ops) {
        int64_t f = multiple(o, divisor);
        if (f == 0) return 0;
        largest = std::max(largest, f);
        overflow = overflow || __builtin_mul_overflow(m, f, &m);
      }
      return overflow ? largest : m;
    }
    case ExprKind::FloorDiv: {
      // x = c*q exactly when c divides x's multiple, and then q is a multiple of that over c.
      const Expr& k = ops[1];
      int64_t mx = multiple(ops[0], divisor);
      if (!k.is_constant() || k.constant() <= 0) return mx == 0 ? 0 : 1;
      if (mx == 0) return 0;
      return mx % k.constant() == 0 ? mx / k.constant() : 1;
    }
    case ExprKind::Mod:  // x - k*(x // k)
    case ExprKind::Max:  // one of the two
    case ExprKind::Min:
      return gcd(multiple(ops[0], divisor), multiple(ops[1], divisor));
  }
  throw std::logic_error("sym::known_multiple: corrupt ExprKind");
}

std::map<std::string, int64_t> divisors(const Symbols& symbols) {
  std::map<std::string, int64_t> out;
  for (const SymbolInfo& s : symbols) out.emplace(s.name, std::max<int64_t>(s.divisor, 1));
  return out;
}

std::vector<Expr> terms_of(const Expr& e) { return e.kind() == ExprKind::Add ? e.operands() : std::vector<Expr>{e}; }

class RangeSimplifier {
 public:
  explicit RangeSimplifier(const Symbols& symbols) : bounds_(symbols), divisor_(divisors(symbols)) {}

  Expr simplify(const Expr& e) const {
    const auto& ops = e.operands();
    switch (e.kind()) {
      case ExprKind::Constant:
      case ExprKind::Symbol:
        return e;
      case ExprKind::Add: {
        Expr sum = 0;
        for (const Expr& o : ops) sum = sum + simplify(o);
        return sum;
      }
      case ExprKind::Mul: {
        Expr product = 1;
        for (const Expr& o : ops) product = product * simplify(o);
        return product;
      }
      case ExprKind::FloorDiv: return divide(simplify(ops[0]), simplify(ops[1]), false);
      case ExprKind::Mod: return divide(simplify(ops[0]), simplify(ops[1]), true);
      case ExprKind::Max:
      case ExprKind::Min: {
        Expr a = simplify(ops[0]), b = simplify(ops[1]);
        Interval d = bound_of([&] { return a - b; });
        bool want_max = e.kind() == ExprKind::Max;
        if (d.lo >= 0) return want_max ? a : b;
        if (d.hi <= 0) return want_max ? b : a;
        return want_max ? max(a, b) : min(a, b);
      }
    }
    throw std::logic_error("sym::simplify: corrupt ExprKind");
  }

 private:
  Expr divide(const Expr& a, const Expr& k, bool remainder) const {
    auto rebuild = [&](const Expr& x) { return remainder ? mod(x, k) : floordiv(x, k); };
    if (a == k && !k.is_constant()) return remainder ? Expr(0) : Expr(1);
    Interval kb = bounds_.bound(k);
    if (kb.lo >= 1 && within(a, k)) return remainder ? a : Expr(0);
    // Split a = k*q + b, b the terms that are not multiples of k. Every rule below holds for any
    // nonzero k: an exact quotient always, the others only for k >= 1 (checked there). A constant
    // k also takes the multiples its symbols' divisors show (s0 // 16 for s0 a multiple of 16)
    // and the multiple part of the constant term.
    Expr q = 0, b = 0;
    for (const Expr& t : terms_of(a)) {
      if (k.is_constant() && t.is_constant()) {
        q = q + floordiv(t, k);
        b = b + mod(t, k);
      } else if (std::optional<Expr> part = term_quotient(t, k)) {
        q = q + *part;
      } else if (k.is_constant() && multiple(t, divisor_) % k.constant() == 0) {
        q = q + floordiv(t, k);  // exact, so it distributes
      } else {
        b = b + t;
      }
    }
    if (b == Expr(0)) return remainder ? Expr(0) : q;
    if (kb.lo < 1) return remainder ? rebuild(b) : q + rebuild(b);
    Interval bb = bounds_.bound(b);
    if (k.is_constant() && bb.bounded_below() && bb.bounded_above()) {
      int64_t c = k.constant(), m_lo, m_hi;
      arith::floordiv_ok(bb.lo, c, &m_lo);
      arith::floordiv_ok(bb.hi, c, &m_hi);
      if (m_lo == m_hi) {
        try {
          return remainder ? b - Expr(m_lo) * k : q + m_lo;
        } catch (const std::overflow_error&) {  // m*k leaves int64 near the ends: keep the division
        }
      }
    }
    if (within(b, k)) return remainder ? b : q;
    if (q == Expr(0)) return rebuild(a);
    return remainder ? rebuild(b) : q + rebuild(b);
  }

  // 0 <= x < k at every point: x's own bound, and the bound of the difference k - x (which sees
  // through correlated terms: s0 - 1 < s0 whatever s0's range).
  bool within(const Expr& x, const Expr& k) const { return bounds_.bound(x).lo >= 0 && bound_of([&] { return k - x; }).lo >= 1; }

  // The bound of an expression built for a proof; unbounded when building it overflows int64
  // (the constructors fold constants with checks), so such a proof fails instead of throwing.
  template <typename F>
  Interval bound_of(F build) const {
    try {
      return bounds_.bound(build());
    } catch (const std::overflow_error&) {
      return Interval{};
    }
  }

  Bounder bounds_;
  std::map<std::string, int64_t> divisor_;
};

}  // namespace

Interval bound(const Expr& e, const Symbols& symbols) { return Bounder(symbols).bound(e); }

namespace {

// +1 where e never decreases as `name` grows, -1 where it never increases, 0 where its form does not say.
int monotone(const Expr& e, const std::string& name) {
  const auto& ops = e.operands();
  switch (e.kind()) {
    case ExprKind::Constant: return 1;  // both: combines with either direction
    case ExprKind::Symbol: return e.symbol_name() == name ? 1 : 0;
    case ExprKind::Add: {
      int dir = 2;  // none yet
      for (const Expr& o : ops) {
        if (o.is_constant()) continue;
        int m = monotone(o, name);
        if (m == 0 || (dir != 2 && m != dir)) return 0;
        dir = m;
      }
      return dir == 2 ? 1 : dir;
    }
    case ExprKind::Mul: {
      // A constant coefficient times one term that moves.
      int64_t sign = 1;
      const Expr* moving = nullptr;
      for (const Expr& o : ops) {
        if (o.is_constant()) {
          sign = o.constant() < 0 ? -sign : sign;
        } else if (moving) {
          return 0;
        } else {
          moving = &o;
        }
      }
      return moving ? static_cast<int>(sign) * monotone(*moving, name) : 1;
    }
    case ExprKind::FloorDiv:
      return ops[1].is_constant() && ops[1].constant() > 0 ? monotone(ops[0], name) : 0;
    case ExprKind::Mod:
    case ExprKind::Max:
    case ExprKind::Min:
      return 0;
  }
  return 0;
}

}  // namespace

bool narrow_range(const Rel& holds, SymbolInfo& symbol) {
  if (holds.op != RelOp::Lt && holds.op != RelOp::Le) return false;
  Expr d = holds.lhs - holds.rhs;  // the relation is d < 0 (or d <= 0)
  std::set<std::string> names;
  free_symbols(d, names);
  if (names.size() != 1 || *names.begin() != symbol.name) return false;
  int dir = monotone(d, symbol.name);
  if (dir == 0) return false;
  auto true_at = [&](int64_t v) {
    try {
      int64_t x = evaluate(d, std::map<std::string, int64_t>{{symbol.name, v}});
      return holds.op == RelOp::Lt ? x < 0 : x <= 0;
    } catch (const std::exception&) {  // leaves int64: no answer, so no narrowing there
      return true;
    }
  };
  if (!true_at(symbol.hint)) return false;
  if (dir < 0) {  // d falls as the symbol grows: true from some value on; the least one in [min, hint]
    int64_t lo = symbol.min, hi = symbol.hint;
    if (true_at(lo)) return false;
    while (hi - lo > 1) {  // true_at(hi), !true_at(lo)
      int64_t mid = lo + (hi - lo) / 2;
      (true_at(mid) ? hi : lo) = mid;
    }
    symbol.min = hi;
    return true;
  }
  // d grows with the symbol: true up to some value; the greatest one in [hint, max], bracketed by doubling
  // from the hint (an unbounded max would overflow d's evaluation).
  int64_t lo = symbol.hint, hi = symbol.hint;
  while (true_at(hi)) {
    if (hi == symbol.max) return false;
    lo = hi;
    hi = hi > symbol.max - hi ? symbol.max : 2 * std::max<int64_t>(hi, 1);
  }
  while (hi - lo > 1) {  // true_at(lo), !true_at(hi)
    int64_t mid = lo + (hi - lo) / 2;
    (true_at(mid) ? lo : hi) = mid;
  }
  symbol.max = lo;
  return true;
}

int64_t known_multiple(const Expr& e, const Symbols& symbols) { return multiple(e, divisors(symbols)); }

Expr simplify(const Expr& e, const Symbols& symbols) { return RangeSimplifier(symbols).simplify(e); }

}  // namespace ember::sym
