// The AVX2 layer of Ember's vector header: VecF (8 floats), MaskF, their loads, stores and
// element-wise operations, plus the internal double-precision half vectors (VecD, 4 doubles) the math
// kernels run on.
//
// Needs: -mavx2 -mfma -mf16c (the driver's flags for EMBER_ISA_AVX2). Included only by vec.h.
// Guarantees: masked loads and stores touch no memory past the first n lanes, nor a load under a
// MaskF any lane outside the mask (vmaskmovps suppresses faults on masked lanes; 16-bit and byte tails go through a small stack buffer); every operation
// gives the same bits as the scalar function of the same name in vec_half.h / vec_math.h.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace ember::vec {

struct MaskF {
  __m256 m;
  MaskF() : m(_mm256_setzero_ps()) {}
  explicit MaskF(__m256 bits) : m(bits) {}

  // Lanes [0, n) set: the mask of a tail of n elements.
  static MaskF first(int n) {
    __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return MaskF(_mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane)));
  }
  static MaskF from_bytes(const uint8_t* p) {
    __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    __m256i wide = _mm256_cvtepu8_epi32(bytes);
    return MaskF(_mm256_castsi256_ps(_mm256_cmpgt_epi32(wide, _mm256_setzero_si256())));
  }
  static MaskF from_bytes(const uint8_t* p, int n) {
    uint8_t buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(buf, p, size_t(n < 0 ? 0 : (n > 8 ? 8 : n)));
    return from_bytes(buf);
  }
  void store_bytes(uint8_t* p) const {
    __m256i ones = _mm256_srli_epi32(_mm256_castps_si256(m), 31);
    __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(ones), _mm256_extracti128_si256(ones, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi16(words, words));
  }
  void store_bytes(uint8_t* p, int n) const {
    uint8_t buf[8];
    store_bytes(buf);
    std::memcpy(p, buf, size_t(n < 0 ? 0 : (n > 8 ? 8 : n)));
  }
  bool lane(int i) const { return (_mm256_movemask_ps(m) >> i) & 1; }
};

inline MaskF operator&(MaskF a, MaskF b) { return MaskF(_mm256_and_ps(a.m, b.m)); }
inline MaskF operator|(MaskF a, MaskF b) { return MaskF(_mm256_or_ps(a.m, b.m)); }
inline MaskF operator^(MaskF a, MaskF b) { return MaskF(_mm256_xor_ps(a.m, b.m)); }
inline MaskF operator!(MaskF a) {
  return MaskF(_mm256_xor_ps(a.m, _mm256_castsi256_ps(_mm256_set1_epi32(-1))));
}
inline bool any(MaskF a) { return _mm256_movemask_ps(a.m) != 0; }
inline bool all(MaskF a) { return _mm256_movemask_ps(a.m) == 0xff; }

struct VecF {
  static constexpr int kSize = 8;
  __m256 v;
  VecF() : v(_mm256_setzero_ps()) {}
  explicit VecF(__m256 x) : v(x) {}
  explicit VecF(float x) : v(_mm256_set1_ps(x)) {}

  static VecF load(const float* p) { return VecF(_mm256_loadu_ps(p)); }
  static VecF load(const float* p, int n) {
    return VecF(_mm256_maskload_ps(p, _mm256_castps_si256(MaskF::first(n).m)));
  }
  // The lanes of m, 0 elsewhere; the other lanes' addresses are never read. Whole and empty masks
  // (all but a cat's boundary chunk) take no masked instruction: one whose masked-off lanes fall in
  // an unmapped page takes a microcode assist (a cat's part read before its buffer: 15x slower).
  static VecF load(const float* p, MaskF m) {
    if (all(m)) return load(p);
    if (!any(m)) return VecF();
    return VecF(_mm256_maskload_ps(p, _mm256_castps_si256(m.m)));
  }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  void store(float* p, int n) const {
    _mm256_maskstore_ps(p, _mm256_castps_si256(MaskF::first(n).m), v);
  }
  static VecF broadcast(float x) { return VecF(x); }
  static VecF iota(float start) {
    return VecF(_mm256_add_ps(_mm256_set1_ps(start), _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7)));
  }
  float lane(int i) const {
    alignas(32) float out[8];
    _mm256_store_ps(out, v);
    return out[i];
  }
};

inline VecF operator+(VecF a, VecF b) { return VecF(_mm256_add_ps(a.v, b.v)); }
inline VecF operator-(VecF a, VecF b) { return VecF(_mm256_sub_ps(a.v, b.v)); }
inline VecF operator*(VecF a, VecF b) { return VecF(_mm256_mul_ps(a.v, b.v)); }
inline VecF operator/(VecF a, VecF b) { return VecF(_mm256_div_ps(a.v, b.v)); }
inline VecF operator-(VecF a) { return VecF(_mm256_xor_ps(a.v, _mm256_set1_ps(-0.0f))); }

