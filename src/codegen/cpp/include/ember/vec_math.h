// Ember's vectorized math: exp, log, log1p, expm1, tanh, sigmoid, erf, sin, cos, pow and division
// by a loop-invariant divisor (DivisorF), for VecF and for float, with the same algorithm (and so
// the same bits) in both forms.
//
// Needs: vec.h's ISA layer (VecF, MaskF and, in the SIMD builds, detail::VecD with fma_, where_,
// pow2i_, scale_exponent_, exponent_, widen_lo/hi, narrow).
// Guarantees: every function is within 2 ulp of glibc's float32 libm over the whole float range
// (tests/codegen/test_vec.py measures it; docs/vector-math.md has the figures), with IEEE special
// values: NaN in gives NaN out, odd functions keep the sign of zero, overflow gives inf and
// underflow rounds through the subnormals. The scalar form of each function gives the same bits as
// every vector lane (sin, cos and pow beyond their vector range call libm in both forms alike).
// Why this shape: exp is the hot one (softmax) and runs in float with a degree-6 polynomial; the
// others widen to double, where short Taylor or Chebyshev polynomials are accurate to ~1e-10, so
// the single rounding to float at the end leaves them all but correctly rounded. The kernels are
// templates over the lane type (float/double or VecF/VecD), which is what keeps scalar and vector
// results identical: the same operations, each correctly rounded, in the same order.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace ember::vec {
namespace detail {

// The scalar forms of the lane operations the kernels are written in.
inline float fma_(float a, float b, float c) { return std::fma(a, b, c); }
inline double fma_(double a, double b, double c) { return std::fma(a, b, c); }
inline float where_(bool m, float a, float b) { return m ? a : b; }
inline double where_(bool m, double a, double b) { return m ? a : b; }
inline double pow2i_(double n) {
  double shifted = n + 6755399441055744.0;
  uint64_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  bits = (bits + 1023u) << 52;
  double out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}
// p * 2^n for a normal p and an integer n with a normal product, where shifted = n + 1.5 * 2^23 (as
// exp's reduction leaves it): its low bits are n in two's complement, which the shift by 23 moves
// onto the exponent field (every higher bit falls off), so one integer add scales p exactly.
inline float scale_exponent_(float p, float shifted) {
  uint32_t pb, sb;
  std::memcpy(&pb, &p, sizeof pb);
  std::memcpy(&sb, &shifted, sizeof sb);
  pb += sb << 23;
  float out;
  std::memcpy(&out, &pb, sizeof out);
  return out;
}
inline float pow2i_(float n) {
  float shifted = n + 12582912.0f;
  uint32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  bits = (bits + 127u) << 23;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}
inline double exponent_(double x, double& significand) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  uint64_t mant = (bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
  std::memcpy(&significand, &mant, sizeof significand);
  return double(bits >> 52);
}

// Round to the nearest integer, ties to even, for |x| < 2^51 (double) or 2^22 (float): adding and
// subtracting 1.5 * 2^mantissa-bits is exact except for that rounding, in every ISA alike.
template <class D>
D rint_d(D x) {
  return (x + D(6755399441055744.0)) - D(6755399441055744.0);
}
template <class T>
T rint_f(T x) {
  return (x + T(12582912.0f)) - T(12582912.0f);
}

// c0 + x * (c1 + x * (c2 + ...)), one fma per coefficient.
template <class T>
T horner(T, double c) {
  return T(c);
}
template <class T, class... Cs>
T horner(T x, double c0, Cs... rest) {
  return fma_(horner(x, rest...), x, T(c0));
}

// exp in float, shared by both scalings below. x = n ln2 + r: s = x log2e + 1.5 * 2^23 rounded
// once (one fma) holds n = round(x log2e) in its low mantissa bits, and n = s - 1.5 * 2^23 exactly;
// |r| <= ln2/2 + 2e-6 (ln2 split in two so n * hi is exact). exp(r) = 1 + (r + r^2 P(r)) with P of
// degree 4, a minimax fit of (exp(r) - 1 - r) / r^2 weighted by r^2 / exp(r)
// (tests/codegen/vec_fit_coeffs.py; relative error 3.8e-9, 0.03 ulp, with these float
// coefficients). Returns exp(r), in [0.707, 1.415]; exp(x) = that * 2^n.
constexpr float kExpShift = 12582912.0f;  // 1.5 * 2^23
template <class T>
T exp_reduced_(T x, T& shifted) {
  shifted = fma_(x, T(1.44269502162933349609375f), T(kExpShift));
  T n = shifted - T(kExpShift);
  T r = fma_(n, T(-0.693145751953125f), x);
  r = fma_(n, T(-1.428606765330187e-06f), r);
  // P by Estrin's scheme, (c0 + c1 r) + r^2 (c2 + c3 r + c4 r^2): the same number of fmas as
  // Horner's but half its dependency chain, which is what bounds a softmax row's exp loop.
  T r2 = r * r;
  T lo = fma_(T(0x1.555492p-3f), r, T(0x1.fffffcp-2f));
  T tail = fma_(fma_(T(0x1.6a243ep-10f), r2, fma_(T(0x1.1239dcp-7f), r, T(0x1.5558f2p-5f))), r2, lo);
  return T(1.0f) + fma_(r2, tail, r);
}

// exp in float for x in [-104, 89]: 2^n applied in two halves so a subnormal result is rounded once.
template <class T>
T exp_f(T x) {
  T shifted;
  T p = exp_reduced_(x, shifted);
  T n = shifted - T(kExpShift);
  T n1 = rint_f(n * T(0.5f));
  return (p * pow2i_(n1)) * pow2i_(n - n1);
}

// exp_f for |x| <= kExpFastAbs, where n lies in [-125, 125] and p * 2^n is a normal float, so it
// is exact: adding n to p's exponent field (scale_exponent_) gives the bits of exp_f's
// (p * 2^n1) * 2^(n - n1), whose products are exact too, without a multiply.
constexpr float kExpFastAbs = 86.5f;
template <class T>
T exp_f_normal(T x) {
  T shifted;
  T p = exp_reduced_(x, shifted);
  return scale_exponent_(p, shifted);
}

// exp in double for |y| <= 700: Taylor to r^10 on |r| <= ln2/2 (truncation 2e-13 relative; the
// float result needs ~1e-9, the margin keeps near-ties rounding like the double reference).
template <class D>
D exp_d(D y) {
  D n = rint_d(y * D(1.4426950408889634));
  D r = fma_(n, D(-0.6931471805599453), y);
  r = fma_(n, D(-2.3190468138462996e-17), r);
  D p = horner(r, 1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320,
               1.0 / 362880, 1.0 / 3628800);
  return p * pow2i_(n);
}

// expm1 in double for y in [-700, 700]: expm1(r) = r + r^2 * (Taylor to r^10, truncation 6e-13
// relative), then
// 2^n (expm1(r) + 1) - 1 as one fma, which keeps the relative accuracy near n = +-1.
template <class D>
D expm1_d(D y) {
  D n = rint_d(y * D(1.4426950408889634));
  D r = fma_(n, D(-0.6931471805599453), y);
  r = fma_(n, D(-2.3190468138462996e-17), r);
  D tail = horner(r, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320,
                  1.0 / 362880, 1.0 / 3628800);
  D e = fma_(r * r, tail, r);
  D s = pow2i_(n);
  return fma_(s, e, s - D(1.0));
}

// log in double for a positive normal double: x = 2^k m with m in [sqrt(1/2), sqrt(2)), f = m - 1,
// s = f / (2 + f), log(1 + f) = 2 atanh(s) = f - s f + s R(s^2) with R = 2/3 s^2 + 2/5 s^4 + ...,
// arranged so the leading f is exact (s^2 <= 0.0295: truncation after s^10 is below 1e-10).
template <class D>
D log_d(D x) {
  D m;
  D k = exponent_(x, m) - D(1023.0);
  auto high = m > D(1.4142135623730951);
  m = where_(high, m * D(0.5), m);
  k = where_(high, k + D(1.0), k);
  D f = m - D(1.0);
  D s = f / (D(2.0) + f);
  D z = s * s;
  D big_r = z * horner(z, 2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11);
  D half_f2 = D(0.5) * f * f;
  D log1p_f = f - (half_f2 - s * (half_f2 + big_r));
  return fma_(k, D(0.6931471805599453), log1p_f);
}

// log1p in double for x > -1: u = 1 + x rounded, its rounding error c recovered exactly (Fast2Sum,
// ordered by magnitude), and log1p(x) = log(u) + c / u.
template <class D>
D log1p_d(D x) {
  D u = D(1.0) + x;
  D c = where_(x > D(1.0), (x - u) + D(1.0), (D(1.0) - u) + x);
  return log_d(u) + c / u;
}

// erf in float for t in [0, 4] (tests/codegen/vec_fit_coeffs.py fits both pieces):
// - below 1, t (c0 + z P(z)) with z = t^2 and P of degree 5 (minimax; 1.4e-8 relative to erf(t) / t);
//   c0 = 2 / sqrt(pi) is a float pair, so the leading product rounds once and tiny t is exact;
// - from 1 to 4, 1 - exp(-t^2) Q(u) with Q of degree 8 in u = (2t - 5) / 3, a minimax fit of
//   erfc(t) exp(t^2) weighted by exp(-t^2) (0.05 ulp of the result); t^2 = z + lo exactly (one fma),
//   and exp(-z - lo) = exp(-z) (1 - lo) to first order (|lo| <= 2^-20). The term is at most 0.16,
//   so its own roundings move the result by well under an ulp; at 4 it rounds to 1.
template <class T>
T erf_f(T t) {
  const T z = t * t;
  const T p = horner(z, -0x1.81274p-2, 0x1.ce2d4ep-4, -0x1.b7fdaep-6, 0x1.54247ap-8, -0x1.a4bb4ap-11,
                     0x1.4b4b98p-14);
  const T small = fma_(t, T(0x1.20dd76p+0f), t * fma_(z, p, T(-0x1.f7ac92p-25f)));
  const T lo = fma_(t, t, T(0.0f) - z);
  const T e = exp_f_normal(T(0.0f) - z);
  const T u = fma_(t, T(0x1.555556p-1f), T(-0x1.aaaaaap+0f));
  const T q = horner(u, 0x1.afbbe6p-3, -0x1.c8c226p-4, 0x1.cb39f2p-5, -0x1.c1ae5ep-6, 0x1.7df51cp-7,
                     -0x1.4903b0p-8, 0x1.9596eep-8, 0x1.f807dep-9, 0x1.66e9a0p-9);
  const T big = fma_(T(0.0f) - fma_(T(0.0f) - e, lo, e), q, T(1.0f));
  return where_(t < T(1.0f), small, big);
}

// sin (cosine = false) or cos in double for |x| <= 2^24: n = round(x * 2/pi), r = x - n pi/2 with
// pi/2 in three parts (the first product and difference are exact, so r is accurate even when x is
// close to a multiple of pi/2), then the sine or cosine Taylor polynomial on |r| <= pi/4 by quadrant.
template <class D>
D sincos_d(D x, bool cosine) {
  D n = rint_d(x * D(0.6366197723675814));
  D r = fma_(n, D(-1.5707963267948966), x);
  r = fma_(n, D(-6.123233995736766e-17), r);
  r = fma_(n, D(1.4973849048591698e-33), r);
  D quadrant = cosine ? n + D(1.0) : n;
  D quarter = quadrant * D(0.25);
  D fl = rint_d(quarter);
  fl = where_(fl > quarter, fl - D(1.0), fl);
  D q = quadrant - D(4.0) * fl;
  D z = r * r;
  D sin_r = fma_(r * z, horner(z, -1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880, -1.0 / 39916800,
                               1.0 / 6227020800.0, -1.0 / 1307674368000.0), r);
  D cos_r = horner(z, 1.0, -1.0 / 2, 1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800,
                   1.0 / 479001600, -1.0 / 87178291200.0, 1.0 / 20922789888000.0);
  D v = where_((q == D(1.0)) | (q == D(3.0)), cos_r, sin_r);
  return where_(q >= D(2.0), D(0.0) - v, v);
}

// num / (1 + e) for e in [0, 1] and num in {1, e}, in float: sigmoid's last step. 1 + e is kept as
// s + lost exactly (Fast2Sum: |e| <= 1), and one correction step on the rounded quotient d takes
// the residual num - (s + lost) * d (its s part exact by fma): the quotient of the unrounded sum,
// so the result is within about 1 ulp of num / (1 + e) (the rest of sigmoid's error is exp's).
template <class T>
T over_one_plus_(T num, T e) {
  const T one(1.0f);
  const T s = one + e;
  const T lost = (one - s) + e;
  const T r = one / s;
  const T d = num * r;
  const T residual = fma_(T(0.0f) - s, d, num) - lost * d;
  return fma_(r, residual, d);
}

// Applies a double kernel to a float or to each half of a VecF.
template <class K>
float on_doubles(float x, K kernel) {
  return float(kernel(double(x)));
}

}  // namespace detail

