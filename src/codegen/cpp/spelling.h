// How the C++ backend spells loop ops and dtypes: two tables, one row per ScalarOp (ops.def) and one
// per DType, read by the emitter (emit_ops.cpp, emit_expr.cpp). Emission dispatches on an op's class
// (ops.def's column) and takes every spelling from here, so a backend is a pair of tables plus the
// code that prints addresses, loops and accumulators; the Triton backend brings its own tables.
//
// Needs: nothing but ops.def and the DType enum. Guarantees: the op table has exactly one row per
// ScalarOp, in ops.def's order, and the dtype table one row per DType (static_asserts in spelling.cpp:
// an op or dtype added without a spelling does not compile). Why tables: the same closed sets were
// spelled in nine switches over every op; a row says in one place what an op becomes in every
// context (scalar code by dtype kind, vector code, reductions), and what it does not support.
//
// Patterns are C++ text with placeholders: $0 $1 $2 the operands (already spelled), $T the C++ type
// of the value computed (a reduction's accumulator type for its identity and update). expand() fills
// them in one pass: substituted text is never rescanned.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/cpp/cpp_codegen.h"

namespace ember::codegen::detail {

// Whether row i of `table` is about enum value i (`key` names the row's field: &Row::op), for the
// static_asserts that keep every backend's spelling tables in their enum's order.
template <class Row, size_t N, class Key>
constexpr bool rows_in_enum_order(const Row (&table)[N], Key Row::*key) {
  for (size_t i = 0; i < N; ++i)
    if (static_cast<size_t>(table[i].*key) != i) return false;
  return true;
}

// How generated code computes values of a dtype: bool, integers, in float through ember::vec (f32,
// and f16/bf16, which are stored narrower and computed as float), in double. None: not supported.
enum class ValueKind : uint8_t { Bool, Int, F32, F64, None };
constexpr int kValueKinds = 4;  // the kinds with a spelling; indexes OpSpelling::scalar and friends

struct DTypeSpelling {
  ir::DType dtype;
  ValueKind kind;
  const char* storage;  // the C++ type a buffer element is stored as (f16/bf16: their bits)
  const char* value;    // the C++ type of a node value
  const char* load;     // a stored element ($0) as a value
  const char* store;    // a value ($0) as a stored element
  // Vector code (kind F32 only): $0 the element pointer, $1 the value, $2 ", n" in a masked tail.
  const char* vector_load;
  const char* vector_store;
};

// The pattern of kind `k` of a by-kind column (null for ValueKind::None).
inline const char* by_kind(const char* const (&patterns)[kValueKinds], ValueKind k) {
  return k == ValueKind::None ? nullptr : patterns[static_cast<int>(k)];
}

// What a reduction op needs beyond its row's other columns (absent for other ops and for Welford's
// shared state, which emit_ops.cpp spells: then `vector_identity` is null).
struct ReductionSpelling {
  // The binary op that folds a value into the accumulator, spelled by its own row: in vector code,
  // in merges of unrolled accumulators, and (when `update` is null) in scalar code.
  loop_ir::ScalarOp combine = loop_ir::ScalarOp::Load;
  const char* identity[kValueKinds] = {};  // by kind, in the accumulator type $T
  const char* vector_identity = nullptr;
  // Scalar update statement by kind, $0 the accumulator and $1 the value; null: $0 = combine($0, $1).
  const char* update[kValueKinds] = {};
  // The value of a vector accumulator ($0); null: its lanes folded one by one with `update`.
  const char* vector_final = nullptr;
};

// The operands a vector form takes: floats only; masks only (logical ops); floats or the int32
// lanes of integer values (the pattern is spelled by overloads that ev::VecI has too).
enum class VectorLanes : uint8_t { Float, Mask, FloatOrInt };

struct OpSpelling {
  loop_ir::ScalarOp op;
  // Scalar code by the kind of the dtype it computes in (a compare's: its operands'); null: not
  // defined for that kind (the verifier rejects it; `unsupported` says why if it reaches codegen).
  const char* scalar[kValueKinds];
  const char* unsupported;
  // Vector code over ev::VecF lanes (ev::MaskF for bool values, ev::VecI for integers); null: no
  // vector form, the loop stays scalar. `lanes`: what its operands may be.
  const char* vector;
  VectorLanes lanes;
  // Costs enough that a value computed by one loop is worth storing for a later loop (emit_reuse.cpp).
  bool transcendental;
  ReductionSpelling reduction;
};

const OpSpelling& op_spelling(loop_ir::ScalarOp op);
const DTypeSpelling& dtype_spelling(ir::DType dt);

// `pattern` with $0.. replaced by `args` and $T by `type`.
std::string expand(const char* pattern, const std::vector<std::string>& args, const std::string& type = "");

}  // namespace ember::codegen::detail
