// How the Triton backend spells loop ops and dtypes: one row per ScalarOp (ops.def) and one per
// DType, like the C++ backend's tables (codegen/cpp/spelling.h), read by the kernel emitter
// (emit_kernel.cpp). An op with a pattern needs no code in the emitter.
//
// Needs: ops.def and the DType enum. Guarantees: exactly one row per ScalarOp in ops.def's order
// and one per DType (static_asserts in spelling.cpp), so an op or dtype added without a Triton
// spelling does not compile. Math that `tl` lacks or gets wrong on the GPU (NaN-propagating
// max/min, Python's // and %, libdevice-accurate transcendentals) is spelled `eh.<fn>`: a
// @triton.jit function of python/ember/_triton/helpers.py.
//
// Patterns are Python text with placeholders: $0 $1 $2 the operands (node variables), $T the
// `tl` dtype of the value computed; expanded by detail::expand (codegen/cpp/spelling.h's rules).
#pragma once

#include <cstdint>

#include "codegen/cpp/cpp_codegen.h"
#include "loop_ir/loop_ir.h"

namespace ember::codegen::triton {

// How a dtype's values compute in a kernel: int1, integers, floats (f16/bf16 values are f32 in
// registers: loads upcast, stores round). None: refused (complex, float8).
enum class TKind : uint8_t { Bool, Int, Float, None };
constexpr int kTKinds = 3;

struct TDTypeSpelling {
  ir::DType dtype;
  TKind kind;
  const char* tl;         // the `tl` dtype of a stored element: "tl.bfloat16"
  const char* value_tl;   // the `tl` dtype of a node value: "tl.float32" for f16/bf16
  const char* signature;  // Triton's signature type of a pointer to it, without '*': "bf16"
};

struct TReduction {
  // The binary op folding a value into a looped accumulator lane by lane (spelled by its row).
  loop_ir::ScalarOp combine = loop_ir::ScalarOp::Load;
  // Identity by kind ($1 the dtype's lowest value, $2 its highest), and the cross-lane reduction
  // of a [XBLOCK, RBLOCK] block ($0) along axis 1.
  const char* identity[kTKinds] = {};
  const char* across = nullptr;
};

struct TOpSpelling {
  loop_ir::ScalarOp op;
  const char* value[kTKinds];  // by the kind it computes in (a compare's: its operands'); null: refused
  const char* unsupported;     // why a kind is refused
  TReduction reduction;        // Reduce ops with an accumulator (Welford is emit_kernel.cpp's)
};

const TOpSpelling& op_spelling(loop_ir::ScalarOp op);
const TDTypeSpelling& dtype_spelling(ir::DType dt);

}  // namespace ember::codegen::triton
