// Converting loads: integer and bool elements loaded as VecF lanes, each lane the element's
// static_cast<float> (rounded to nearest even for int64 and int32 values past 2^24, as the scalar
// conversion under the default rounding mode), full or the first n lanes (nothing past them is read).
//
// Needs: the ISA layer (vec_avx512.h, vec_avx2.h or vec_scalar.h) included first, as vec.h does.
// Guarantees: ev::load_float(p) and ev::load_float(p, n) for p of int64_t, int32_t, int16_t,
// int8_t, uint8_t and bool; the same bits as static_cast<float> per element on every ISA.
// Why: a BERT padding mask `(1 - mask.to(f32)) * min` reads an int64 buffer; without a vector form
// the whole softmax around it ran scalar (docs/codegen-cpp.md, "Converting loads").
// AVX-512DQ converts int64 lanes itself (vcvtqq2ps); AVX2 has no such instruction, so int64 goes
// element by element through a float array (still one vector loop around it); narrower integers
// widen to int32 lanes and convert with vcvtdq2ps, exact for them.
#pragma once

#include <cstdint>

namespace ember::vec {

// Every ISA: element by element into a float array, then one vector load.
template <class T>
inline VecF load_float(const T* p, int n) {
  alignas(64) float lanes[VecF::kSize] = {};
  for (int l = 0; l < n && l < VecF::kSize; ++l) lanes[l] = static_cast<float>(p[l]);
  return VecF::load(lanes);
}
template <class T>
inline VecF load_float(const T* p) {
  return load_float(p, VecF::kSize);
}

#if defined(EMBER_ISA_AVX512)
inline VecF load_float(const int64_t* p, int n) {
  const MaskF m = MaskF::first(n);
  const __m256 lo = _mm512_cvtepi64_ps(_mm512_maskz_loadu_epi64(__mmask8(m.m & 0xff), p));
  const __m256 hi = _mm512_cvtepi64_ps(_mm512_maskz_loadu_epi64(__mmask8(m.m >> 8), p + 8));
  return VecF(_mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1));
}
inline VecF load_float(const int64_t* p) { return load_float(p, VecF::kSize); }
inline VecF load_float(const int32_t* p, int n) {
  return VecF(_mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(MaskF::first(n).m, p)));
}
inline VecF load_float(const int32_t* p) { return VecF(_mm512_cvtepi32_ps(_mm512_loadu_si512(p))); }
inline VecF load_float(const int16_t* p, int n) {
  return VecF(_mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(MaskF::first(n).m, p))));
}
inline VecF load_float(const int16_t* p) { return load_float(p, VecF::kSize); }
inline VecF load_float(const int8_t* p, int n) {
  return VecF(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(MaskF::first(n).m, p))));
}
inline VecF load_float(const int8_t* p) { return load_float(p, VecF::kSize); }
inline VecF load_float(const uint8_t* p, int n) {
  return VecF(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(MaskF::first(n).m, p))));
}
inline VecF load_float(const uint8_t* p) { return load_float(p, VecF::kSize); }
#elif defined(EMBER_ISA_AVX2)
// Narrow integers: a partial row goes through the generic form (AVX2 has no byte-masked load).
inline VecF load_float(const int32_t* p) {
  return VecF(_mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
}
inline VecF load_float(const int16_t* p) {
  return VecF(_mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))));
}
inline VecF load_float(const int8_t* p) {
  return VecF(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))));
}
inline VecF load_float(const uint8_t* p) {
  return VecF(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))));
}
#endif

// bool is one byte holding 0 or 1 (the ABI's and torch's), so its elements convert as uint8.
inline VecF load_float(const bool* p, int n) { return load_float(reinterpret_cast<const uint8_t*>(p), n); }
inline VecF load_float(const bool* p) { return load_float(reinterpret_cast<const uint8_t*>(p)); }

}  // namespace ember::vec