// ---- float forms ----

inline float exp(float x) {
  if (std::fabs(x) <= detail::kExpFastAbs) return detail::exp_f_normal(x);
  if (x < -104.0f) return 0.0f;  // exp_f(-104) is 0; computing it makes a subnormal (see exp_wide_)
  return x != x ? x + x : detail::exp_f(x > 89.0f ? 89.0f : x);
}
// exp for an argument known to be <= 0 or NaN (softmax's x - max(x)): the bits of exp(x) for every
// such x. For x <= 0, |x| <= kExpFastAbs is x >= -kExpFastAbs, so the range check needs no |x|;
// NaN fails both tests alike. A positive argument is a caller's error (it would skip the overflow
// handling): the code generator emits this only where it proved the argument non-positive.
inline float exp_nonpositive(float x) {
  if (x >= -detail::kExpFastAbs) return detail::exp_f_normal(x);
  if (x < -104.0f) return 0.0f;
  return x != x ? x + x : detail::exp_f(x);
}
inline float expm1(float x) {
  if (x != x || x == 0.0f) return x + x;
  float c = x < -110.0f ? -110.0f : (x > 89.0f ? 89.0f : x);
  return float(detail::expm1_d(double(c)));
}
inline float log(float x) {
  if (x != x) return x + x;
  if (x < 0.0f) return std::numeric_limits<float>::quiet_NaN();
  if (x == 0.0f) return -std::numeric_limits<float>::infinity();
  if (x == std::numeric_limits<float>::infinity()) return x;
  return float(detail::log_d(double(x)));
}
inline float log1p(float x) {
  if (x != x || x == 0.0f) return x + x;
  if (x < -1.0f) return std::numeric_limits<float>::quiet_NaN();
  if (x == -1.0f) return -std::numeric_limits<float>::infinity();
  if (x == std::numeric_limits<float>::infinity()) return x;
  return float(detail::log1p_d(double(x)));
}
inline float tanh(float x) {
  if (x != x || x == 0.0f) return x + x;
  float a = std::fabs(x) > 10.0f ? 10.0f : std::fabs(x);
  double e = detail::expm1_d(2.0 * double(a));
  return std::copysign(float(e / (e + 2.0)), x);
}
// 1 / (1 + exp(-x)) for x >= 0, exp(x) / (1 + exp(x)) below: exp of -|x| lies in (0, 1], so
// nothing overflows, and float arithmetic throughout (the double form cost 2.6x eager's SiLU).
inline float sigmoid(float x) {
  if (x != x) return x + x;
  const float e = exp_nonpositive(-std::fabs(x));
  return detail::over_one_plus_(x >= 0.0f ? 1.0f : e, e);
}
inline float erf(float x) {
  if (x != x || x == 0.0f) return x + x;
  float a = std::fabs(x) > 4.0f ? 4.0f : std::fabs(x);
  return std::copysign(detail::erf_f(a), x);
}
inline float sin(float x) {
  if (!(std::fabs(x) <= 16777216.0f)) return std::sin(x);
  if (x == 0.0f) return x;
  return float(detail::sincos_d(double(x), false));
}
inline float cos(float x) {
  if (!(std::fabs(x) <= 16777216.0f)) return std::cos(x);
  return float(detail::sincos_d(double(x), true));
}
inline float pow(float x, float y) { return std::pow(x, y); }
inline float sqrt(float x) { return std::sqrt(x); }
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline float reciprocal(float x) { return 1.0f / x; }
inline float abs(float x) { return std::fabs(x); }
inline float floor(float x) { return std::floor(x); }
inline float ceil(float x) { return std::ceil(x); }
inline float trunc(float x) { return std::trunc(x); }
inline float round(float x) { return std::nearbyint(x); }
inline float sign(float x) { return float(int(0.0f < x) - int(x < 0.0f)); }
inline float fma(float a, float b, float c) { return std::fma(a, b, c); }
inline float relu(float x) { return x < 0.0f ? 0.0f : x; }
inline bool isnan(float x) { return x != x; }
inline float maximum(float a, float b) {
  if (a != a || b != b) return a + b;
  return b > a ? b : a;
}
inline float minimum(float a, float b) {
  if (a != a || b != b) return a + b;
  return b < a ? b : a;
}


