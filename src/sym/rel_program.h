// RelProgram: a list of relations compiled to a flat postfix program, for guards that run on
// every call of a compiled graph.
//
// Needs: every symbol the relations mention is in `order`; symbol k of `order` reads values[k].
// Guarantees: holds(values) is true exactly when every relation holds at those values, where a
// step that leaves int64 or divides by zero makes its relation not hold (checked with
// __builtin_*_overflow: never undefined behaviour). Running allocates nothing and does not recurse:
// the stack is a fixed array, and a relation deeper than kMaxStack is refused when compiling.
// Why: the frontend's guard tree evaluates these per call, so they must cost nanoseconds, while
// the Expr trees they come from are built for manipulation, not speed. Measured cost: docs/ir.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sym/relation.h"

namespace ember::sym {

class RelProgram {
 public:
  static constexpr size_t kMaxStack = 64;

  // Throws std::invalid_argument naming a symbol missing from `order`, or a relation whose
  // evaluation needs more than kMaxStack values on the stack.
  RelProgram(const std::vector<Rel>& rels, const std::vector<std::string>& order);

  bool holds(const int64_t* values) const { return !first_failure(values); }
  // The index (into the constructor's `rels`) of the first relation that does not hold.
  std::optional<size_t> first_failure(const int64_t* values) const;

  size_t relations() const { return relations_; }
  size_t instructions() const { return code_.size(); }

 private:
  enum class Code : uint8_t { Constant, Symbol, Add, Mul, FloorDiv, Mod, Max, Min, Eq, Ne, Lt, Le };
  struct Instruction {
    Code code;
    int64_t operand;  // Constant: the value; Symbol: the index into values; otherwise unused
  };
  void emit(const Expr& e, const std::vector<std::string>& order, size_t depth);

  std::vector<Instruction> code_;
  size_t relations_ = 0;
};

}  // namespace ember::sym
