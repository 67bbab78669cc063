// Scalar conversions between float32 and the 16-bit float storage types (bfloat16, float16).
//
// Needs: nothing beyond <cstdint>/<cstring>. Included by vec.h before the ISA layer, whose vector
// conversions must give the same bits as these functions for every input.
// Guarantees: round to nearest even; the bits are those of torch's tensor conversion on x86
// (`tensor.to(torch.bfloat16)` / `.to(torch.float16)`), which for NaN are:
//   float -> bfloat16: every NaN becomes 0xffff (torch's vectorized kernel; its scalar c10 path
//                      would give 0x7fc0, but tensors go through the vectorized one);
//   float -> float16:  sign kept, quiet bit set, top 9 payload bits kept (what F16C's vcvtps2ph does);
//   float16 -> float:  sign kept, quiet bit set, payload moved up (what vcvtph2ps does);
//   bfloat16 -> float: the bits shifted up, so the payload is kept as it is.
// Why here: generated scalar code (tails of non-vectorized loops, scalar kernels) and the scalar ISA
// build use these, so every path of a kernel rounds exactly alike.
#pragma once

#include <cstdint>
#include <cstring>

namespace ember::vec {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float bf16_to_f32(uint16_t h) { return bits_float(uint32_t(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0xffff;
  // Adding 0x7fff plus the lowest kept bit rounds the dropped half-word to nearest, ties to even;
  // a carry out of the mantissa correctly bumps the exponent (up to infinity).
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return bits_float(sign | 0x7f800000u | (mant ? 0x400000u | (mant << 13) : 0u));
  if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  // Subnormal or zero: mant * 2^-24 is exact in float.
  float mag = float(mant) * (1.0f / 16777216.0f);
  return bits_float(sign | float_bits(mag));
}

inline uint16_t f32_to_f16(float f) {
  uint32_t u = float_bits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  // 65520 is halfway between 65504 (largest half) and 2^16; ties go to the even side, infinity.
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);
  if (a < 0x38800000u) {
    // Below 2^-14 the result is subnormal: round a * 2^24 to an integer (exact scaling), ties to
    // even by the add-and-subtract of 2^23, which is exact for values below 2^23.
    float scaled = bits_float(a) * 16777216.0f;
    float rounded = (scaled + 8388608.0f) - 8388608.0f;  // no -ffast-math, so this is not folded
    return uint16_t(sign | uint16_t(rounded));
  }
  uint32_t h = (a >> 13) - (112u << 10);
  uint32_t rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

}  // namespace ember::vec
