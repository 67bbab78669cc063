// Symbolic integer expressions: the sizes, strides and (later) loop indices of Ember's IRs.
//
// An Expr is an immutable tree, shared by value (copying is a reference-count bump). Static
// shapes are constant expressions, so dynamic shapes need no change to the IRs that hold them.
// Constructors simplify as they build (constant folding, flattening and sorting of sums and
// products, x*1, x+0, floordiv/mod by 1), so two expressions that are equal after
// simplification compare equal structurally and print the same. Arithmetic on constants that
// leaves int64 throws std::overflow_error; a floordiv or mod by the constant 0 throws
// std::domain_error.
//
// Text form (printer and parser agree): integers, symbols `s0`, `batch`, `+`, `*`, `//`, `%`,
// `-` (as `+ -1*x`), `max(a, b)`, `min(a, b)`, parentheses.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ember::sym {

enum class ExprKind : uint8_t { Constant, Symbol, Add, Mul, FloorDiv, Mod, Max, Min };

struct ExprNode;

class Expr {
 public:
  Expr() : Expr(int64_t{0}) {}
  Expr(int64_t value);  // NOLINT: constants convert implicitly, as in `sizes.push_back(4)`
  Expr(int value) : Expr(int64_t{value}) {}
  static Expr symbol(std::string name);  // name: [A-Za-z_][A-Za-z0-9_]*, else invalid_argument

  ExprKind kind() const;
  bool is_constant() const { return kind() == ExprKind::Constant; }
  int64_t constant() const;                 // requires is_constant()
  const std::string& symbol_name() const;   // requires kind() == Symbol
  const std::vector<Expr>& operands() const;

  std::string str() const;
  bool operator==(const Expr& other) const;  // structural, after simplification
  bool operator!=(const Expr& other) const { return !(*this == other); }
  bool operator<(const Expr& other) const;   // a total order, for deterministic sorting

  friend Expr operator+(const Expr& a, const Expr& b);
  friend Expr operator-(const Expr& a, const Expr& b);
  friend Expr operator*(const Expr& a, const Expr& b);
  friend Expr floordiv(const Expr& a, const Expr& b);
  friend Expr mod(const Expr& a, const Expr& b);
  friend Expr max(const Expr& a, const Expr& b);
  friend Expr min(const Expr& a, const Expr& b);

 private:
  explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}
  std::shared_ptr<const ExprNode> node_;
  friend struct ExprBuilder;
};

// The product of `xs` (1 for none): an element count from sizes.
Expr product(const std::vector<Expr>& xs);

// Thrown by the parsers below. `reason` says what is wrong, `offset` is where (a byte offset
// into the text), so a parser that embeds expressions (the graph IR's) can report its own
// line:column; what() reads "column N: reason".
struct ExprParseError : std::invalid_argument {
  ExprParseError(std::string reason, size_t offset);
  std::string reason;
  size_t offset;
};

// Parses the whole text as one expression.
Expr parse_expr(std::string_view text);
// Parses the longest expression starting at `pos` (leading whitespace skipped) and leaves `pos`
// just after it: for parsers of IRs that embed expressions, e.g. `f32[s0 // 2, 8]`.
Expr parse_expr_prefix(std::string_view text, size_t& pos);

// ---- Operations over a tree (evaluate.cpp).

// The value of `e` with each symbol's value given by `lookup` (nullopt: unbound). Throws
// std::invalid_argument naming an unbound symbol, std::overflow_error when a step leaves int64 and
// std::domain_error on a division by zero, as the constructors do; Python semantics otherwise.
using SymbolLookup = std::function<std::optional<int64_t>(const std::string&)>;
int64_t evaluate(const Expr& e, const SymbolLookup& lookup);
int64_t evaluate(const Expr& e, const std::map<std::string, int64_t>& values);

// Replaces symbols by expressions simultaneously (`{s0: s1, s1: s0}` swaps them) and rebuilds
// through the constructors, so the result is canonical. A name given twice is
// std::invalid_argument; names not in `e` are ignored.
using Replacements = std::vector<std::pair<std::string, Expr>>;
Expr substitute(const Expr& e, const Replacements& replacements);

// t / k when the term t is structurally a multiple of k: k's constant coefficient divides t's and
// each of k's other factors is among t's (`6*s0*s1` over `3*s1` is `2*s0`); nullopt otherwise.
// Exact, so it holds for every value (where k != 0).
std::optional<Expr> term_quotient(const Expr& t, const Expr& k);

// Adds the names of the symbols `e` mentions to `out`.
void free_symbols(const Expr& e, std::set<std::string>& out);

}  // namespace ember::sym
