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
  // Index of the first instruction at or after a byte offset (for resume points and line lookups).
  int32_t index_at_offset(uint32_t offset) const;
};

// Decodes `code`. Throws std::runtime_error for malformed bytecode (never for unknown opcodes,
// which decode as Opcode::Unsupported with their name).
DecodedCode decode(PyCodeObject* code);

// The facts about the running CPython that the interpreter needs as data.
struct VersionTraits {
  int minor = 0;                     // 11, 12, 13
  bool null_after_callable = false;  // 3.13: [callable, self_or_NULL, args]; before: [NULL_or_method, callable_or_self, args]
};
const VersionTraits& version_traits();

}  // namespace ember::bytecode
