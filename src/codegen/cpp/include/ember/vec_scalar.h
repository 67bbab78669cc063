// The portable layer of Ember's vector header, used when neither EMBER_ISA_AVX2 nor EMBER_ISA_AVX512
// is defined: VecF is 8 floats in a plain array, so generated code has one shape on every machine.
//
// Needs: only the standard library. Included only by vec.h.
// Guarantees: the same API and the same bits as the SIMD layers (each lane goes through the scalar
// float functions, which the SIMD layers match), masked loads and stores touch only lanes [0, n).
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>

namespace ember::vec {

struct MaskF {
  static constexpr int kSize = 8;
  bool m[kSize] = {};

  static MaskF first(int n) {
    MaskF out;
    for (int i = 0; i < kSize; ++i) out.m[i] = i < n;
    return out;
  }
  static MaskF from_bytes(const uint8_t* p) { return from_bytes(p, kSize); }
  static MaskF from_bytes(const uint8_t* p, int n) {
    MaskF out;
    for (int i = 0; i < kSize && i < n; ++i) out.m[i] = p[i] != 0;
    return out;
  }
  void store_bytes(uint8_t* p) const { store_bytes(p, kSize); }
  void store_bytes(uint8_t* p, int n) const {
    for (int i = 0; i < kSize && i < n; ++i) p[i] = m[i] ? 1 : 0;
  }
  bool lane(int i) const { return m[i]; }
};

template <class F>
MaskF zip_masks(MaskF a, MaskF b, F f) {
  MaskF out;
  for (int i = 0; i < MaskF::kSize; ++i) out.m[i] = f(a.m[i], b.m[i]);
  return out;
}
inline MaskF operator&(MaskF a, MaskF b) { return zip_masks(a, b, [](bool x, bool y) { return x && y; }); }
inline MaskF operator|(MaskF a, MaskF b) { return zip_masks(a, b, [](bool x, bool y) { return x || y; }); }
inline MaskF operator^(MaskF a, MaskF b) { return zip_masks(a, b, [](bool x, bool y) { return x != y; }); }
inline MaskF operator!(MaskF a) { return zip_masks(a, a, [](bool x, bool) { return !x; }); }
inline bool any(MaskF a) {
  for (bool b : a.m)
    if (b) return true;
  return false;
}
inline bool all(MaskF a) {
  for (bool b : a.m)
    if (!b) return false;
  return true;
}

struct VecF {
  static constexpr int kSize = 8;
  float v[kSize] = {};

