// The Triton backend's spelling tables (spelling.h says what a row means).
//
// Values follow the loop IR's semantics (ops.def): torch's, not C's or Triton's. Where Triton's own
// operator differs — `//` and `%` truncate, tl.maximum drops NaN, tl.exp/tl.sin are approximate on
// the GPU — the row calls a helper (`eh.`), which is libdevice on the GPU and a numpy-backed `tl`
// shim in the interpreter. Integer arithmetic wraps, as in torch.
#include "codegen/triton/spelling.h"

#include <iterator>

#include "codegen/cpp/spelling.h"

namespace ember::codegen::triton {

namespace {

using ir::DType;
using loop_ir::ScalarOp;
using K = TKind;

constexpr TDTypeSpelling kDTypes[] = {
    // dtype, kind, stored tl dtype, value tl dtype, signature
    {DType::Bool, K::Bool, "tl.int1", "tl.int1", "i1"},
    {DType::UInt8, K::Int, "tl.uint8", "tl.uint8", "u8"},
    {DType::Int8, K::Int, "tl.int8", "tl.int8", "i8"},
    {DType::Int16, K::Int, "tl.int16", "tl.int16", "i16"},
    {DType::Int32, K::Int, "tl.int32", "tl.int32", "i32"},
    {DType::Int64, K::Int, "tl.int64", "tl.int64", "i64"},
    {DType::Float16, K::Float, "tl.float16", "tl.float32", "fp16"},
    {DType::BFloat16, K::Float, "tl.bfloat16", "tl.float32", "bf16"},
    {DType::Float32, K::Float, "tl.float32", "tl.float32", "fp32"},
    {DType::Float64, K::Float, "tl.float64", "tl.float64", "fp64"},
    {DType::Complex64, K::None, nullptr, nullptr, nullptr},
    {DType::Complex128, K::None, nullptr, nullptr, nullptr},
    {DType::Float8E4M3FN, K::None, nullptr, nullptr, nullptr},
    {DType::Float8E5M2, K::None, nullptr, nullptr, nullptr},
};

constexpr const char* kNeedsFloat = "needs a floating-point operand";
constexpr const char* kBitwise = "bitwise ops need integer or bool operands";

constexpr TOpSpelling kOps[] = {
    // op, {bool, int, float}, why a kind is refused. Leaves, casts, index checks and stores print
    // addresses, conversions or assertions: emit_kernel.cpp spells them.
    {ScalarOp::Load, {}, nullptr, {}},
    {ScalarOp::Constant, {}, nullptr, {}},
    {ScalarOp::Index, {}, nullptr, {}},
    {ScalarOp::Neg, {nullptr, "-$0", "-$0"}, "negation of bool", {}},
    {ScalarOp::Abs, {"$0", "tl.abs($0)", "tl.abs($0)"}, nullptr, {}},
    {ScalarOp::Exp, {nullptr, nullptr, "eh.exp($0)"}, kNeedsFloat, {}},
    {ScalarOp::Log, {nullptr, nullptr, "eh.log($0)"}, kNeedsFloat, {}},
    {ScalarOp::Log1p, {nullptr, nullptr, "eh.log1p($0)"}, kNeedsFloat, {}},
    {ScalarOp::Expm1, {nullptr, nullptr, "eh.expm1($0)"}, kNeedsFloat, {}},
    {ScalarOp::Sqrt, {nullptr, nullptr, "eh.sqrt($0)"}, kNeedsFloat, {}},
    {ScalarOp::Rsqrt, {nullptr, nullptr, "eh.rsqrt($0)"}, kNeedsFloat, {}},
    {ScalarOp::Sin, {nullptr, nullptr, "eh.sin($0)"}, kNeedsFloat, {}},
    {ScalarOp::Cos, {nullptr, nullptr, "eh.cos($0)"}, kNeedsFloat, {}},
    {ScalarOp::Tanh, {nullptr, nullptr, "eh.tanh($0)"}, kNeedsFloat, {}},
    {ScalarOp::Sigmoid, {nullptr, nullptr, "eh.sigmoid($0)"}, kNeedsFloat, {}},
    {ScalarOp::Erf, {nullptr, nullptr, "eh.erf($0)"}, kNeedsFloat, {}},
    {ScalarOp::Reciprocal, {nullptr, nullptr, "eh.reciprocal($0)"}, kNeedsFloat, {}},
    // NaN and -0.0 pass, as in torch.
    {ScalarOp::Relu, {"$0", "tl.maximum($0, 0)", "tl.where($0 < 0, 0, $0)"}, nullptr, {}},
    // Rounding leaves integers and bools as they are; round is half to even.
    {ScalarOp::Floor, {"$0", "$0", "tl.floor($0)"}, nullptr, {}},
    {ScalarOp::Ceil, {"$0", "$0", "tl.ceil($0)"}, nullptr, {}},
    {ScalarOp::Trunc, {"$0", "$0", "eh.trunc($0)"}, nullptr, {}},
    {ScalarOp::Round, {"$0", "$0", "eh.round($0)"}, nullptr, {}},
    // sign(NaN) is 0 in torch.
    {ScalarOp::Sign, {"$0", "($0 > 0).to($T) - ($0 < 0).to($T)", "($0 > 0).to($T) - ($0 < 0).to($T)"}, nullptr, {}},
    {ScalarOp::IsNan, {"$0 != $0", "$0 != $0", "$0 != $0"}, nullptr, {}},
    {ScalarOp::LogicalNot, {"$0 == 0", "$0 == 0", "$0 == 0"}, nullptr, {}},
    {ScalarOp::BitwiseNot, {"$0 == 0", "~$0", nullptr}, "bitwise_not needs an integer or bool operand", {}},
    {ScalarOp::Cast, {}, nullptr, {}},
    {ScalarOp::Add, {"$0 | $1", "$0 + $1", "$0 + $1"}, nullptr, {}},
    {ScalarOp::Sub, {nullptr, "$0 - $1", "$0 - $1"}, "subtraction of bools", {}},
    {ScalarOp::Mul, {"$0 & $1", "$0 * $1", "$0 * $1"}, nullptr, {}},
    // IEEE division and sqrt (a plain `/` is div.full.f32 on the GPU: 2 ulp).
    {ScalarOp::Div, {nullptr, nullptr, "eh.div($0, $1)"},
     "true division needs floating-point operands (lowering casts them)", {}},
    {ScalarOp::FloorDiv, {nullptr, "eh.floordiv_int($0, $1)", "eh.floordiv_float($0, $1)"}, "floordiv of bools", {}},
    {ScalarOp::Mod, {nullptr, "eh.mod_int($0, $1)", "eh.mod_float($0, $1)"}, "mod of bools", {}},
    {ScalarOp::Pow, {nullptr, "eh.pow_int($0, $1)", "eh.pow($0, $1)"}, "pow of bools", {}},
    {ScalarOp::Maximum, {"$0 | $1", "tl.maximum($0, $1)", "eh.maximum($0, $1)"}, nullptr, {}},
    {ScalarOp::Minimum, {"$0 & $1", "tl.minimum($0, $1)", "eh.minimum($0, $1)"}, nullptr, {}},
    {ScalarOp::BitwiseAnd, {"$0 & $1", "$0 & $1", nullptr}, kBitwise, {}},
    {ScalarOp::BitwiseOr, {"$0 | $1", "$0 | $1", nullptr}, kBitwise, {}},
    {ScalarOp::BitwiseXor, {"$0 ^ $1", "$0 ^ $1", nullptr}, kBitwise, {}},
    {ScalarOp::Eq, {"$0 == $1", "$0 == $1", "$0 == $1"}, nullptr, {}},
    {ScalarOp::Ne, {"$0 != $1", "$0 != $1", "$0 != $1"}, nullptr, {}},
    {ScalarOp::Lt, {"$0 < $1", "$0 < $1", "$0 < $1"}, nullptr, {}},
    {ScalarOp::Le, {"$0 <= $1", "$0 <= $1", "$0 <= $1"}, nullptr, {}},
    {ScalarOp::Gt, {"$0 > $1", "$0 > $1", "$0 > $1"}, nullptr, {}},
    {ScalarOp::Ge, {"$0 >= $1", "$0 >= $1", "$0 >= $1"}, nullptr, {}},
    {ScalarOp::LogicalAnd, {"$0 & $1", "($0 != 0) & ($1 != 0)", "($0 != 0) & ($1 != 0)"}, nullptr, {}},
    {ScalarOp::LogicalOr, {"$0 | $1", "($0 != 0) | ($1 != 0)", "($0 != 0) | ($1 != 0)"}, nullptr, {}},
    {ScalarOp::Where, {"tl.where($0, $1, $2)", "tl.where($0, $1, $2)", "tl.where($0, $1, $2)"}, nullptr, {}},
    // The same function as ember/philox.h and python/ember/rng.py (tests/codegen/test_philox.py).
    {ScalarOp::PhiloxRand, {nullptr, nullptr, "tl.rand($0, ($1).to(tl.int64))"}, "philox_rand yields f32", {}},
    // Reductions: {combine, identity by kind, cross-lane reduction along axis 1}. Bool values
    // reduce as int32 (emit_kernel.cpp widens them). tl.max/tl.min drop NaN on the GPU and the
    // custom-combine tl.reduce is ~1000x slower in the interpreter: eh.reduce_max/min take tl.max
    // plus a NaN flag.
    {ScalarOp::ReduceSum, {}, nullptr, {ScalarOp::Add, {"0", "0", "0.0"}, "tl.sum($0, 1)"}},
    {ScalarOp::ReduceProd, {}, nullptr, {ScalarOp::Mul, {"1", "1", "1.0"}, "eh.reduce_prod($0, 1)"}},
    {ScalarOp::ReduceMax, {}, nullptr, {ScalarOp::Maximum, {"0", "$1", "float('-inf')"}, "eh.reduce_max($0, 1)"}},
    {ScalarOp::ReduceMin, {}, nullptr, {ScalarOp::Minimum, {"1", "$2", "float('inf')"}, "eh.reduce_min($0, 1)"}},
    {ScalarOp::WelfordMean, {}, nullptr, {}},
    {ScalarOp::WelfordM2, {}, nullptr, {}},
    {ScalarOp::CheckIndex, {}, nullptr, {}},
    {ScalarOp::Store, {}, nullptr, {}},
};

static_assert(std::size(kOps) == loop_ir::kScalarOpCount, "every ScalarOp of ops.def needs a row in the Triton kOps");
static_assert(detail::rows_in_enum_order(kOps, &TOpSpelling::op), "the Triton kOps rows must follow ops.def's order");
// DType::Float8E5M2 is the last DType.
static_assert(std::size(kDTypes) == static_cast<size_t>(DType::Float8E5M2) + 1,
              "every DType needs a row in the Triton kDTypes");
static_assert(detail::rows_in_enum_order(kDTypes, &TDTypeSpelling::dtype), "the Triton kDTypes rows must follow the DType enum's order");

}  // namespace

const TOpSpelling& op_spelling(ScalarOp op) { return kOps[static_cast<size_t>(op)]; }

const TDTypeSpelling& dtype_spelling(DType dt) { return kDTypes[static_cast<size_t>(dt)]; }

}  // namespace ember::codegen::triton
