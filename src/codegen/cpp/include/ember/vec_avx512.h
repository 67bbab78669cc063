// The AVX-512 layer of Ember's vector header: VecF (16 floats), MaskF (a k-register mask), their
// loads, stores and element-wise operations, plus the internal double half vectors (VecD, 8 doubles)
// the math kernels run on.
//
// Needs: -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c (the driver's flags for
// EMBER_ISA_AVX512). Included only by vec.h.
// Guarantees: tail loads and stores are masked instructions, which suppress faults on masked lanes,
// so nothing past the first n elements (or outside a load's MaskF) is touched; every operation gives the same bits as the
// scalar function of the same name in vec_half.h / vec_math.h.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace ember::vec {

struct MaskF {
  __mmask16 m;
  MaskF() : m(0) {}
  explicit MaskF(__mmask16 bits) : m(bits) {}

  static MaskF first(int n) {
    return MaskF(__mmask16(n <= 0 ? 0u : (n >= 16 ? 0xffffu : (1u << n) - 1u)));
  }
  static MaskF from_bytes(const uint8_t* p) {
    __m512i wide = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return MaskF(_mm512_test_epi32_mask(wide, wide));
  }
  static MaskF from_bytes(const uint8_t* p, int n) {
    __m512i wide = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(first(n).m, p));
    return MaskF(_mm512_test_epi32_mask(wide, wide));
  }
  void store_bytes(uint8_t* p) const {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm512_cvtepi32_epi8(_mm512_maskz_mov_epi32(m, _mm512_set1_epi32(1))));
  }
  void store_bytes(uint8_t* p, int n) const {
    _mm_mask_storeu_epi8(p, first(n).m, _mm512_cvtepi32_epi8(_mm512_maskz_mov_epi32(m, _mm512_set1_epi32(1))));
  }
  bool lane(int i) const { return (m >> i) & 1; }
};

inline MaskF operator&(MaskF a, MaskF b) { return MaskF(__mmask16(a.m & b.m)); }
inline MaskF operator|(MaskF a, MaskF b) { return MaskF(__mmask16(a.m | b.m)); }
inline MaskF operator^(MaskF a, MaskF b) { return MaskF(__mmask16(a.m ^ b.m)); }
inline MaskF operator!(MaskF a) { return MaskF(__mmask16(~a.m)); }
inline bool any(MaskF a) { return a.m != 0; }
inline bool all(MaskF a) { return a.m == 0xffff; }

struct VecF {
  static constexpr int kSize = 16;
  __m512 v;
  VecF() : v(_mm512_setzero_ps()) {}
  explicit VecF(__m512 x) : v(x) {}
  explicit VecF(float x) : v(_mm512_set1_ps(x)) {}

  static VecF load(const float* p) { return VecF(_mm512_loadu_ps(p)); }
  static VecF load(const float* p, int n) { return VecF(_mm512_maskz_loadu_ps(MaskF::first(n).m, p)); }
  // The lanes of m, 0 elsewhere; the other lanes' addresses are never read. Whole and empty masks
  // (all but a cat's boundary chunk) take no masked instruction: one whose masked-off lanes fall in
  // an unmapped page takes a microcode assist (a cat's part read before its buffer: 15x slower).
  static VecF load(const float* p, MaskF m) {
    if (all(m)) return load(p);
    if (!any(m)) return VecF();
    return VecF(_mm512_maskz_loadu_ps(m.m, p));
  }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  void store(float* p, int n) const { _mm512_mask_storeu_ps(p, MaskF::first(n).m, v); }
  static VecF broadcast(float x) { return VecF(x); }
  static VecF iota(float start) {
    __m512 steps = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return VecF(_mm512_add_ps(_mm512_set1_ps(start), steps));
  }
  float lane(int i) const {
    alignas(64) float out[16];
    _mm512_store_ps(out, v);
    return out[i];
  }
};

inline VecF operator+(VecF a, VecF b) { return VecF(_mm512_add_ps(a.v, b.v)); }
inline VecF operator-(VecF a, VecF b) { return VecF(_mm512_sub_ps(a.v, b.v)); }
inline VecF operator*(VecF a, VecF b) { return VecF(_mm512_mul_ps(a.v, b.v)); }
inline VecF operator/(VecF a, VecF b) { return VecF(_mm512_div_ps(a.v, b.v)); }
inline VecF operator-(VecF a) {
  return VecF(_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a.v), _mm512_set1_epi32(INT32_MIN))));
}

