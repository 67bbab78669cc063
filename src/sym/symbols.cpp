// The text form of shape symbols (sym/symbols.h): `symbol s0 hint=16 range=[2, inf] divisor=1`.
#include <charconv>

#include "sym/expr.h"
#include "sym/symbols.h"
#include "support/text.h"

namespace ember::sym {

namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
const SymbolInfo kDefaults;

std::string bound_str(int64_t v) { return v == kInf ? "inf" : std::to_string(v); }

class SymbolParser {
 public:
  explicit SymbolParser(std::string_view text) : text_(text) {}

  SymbolInfo line() {
    SymbolInfo s;
    skip_space();
    keyword("symbol");
    skip_space();
    size_t at = pos_;
    if (!text::is_name_start(peek())) fail("expected a symbol name, found " + found(), at);
    while (text::is_name_char(peek())) ++pos_;
    s.name = std::string(text_.substr(at, pos_ - at));
    skip_space();
    keyword("hint=");
    size_t hint_at = pos_;
    s.hint = integer(false);
    skip_space();
    size_t range_at = pos_;
    if (text_.substr(pos_).rfind("range=", 0) == 0) {
      pos_ += 6;
      expect('[');
      s.min = integer(false);
      expect(',');
      s.max = integer(true);
      expect(']');
      if (s.min > s.max) fail("range=[" + std::to_string(s.min) + ", " + bound_str(s.max) + "] is empty", range_at);
      skip_space();
    }
    if (text_.substr(pos_).rfind("divisor=", 0) == 0) {
      pos_ += 8;
      size_t at_divisor = pos_;
      s.divisor = integer(false);
      if (s.divisor < 1) fail("divisor must be at least 1", at_divisor);
      skip_space();
    }
    if (text_.substr(pos_) == "int" || text_.substr(pos_).rfind("int ", 0) == 0) {
      pos_ += 3;
      s.from_int = true;
      skip_space();
    }
    if (pos_ != text_.size())
      fail("unexpected " + found() + " (after hint=, only range=[lo, hi], divisor=d then int may follow)", pos_);
    if (s.hint < s.min || s.hint > s.max)
      fail("hint " + std::to_string(s.hint) + " is outside range=[" + std::to_string(s.min) + ", " + bound_str(s.max) + "]", hint_at);
    if (s.hint % s.divisor != 0)
      fail("hint " + std::to_string(s.hint) + " is not a multiple of divisor=" + std::to_string(s.divisor), hint_at);
    return s;
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (peek() == ' ' || peek() == '\t' || peek() == '\r' || peek() == '\n') ++pos_;
  }
  std::string found() const { return pos_ >= text_.size() ? "end of line" : text::quoted_char(text_[pos_]); }
  [[noreturn]] void fail(const std::string& reason, size_t at) const { throw ExprParseError(reason, at); }

  void keyword(std::string_view word) {
    if (text_.substr(pos_).rfind(word, 0) != 0) fail("expected '" + std::string(word) + "', found " + found(), pos_);
    pos_ += word.size();
  }

  void expect(char c) {
    skip_space();
    if (peek() != c) fail("expected '" + std::string(1, c) + "' in range=[lo, hi], found " + found(), pos_);
    ++pos_;
    skip_space();
  }

  // An int64 literal, or `inf` (INT64_MAX) where allowed.
  int64_t integer(bool allow_inf) {
    size_t at = pos_;
    std::string_view rest = text_.substr(pos_);
    if (allow_inf && rest.rfind("inf", 0) == 0) {
      pos_ += 3;
      return kInf;
    }
    int64_t v = 0;
    auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
    if (error == std::errc::result_out_of_range) fail("integer literal does not fit in int64", at);
    if (error != std::errc()) fail(std::string("expected an integer") + (allow_inf ? " or inf" : "") + ", found " + found(), at);
    pos_ += static_cast<size_t>(end - rest.data());
    if (text::is_name_char(peek())) fail("unexpected " + found() + " after an integer", pos_);
    return v;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::string print_symbol(const SymbolInfo& s) {
  std::string out = "symbol " + s.name + " hint=" + std::to_string(s.hint);
  if (s.min != kDefaults.min || s.max != kDefaults.max) out += " range=[" + std::to_string(s.min) + ", " + bound_str(s.max) + "]";
  if (s.divisor != kDefaults.divisor) out += " divisor=" + std::to_string(s.divisor);
  if (s.from_int) out += " int";
  return out;
}

SymbolInfo parse_symbol(std::string_view line) { return SymbolParser(line).line(); }

}  // namespace ember::sym
