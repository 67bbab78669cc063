// The shape symbols of one graph (dynamic shapes, docs/dynamic-shapes.md): sizes that vary between
// the calls one compiled graph serves.
//
// The frontend makes a symbol for an input dimension it decides to leave dynamic, or for a Python
// int it reads from the frame (an argument, a module attribute, a global) that it leaves dynamic,
// and records what it knows about it (guarded on every call, so the backend may rely on it). A
// size symbol appears bare as at least one dimension of a graph input: that is where the runtime
// reads its value (runtime::SymbolBinding). An int symbol (`from_int`) is the value of a Python
// int the graph receives after its tensor inputs, one per int symbol in the order of `symbols`.
// Sizes 0 and 1 are never symbols (they decide broadcasting), so `min` is at least 2 unless a
// producer says otherwise: an int symbol's is 1 (broadcasting rules never guess that a symbol is
// not 1; an int symbol is never 0).
//
// Text form (both IRs print it, one line per symbol before the inputs / buffers):
//     symbol s0 hint=16 range=[2, inf] divisor=1
//     symbol s1 hint=5 int
// `inf` spells INT64_MAX. The printer omits `range=` and `divisor=` when they are the defaults
// ([2, inf] and 1), and `int` for a size symbol; the parser accepts them in that order, each
// optional, and checks min <= hint <= max, divisor >= 1 and hint % divisor == 0.
#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ember::sym {

struct SymbolInfo {
  std::string name;  // s0, s1, ... in order of first appearance
  // Its value on the call that was traced. A heuristic only (tile sizes, whether to parallelize,
  // autotuning): code must be correct for every value in [min, max].
  int64_t hint = 2;
  int64_t min = 2;  // inclusive bounds the guards hold
  int64_t max = std::numeric_limits<int64_t>::max();
  int64_t divisor = 1;  // the value is a multiple of this (guarded)
  bool from_int = false;  // read from a Python int input, not from a tensor's dim
  bool operator==(const SymbolInfo& o) const {
    return name == o.name && hint == o.hint && min == o.min && max == o.max && divisor == o.divisor &&
           from_int == o.from_int;
  }
};

using Symbols = std::vector<SymbolInfo>;

std::string print_symbol(const SymbolInfo& symbol);
// Parses one line of the text form (surrounding whitespace allowed). Throws sym::ExprParseError
// (sym/expr.h) whose offset is a byte offset into `line`, so an IR parser can report line:column.
SymbolInfo parse_symbol(std::string_view line);

// A stage that cannot serve a symbolic size throws this, naming itself and the op:
// "lower: conv2d with a symbolic spatial size". The driver catches it and compiles the graph with
// every symbol replaced by its hint (guarded as exact sizes): slower, never wrong. Never treat a
// symbol as its hint silently instead.
struct SymbolicUnsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace ember::sym
