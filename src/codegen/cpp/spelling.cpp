// The C++ backend's spelling tables (spelling.h says what a row means).
//
// Scalar float32 math goes through ember::vec's scalar functions, the same algorithms as its vector
// ones, so a vector loop's main lanes, its masked tail and a scalar loop agree. float64 uses <cmath>.
// Integer ops follow torch: wrap-around arithmetic, Python rounding for // and % (ember::rt).
#include "codegen/cpp/spelling.h"

#include <iterator>

namespace ember::codegen::detail {

namespace {

using ir::DType;
using loop_ir::ScalarOp;
using K = ValueKind;
using L = VectorLanes;

constexpr DTypeSpelling kDTypes[] = {
    // dtype, kind, storage, value; load (element $0 as a value), store (value $0 as an element);
    // vector load and store.
    {DType::Bool,         K::Bool, "bool",     "bool",    "$0", "$0", nullptr, nullptr},
    {DType::UInt8,        K::Int,  "uint8_t",  "uint8_t", "$0", "$0", nullptr, nullptr},
    {DType::Int8,         K::Int,  "int8_t",   "int8_t",  "$0", "$0", nullptr, nullptr},
    {DType::Int16,        K::Int,  "int16_t",  "int16_t", "$0", "$0", nullptr, nullptr},
    {DType::Int32,        K::Int,  "int32_t",  "int32_t", "$0", "$0", nullptr, nullptr},
    {DType::Int64,        K::Int,  "int64_t",  "int64_t", "$0", "$0", nullptr, nullptr},
    {DType::Float16,      K::F32,  "uint16_t", "float",   "ev::f16_to_f32($0)", "ev::f32_to_f16($0)",
                                                          "ev::load_f16($0$2)", "ev::store_f16($0, $1$2)"},
    {DType::BFloat16,     K::F32,  "uint16_t", "float",   "ev::bf16_to_f32($0)", "ev::f32_to_bf16($0)",
                                                          "ev::load_bf16($0$2)", "ev::store_bf16($0, $1$2)"},
    {DType::Float32,      K::F32,  "float",    "float",   "$0", "$0", "ev::VecF::load($0$2)", "$1.store($0$2)"},
    {DType::Float64,      K::F64,  "double",   "double",  "$0", "$0", nullptr, nullptr},
    {DType::Complex64,    K::None, nullptr,    nullptr,   nullptr, nullptr, nullptr, nullptr},
    {DType::Complex128,   K::None, nullptr,    nullptr,   nullptr, nullptr, nullptr, nullptr},
    {DType::Float8E4M3FN, K::None, nullptr,    nullptr,   nullptr, nullptr, nullptr, nullptr},
    {DType::Float8E5M2,   K::None, nullptr,    nullptr,   nullptr, nullptr, nullptr, nullptr},
};

// Reasons, shared by the rows that refuse a kind for the same cause.
constexpr const char* kNeedsFloat = "needs a floating-point operand";
constexpr const char* kBitwise = "bitwise ops need integer or bool operands";
// NaN-propagating maximum/minimum in double (torch.maximum); the float32 scalar reductions use it too.
#define EMBER_F64_EXTREMUM(cmp) "(($0 != $0 || $0 " cmp " $1) ? $0 : ($1 != $1) ? $1 : $0 " cmp " $1 ? $0 : $1)"

constexpr OpSpelling kOps[] = {
    // op, scalar {bool, int, f32 (ev::), f64 (<cmath>)}, why a kind is missing, vector, its lanes,
    // transcendental.
    // Leaves, stores, casts and index checks print addresses, conversions or control flow: emit_ops.cpp
    // spells them itself.
    {ScalarOp::Load, {}, nullptr, nullptr, L::Float, false},
    {ScalarOp::Constant, {}, nullptr, nullptr, L::Float, false},
    {ScalarOp::Index, {}, nullptr, nullptr, L::Float, false},
    {ScalarOp::Neg, {nullptr, "-$0", "-$0", "-$0"}, "negation of bool", "-$0", L::FloatOrInt, false},
    {ScalarOp::Abs, {"$0", "($0 < 0 ? -$0 : $0)", "ev::abs($0)", "std::fabs($0)"}, nullptr, "ev::abs($0)", L::FloatOrInt, false},
    {ScalarOp::Exp, {nullptr, nullptr, "ev::exp($0)", "std::exp($0)"}, kNeedsFloat, "ev::exp($0)", L::Float, true},
    {ScalarOp::Log, {nullptr, nullptr, "ev::log($0)", "std::log($0)"}, kNeedsFloat, "ev::log($0)", L::Float, true},
    {ScalarOp::Log1p, {nullptr, nullptr, "ev::log1p($0)", "std::log1p($0)"}, kNeedsFloat, "ev::log1p($0)", L::Float, true},
    {ScalarOp::Expm1, {nullptr, nullptr, "ev::expm1($0)", "std::expm1($0)"}, kNeedsFloat, "ev::expm1($0)", L::Float, true},
    {ScalarOp::Sqrt, {nullptr, nullptr, "ev::sqrt($0)", "std::sqrt($0)"}, kNeedsFloat, "ev::sqrt($0)", L::Float, false},
    {ScalarOp::Rsqrt, {nullptr, nullptr, "ev::rsqrt($0)", "1.0 / std::sqrt($0)"}, kNeedsFloat, "ev::rsqrt($0)", L::Float,
     false},
    {ScalarOp::Sin, {nullptr, nullptr, "ev::sin($0)", "std::sin($0)"}, kNeedsFloat, "ev::sin($0)", L::Float, true},
    {ScalarOp::Cos, {nullptr, nullptr, "ev::cos($0)", "std::cos($0)"}, kNeedsFloat, "ev::cos($0)", L::Float, true},
    {ScalarOp::Tanh, {nullptr, nullptr, "ev::tanh($0)", "std::tanh($0)"}, kNeedsFloat, "ev::tanh($0)", L::Float, true},
    {ScalarOp::Sigmoid, {nullptr, nullptr, "ev::sigmoid($0)", "1.0 / (1.0 + std::exp(-$0))"}, kNeedsFloat,
     "ev::sigmoid($0)", L::Float, true},
    {ScalarOp::Erf, {nullptr, nullptr, "ev::erf($0)", "std::erf($0)"}, kNeedsFloat, "ev::erf($0)", L::Float, true},
    {ScalarOp::Reciprocal, {nullptr, nullptr, "ev::reciprocal($0)", "1.0 / $0"}, kNeedsFloat, "ev::reciprocal($0)",
     L::Float, false},
    // NaN and -0.0 pass, as in torch.
    {ScalarOp::Relu, {"$0", "($0 > 0 ? $0 : 0)", "ev::relu($0)", "($0 < 0.0 ? 0.0 : $0)"}, nullptr, "ev::relu($0)",
     L::Float, false},
    // Rounding leaves integers and bools as they are.
    {ScalarOp::Floor, {"$0", "$0", "ev::floor($0)", "std::floor($0)"}, nullptr, "ev::floor($0)", L::Float, false},
    {ScalarOp::Ceil, {"$0", "$0", "ev::ceil($0)", "std::ceil($0)"}, nullptr, "ev::ceil($0)", L::Float, false},
    {ScalarOp::Trunc, {"$0", "$0", "ev::trunc($0)", "std::trunc($0)"}, nullptr, "ev::trunc($0)", L::Float, false},
    // The default rounding mode: half to even.
    {ScalarOp::Round, {"$0", "$0", "ev::round($0)", "std::nearbyint($0)"}, nullptr, "ev::round($0)", L::Float, false},
    // sign(NaN) is 0 in torch.
    {ScalarOp::Sign,
     {"$0", "(($0 > 0) - ($0 < 0))", "ev::sign($0)", "static_cast<double>(($0 > 0.0) - ($0 < 0.0))"},
     nullptr, "ev::sign($0)", L::Float, false},
    {ScalarOp::IsNan, {"false", "false", "$0 != $0", "$0 != $0"}, nullptr, "ev::isnan($0)", L::Float, false},
    {ScalarOp::LogicalNot, {"!$0", "!$0", "!$0", "!$0"}, nullptr, "!$0", L::Mask, false},
    {ScalarOp::BitwiseNot, {"!$0", "~$0", nullptr, nullptr}, "bitwise_not needs an integer or bool operand", nullptr,
     L::Float, false},
    {ScalarOp::Cast, {}, nullptr, nullptr, L::Float, false},
    {ScalarOp::Add, {"($0 || $1)", "$0 + $1", "$0 + $1", "$0 + $1"}, nullptr, "$0 + $1", L::FloatOrInt, false},
    {ScalarOp::Sub, {nullptr, "$0 - $1", "$0 - $1", "$0 - $1"}, "subtraction of bools", "$0 - $1", L::FloatOrInt, false},
    {ScalarOp::Mul, {"($0 && $1)", "$0 * $1", "$0 * $1", "$0 * $1"}, nullptr, "$0 * $1", L::FloatOrInt, false},
    {ScalarOp::Div, {nullptr, nullptr, "$0 / $1", "$0 / $1"},
     "true division needs floating-point operands (lowering casts them)", "$0 / $1", L::Float, false},
    {ScalarOp::FloorDiv,
     {nullptr, "ember::rt::floordiv_int<$T>($0, $1)", "ember::rt::floordiv_float<$T>($0, $1)",
      "ember::rt::floordiv_float<$T>($0, $1)"},
     "floordiv of bools", nullptr, L::Float, false},
    {ScalarOp::Mod,
     {nullptr, "ember::rt::mod_int<$T>($0, $1)", "ember::rt::mod_float<$T>($0, $1)", "ember::rt::mod_float<$T>($0, $1)"},
     "mod of bools", nullptr, L::Float, false},
    {ScalarOp::Pow, {nullptr, "ember::rt::pow_int<$T>($0, $1)", "ev::pow($0, $1)", "std::pow($0, $1)"}, "pow of bools",
     "ev::pow($0, $1)", L::Float, true},
    {ScalarOp::Maximum, {"($0 || $1)", "($0 > $1 ? $0 : $1)", "ev::maximum($0, $1)", EMBER_F64_EXTREMUM(">")}, nullptr,
     "ev::maximum($0, $1)", L::FloatOrInt, false},
    {ScalarOp::Minimum, {"($0 && $1)", "($0 < $1 ? $0 : $1)", "ev::minimum($0, $1)", EMBER_F64_EXTREMUM("<")}, nullptr,
     "ev::minimum($0, $1)", L::FloatOrInt, false},
    {ScalarOp::BitwiseAnd, {"($0 & $1)", "($0 & $1)", nullptr, nullptr}, kBitwise, nullptr, L::Float, false},
    {ScalarOp::BitwiseOr, {"($0 | $1)", "($0 | $1)", nullptr, nullptr}, kBitwise, nullptr, L::Float, false},
    {ScalarOp::BitwiseXor, {"($0 ^ $1)", "($0 ^ $1)", nullptr, nullptr}, kBitwise, nullptr, L::Float, false},
    {ScalarOp::Eq, {"$0 == $1", "$0 == $1", "$0 == $1", "$0 == $1"}, nullptr, "$0 == $1", L::FloatOrInt, false},
    {ScalarOp::Ne, {"$0 != $1", "$0 != $1", "$0 != $1", "$0 != $1"}, nullptr, "$0 != $1", L::FloatOrInt, false},
    {ScalarOp::Lt, {"$0 < $1", "$0 < $1", "$0 < $1", "$0 < $1"}, nullptr, "$0 < $1", L::FloatOrInt, false},
    {ScalarOp::Le, {"$0 <= $1", "$0 <= $1", "$0 <= $1", "$0 <= $1"}, nullptr, "$0 <= $1", L::FloatOrInt, false},
    {ScalarOp::Gt, {"$0 > $1", "$0 > $1", "$0 > $1", "$0 > $1"}, nullptr, "$0 > $1", L::FloatOrInt, false},
    {ScalarOp::Ge, {"$0 >= $1", "$0 >= $1", "$0 >= $1", "$0 >= $1"}, nullptr, "$0 >= $1", L::FloatOrInt, false},
    {ScalarOp::LogicalAnd, {"($0 && $1)", "($0 && $1)", "($0 && $1)", "($0 && $1)"}, nullptr, "$0 & $1", L::Mask, false},
    {ScalarOp::LogicalOr, {"($0 || $1)", "($0 || $1)", "($0 || $1)", "($0 || $1)"}, nullptr, "$0 | $1", L::Mask, false},
    {ScalarOp::Where, {"$0 ? $1 : $2", "$0 ? $1 : $2", "$0 ? $1 : $2", "$0 ? $1 : $2"}, nullptr,
     "ev::where($0, $1, $2)", L::FloatOrInt, false},
    // Operands i64 (seed, counter), value f32 (ember/philox.h). Vector code: emit_ops.cpp.
    {ScalarOp::PhiloxRand, {nullptr, nullptr, "ember::rt::philox_uniform($0, $1)", nullptr}, "philox_rand yields f32",
     nullptr, L::Float, false},
    // Reductions: {combine, identity by kind, vector identity, update by kind, vector final}. $T is the
    // accumulator type: scalar float32 sums and products accumulate in double (a scalar loop is the one
    // that could not be vectorized, often a long strided one, and double keeps its error below torch's
    // cascade summation), max and min in float (exact); emit_ops.cpp's accumulator_dtype decides.
    {ScalarOp::ReduceSum, {}, nullptr, nullptr, L::Float, false,
     {ScalarOp::Add, {"false", "0", "0", "0"}, "0.0f", {"$0 = $0 || $1", "$0 += $1", "$0 += $1", "$0 += $1"},
      "ev::reduce_add($0)"}},
    {ScalarOp::ReduceProd, {}, nullptr, nullptr, L::Float, false,
     {ScalarOp::Mul, {"true", "1", "1", "1"}, "1.0f", {"$0 = $0 && $1", "$0 *= $1", "$0 *= $1", "$0 *= $1"}, nullptr}},
    {ScalarOp::ReduceMax, {}, nullptr, nullptr, L::Float, false,
     {ScalarOp::Maximum,
      {"false", "std::numeric_limits<$T>::lowest()", "-std::numeric_limits<$T>::infinity()",
       "-std::numeric_limits<$T>::infinity()"},
      "-std::numeric_limits<float>::infinity()", {}, "ev::reduce_max($0)"}},
    {ScalarOp::ReduceMin, {}, nullptr, nullptr, L::Float, false,
     {ScalarOp::Minimum,
      {"true", "std::numeric_limits<$T>::max()", "std::numeric_limits<$T>::infinity()",
       "std::numeric_limits<$T>::infinity()"},
      "std::numeric_limits<float>::infinity()", {}, "ev::reduce_min($0)"}},
    // Welford mean/m2 share one accumulator state per operand (emit_ops.cpp spells it): no row data.
    {ScalarOp::WelfordMean, {}, nullptr, nullptr, L::Float, false},
    {ScalarOp::WelfordM2, {}, nullptr, nullptr, L::Float, false},
    {ScalarOp::CheckIndex, {}, nullptr, nullptr, L::Float, false},
    {ScalarOp::Store, {}, nullptr, nullptr, L::Float, false},
};
#undef EMBER_F64_EXTREMUM

static_assert(std::size(kOps) == loop_ir::kScalarOpCount, "every ScalarOp of ops.def needs a row in kOps");
static_assert(detail::rows_in_enum_order(kOps, &OpSpelling::op), "kOps rows must follow ops.def's order");
// DType::Float8E5M2 is the last DType.
static_assert(std::size(kDTypes) == static_cast<size_t>(DType::Float8E5M2) + 1, "every DType needs a row in kDTypes");
static_assert(detail::rows_in_enum_order(kDTypes, &DTypeSpelling::dtype), "kDTypes rows must follow the DType enum's order");

}  // namespace

const OpSpelling& op_spelling(ScalarOp op) { return kOps[static_cast<size_t>(op)]; }

const DTypeSpelling& dtype_spelling(DType dt) { return kDTypes[static_cast<size_t>(dt)]; }

std::string expand(const char* pattern, const std::vector<std::string>& args, const std::string& type) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (*p == '$' && p[1] == 'T') {
      out += type;
      ++p;
    } else if (*p == '$' && p[1] >= '0' && p[1] < '0' + static_cast<int>(args.size())) {
      out += args[static_cast<size_t>(p[1] - '0')];
      ++p;
    } else {
      out += *p;
    }
  }
  return out;
}

}  // namespace ember::codegen::detail
