// Ember's types: dtypes (one table, dtypes.def), devices and tensor types, and the three rules
// every stage shares over them: torch's type promotion, broadcasting and contiguous strides.
//
// Why one file: the passes, lowering, the shape rules and the verifiers all ask "is this dtype
// floating?", "what do these two dtypes promote to?", "what shape do these broadcast to?"; each
// used to answer with its own switch or its own copy, and the copies drifted (float8 floating in
// one, not in another; complex promoted in one, refused in another). Here each question has one
// answer, taken from the table where the table carries it.
//
// Guarantees: the text form of dtypes (dtype_name) is the IR's and never changes; promotion is
// torch.promote_types exactly, or nullopt where torch refuses or Ember does not model the pair;
// broadcast_shapes and contiguous_strides answer over symbolic sizes, and broadcast_shapes says
// it cannot (nullopt) rather than guess when a symbolic size might be 1.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sym/expr.h"

namespace ember::ir {

enum class DType : uint8_t {
#define EMBER_DTYPE(Enum, name, torch_name, itemsize, category, is_signed, c_type, max_finite) Enum,
#include "ir/dtypes.def"
#undef EMBER_DTYPE
};

// torch's dtype categories, in torch's promotion order for the first four (a category higher in
// the order wins over a lower one); float8 promotes with nothing but itself.
enum class DTypeCategory : uint8_t { Bool, Integral, Floating, Complex, Float8 };

struct DTypeInfo {
  const char* name;        // "b8", "u8", "i8", ..., "f32", "bf16", "c64", "f8e4m3fn"
  const char* torch_name;  // "bool", "uint8", ..., "float32", "bfloat16"
  int itemsize;
  DTypeCategory category;
  bool is_signed;
  const char* c_type;      // nullptr: no C++ storage type
  double max_finite;
};

namespace detail {
inline constexpr DTypeInfo kDTypes[] = {
#define EMBER_DTYPE(Enum, name, torch_name, itemsize, category, is_signed, c_type, max_finite) \
  {name, torch_name, itemsize, DTypeCategory::category, is_signed, c_type, max_finite},
#include "ir/dtypes.def"
#undef EMBER_DTYPE
};
}  // namespace detail

inline constexpr int kDTypeCount = sizeof(detail::kDTypes) / sizeof(detail::kDTypes[0]);
constexpr const DTypeInfo& dtype_info(DType dt) { return detail::kDTypes[static_cast<int>(dt)]; }

inline const char* dtype_name(DType dt) { return dtype_info(dt).name; }
inline const char* dtype_torch_name(DType dt) { return dtype_info(dt).torch_name; }
inline int dtype_itemsize(DType dt) { return dtype_info(dt).itemsize; }
constexpr DTypeCategory dtype_category(DType dt) { return dtype_info(dt).category; }
std::optional<DType> dtype_from_name(std::string_view name);        // short form
std::optional<DType> dtype_from_torch_name(std::string_view name);  // "float32" or an alias such as "float" (no "torch.")

// Category predicates, with torch's meanings: is_floating is the floating types torch's kernels
// dispatch over (f16, bf16, f32, f64), is_floating_point torch's Tensor.is_floating_point()
// (float8 included).
constexpr bool is_integral(DType dt) { return dtype_category(dt) == DTypeCategory::Integral; }  // bool excluded
constexpr bool is_floating(DType dt) { return dtype_category(dt) == DTypeCategory::Floating; }
constexpr bool is_float8(DType dt) { return dtype_category(dt) == DTypeCategory::Float8; }
constexpr bool is_floating_point(DType dt) { return is_floating(dt) || is_float8(dt); }
constexpr bool is_complex(DType dt) { return dtype_category(dt) == DTypeCategory::Complex; }
// Tensors of these dtypes can require grad: floating (float8 included) and complex.
constexpr bool is_differentiable(DType dt) { return is_floating_point(dt) || is_complex(dt); }

std::optional<DType> real_of(DType complex_dt);  // complex64 -> float32; nullopt for the rest
// float32 and bfloat16 -> complex64, float64 -> complex128; nullopt for float16 (its
// counterpart, complex32, is not an Ember dtype) and the rest.
std::optional<DType> complex_of(DType real_dt);

// torch.promote_types(a, b); nullopt where torch refuses (float8 with another dtype).
std::optional<DType> promote_types(DType a, DType b);

struct Device {
  std::string type = "cpu";  // torch's device type: cpu, cuda, meta, mps, xpu, ...
  int index = -1;            // -1: no index
  std::string str() const;   // "cpu", "cuda:0"
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};
std::optional<Device> device_from_string(std::string_view text);

struct TensorType {
  DType dtype = DType::Float32;
  std::vector<sym::Expr> sizes;
  std::vector<sym::Expr> strides;
  Device device;
  bool requires_grad = false;
  std::string str() const;  // "f32[4, 8]{8, 1} cpu grad"
  bool operator==(const TensorType& o) const;
};

// The two shape rules below are written once over a size type: sym::Expr (the IR's sizes) or
// int64_t (the shape rules' constant fast path, which would otherwise allocate an Expr per size).
namespace detail {
inline bool is_size(int64_t s, int64_t v) { return s == v; }
inline bool is_size(const sym::Expr& s, int64_t v) { return s.is_constant() && s.constant() == v; }
}  // namespace detail

// torch's broadcast of two shapes. Sizes pair up from the right; a pair is equal (structurally,
// after simplification), or one side is the constant 1. nullopt when two sizes differ and neither
// is 1 — torch refuses constants that do, and a symbolic size might or might not be 1.
template <class Size>
std::optional<std::vector<Size>> broadcast_shapes(const std::vector<Size>& a, const std::vector<Size>& b) {
  size_t n = std::max(a.size(), b.size());
  std::vector<Size> out(n);
  for (size_t i = 0; i < n; ++i) {
    const Size* x = i < a.size() ? &a[a.size() - 1 - i] : nullptr;
    const Size* y = i < b.size() ? &b[b.size() - 1 - i] : nullptr;
    Size& r = out[n - 1 - i];
    if (!y) {
      r = *x;
    } else if (!x || detail::is_size(*x, 1)) {
      r = *y;
    } else if (detail::is_size(*y, 1) || *x == *y) {
      r = *x;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

// Row-major strides of `sizes`, as torch gives a contiguous tensor: a size-0 dimension counts as
// 1 (so strides stay nonzero), a symbolic size as itself.
template <class Size>
std::vector<Size> contiguous_strides(const std::vector<Size>& sizes) {
  std::vector<Size> strides(sizes.size());
  Size running = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = running;
    if (!detail::is_size(sizes[i], 0)) running = running * sizes[i];
  }
  return strides;
}

// torch's channels-last strides of a 4-d size (N, C, H, W): C varies fastest, then W, H, N.
template <class Size>
std::vector<Size> channels_last_strides(const std::vector<Size>& s) {
  return {s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]};
}

// Whether `strides` walk 4-d `sizes` channels-last with no gaps, a size-1 dimension's stride ignored (torch's
// `is_contiguous(memory_format=torch.channels_last)`): the layout `channels_last_strides` gives, up to those strides.
template <class Size>
bool channels_last_dense(const std::vector<Size>& sizes, const std::vector<Size>& strides) {
  if (sizes.size() != 4) return false;
  Size expected = 1;
  for (size_t d : {1, 3, 2, 0}) {
    if (detail::is_size(sizes[d], 1)) continue;
    if (strides[d] != expected) return false;
    expected = expected * sizes[d];
  }
  return true;
}

// Whether `strides` walk `sizes` row-major with no gaps, a size-1 dimension's stride ignored (it never
// moves): the layout `contiguous_strides` gives, up to those strides.
template <class Size>
bool row_major(const std::vector<Size>& sizes, const std::vector<Size>& strides) {
  Size expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (detail::is_size(sizes[i], 1)) continue;
    if (strides[i] != expected) return false;
    expected = expected * sizes[i];
  }
  return true;
}

// Channels-last and not row-major: a 4-d layout the two formats order differently (two of N, H, W, C of
// size > 1 walked in another order), as a channels-last choice leaves a value; [N, C, 1, 1] is neither.
template <class Size>
bool strictly_channels_last(const std::vector<Size>& sizes, const std::vector<Size>& strides) {
  return channels_last_dense(sizes, strides) && !row_major(sizes, strides);
}

}  // namespace ember::ir
