// The bytecode assembler: CPython instructions in the running interpreter's own encoding, as a
// list that can be edited (jumps are instruction indices, exception-table ranges are index
// ranges), and the way back to a code object.
//
// The graph-break code (src/frontend/graph_break.cpp) builds its glue and resume functions by
// disassembling the user's code, inserting and retargeting instructions, and assembling the result.
// Unlike the normalized decoder (instruction.h), nothing here interprets instructions: opcodes
// stay the running CPython's numbers, and every per-version fact (cache counts, which opcodes jump
// and in which direction, which take a local slot) comes from the table the decoder already builds
// from `dis` (opcode_table.cpp), never from hard-coded numbers.
//
// Contract: for every code object CPython 3.11-3.13 produces, `assemble(disassemble(code))`
// reproduces `co_code` (as returned by PyCode_GetCode: de-optimised, CACHE units zeroed),
// `co_exceptiontable`, `co_linetable` and `co_stacksize` byte for byte.
//
// Jump direction is normalized: a relative jump's opcode may be either direction's variant; when
// its target lies the other way, assemble() writes the variant that matches (3.11
// POP_JUMP_FORWARD_IF_X <-> POP_JUMP_BACKWARD_IF_X, and on every version JUMP_FORWARD <->
// JUMP_BACKWARD), so callers write JUMP_FORWARD / the forward conditional and never think about
// it. A target at or before the jump itself is backward. Opcodes without a variant refuse the
// wrong direction: 3.12+ POP_JUMP_IF_* and FOR_ITER, SEND, 3.11 JUMP_IF_*_OR_POP go forward only,
// JUMP_BACKWARD_NO_INTERRUPT backward only.
//
// Instructions that CPython's specialised forms treat as a unit must stay together: on 3.11 a
// PRECALL and its CALL (a specialised PRECALL skips the CALL as a pair), and on 3.12+ FOR_ITER's
// target must be its END_FOR (3.13: END_FOR then POP_TOP), which specialised FOR_ITERs skip when
// the iterator is exhausted; assemble() checks the FOR_ITER rule.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>
#include <vector>

#include "frontend/bytecode/instruction.h"
#include "pybridge/pyref.h"

namespace ember::bytecode {

// A PEP 657 source position; line == -1 means "no location".
struct Position {
  int line = -1, end_line = -1, col = -1, end_col = -1;
  bool operator==(const Position& o) const {
    return line == o.line && end_line == o.end_line && col == o.col && end_col == o.end_col;
  }
};

struct RawInstruction {
  int opcode = 0;        // the running interpreter's number; never CACHE or EXTENDED_ARG
  int arg = 0;           // the whole argument, EXTENDED_ARG folded in; ignored for jumps (see target)
  int target = -1;       // relative jumps (dis.hasjrel): index of the instruction jumped to; else -1
  Position position;     // of the instruction; its EXTENDED_ARG prefixes and caches share it
  int32_t offset = -1;   // byte offset in the code it was disassembled from (its first EXTENDED_ARG),
                         // -1 for an inserted instruction; assemble() ignores it
};

struct RawCode {
  std::vector<RawInstruction> instructions;
  // [start, end) and target are indices into `instructions`. Entries must not overlap; assemble()
  // sorts them and merges adjacent entries with the same target, depth and lasti, as CPython does.
  std::vector<ExceptionTableEntry> exception_table;
  int firstlineno = 0;
};

// Needs the GIL. Throws std::runtime_error for malformed bytecode (the decoder's checks).
RawCode disassemble(PyCodeObject* code);

struct Assembled {
  std::string code;            // co_code: instructions, EXTENDED_ARG prefixes, zeroed CACHE units
  std::string linetable;       // co_linetable (PEP 626/657 location table)
  std::string exceptiontable;  // co_exceptiontable
  int stacksize = 0;           // co_stacksize, by flow analysis over jumps and exception handlers
};

// Lays out the instructions: EXTENDED_ARG prefixes sized to a fixpoint, jump arguments from
// `target` (forward/backward by the opcode's direction, counted as each version does), inline
// caches, the location and exception tables, the stack depth. Throws std::invalid_argument naming
// the instruction for: a jump without a target or a target out of range, a backward-only opcode
// jumping forward or the reverse, an argument that does not fit 32 bits (a negative `arg`), a
// stack that underflows or differs between two paths into one instruction, an exception entry out
// of range. Also refused: an opcode the interpreter does not define, CACHE or EXTENDED_ARG listed
// as instructions (the assembler writes them), a target on a non-jump, a 3.12+ FOR_ITER not aimed
// at END_FOR, control falling off the last instruction, overlapping exception entries, and an
// instruction covered by an exception entry whose depth is above the stack depth there. Empty exception entries are dropped. Instructions with line -1 get
// "no location"; positions follow CPython's own choice of location-table forms.
Assembled assemble(const RawCode& raw);

// The fields of a new code object that differ from the one it is derived from; empty or
// negative fields keep the base's value.
struct CodeChanges {
  int argcount = -1, posonlyargcount = -1, kwonlyargcount = -1;
  int flags = -1;
  PyRef varnames, cellvars, freevars;  // tuples of str
  PyRef consts, names;                 // tuples
  std::string name, qualname;
};

// A code object: `base` with `raw` assembled into it and `changes` applied (code.replace, the most
// version-robust constructor); co_firstlineno = raw.firstlineno, co_nlocals = len(varnames). Needs
// the GIL; returns nullptr with a Python error set on failure, including assemble()'s refusals
// (as ValueError "make_code(<qualname>): assemble: ...").
PyRef make_code(PyCodeObject* base, const RawCode& raw, const CodeChanges& changes);

// The running interpreter's opcode number for `name` (e.g. "LOAD_FAST"), or -1 when it has none.
int opcode_number(const char* name);

// Shifts every local-slot argument (dis.haslocal and dis.hasfree opcodes, incl. the 3.13 fused
// LOAD_FAST_LOAD_FAST / STORE_FAST_LOAD_FAST / STORE_FAST_STORE_FAST, which are split into two
// instructions when a shifted slot no longer fits 4 bits) by `delta`: what inserting `delta`
// names into co_varnames before slot `from_slot` requires (slots below it keep their index).
// Jump targets and exception entries are kept valid. Throws std::invalid_argument when a slot
// would become negative.
void shift_local_slots(RawCode& raw, int delta, int from_slot = 0);

}  // namespace ember::bytecode