// ---- VecF forms ----

// Element-wise operations every ISA expresses through VecF's own operators.
inline VecF rsqrt(VecF x) { return VecF(1.0f) / sqrt(x); }
inline VecF reciprocal(VecF x) { return VecF(1.0f) / x; }
inline VecF relu(VecF x) { return where(x < VecF(0.0f), VecF(0.0f), x); }
inline VecF sign(VecF x) {
  VecF zero(0.0f), one(1.0f);
  return where(x > zero, one, zero) - where(x < zero, one, zero);
}

#if EMBER_VEC_SIMD

namespace detail {

template <class K>
VecF on_doubles(VecF x, K kernel) {
  return narrow(kernel(widen_lo(x)), kernel(widen_hi(x)));
}

// Lanes where `fallback` is set are recomputed with the scalar function f (libm beyond the
// vector range); lanes are independent, so the order does not matter.
template <class F>
VecF patch_lanes(VecF x, VecF r, MaskF fallback, F f) {
  if (!any(fallback)) return r;
  float xs[VecF::kSize], rs[VecF::kSize];
  x.store(xs);
  r.store(rs);
  for (int i = 0; i < VecF::kSize; ++i)
    if (fallback.lane(i)) rs[i] = f(xs[i]);
  return VecF::load(rs);
}

inline VecF quiet_nan_where(MaskF m, VecF x) {
  return where(m, VecF(std::numeric_limits<float>::quiet_NaN()), x);
}

}  // namespace detail

