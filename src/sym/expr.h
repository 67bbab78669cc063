// Symbolic integer expressions: the sizes, strides and (later) loop indices of Ember's IRs.
//
// An Expr is an immutable tree, shared by value (copying is a reference-count bump). Static
// shapes are constant expressions, so dynamic shapes need no change to the IRs that hold them.
// Constructors simplify as they build (constant folding, flattening and sorting of sums and
// products, x*1, x+0, floordiv/mod by 1), so two expressions that are equal after
// simplification compare equal structurally and print the same.
//
// Text form (printer and parser agree): integers, symbols `s0`, `batch`, `+`, `*`, `//`, `%`,
// `-` (as `+ -1*x`), `max(a, b)`, `min(a, b)`, parentheses.
#pragma once

#include <cstdint>
#include <memory>
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
  static Expr symbol(std::string name);

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

// Parses the text form; throws std::invalid_argument naming the position on bad input.
Expr parse_expr(std::string_view text);

}  // namespace ember::sym