inline MaskF operator==(VecF a, VecF b) { return MaskF(_mm256_cmp_ps(a.v, b.v, _CMP_EQ_OQ)); }
inline MaskF operator!=(VecF a, VecF b) { return MaskF(_mm256_cmp_ps(a.v, b.v, _CMP_NEQ_UQ)); }
inline MaskF operator<(VecF a, VecF b) { return MaskF(_mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ)); }
inline MaskF operator<=(VecF a, VecF b) { return MaskF(_mm256_cmp_ps(a.v, b.v, _CMP_LE_OQ)); }
inline MaskF operator>(VecF a, VecF b) { return MaskF(_mm256_cmp_ps(a.v, b.v, _CMP_GT_OQ)); }
inline MaskF operator>=(VecF a, VecF b) { return MaskF(_mm256_cmp_ps(a.v, b.v, _CMP_GE_OQ)); }
inline MaskF isnan(VecF a) { return MaskF(_mm256_cmp_ps(a.v, a.v, _CMP_UNORD_Q)); }

inline VecF where(MaskF m, VecF a, VecF b) { return VecF(_mm256_blendv_ps(b.v, a.v, m.m)); }

// Transposes a kSize x kSize tile in place: afterwards rows[a] lane j holds what rows[j] lane a held.
// Tiled transposes (docs/codegen-cpp.md, "Tiled transposes") load columns contiguously and read
// rows from here. Three rounds: 32-bit pairs, 64-bit pairs, 128-bit halves.
inline void transpose(VecF* rows) {
  __m256 t[8], u[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_ps(rows[2 * k].v, rows[2 * k + 1].v);
    t[2 * k + 1] = _mm256_unpackhi_ps(rows[2 * k].v, rows[2 * k + 1].v);
  }
  // u[4k + c], 128-bit half g: rows 4k..4k+3 of column 4g + c.
  for (int k = 0; k < 2; ++k) {
    u[4 * k] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
    u[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0xEE);
    u[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
    u[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
  }
  for (int c = 0; c < 4; ++c) {
    rows[c].v = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
    rows[4 + c].v = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
  }
}

// 32-bit integer lanes, one per VecF lane (so compares give a MaskF of the same lanes): integer index
// values the code generator proved to fit in int32 (docs/codegen-cpp.md, "Integer lanes").
// Arithmetic wraps modulo 2^32, as the instructions do.
struct VecI {
  static constexpr int kSize = 8;
  __m256i v;
  VecI() : v(_mm256_setzero_si256()) {}
  explicit VecI(__m256i x) : v(x) {}
  explicit VecI(int32_t x) : v(_mm256_set1_epi32(x)) {}
  static VecI broadcast(int32_t x) { return VecI(x); }
  // Lane i holds start + i * step.
  static VecI iota(int32_t start, int32_t step) {
    __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return VecI(_mm256_add_epi32(_mm256_set1_epi32(start), _mm256_mullo_epi32(_mm256_set1_epi32(step), lanes)));
  }
  int32_t lane(int i) const {
    alignas(32) int32_t out[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(out), v);
    return out[i];
  }
};

inline VecI operator+(VecI a, VecI b) { return VecI(_mm256_add_epi32(a.v, b.v)); }
inline VecI operator-(VecI a, VecI b) { return VecI(_mm256_sub_epi32(a.v, b.v)); }
inline VecI operator*(VecI a, VecI b) { return VecI(_mm256_mullo_epi32(a.v, b.v)); }
inline VecI operator-(VecI a) { return VecI(_mm256_sub_epi32(_mm256_setzero_si256(), a.v)); }
inline MaskF operator==(VecI a, VecI b) { return MaskF(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a.v, b.v))); }
inline MaskF operator>(VecI a, VecI b) { return MaskF(_mm256_castsi256_ps(_mm256_cmpgt_epi32(a.v, b.v))); }
inline MaskF operator!=(VecI a, VecI b) { return !(a == b); }
inline MaskF operator<(VecI a, VecI b) { return b > a; }
inline MaskF operator<=(VecI a, VecI b) { return !(a > b); }
inline MaskF operator>=(VecI a, VecI b) { return !(b > a); }
inline VecI where(MaskF m, VecI a, VecI b) { return VecI(_mm256_blendv_epi8(b.v, a.v, _mm256_castps_si256(m.m))); }
inline MaskF where(MaskF m, MaskF a, MaskF b) { return MaskF(_mm256_blendv_ps(b.m, a.m, m.m)); }
inline VecI abs(VecI a) { return VecI(_mm256_abs_epi32(a.v)); }
inline VecI maximum(VecI a, VecI b) { return VecI(_mm256_max_epi32(a.v, b.v)); }
inline VecI minimum(VecI a, VecI b) { return VecI(_mm256_min_epi32(a.v, b.v)); }
// Rounded to nearest even, as a scalar int -> float conversion.
inline VecF to_float(VecI a) { return VecF(_mm256_cvtepi32_ps(a.v)); }
inline VecF fma(VecF a, VecF b, VecF c) { return VecF(_mm256_fmadd_ps(a.v, b.v, c.v)); }
inline VecF abs(VecF a) { return VecF(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), a.v)); }
inline VecF copysign(VecF mag, VecF sgn) {
  __m256 s = _mm256_set1_ps(-0.0f);
  return VecF(_mm256_or_ps(_mm256_andnot_ps(s, mag.v), _mm256_and_ps(s, sgn.v)));
}
inline VecF sqrt(VecF a) { return VecF(_mm256_sqrt_ps(a.v)); }
inline VecF floor(VecF a) { return VecF(_mm256_round_ps(a.v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)); }
inline VecF ceil(VecF a) { return VecF(_mm256_round_ps(a.v, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC)); }
inline VecF trunc(VecF a) { return VecF(_mm256_round_ps(a.v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)); }
inline VecF round(VecF a) {
  return VecF(_mm256_round_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
// vmaxps(b, a) answers a when the lanes compare equal (so maximum(-0, +0) is -0, as torch) and
// when either is NaN; the blend then makes any NaN win.
inline VecF maximum(VecF a, VecF b) {
  __m256 nan = _mm256_cmp_ps(a.v, b.v, _CMP_UNORD_Q);
  return VecF(_mm256_blendv_ps(_mm256_max_ps(b.v, a.v), _mm256_add_ps(a.v, b.v), nan));
}
inline VecF minimum(VecF a, VecF b) {
  __m256 nan = _mm256_cmp_ps(a.v, b.v, _CMP_UNORD_Q);
  return VecF(_mm256_blendv_ps(_mm256_min_ps(b.v, a.v), _mm256_add_ps(a.v, b.v), nan));
}

inline VecF load_bf16(const uint16_t* p) {
  __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return VecF(_mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
}
inline VecF load_f16(const uint16_t* p) {
  return VecF(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
namespace detail {
// Each lane rounded to bfloat16 (f32_to_bf16's rule), its 16 bits in the lane's upper half.
inline __m256i bf16_in_upper_half(VecF x) {
  __m256i u = _mm256_castps_si256(x.v);
  __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff)));
  return _mm256_blendv_epi8(r, _mm256_set1_epi32(-1), _mm256_castps_si256(isnan(x).m));
}
}  // namespace detail
// What storing into bfloat16/float16 and loading back gives, in registers.
inline VecF round_bf16(VecF x) {
  return VecF(_mm256_castsi256_ps(_mm256_and_si256(detail::bf16_in_upper_half(x), _mm256_set1_epi32(-65536))));
}
inline VecF round_f16(VecF x) { return VecF(_mm256_cvtph_ps(_mm256_cvtps_ph(x.v, _MM_FROUND_TO_NEAREST_INT))); }
inline void store_bf16(uint16_t* p, VecF x) {
  __m256i r = _mm256_srli_epi32(detail::bf16_in_upper_half(x), 16);
  __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
}
inline void store_f16(uint16_t* p, VecF x) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(x.v, _MM_FROUND_TO_NEAREST_INT));
}