// Rows whose every lane is in the normal range (NaN is not) take the short form; the result
// bits are the same either way, so the branch only decides the cost.
namespace detail {
// exp off the fast range. Lanes below -104, whose exp rounds to +0 (exp_f(-104) is 0), get 0
// directly and run exp_f on 0 instead: exp_f(-104) computes a subnormal intermediate, and a
// subnormal result costs a microcode assist per instruction on x86 (a padding mask's
// finfo.min lanes made the masked softmax's exp loop ~4x slower). Same bits as before.
inline VecF exp_wide_(VecF x) {
  const MaskF zero = x < VecF(-104.0f);
  const VecF r = exp_f(clamp_(where(zero, VecF(0.0f), x), -104.0f, 89.0f));
  return where(isnan(x), x + x, where(zero, VecF(0.0f), r));
}
}  // namespace detail
inline VecF exp(VecF x) {
  if (all(abs(x) <= VecF(detail::kExpFastAbs))) return detail::exp_f_normal(x);
  return detail::exp_wide_(x);
}
inline VecF exp_nonpositive(VecF x) {
  if (all(x >= VecF(-detail::kExpFastAbs))) return detail::exp_f_normal(x);
  return detail::exp_wide_(x);
}
inline VecF expm1(VecF x) {
  VecF r = detail::on_doubles(detail::clamp_(x, -110.0f, 89.0f), [](auto d) { return detail::expm1_d(d); });
  return where(isnan(x) | (x == VecF(0.0f)), x + x, r);
}
inline VecF log(VecF x) {
  VecF inf(std::numeric_limits<float>::infinity());
  VecF safe = where((x > VecF(0.0f)) & (x < inf), x, VecF(1.0f));
  VecF r = detail::on_doubles(safe, [](auto d) { return detail::log_d(d); });
  r = detail::quiet_nan_where(x < VecF(0.0f), r);
  r = where(x == VecF(0.0f), -inf, r);
  r = where(x == inf, inf, r);
  return where(isnan(x), x + x, r);
}
inline VecF log1p(VecF x) {
  VecF inf(std::numeric_limits<float>::infinity());
  VecF safe = where((x > VecF(-1.0f)) & (x < inf), x, VecF(0.0f));
  VecF r = detail::on_doubles(safe, [](auto d) { return detail::log1p_d(d); });
  r = detail::quiet_nan_where(x < VecF(-1.0f), r);
  r = where(x == VecF(-1.0f), -inf, r);
  r = where(x == inf, inf, r);
  return where(isnan(x) | (x == VecF(0.0f)), x + x, r);
}
inline VecF tanh(VecF x) {
  VecF a = detail::clamp_(abs(x), 0.0f, 10.0f);
  VecF r = detail::on_doubles(a, [](auto d) {
    auto e = detail::expm1_d(d + d);
    return e / (e + decltype(d)(2.0));
  });
  return where(isnan(x) | (x == VecF(0.0f)), x + x, copysign(r, x));
}
inline VecF sigmoid(VecF x) {  // the float form's steps lane by lane (same bits)
  const VecF e = exp_nonpositive(VecF(0.0f) - abs(x));
  return where(isnan(x), x + x, detail::over_one_plus_(where(x >= VecF(0.0f), VecF(1.0f), e), e));
}
inline VecF erf(VecF x) {
  VecF a = detail::clamp_(abs(x), 0.0f, 4.0f);
  VecF r = detail::erf_f(a);
  return where(isnan(x) | (x == VecF(0.0f)), x + x, copysign(r, x));
}
inline VecF sin(VecF x) {
  MaskF outside = !(abs(x) <= VecF(16777216.0f));
  VecF inside = where(outside, VecF(0.0f), x);
  VecF r = detail::on_doubles(inside, [](auto d) { return detail::sincos_d(d, false); });
  r = where(x == VecF(0.0f), x, r);
  return detail::patch_lanes(x, r, outside, [](float v) { return std::sin(v); });
}
inline VecF cos(VecF x) {
  MaskF outside = !(abs(x) <= VecF(16777216.0f));
  VecF inside = where(outside, VecF(0.0f), x);
  VecF r = detail::on_doubles(inside, [](auto d) { return detail::sincos_d(d, true); });
  return detail::patch_lanes(x, r, outside, [](float v) { return std::cos(v); });
}
inline VecF pow(VecF x, VecF y) {
  float xs[VecF::kSize], ys[VecF::kSize];
  x.store(xs);
  y.store(ys);
  for (int i = 0; i < VecF::kSize; ++i) xs[i] = std::pow(xs[i], ys[i]);
  return VecF::load(xs);
}

