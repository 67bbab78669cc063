// Parser for the text form of symbolic expressions, the inverse of Expr::str().
//
// Grammar (Python's precedence and left associativity):
//   sum   := term (('+' | '-') term)*
//   term  := unary (('*' | '//' | '%') unary)*
//   unary := '-' unary | atom
//   atom  := INT | NAME | ('max' | 'min') '(' sum ',' sum ')' | '(' sum ')'
// `-` directly before an integer makes a negative literal, so INT64_MIN parses. Everything
// goes through the simplifying constructors, so the result is canonical whatever the spelling.
#include <cstdio>

#include "sym/expr.h"
#include "support/text.h"

namespace ember::sym {

ExprParseError::ExprParseError(std::string reason_, size_t offset_)
    : std::invalid_argument("column " + std::to_string(offset_ + 1) + ": " + reason_),
      reason(std::move(reason_)),
      offset(offset_) {}

namespace {

using text::is_digit;
using text::is_name_char;
using text::is_name_start;
using text::quoted_char;

class ExprParser {
 public:
  ExprParser(std::string_view text, size_t pos) : text_(text), pos_(pos) {}

  Expr sum() {
    Expr lhs = term();
    for (;;) {
      skip_space();
      char c = peek();
      if (c != '+' && c != '-') return lhs;
      size_t at = pos_++;
      Expr rhs = term();
      lhs = apply(at, [&] { return c == '+' ? lhs + rhs : lhs - rhs; });
    }
  }

  size_t pos() const { return pos_; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  [[noreturn]] void fail(const std::string& reason, size_t at) const { throw ExprParseError(reason, at); }
  std::string found() const {
    if (pos_ >= text_.size()) return "end of text";
    return quoted_char(text_[pos_]);
  }

 private:
  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }

  // Runs a constructor, turning its arithmetic errors (overflow, division by zero) into a
  // parse error at the operator.
  template <typename F>
  Expr apply(size_t at, F build) {
    try {
      return build();
    } catch (const std::overflow_error& e) {
      fail(e.what(), at);
    } catch (const std::domain_error& e) {
      fail(e.what(), at);
    }
  }

  Expr term() {
    Expr lhs = unary();
    for (;;) {
      skip_space();
      size_t at = pos_;
      if (peek() == '*') {
        ++pos_;
        Expr rhs = unary();
        lhs = apply(at, [&] { return lhs * rhs; });
      } else if (peek() == '/' && peek(1) == '/') {
        pos_ += 2;
        Expr rhs = unary();
        lhs = apply(at, [&] { return floordiv(lhs, rhs); });
      } else if (peek() == '%') {
        ++pos_;
        Expr rhs = unary();
        lhs = apply(at, [&] { return mod(lhs, rhs); });
      } else if (peek() == '/') {
        fail("'/' is true division, which integer expressions do not have; use '//'", at);
      } else {
        return lhs;
      }
    }
  }

  // Recursion depth is bounded so that hostile text fails cleanly instead of overflowing the stack.
  struct Nesting {
    explicit Nesting(ExprParser& p) : parser(p) {
      if (++parser.depth_ > kMaxDepth) parser.fail("expression nested deeper than " + std::to_string(kMaxDepth) + " levels", parser.pos_);
    }
    ~Nesting() { --parser.depth_; }
    ExprParser& parser;
  };
  static constexpr int kMaxDepth = 256;

  Expr unary() {
    Nesting nesting(*this);
    skip_space();
    if (peek() != '-') return atom();
    size_t at = pos_++;
    skip_space();
    if (is_digit(peek())) return integer(true);
    Expr operand = unary();
    return apply(at, [&] { return Expr(-1) * operand; });
  }

  Expr integer(bool negative) {
    size_t start = pos_;
    // Accumulate the magnitude as unsigned so that -9223372036854775808 fits.
    const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
    uint64_t magnitude = 0;
    while (is_digit(peek())) {
      uint64_t digit = static_cast<uint64_t>(peek() - '0');
      if (magnitude > (limit - digit) / 10) fail("integer literal does not fit in int64", start);
      magnitude = magnitude * 10 + digit;
      ++pos_;
    }
    if (is_name_char(peek())) fail("unexpected '" + std::string(1, peek()) + "' in an integer literal", pos_);
    if (!negative) return Expr(static_cast<int64_t>(magnitude));
    return Expr(magnitude == (uint64_t{1} << 63) ? INT64_MIN : -static_cast<int64_t>(magnitude));
  }

  Expr atom() {
    skip_space();
    size_t at = pos_;
    char c = peek();
    if (is_digit(c)) return integer(false);
    if (c == '(') {
      ++pos_;
      Expr inner = sum();
      expect(')', "to close '('");
      return inner;
    }
    if (is_name_start(c)) {
      while (is_name_char(peek())) ++pos_;
      std::string name(text_.substr(at, pos_ - at));
      size_t after = pos_;
      skip_space();
      if ((name == "max" || name == "min") && peek() == '(') {
        ++pos_;
        Expr a = sum();
        expect(',', "between the two arguments of " + name);
        Expr b = sum();
        expect(')', "after the second argument of " + name + " (it takes two)");
        return name == "max" ? max(a, b) : min(a, b);
      }
      pos_ = after;
      return Expr::symbol(name);
    }
    fail("expected an integer, a symbol, max(...), min(...) or '(', found " + found(), at);
  }

  void expect(char c, const std::string& why) {
    skip_space();
    if (peek() != c) fail("expected '" + std::string(1, c) + "' " + why + ", found " + found(), pos_);
    ++pos_;
  }

  std::string_view text_;
  size_t pos_;
  int depth_ = 0;
};

}  // namespace

Expr parse_expr_prefix(std::string_view text, size_t& pos) {
  ExprParser parser(text, pos);
  Expr e = parser.sum();
  pos = parser.pos();
  return e;
}

Expr parse_expr(std::string_view text) {
  ExprParser parser(text, 0);
  Expr e = parser.sum();
  parser.skip_space();
  if (parser.pos() != text.size())
    parser.fail("unexpected " + parser.found() + " after the expression", parser.pos());
  return e;
}

}  // namespace ember::sym
