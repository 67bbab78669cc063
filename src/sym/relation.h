// Relations between symbolic expressions: what guards check and what stages ask about sizes.
//
// A Rel is `lhs op rhs` with op one of ==, !=, <, <=; `a > b` and `a >= b` are stored swapped as
// `b < a` and `b <= a`, so every consumer handles four cases. Text form: `s0 <= 4096`,
// `64*s1 == s2` (parse_rel accepts >, >= too and normalizes).
//
// statically_known decides a relation for every assignment the symbols' facts allow (sym/range.h),
// once the factors both sides' products share (each >= 1 by its interval) are cancelled (`s1 < s1*s1`
// is `1 < s1`),
// from the interval of lhs - rhs, the divisibility of its linear form (`2*s0 == 7` is false) and
// structural equality. Guarantee: a true/false answer is right at every assignment where both sides
// evaluate; nullopt when undecided (the caller guards or keeps the general code). Property-tested
// against evaluation (tests/ir/test_sym_relations.py).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sym/expr.h"
#include "sym/symbols.h"

namespace ember::sym {

enum class RelOp : uint8_t { Eq, Ne, Lt, Le };

struct Rel {
  Expr lhs;
  RelOp op = RelOp::Eq;
  Expr rhs;
  std::string str() const;
  bool operator==(const Rel& o) const { return op == o.op && lhs == o.lhs && rhs == o.rhs; }
};

const char* rel_op_name(RelOp op);  // "==", "!=", "<", "<="

// Throws ExprParseError (a byte offset into `text`) on malformed text.
Rel parse_rel(std::string_view text);

// Whether the relation holds at the given values; throws as evaluate() does.
bool evaluate(const Rel& rel, const SymbolLookup& lookup);

std::optional<bool> statically_known(const Rel& rel, const Symbols& symbols);
// Whether statically_known proves `rel` (true at every assignment the facts allow).
inline bool provable(const Rel& rel, const Symbols& symbols) { return statically_known(rel, symbols) == true; }

// Whether e is a multiple of k (k >= 1) at every assignment: for aligned vector loads.
bool statically_known_multiple_of(const Expr& e, int64_t k, const Symbols& symbols);

}  // namespace ember::sym
