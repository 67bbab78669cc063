// Decoded, normalized bytecode of one code object (see ops.def for the instruction kinds).
//
// The decoder reads the de-optimised bytes of `co_code` (never the specialised in-memory copy),
// skips CACHE units and folds EXTENDED_ARG into the argument. One CPython instruction usually
// becomes one Instruction; a fused 3.13 instruction (LOAD_FAST_LOAD_FAST, ...) or a 3.11/3.12
// FORMAT_VALUE with a conversion becomes two, sharing the original offset. Jump targets are
// indices into `instructions`, already translated from each version's relative encoding.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ember::bytecode {

enum class Opcode : uint8_t {
#define EMBER_BC(Enum) Enum,
#include "frontend/bytecode/ops.def"
#undef EMBER_BC
};
const char* opcode_name(Opcode op);

struct Instruction {
  Opcode op = Opcode::Nop;
  int32_t arg = 0;
  int32_t arg2 = 0;
  int32_t target = -1;     // instruction index for jumps and ForIter, -1 otherwise
  uint32_t offset = 0;     // byte offset of the original instruction (its first EXTENDED_ARG)
  int32_t line = -1;       // source line, -1 when none
  const char* opname = ""; // the original CPython opcode name (static storage), for messages
};

struct ExceptionTableEntry {
  int32_t start = 0, end = 0;  // instruction indices, [start, end)
  int32_t target = 0;          // instruction index of the handler
  int32_t depth = 0;
  bool lasti = false;
};

struct DecodedCode {
  std::vector<Instruction> instructions;
  std::vector<ExceptionTableEntry> exception_table;
  // For each 2-byte code unit: the instruction it belongs to (EXTENDED_ARG prefix or opcode unit),
  // or, for an inline CACHE unit, the instruction after it (instructions.size() at the end).
  std::vector<int32_t> unit_index;
  // Index of the instruction at a byte offset: one that starts there, or whose opcode unit is there
  // (a frame's last instruction points past EXTENDED_ARG prefixes); else the first one after it.
  // Offsets at or past the end give instructions.size().
  int32_t index_at_offset(uint32_t offset) const;
};

// Decodes `code`. Needs the GIL. Throws std::runtime_error for malformed bytecode and for a CPython
// other than 3.11-3.13 (never for unknown opcodes, which decode as Opcode::Unsupported with their name).
DecodedCode decode(PyCodeObject* code);

// How one opcode number of the running interpreter decodes: the kind it usually becomes (FORMAT_VALUE,
// LOAD_ATTR, CALL_INTRINSIC_1 and the fused ops may become others, see docs/bytecode.md) and the
// name of the decoding rule. For diagnostics and coverage tests; every opcode in `opcode.opmap` has one.
struct OpcodeInfo {
  int number = 0;
  const char* name = "";  // CPython's name, or "<opcode N>" for numbers the interpreter does not define
  Opcode op = Opcode::Unsupported;
  const char* rule = "";
  int caches = 0;         // inline CACHE units that follow the opcode
};
std::vector<OpcodeInfo> opcode_table();

// The facts about the running CPython that the interpreter needs as data.
struct VersionTraits {
  int minor = 0;                     // 11, 12, 13
  bool null_after_callable = false;  // 3.13: [callable, self_or_NULL, args]; before: [NULL_or_method, callable_or_self, args]
};
const VersionTraits& version_traits();

}  // namespace ember::bytecode