  VecF() = default;
  explicit VecF(float x) {
    for (float& lane : v) lane = x;
  }
  static VecF load(const float* p) { return load(p, kSize); }
  static VecF load(const float* p, int n) {
    VecF out;
    for (int i = 0; i < kSize && i < n; ++i) out.v[i] = p[i];
    return out;
  }
  // The lanes of m, 0 elsewhere; the other lanes' addresses are never read.
  static VecF load(const float* p, MaskF m) {
    VecF out;
    for (int i = 0; i < kSize; ++i)
      if (m.m[i]) out.v[i] = p[i];
    return out;
  }
  void store(float* p) const { store(p, kSize); }
  void store(float* p, int n) const {
    for (int i = 0; i < kSize && i < n; ++i) p[i] = v[i];
  }
  static VecF broadcast(float x) { return VecF(x); }
  static VecF iota(float start) {
    VecF out;
    for (int i = 0; i < kSize; ++i) out.v[i] = start + float(i);
    return out;
  }
  float lane(int i) const { return v[i]; }
};

template <class F>
VecF map_lanes(VecF a, F f) {
  VecF out;
  for (int i = 0; i < VecF::kSize; ++i) out.v[i] = f(a.v[i]);
  return out;
}
template <class F>
VecF zip_lanes(VecF a, VecF b, F f) {
  VecF out;
  for (int i = 0; i < VecF::kSize; ++i) out.v[i] = f(a.v[i], b.v[i]);
  return out;
}
template <class F>
MaskF compare_lanes(VecF a, VecF b, F f) {
  MaskF out;
  for (int i = 0; i < VecF::kSize; ++i) out.m[i] = f(a.v[i], b.v[i]);
  return out;
}

inline VecF operator+(VecF a, VecF b) { return zip_lanes(a, b, [](float x, float y) { return x + y; }); }
inline VecF operator-(VecF a, VecF b) { return zip_lanes(a, b, [](float x, float y) { return x - y; }); }
inline VecF operator*(VecF a, VecF b) { return zip_lanes(a, b, [](float x, float y) { return x * y; }); }
inline VecF operator/(VecF a, VecF b) { return zip_lanes(a, b, [](float x, float y) { return x / y; }); }
inline VecF operator-(VecF a) { return map_lanes(a, [](float x) { return -x; }); }

inline MaskF operator==(VecF a, VecF b) { return compare_lanes(a, b, [](float x, float y) { return x == y; }); }
inline MaskF operator!=(VecF a, VecF b) { return compare_lanes(a, b, [](float x, float y) { return x != y; }); }
inline MaskF operator<(VecF a, VecF b) { return compare_lanes(a, b, [](float x, float y) { return x < y; }); }
inline MaskF operator<=(VecF a, VecF b) { return compare_lanes(a, b, [](float x, float y) { return x <= y; }); }
inline MaskF operator>(VecF a, VecF b) { return compare_lanes(a, b, [](float x, float y) { return x > y; }); }
inline MaskF operator>=(VecF a, VecF b) { return compare_lanes(a, b, [](float x, float y) { return x >= y; }); }
inline MaskF isnan(VecF a) { return a != a; }

inline VecF where(MaskF m, VecF a, VecF b) {
  VecF out;
  for (int i = 0; i < VecF::kSize; ++i) out.v[i] = m.m[i] ? a.v[i] : b.v[i];
  return out;
}

// Transposes a kSize x kSize tile in place: afterwards rows[a] lane j holds what rows[j] lane a held
// (the SIMD layers shuffle registers; tiled transposes in docs/codegen-cpp.md).
inline void transpose(VecF* rows) {
  for (int a = 0; a < VecF::kSize; ++a)
    for (int j = a + 1; j < VecF::kSize; ++j) std::swap(rows[a].v[j], rows[j].v[a]);
}

// 32-bit integer lanes, one per VecF lane (so compares give a MaskF of the same lanes): integer index
// values the code generator proved to fit in int32 (docs/codegen-cpp.md, "Integer lanes").
// Arithmetic wraps modulo 2^32 (computed on uint32_t), as the SIMD layers' instructions do.
struct VecI {
  static constexpr int kSize = 8;
  int32_t v[kSize] = {};

