// ShapeEnv: the shape symbols of one trace and what the trace relied on about them (dynamic
// shapes, docs/dynamic-shapes.md).
//
// A tensor dimension the policy leaves dynamic (DynamicPolicy below) gets a symbol instead of its
// size: `s0, s1, ...` in order of first appearance. Sizes 0 and 1 never do (they decide
// broadcasting). Two dimensions of the same size share one symbol (duck sizing), so loops over
// them fuse exactly; the guards then require them equal. Every symbol is read on later calls
// from the first (tensor source, dim) it was made for. A Python int the policy leaves dynamic
// gets a symbol of its own (`int_symbol`: never duck-sized, as torch.compile's ints), read on
// later calls from the int's source.
//
// Python code that branches on a symbolic size asks `evaluate`: a relation the symbols' facts
// decide costs nothing; any other is decided by the traced call's values (the hints) and recorded
// as a guard, with the user's line that needed it (a guard over one symbol, monotone in it, also
// narrows the symbol's range: sym::narrow_range). `specialize` makes symbols static where the
// trace cannot carry them (an op without a symbolic shape rule, an int passed to plain Python):
// the guard `s == hint` and a replacement that finish() applies to the whole graph. So a trace
// never treats a symbol as its hint without a guard saying so.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "frontend/source.h"
#include "ir/graph.h"
#include "sym/expr.h"
#include "sym/relation.h"
#include "sym/symbols.h"
#include "support/options.h"

namespace ember::frontend {

// Which input dimensions a trace makes symbolic. `mode` is ember.compile(dynamic=...): Never makes
// none; Always every dimension of size >= 2 of a tensor that is not a parameter or read through a
// module; Auto the dimensions whose size differs from what an earlier compile of the same code saw
// (`seen`: per tensor source, the sizes seen, -1 once one changed; updated by the trace), and
// those marked with ember.mark_dynamic (or torch._dynamo.mark_dynamic: the same attribute).
// mark_static wins over both.
//
// Python ints (DynamicPolicy applies to them too, Trace::dynamic_int): Never none; Always the
// frame's arguments (as torch.compile(dynamic=True)) and, as under Auto, attributes and globals
// once their value changed; Auto those whose value differs from what an earlier compile saw
// (`seen` keyed "int " + source). Never bools, and never the value 0 or negative ints (an int
// symbol is >= 1; torch.compile's may be any int, its backend guarding each use).
struct DynamicPolicy {
  Dynamic mode = Dynamic::Auto;
  std::map<std::string, std::vector<int64_t>>* seen = nullptr;
};

class ShapeEnv {
 public:
  // Where a symbol's value is read: dim `dim` of the tensor at `source`, or (dim -1) the int at
  // `source`.
  struct Binding {
    SourceRef source;
    int dim = 0;
  };
  struct Guard {
    sym::Rel rel;
    std::string why;  // what needed it: "x.size(1) <= 1024 at model.py:42"
  };

  // The size expression of a dimension the policy made dynamic: a fresh symbol, or the one another
  // dimension of the same size already has (duck sizing; that of the same dim of another tensor
  // first). `value` >= 2. `dims_apart`: dims of one tensor never share a symbol (automatic dynamic:
  // its dims were seen to change apart, so `B == T` on one call says nothing about the next).
  sym::Expr symbol_for(int64_t value, const SourceRef& tensor, int dim, bool dims_apart = false);
  // A fresh symbol for the Python int at `source` (SymbolInfo::from_int, range [1, inf]), `value` >= 1.
  sym::Expr int_symbol(int64_t value, const SourceRef& source);

  // `e` with the replacements made so far (symbols specialized to constants) applied.
  sym::Expr resolve(const sym::Expr& e) const;
  // The value of `e` on the traced call.
  int64_t hint(const sym::Expr& e) const;
  // Whether `rel` holds on the traced call. Answered from the symbols' facts when they decide it;
  // otherwise by the hints, and the answer becomes a guard (the relation or its negation).
  bool evaluate(const sym::Rel& rel, const std::string& why);
  // Makes every symbol `e` mentions static: guards `s == hint` and replaces s by its hint from
  // now on. Returns the constant `e` then is.
  int64_t specialize(const sym::Expr& e, const std::string& why);

  bool empty() const { return symbols_.empty(); }
  // The symbols still symbolic (not specialized), for ir::Graph::symbols.
  sym::Symbols live_symbols() const;
  const sym::Symbols& all_symbols() const { return symbols_; }
  const std::vector<Binding>& bindings() const { return bindings_; }  // per symbol of all_symbols()
  const std::vector<Guard>& guards() const { return guards_; }
  const sym::Replacements& replacements() const { return replacements_; }
  bool specialized(const std::string& symbol) const;

 private:
  sym::Expr fresh(int64_t value, Binding binding);

  sym::Symbols symbols_;
  std::vector<Binding> bindings_;
  std::map<std::string, int64_t> hints_;  // symbol name -> hint, kept with symbols_ (for sym::evaluate)
  sym::Replacements replacements_;   // specialized symbols -> their hints
  std::vector<Guard> guards_;
};

}  // namespace ember::frontend