#else  // the scalar ISA: every lane through the float form, so the bits agree by construction

inline VecF exp(VecF x) { return map_lanes(x, [](float v) { return exp(v); }); }
inline VecF exp_nonpositive(VecF x) { return map_lanes(x, [](float v) { return exp_nonpositive(v); }); }
inline VecF expm1(VecF x) { return map_lanes(x, [](float v) { return expm1(v); }); }
inline VecF log(VecF x) { return map_lanes(x, [](float v) { return log(v); }); }
inline VecF log1p(VecF x) { return map_lanes(x, [](float v) { return log1p(v); }); }
inline VecF tanh(VecF x) { return map_lanes(x, [](float v) { return tanh(v); }); }
inline VecF sigmoid(VecF x) { return map_lanes(x, [](float v) { return sigmoid(v); }); }
inline VecF erf(VecF x) { return map_lanes(x, [](float v) { return erf(v); }); }
inline VecF sin(VecF x) { return map_lanes(x, [](float v) { return sin(v); }); }
inline VecF cos(VecF x) { return map_lanes(x, [](float v) { return cos(v); }); }
inline VecF pow(VecF x, VecF y) {
  VecF out;
  for (int i = 0; i < VecF::kSize; ++i) out.v[i] = std::pow(x.v[i], y.v[i]);
  return out;
}

