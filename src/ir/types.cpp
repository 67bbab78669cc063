// The dtype table's lookups, devices, tensor types and promote_types (broadcast_shapes and
// contiguous_strides are templates in types.h). The contracts are in types.h.
#include "ir/types.h"

#include <algorithm>
#include <utility>

namespace ember::ir {

namespace {

// torch's other spellings of the same dtypes (torch.float is torch.float32); accepted, never printed.
constexpr std::pair<const char*, DType> kTorchAliases[] = {
    {"half", DType::Float16},   {"float", DType::Float32},       {"double", DType::Float64},
    {"short", DType::Int16},    {"int", DType::Int32},           {"long", DType::Int64},
    {"cfloat", DType::Complex64}, {"cdouble", DType::Complex128},
};

bool is_device_type_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

}  // namespace

std::optional<DType> dtype_from_name(std::string_view name) {
  for (int i = 0; i < kDTypeCount; ++i)
    if (name == detail::kDTypes[i].name) return static_cast<DType>(i);
  return std::nullopt;
}

std::optional<DType> dtype_from_torch_name(std::string_view name) {
  for (int i = 0; i < kDTypeCount; ++i)
    if (name == detail::kDTypes[i].torch_name) return static_cast<DType>(i);
  for (const auto& [alias, dt] : kTorchAliases)
    if (name == alias) return dt;
  return std::nullopt;
}

std::optional<DType> real_of(DType dt) {
  if (dt == DType::Complex64) return DType::Float32;
  if (dt == DType::Complex128) return DType::Float64;
  return std::nullopt;
}

std::optional<DType> complex_of(DType dt) {
  // bfloat16 has float32's range, so its complex counterpart is complex64.
  if (dt == DType::Float32 || dt == DType::BFloat16) return DType::Complex64;
  if (dt == DType::Float64) return DType::Complex128;
  return std::nullopt;
}

std::optional<DType> promote_types(DType a, DType b) {
  if (a == b) return a;
  DTypeCategory ca = dtype_category(a), cb = dtype_category(b);
  if (ca == DTypeCategory::Float8 || cb == DTypeCategory::Float8) return std::nullopt;
  if (ca == DTypeCategory::Bool) return b;
  if (cb == DTypeCategory::Bool) return a;
  if (ca == DTypeCategory::Integral && cb == DTypeCategory::Integral) {
    // An unsigned and a signed type: the smallest signed type holding both ranges (uint8 with
    // int8 is int16).
    if (dtype_info(a).is_signed != dtype_info(b).is_signed) {
      DType s = dtype_info(a).is_signed ? a : b;
      return dtype_itemsize(s) > 1 ? s : DType::Int16;
    }
    return dtype_itemsize(a) >= dtype_itemsize(b) ? a : b;
  }
  if (ca == DTypeCategory::Integral) return b;  // the other is floating or complex
  if (cb == DTypeCategory::Integral) return a;
  if (ca == DTypeCategory::Floating && cb == DTypeCategory::Floating) {
    // float16 and bfloat16 meet at float32; otherwise the wider one.
    if (dtype_itemsize(a) == dtype_itemsize(b)) return DType::Float32;
    return dtype_itemsize(a) > dtype_itemsize(b) ? a : b;
  }
  // At least one complex: complex128 when either side carries double precision.
  bool wide = a == DType::Complex128 || b == DType::Complex128 || a == DType::Float64 || b == DType::Float64;
  return wide ? DType::Complex128 : DType::Complex64;
}

std::string Device::str() const { return index < 0 ? type : type + ":" + std::to_string(index); }

// "type" or "type:index": type in [a-z0-9_]+ starting with a letter or '_', index a decimal
// without sign or leading zeros, so every accepted string prints back the same.
std::optional<Device> device_from_string(std::string_view text) {
  size_t colon = text.find(':');
  std::string_view type = text.substr(0, colon);
  if (type.empty() || (type[0] >= '0' && type[0] <= '9')) return std::nullopt;
  if (!std::all_of(type.begin(), type.end(), is_device_type_char)) return std::nullopt;
  Device device{std::string(type), -1};
  if (colon == std::string_view::npos) return device;
  std::string_view digits = text.substr(colon + 1);
  if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  int index = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    index = index * 10 + (c - '0');
  }
  device.index = index;
  return device;
}

std::string TensorType::str() const {
  auto join = [](const std::vector<sym::Expr>& xs) {
    std::string out;
    for (size_t i = 0; i < xs.size(); ++i) out += (i ? ", " : "") + xs[i].str();
    return out;
  };
  std::string out = std::string(dtype_name(dtype)) + "[" + join(sizes) + "]{" + join(strides) + "} " + device.str();
  if (requires_grad) out += " grad";
  return out;
}

bool TensorType::operator==(const TensorType& o) const {
  return dtype == o.dtype && sizes == o.sizes && strides == o.strides && device == o.device &&
         requires_grad == o.requires_grad;
}

}  // namespace ember::ir