inline MaskF operator==(VecF a, VecF b) { return MaskF(_mm512_cmp_ps_mask(a.v, b.v, _CMP_EQ_OQ)); }
inline MaskF operator!=(VecF a, VecF b) { return MaskF(_mm512_cmp_ps_mask(a.v, b.v, _CMP_NEQ_UQ)); }
inline MaskF operator<(VecF a, VecF b) { return MaskF(_mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ)); }
inline MaskF operator<=(VecF a, VecF b) { return MaskF(_mm512_cmp_ps_mask(a.v, b.v, _CMP_LE_OQ)); }
inline MaskF operator>(VecF a, VecF b) { return MaskF(_mm512_cmp_ps_mask(a.v, b.v, _CMP_GT_OQ)); }
inline MaskF operator>=(VecF a, VecF b) { return MaskF(_mm512_cmp_ps_mask(a.v, b.v, _CMP_GE_OQ)); }
inline MaskF isnan(VecF a) { return MaskF(_mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q)); }

inline VecF where(MaskF m, VecF a, VecF b) { return VecF(_mm512_mask_blend_ps(m.m, b.v, a.v)); }

// Transposes a kSize x kSize tile in place: afterwards rows[a] lane j holds what rows[j] lane a held.
// Tiled transposes (docs/codegen-cpp.md, "Tiled transposes") load columns contiguously and read
// rows from here. Four rounds of shuffles: 32-bit pairs, 64-bit pairs, then 128-bit lanes twice.
inline void transpose(VecF* rows) {
  __m512 t[16], u[16];
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_ps(rows[2 * k].v, rows[2 * k + 1].v);
    t[2 * k + 1] = _mm512_unpackhi_ps(rows[2 * k].v, rows[2 * k + 1].v);
  }
  // u[4k + c], 128-bit lane g: rows 4k..4k+3 of column 4g + c.
  for (int k = 0; k < 4; ++k) {
    u[4 * k] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
    u[4 * k + 1] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0xEE);
    u[4 * k + 2] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
    u[4 * k + 3] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
    const __m512 w0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
    const __m512 w1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
    rows[c].v = _mm512_shuffle_f32x4(v0, w0, 0x88);
    rows[4 + c].v = _mm512_shuffle_f32x4(v1, w1, 0x88);
    rows[8 + c].v = _mm512_shuffle_f32x4(v0, w0, 0xDD);
    rows[12 + c].v = _mm512_shuffle_f32x4(v1, w1, 0xDD);
  }
}

// 32-bit integer lanes, one per VecF lane (so compares give a MaskF of the same lanes): integer index
// values the code generator proved to fit in int32 (docs/codegen-cpp.md, "Integer lanes").
// Arithmetic wraps modulo 2^32, as the instructions do.
struct VecI {
  static constexpr int kSize = 16;
  __m512i v;
  VecI() : v(_mm512_setzero_si512()) {}
  explicit VecI(__m512i x) : v(x) {}
  explicit VecI(int32_t x) : v(_mm512_set1_epi32(x)) {}
  static VecI broadcast(int32_t x) { return VecI(x); }
  // Lane i holds start + i * step.
  static VecI iota(int32_t start, int32_t step) {
    __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return VecI(_mm512_add_epi32(_mm512_set1_epi32(start), _mm512_mullo_epi32(_mm512_set1_epi32(step), lanes)));
  }
  int32_t lane(int i) const {
    alignas(64) int32_t out[16];
    _mm512_store_si512(out, v);
    return out[i];
  }
};