#endif

// Division by a value fixed over a loop (softmax's sum, a mean's count): divide(a, d) gives the
// bits of a / d.value. With y = 1/b rounded and q = a * y rounded (within one ulp of a/b),
// e = a - b q is exact (one fma) and q + e y rounded is a/b correctly rounded (Markstein's
// theorem), provided nothing underflows or overflows on the way: so the SIMD form takes the
// multiply-and-two-fmas route only when |b| lies in [2^-60, 2^60] (decided once) and every lane of
// |a| in [2^-60, 2^60] (per vector, NaN and zero fail it); otherwise it divides. One divide per
// vector bounded softmax's normalize pass (AVX2 divide throughput: one per ~3.5 cycles).
struct DivisorF {
  explicit DivisorF(float b)
      : value(b), b_v(b), inv_v(1.0f / b), fast(std::fabs(b) >= 0x1p-60f && std::fabs(b) <= 0x1p60f) {}
  float value;
  VecF b_v, inv_v;
  bool fast;
};
inline float divide(float a, const DivisorF& d) { return a / d.value; }
inline VecF divide(VecF a, const DivisorF& d) {
#if EMBER_VEC_SIMD
  if (d.fast) {
    VecF m = abs(a);
    if (all((m >= VecF(0x1p-60f)) & (m <= VecF(0x1p60f)))) {
      VecF q = a * d.inv_v;
      return fma(fma(-q, d.b_v, a), d.inv_v, q);
    }
  }
#endif
  return a / d.b_v;
}

}  // namespace ember::vec