  VecI() = default;
  explicit VecI(int32_t x) {
    for (int32_t& lane : v) lane = x;
  }
  static VecI broadcast(int32_t x) { return VecI(x); }
  // Lane i holds start + i * step.
  static VecI iota(int32_t start, int32_t step) {
    VecI out;
    for (int i = 0; i < kSize; ++i) out.v[i] = int32_t(uint32_t(start) + uint32_t(i) * uint32_t(step));
    return out;
  }
  int32_t lane(int i) const { return v[i]; }
};

template <class F>
VecI zip_int_lanes(VecI a, VecI b, F f) {
  VecI out;
  for (int i = 0; i < VecI::kSize; ++i) out.v[i] = int32_t(f(uint32_t(a.v[i]), uint32_t(b.v[i])));
  return out;
}
template <class F>
MaskF compare_int_lanes(VecI a, VecI b, F f) {
  MaskF out;
  for (int i = 0; i < VecI::kSize; ++i) out.m[i] = f(a.v[i], b.v[i]);
  return out;
}
inline VecI operator+(VecI a, VecI b) { return zip_int_lanes(a, b, [](uint32_t x, uint32_t y) { return x + y; }); }
inline VecI operator-(VecI a, VecI b) { return zip_int_lanes(a, b, [](uint32_t x, uint32_t y) { return x - y; }); }
inline VecI operator*(VecI a, VecI b) { return zip_int_lanes(a, b, [](uint32_t x, uint32_t y) { return x * y; }); }
inline VecI operator-(VecI a) { return VecI(0) - a; }
inline MaskF operator==(VecI a, VecI b) { return compare_int_lanes(a, b, [](int32_t x, int32_t y) { return x == y; }); }
inline MaskF operator!=(VecI a, VecI b) { return compare_int_lanes(a, b, [](int32_t x, int32_t y) { return x != y; }); }
inline MaskF operator<(VecI a, VecI b) { return compare_int_lanes(a, b, [](int32_t x, int32_t y) { return x < y; }); }
inline MaskF operator<=(VecI a, VecI b) { return compare_int_lanes(a, b, [](int32_t x, int32_t y) { return x <= y; }); }
inline MaskF operator>(VecI a, VecI b) { return compare_int_lanes(a, b, [](int32_t x, int32_t y) { return x > y; }); }
inline MaskF operator>=(VecI a, VecI b) { return compare_int_lanes(a, b, [](int32_t x, int32_t y) { return x >= y; }); }
inline VecI where(MaskF m, VecI a, VecI b) {
  VecI out;
  for (int i = 0; i < VecI::kSize; ++i) out.v[i] = m.m[i] ? a.v[i] : b.v[i];
  return out;
}
inline MaskF where(MaskF m, MaskF a, MaskF b) {
  MaskF out;
  for (int i = 0; i < MaskF::kSize; ++i) out.m[i] = m.m[i] ? a.m[i] : b.m[i];
  return out;
}
// abs(INT32_MIN) wraps to itself, as vpabsd.
inline VecI abs(VecI a) { return where(a < VecI(0), -a, a); }
inline VecI maximum(VecI a, VecI b) { return where(a > b, a, b); }
inline VecI minimum(VecI a, VecI b) { return where(a < b, a, b); }
// Rounded to nearest even, as the SIMD layers' conversion.
inline VecF to_float(VecI a) {
  VecF out;
  for (int i = 0; i < VecI::kSize; ++i) out.v[i] = float(a.v[i]);
  return out;
}
inline VecF fma(VecF a, VecF b, VecF c) {
  VecF out;
  for (int i = 0; i < VecF::kSize; ++i) out.v[i] = std::fma(a.v[i], b.v[i], c.v[i]);
  return out;
}
inline VecF abs(VecF a) { return map_lanes(a, [](float x) { return std::fabs(x); }); }
inline VecF copysign(VecF mag, VecF sgn) {
  return zip_lanes(mag, sgn, [](float x, float y) { return std::copysign(x, y); });
}
inline VecF sqrt(VecF a) { return map_lanes(a, [](float x) { return std::sqrt(x); }); }
inline VecF floor(VecF a) { return map_lanes(a, [](float x) { return std::floor(x); }); }
inline VecF ceil(VecF a) { return map_lanes(a, [](float x) { return std::ceil(x); }); }
inline VecF trunc(VecF a) { return map_lanes(a, [](float x) { return std::trunc(x); }); }
inline VecF round(VecF a) { return map_lanes(a, [](float x) { return std::nearbyint(x); }); }
inline VecF maximum(VecF a, VecF b) {
  return zip_lanes(a, b, [](float x, float y) { return (x != x || y != y) ? x + y : (y > x ? y : x); });
}
inline VecF minimum(VecF a, VecF b) {
  return zip_lanes(a, b, [](float x, float y) { return (x != x || y != y) ? x + y : (y < x ? y : x); });
}

inline VecF load_bf16(const uint16_t* p, int n) {
  VecF out;
  for (int i = 0; i < VecF::kSize && i < n; ++i) out.v[i] = bf16_to_f32(p[i]);
  return out;
}
inline VecF load_f16(const uint16_t* p, int n) {
  VecF out;
  for (int i = 0; i < VecF::kSize && i < n; ++i) out.v[i] = f16_to_f32(p[i]);
  return out;
}
inline void store_bf16(uint16_t* p, VecF x, int n) {
  for (int i = 0; i < VecF::kSize && i < n; ++i) p[i] = f32_to_bf16(x.v[i]);
}
inline void store_f16(uint16_t* p, VecF x, int n) {
  for (int i = 0; i < VecF::kSize && i < n; ++i) p[i] = f32_to_f16(x.v[i]);
}
inline VecF load_bf16(const uint16_t* p) { return load_bf16(p, VecF::kSize); }
// What storing into bfloat16/float16 and loading back gives.
inline VecF round_bf16(VecF x) { return map_lanes(x, [](float v) { return bf16_to_f32(f32_to_bf16(v)); }); }
inline VecF round_f16(VecF x) { return map_lanes(x, [](float v) { return f16_to_f32(f32_to_f16(v)); }); }
inline VecF load_f16(const uint16_t* p) { return load_f16(p, VecF::kSize); }
inline void store_bf16(uint16_t* p, VecF x) { store_bf16(p, x, VecF::kSize); }
inline void store_f16(uint16_t* p, VecF x) { store_f16(p, x, VecF::kSize); }

}  // namespace ember::vec
