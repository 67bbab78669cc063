// The running interpreter's opcode table, as the decoder and the assembler need it (internal to
// src/frontend/bytecode).
//
// Built once, at first use, from `sys.version_info` and the `dis` module (opmap, hasarg or
// HAVE_ARGUMENT, hasjrel, _inline_cache_entries, _intrinsic_1_descs), so one decoder serves 3.11,
// 3.12 and 3.13 without compile-time version tests. Each opcode number maps to its name, the Ember
// kind(s) it becomes and a decoding rule; the few per-version facts that are not in `dis` (arg bit
// fields, FOR_ITER's exhaustion skip, END_FOR's pop count) are keyed on the minor version here and
// nowhere else.
#pragma once

#include "frontend/bytecode/instruction.h"

#include <array>
#include <string>

namespace ember::bytecode::detail {

// How the folded argument of one CPython instruction becomes Ember instructions.
#define EMBER_BC_RULES(X)                                                                        \
  X(Plain, "plain")                    /* one `op`, arg as is (0 for opcodes without argument) */ \
  X(ExtendedArg, "extended_arg")       /* folded into the next instruction's arg */               \
  X(Cache, "cache")                    /* only valid as an inline cache unit; skipped */          \
  X(NullBit, "null_bit")               /* LOAD_GLOBAL: arg >> 1, arg2 = arg & 1 */                \
  X(MethodBit, "method_bit")           /* 3.12+ LOAD_ATTR: LoadMethod if arg & 1; arg >> 1 */     \
  X(SuperAttr, "super_attr")           /* LOAD_SUPER_ATTR: arg >> 2, arg2 = arg & 3 */            \
  X(Compare, "compare")                /* COMPARE_OP: arg >> compare_shift, arg2 = bool bit */    \
  X(Intrinsic1, "intrinsic_1")         /* CALL_INTRINSIC_1: own kinds for two intrinsics */       \
  X(FormatValue, "format_value")       /* 3.11/3.12: [ConvertValue] + FormatSimple/WithSpec */    \
  X(FusedFast, "fused_fast")           /* 3.13: `op` arg >> 4, then `op2` arg & 15 */             \
  X(Jump, "jump")                      /* relative jump to `target` */                            \
  X(ForIter, "for_iter")               /* jump past END_FOR (+POP_TOP) on exhaustion */           \
  X(EndFor, "end_for")                 /* PopN with the version's pop count */                    \
  X(FlagBit0, "flag_bit0")             /* CALL_FUNCTION_EX: arg & 1 */                            \
  X(Unknown, "unsupported")            /* Opcode::Unsupported, raw arg */

enum class Rule : uint8_t {
#define EMBER_BC_RULE_ENUM(Enum, Name) Enum,
  EMBER_BC_RULES(EMBER_BC_RULE_ENUM)
#undef EMBER_BC_RULE_ENUM
};
const char* rule_name(Rule rule);

struct OpcodeEntry {
  const char* name = "";  // points into OpcodeTable::names, which lives as long as the process
  Opcode op = Opcode::Unsupported;
  Opcode op2 = Opcode::Unsupported;  // second instruction of a FusedFast pair
  Rule rule = Rule::Unknown;
  uint8_t caches = 0;
  bool has_arg = false;
  bool backward = false;  // for Jump / ForIter: the arg counts backwards
  bool defined = false;   // the interpreter's opmap names this number
  // Facts the assembler needs about every opcode, not only the ones Ember decodes.
  bool relative_jump = false;  // in dis.hasjrel: the arg is a relative jump
  bool ends_block = false;     // never falls through: unconditional jump, return, raise
  uint8_t local_slots = 0;     // localsplus indices in the arg: 1, or 2 for a fused 4-bit pair
  int16_t flipped = -1;        // the same jump in the other direction (3.11 POP_JUMP_FORWARD_IF_TRUE
                               // <-> POP_JUMP_BACKWARD_IF_TRUE, JUMP_FORWARD <-> JUMP_BACKWARD), or -1
};

struct OpcodeTable {
  int minor = 0;
  std::array<OpcodeEntry, 256> entries;
  std::array<std::string, 256> names;
  // Per-version facts that `dis` does not state as data.
  int compare_shift = 0;          // COMPARE_OP: operator = arg >> shift
  int compare_bool_bit = -1;      // COMPARE_OP: bit meaning "coerce the result to bool", -1 if none
  int for_iter_skip = 0;          // code units FOR_ITER skips past its jump target when exhausted
  int end_for_pops = 0;           // values END_FOR pops
  int min_stacksize = 0;          // co_stacksize CPython writes for code that never pushes
  int intrinsic_unary_positive = -1;  // CALL_INTRINSIC_1 numbers, -1 where there is no intrinsic
  int intrinsic_list_to_tuple = -1;
  int end_for_opcode = -1;        // numbers checked at FOR_ITER's exhaustion target, -1 if none
  int pop_top_opcode = -1;
  int extended_arg_opcode = -1;
  int cache_opcode = -1;
  int return_generator_opcode = -1;

  // The opcode number for `name` (exact CPython name), -1 when the interpreter has none.
  int number_of(const char* name) const;
};

// The table of the running interpreter. Needs the GIL; throws std::runtime_error when `dis` lacks
// something the decoder relies on or the interpreter is not 3.11-3.13.
const OpcodeTable& running_opcode_table();

// Throws std::runtime_error carrying `what` and the pending Python exception's text (which is cleared).
[[noreturn]] void throw_python_error(const std::string& what);

// The code object's co_qualname, for messages ("?" when unreadable; no Python error left set).
std::string qualname_of(PyCodeObject* code);

// Throws std::runtime_error("malformed bytecode in <co_qualname>: <what>").
[[noreturn]] void throw_malformed(PyCodeObject* code, const std::string& what);

}  // namespace ember::bytecode::detail