inline VecI operator+(VecI a, VecI b) { return VecI(_mm512_add_epi32(a.v, b.v)); }
inline VecI operator-(VecI a, VecI b) { return VecI(_mm512_sub_epi32(a.v, b.v)); }
inline VecI operator*(VecI a, VecI b) { return VecI(_mm512_mullo_epi32(a.v, b.v)); }
inline VecI operator-(VecI a) { return VecI(_mm512_sub_epi32(_mm512_setzero_si512(), a.v)); }
inline MaskF operator==(VecI a, VecI b) { return MaskF(_mm512_cmp_epi32_mask(a.v, b.v, _MM_CMPINT_EQ)); }
inline MaskF operator!=(VecI a, VecI b) { return MaskF(_mm512_cmp_epi32_mask(a.v, b.v, _MM_CMPINT_NE)); }
inline MaskF operator<(VecI a, VecI b) { return MaskF(_mm512_cmp_epi32_mask(a.v, b.v, _MM_CMPINT_LT)); }
inline MaskF operator<=(VecI a, VecI b) { return MaskF(_mm512_cmp_epi32_mask(a.v, b.v, _MM_CMPINT_LE)); }
inline MaskF operator>(VecI a, VecI b) { return MaskF(_mm512_cmp_epi32_mask(a.v, b.v, _MM_CMPINT_NLE)); }
inline MaskF operator>=(VecI a, VecI b) { return MaskF(_mm512_cmp_epi32_mask(a.v, b.v, _MM_CMPINT_NLT)); }
inline VecI where(MaskF m, VecI a, VecI b) { return VecI(_mm512_mask_blend_epi32(m.m, b.v, a.v)); }
inline MaskF where(MaskF m, MaskF a, MaskF b) { return MaskF(__mmask16((m.m & a.m) | (~m.m & b.m))); }
inline VecI abs(VecI a) { return VecI(_mm512_abs_epi32(a.v)); }
inline VecI maximum(VecI a, VecI b) { return VecI(_mm512_max_epi32(a.v, b.v)); }
inline VecI minimum(VecI a, VecI b) { return VecI(_mm512_min_epi32(a.v, b.v)); }
// Rounded to nearest even, as a scalar int -> float conversion.
inline VecF to_float(VecI a) { return VecF(_mm512_cvtepi32_ps(a.v)); }
inline VecF fma(VecF a, VecF b, VecF c) { return VecF(_mm512_fmadd_ps(a.v, b.v, c.v)); }
inline VecF abs(VecF a) {
  return VecF(_mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a.v), _mm512_set1_epi32(INT32_MAX))));
}
inline VecF copysign(VecF mag, VecF sgn) {
  __m512i m = _mm512_and_si512(_mm512_castps_si512(mag.v), _mm512_set1_epi32(INT32_MAX));
  __m512i s = _mm512_and_si512(_mm512_castps_si512(sgn.v), _mm512_set1_epi32(INT32_MIN));
  return VecF(_mm512_castsi512_ps(_mm512_or_si512(m, s)));
}
inline VecF sqrt(VecF a) { return VecF(_mm512_sqrt_ps(a.v)); }
inline VecF floor(VecF a) { return VecF(_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)); }
inline VecF ceil(VecF a) { return VecF(_mm512_roundscale_ps(a.v, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC)); }
inline VecF trunc(VecF a) { return VecF(_mm512_roundscale_ps(a.v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)); }
inline VecF round(VecF a) {
  return VecF(_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
// vmaxps(b, a) answers a on equal lanes (maximum(-0, +0) is -0, as torch) and on NaN; the masked
// add then makes any NaN win.
inline VecF maximum(VecF a, VecF b) {
  __mmask16 nan = _mm512_cmp_ps_mask(a.v, b.v, _CMP_UNORD_Q);
  return VecF(_mm512_mask_add_ps(_mm512_max_ps(b.v, a.v), nan, a.v, b.v));
}
inline VecF minimum(VecF a, VecF b) {
  __mmask16 nan = _mm512_cmp_ps_mask(a.v, b.v, _CMP_UNORD_Q);
  return VecF(_mm512_mask_add_ps(_mm512_min_ps(b.v, a.v), nan, a.v, b.v));
}

inline VecF load_bf16(const uint16_t* p) {
  __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return VecF(_mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
}
inline VecF load_bf16(const uint16_t* p, int n) {
  __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(MaskF::first(n).m, p));
  return VecF(_mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
}
inline VecF load_f16(const uint16_t* p) {
  return VecF(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
}
inline VecF load_f16(const uint16_t* p, int n) {
  return VecF(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(MaskF::first(n).m, p)));
}
namespace detail {
// Each lane rounded to bfloat16 (f32_to_bf16's rule), its 16 bits in the lane's upper half.
inline __m512i bf16_in_upper_half(VecF x) {
  __m512i u = _mm512_castps_si512(x.v);
  __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
  return _mm512_mask_mov_epi32(r, isnan(x).m, _mm512_set1_epi32(-1));
}
inline __m256i to_bf16_bits(VecF x) { return _mm512_cvtepi32_epi16(_mm512_srli_epi32(bf16_in_upper_half(x), 16)); }
}  // namespace detail
// What storing into bfloat16/float16 and loading back gives, in registers.
inline VecF round_bf16(VecF x) {
  return VecF(_mm512_castsi512_ps(_mm512_and_si512(detail::bf16_in_upper_half(x), _mm512_set1_epi32(-65536))));
}
inline VecF round_f16(VecF x) { return VecF(_mm512_cvtph_ps(_mm512_cvtps_ph(x.v, _MM_FROUND_TO_NEAREST_INT))); }
inline void store_bf16(uint16_t* p, VecF x) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), detail::to_bf16_bits(x));
}
inline void store_bf16(uint16_t* p, VecF x, int n) {
  _mm256_mask_storeu_epi16(p, MaskF::first(n).m, detail::to_bf16_bits(x));
}
inline void store_f16(uint16_t* p, VecF x) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(x.v, _MM_FROUND_TO_NEAREST_INT));
}
inline void store_f16(uint16_t* p, VecF x, int n) {
  _mm256_mask_storeu_epi16(p, MaskF::first(n).m, _mm512_cvtps_ph(x.v, _MM_FROUND_TO_NEAREST_INT));
}

