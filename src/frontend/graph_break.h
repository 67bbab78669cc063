// Graph breaks: what a frame is split at, and the code that continues it.
//
// When the interpreter cannot trace an instruction of the frame being compiled, the compiler
// traces again up to that instruction and stops there (StopAt, interpreter.h). The cache entry then runs the graph
// of everything before it, applies the side effects recorded so far, and hands over to two kinds
// of generated code, both derived from the user's own code object (so exception handlers, with
// blocks, loops and line numbers stay the user's):
//
//  * the glue function runs the break instruction(s) in CPython: its prologue rebuilds the
//    stack and the live locals from its arguments and jumps to the instruction; after it, an
//    epilogue per successor returns (marker, successor, values the instruction pushed). If the
//    instruction raises inside a user `try`, the user's handler runs, and the rest of the frame
//    runs natively in the glue (its result is the frame's result). The hook never traces glue
//    (SkipReason::generated); the functions glue calls are compiled on their own as usual.
//  * a resume function per successor (fallthrough, jump target) rebuilds the stack and the live
//    locals the same way and jumps to the successor. It is an ordinary function to the hook: it
//    is traced when called, cached per location (breaks that continue at one instruction with
//    one stack layout and the same locals share it), and may break again. A break in a resume
//    function is mapped back to the original code, so there is one resume function per location
//    of the original code, never a resume of a resume.
//
// Both take their arguments positionally: the code's first argument (kept in slot 0, where
// zero-argument super() reads `self`), the non-NULL stack values (bottom first), then the other
// live locals (localsplus order). NULLs of call sequences are re-pushed by the prologue; an
// iterator on the stack (a `for` loop around the break) is passed as the tuple of the items it
// has left and re-made with GET_ITER. A first argument that was deleted (`del x`) is passed as
// None and deleted again by the prologue (super() then fails as it would in CPython).
//
// Cell variables are passed as their cell objects, not their contents: the prologue stores the
// passed cell in the cell's slot (STORE_FAST over the fresh cell MAKE_CELL made), so the glue,
// the resume function and every closure made before the break (rebuilt from its code and these
// cells, closures.cpp) share one cell, and `nonlocal` writes on either side are seen on the
// other. A first argument that is a cell is passed in place as None (MAKE_CELL wraps it) and
// its cell object among the locals.
#pragma once

#include <Python.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/interp/interpreter.h"
#include "frontend/interp/variables.h"
#include "pybridge/pyref.h"

namespace ember::frontend {

// The instruction range a break at normalized instruction `failed` covers, if the frame can be
// split there: `failed` itself, extended backwards over the KW_NAMES/PRECALL of a call.
struct BreakRange {
  int first = -1, last = -1;
};
std::optional<BreakRange> break_range(const CodeInfo& info, int failed);
// Why a frame cannot be split at instruction `failed` (for the fallback reason).
std::string unbreakable_reason(const CodeInfo& info, int failed);

// How a stack slot is passed.
enum class SlotKind : uint8_t { Null, Value, Iterator };

// The generated code for one break location and stack layout.
struct BreakCode {
  PyRef glue;                          // code object
  PyRef resume[2];                     // per successor: 0 fallthrough, 1 jump; null if none
  std::vector<SlotKind> lower;         // stack slots the break leaves alone (bottom first)
  std::vector<SlotKind> operands;      // the slots it consumes
  int pushed[2] = {0, 0};              // values it pushes along each successor
  bool first_in_place = false;         // the code has arguments: slot 0 is passed first, in place
  bool first_plain = false;            // ... with its value (a bound plain local); else None,
  bool first_deleted = false;          // ... and the prologue deletes slot 0 when it was deleted
  std::vector<int> glue_locals;        // original localsplus slots passed to glue after the stack
                                       // (slot 0 only when it is a cell), in order
  std::vector<int> resume_locals[2];   // ... and to each resume function
  std::string qualname;                // of the original code, for names and messages
};

// Owned by one Compiler: the generated code of every break location it has met, and for each
// resume code the original it was made from.
class BreakCodeCache {
 public:
  // A code object's origin: itself, or the original of a resume function.
  struct Origin {
    PyCodeObject* original = nullptr;
    int slot_shift = 0;                    // resume slot = original slot + slot_shift ...
    bool first_in_place = false;           // ... except slot 0 when this is set
    int slot(int original_slot) const {
      return first_in_place && original_slot == 0 ? 0 : original_slot + slot_shift;
    }
    std::unordered_map<int, int> index;    // resume normalized index -> original normalized index
  };
  // nullptr for a code this cache did not make.
  const Origin* origin(PyCodeObject* code) const;

  // The code for a break over `range` of `original` (normalized indices of the original),
  // with `stack` the layout of the stack at range.first and `bound` the original slots holding a
  // value there. Throws Unsupported when the code cannot be made. Needs the GIL.
  const BreakCode& get(const CodeInfo& original, BreakRange range, const std::vector<SlotKind>& stack,
                       const std::vector<bool>& bound);

  // The object glue returns first in its tuple, so its result can be told apart from a value
  // the user's frame returned after a handled exception.
  static PyObject* marker();

 private:
  std::map<std::string, std::unique_ptr<BreakCode>> codes_;
  std::map<std::string, PyRef> resumes_;           // by original, successor, layout and locals
  std::unordered_map<PyObject*, Origin> origins_;  // keys are resume codes held by codes_
};

// Local slots live on entry to each normalized instruction of `info`: read later on some path
// (jumps and exception handlers included) before being written. Cells and free variables are
// reported live everywhere (closures may read them at any time). BreakCodeCache::get keeps the result
// in CodeInfo::live, so it is computed once per code object.
std::vector<std::vector<bool>> live_locals(const CodeInfo& info);

}  // namespace ember::frontend