// Tails of 16-bit data go through a zeroed stack buffer: AVX2 has no 16-bit masked load/store.
inline int tail_count_(int n) { return n < 0 ? 0 : (n > VecF::kSize ? VecF::kSize : n); }
inline VecF load_bf16(const uint16_t* p, int n) {
  uint16_t buf[VecF::kSize] = {};
  std::memcpy(buf, p, sizeof(uint16_t) * size_t(tail_count_(n)));
  return load_bf16(buf);
}
inline VecF load_f16(const uint16_t* p, int n) {
  uint16_t buf[VecF::kSize] = {};
  std::memcpy(buf, p, sizeof(uint16_t) * size_t(tail_count_(n)));
  return load_f16(buf);
}
inline void store_bf16(uint16_t* p, VecF x, int n) {
  uint16_t buf[VecF::kSize];
  store_bf16(buf, x);
  std::memcpy(p, buf, sizeof(uint16_t) * size_t(tail_count_(n)));
}
inline void store_f16(uint16_t* p, VecF x, int n) {
  uint16_t buf[VecF::kSize];
  store_f16(buf, x);
  std::memcpy(p, buf, sizeof(uint16_t) * size_t(tail_count_(n)));
}

namespace detail {

// Four doubles: the math kernels widen a VecF into two of these, so their internal precision is
// double and one rounding to float at the end gives results within a hair of correctly rounded.
struct MaskD {
  __m256d m;
};
struct VecD {
  __m256d v;
  VecD() : v(_mm256_setzero_pd()) {}
  explicit VecD(__m256d x) : v(x) {}
  explicit VecD(double x) : v(_mm256_set1_pd(x)) {}
};
inline VecD operator+(VecD a, VecD b) { return VecD(_mm256_add_pd(a.v, b.v)); }
inline VecD operator-(VecD a, VecD b) { return VecD(_mm256_sub_pd(a.v, b.v)); }
inline VecD operator*(VecD a, VecD b) { return VecD(_mm256_mul_pd(a.v, b.v)); }
inline VecD operator/(VecD a, VecD b) { return VecD(_mm256_div_pd(a.v, b.v)); }
inline MaskD operator<(VecD a, VecD b) { return MaskD{_mm256_cmp_pd(a.v, b.v, _CMP_LT_OQ)}; }
inline MaskD operator>(VecD a, VecD b) { return MaskD{_mm256_cmp_pd(a.v, b.v, _CMP_GT_OQ)}; }
inline MaskD operator>=(VecD a, VecD b) { return MaskD{_mm256_cmp_pd(a.v, b.v, _CMP_GE_OQ)}; }
inline MaskD operator==(VecD a, VecD b) { return MaskD{_mm256_cmp_pd(a.v, b.v, _CMP_EQ_OQ)}; }
inline MaskD operator|(MaskD a, MaskD b) { return MaskD{_mm256_or_pd(a.m, b.m)}; }
inline VecD fma_(VecD a, VecD b, VecD c) { return VecD(_mm256_fmadd_pd(a.v, b.v, c.v)); }
inline VecD where_(MaskD m, VecD a, VecD b) { return VecD(_mm256_blendv_pd(b.v, a.v, m.m)); }
inline VecF fma_(VecF a, VecF b, VecF c) { return fma(a, b, c); }
// Clamp to [lo, hi]; a NaN lane comes out as lo (vmaxps answers its second operand), which the
// callers overwrite afterwards.
inline VecF clamp_(VecF x, float lo, float hi) {
  return VecF(_mm256_min_ps(_mm256_max_ps(x.v, _mm256_set1_ps(lo)), _mm256_set1_ps(hi)));
}
inline VecF where_(MaskF m, VecF a, VecF b) { return where(m, a, b); }

// 2^n for integer-valued n in [-1022, 1023]: adding 1.5 * 2^52 puts n in the low mantissa bits;
// adding the bias and shifting by 52 drops everything else.
inline VecD pow2i_(VecD n) {
  __m256i bits = _mm256_castpd_si256(_mm256_add_pd(n.v, _mm256_set1_pd(6755399441055744.0)));
  return VecD(_mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(bits, _mm256_set1_epi64x(1023)), 52)));
}
// The float form, n in [-126, 127].
// p * 2^n where shifted = n + 1.5 * 2^23 and the product is normal (vec_math.h's float form
// says why one integer add of shifted's bits << 23 does it).
inline VecF scale_exponent_(VecF p, VecF shifted) {
  return VecF(_mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p.v), _mm256_slli_epi32(_mm256_castps_si256(shifted.v), 23))));
}
inline VecF pow2i_(VecF n) {
  __m256i bits = _mm256_castps_si256(_mm256_add_ps(n.v, _mm256_set1_ps(12582912.0f)));
  return VecF(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(127)), 23)));
}
// For positive, finite, normal x: the biased exponent as a double and the significand in [1, 2).
inline VecD exponent_(VecD x, VecD& significand) {
  __m256i bits = _mm256_castpd_si256(x.v);
  __m256i mant = _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi64x(0x000fffffffffffffLL)),
                                 _mm256_set1_epi64x(0x3ff0000000000000LL));
  significand = VecD(_mm256_castsi256_pd(mant));
  __m256i e = _mm256_or_si256(_mm256_srli_epi64(bits, 52), _mm256_set1_epi64x(0x4330000000000000LL));
  return VecD(_mm256_sub_pd(_mm256_castsi256_pd(e), _mm256_set1_pd(4503599627370496.0)));
}

inline VecD widen_lo(VecF x) { return VecD(_mm256_cvtps_pd(_mm256_castps256_ps128(x.v))); }
inline VecD widen_hi(VecF x) { return VecD(_mm256_cvtps_pd(_mm256_extractf128_ps(x.v, 1))); }
inline VecF narrow(VecD lo, VecD hi) {
  return VecF(_mm256_set_m128(_mm256_cvtpd_ps(hi.v), _mm256_cvtpd_ps(lo.v)));
}

}  // namespace detail
}  // namespace ember::vec
