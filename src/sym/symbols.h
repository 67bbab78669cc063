// The shape symbols of one graph (dynamic shapes, docs/dynamic-shapes.md): sizes that vary between
// the calls one compiled graph serves.
//
// The frontend makes a symbol for an input dimension it decides to leave dynamic and records what it
// knows about it (guarded on every call, so the backend may rely on it). Every symbol of a graph
// appears bare as at least one dimension of a graph input: that is where the runtime reads its value
// (`binding_of` in the runtime). Sizes 0 and 1 are never symbols (they decide broadcasting), so
// `min` is at least 2 unless a producer says otherwise.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
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
  bool operator==(const SymbolInfo& o) const {
    return name == o.name && hint == o.hint && min == o.min && max == o.max && divisor == o.divisor;
  }
};

using Symbols = std::vector<SymbolInfo>;

}  // namespace ember::sym