namespace detail {

// Eight doubles: the math kernels widen a VecF into two of these (see vec_math.h).
struct MaskD {
  __mmask8 m;
};
struct VecD {
  __m512d v;
  VecD() : v(_mm512_setzero_pd()) {}
  explicit VecD(__m512d x) : v(x) {}
  explicit VecD(double x) : v(_mm512_set1_pd(x)) {}
};
inline VecD operator+(VecD a, VecD b) { return VecD(_mm512_add_pd(a.v, b.v)); }
inline VecD operator-(VecD a, VecD b) { return VecD(_mm512_sub_pd(a.v, b.v)); }
inline VecD operator*(VecD a, VecD b) { return VecD(_mm512_mul_pd(a.v, b.v)); }
inline VecD operator/(VecD a, VecD b) { return VecD(_mm512_div_pd(a.v, b.v)); }
inline MaskD operator<(VecD a, VecD b) { return MaskD{_mm512_cmp_pd_mask(a.v, b.v, _CMP_LT_OQ)}; }
inline MaskD operator>(VecD a, VecD b) { return MaskD{_mm512_cmp_pd_mask(a.v, b.v, _CMP_GT_OQ)}; }
inline MaskD operator>=(VecD a, VecD b) { return MaskD{_mm512_cmp_pd_mask(a.v, b.v, _CMP_GE_OQ)}; }
inline MaskD operator==(VecD a, VecD b) { return MaskD{_mm512_cmp_pd_mask(a.v, b.v, _CMP_EQ_OQ)}; }
inline MaskD operator|(MaskD a, MaskD b) { return MaskD{__mmask8(a.m | b.m)}; }
inline VecD fma_(VecD a, VecD b, VecD c) { return VecD(_mm512_fmadd_pd(a.v, b.v, c.v)); }
inline VecD where_(MaskD m, VecD a, VecD b) { return VecD(_mm512_mask_blend_pd(m.m, b.v, a.v)); }
inline VecF fma_(VecF a, VecF b, VecF c) { return fma(a, b, c); }
inline VecF where_(MaskF m, VecF a, VecF b) { return where(m, a, b); }
// Clamp to [lo, hi]; a NaN lane comes out as lo, which the callers overwrite afterwards.
inline VecF clamp_(VecF x, float lo, float hi) {
  return VecF(_mm512_min_ps(_mm512_max_ps(x.v, _mm512_set1_ps(lo)), _mm512_set1_ps(hi)));
}

// 2^n for integer-valued n in [-1022, 1023] (see the AVX2 layer for the bit trick).
inline VecD pow2i_(VecD n) {
  __m512i bits = _mm512_castpd_si512(_mm512_add_pd(n.v, _mm512_set1_pd(6755399441055744.0)));
  return VecD(_mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(bits, _mm512_set1_epi64(1023)), 52)));
}
// p * 2^n where shifted = n + 1.5 * 2^23 and the product is normal (vec_math.h's float form
// says why one integer add of shifted's bits << 23 does it).
inline VecF scale_exponent_(VecF p, VecF shifted) {
  return VecF(_mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p.v), _mm512_slli_epi32(_mm512_castps_si512(shifted.v), 23))));
}
inline VecF pow2i_(VecF n) {
  __m512i bits = _mm512_castps_si512(_mm512_add_ps(n.v, _mm512_set1_ps(12582912.0f)));
  return VecF(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(127)), 23)));
}
inline VecD exponent_(VecD x, VecD& significand) {
  __m512i bits = _mm512_castpd_si512(x.v);
  __m512i mant = _mm512_or_si512(_mm512_and_si512(bits, _mm512_set1_epi64(0x000fffffffffffffLL)),
                                 _mm512_set1_epi64(0x3ff0000000000000LL));
  significand = VecD(_mm512_castsi512_pd(mant));
  __m512i e = _mm512_or_si512(_mm512_srli_epi64(bits, 52), _mm512_set1_epi64(0x4330000000000000LL));
  return VecD(_mm512_sub_pd(_mm512_castsi512_pd(e), _mm512_set1_pd(4503599627370496.0)));
}

inline VecD widen_lo(VecF x) { return VecD(_mm512_cvtps_pd(_mm512_castps512_ps256(x.v))); }
inline VecD widen_hi(VecF x) { return VecD(_mm512_cvtps_pd(_mm512_extractf32x8_ps(x.v, 1))); }
inline VecF narrow(VecD lo, VecD hi) {
  return VecF(_mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo.v)), _mm512_cvtpd_ps(hi.v), 1));
}

}  // namespace detail
}  // namespace ember::vec
