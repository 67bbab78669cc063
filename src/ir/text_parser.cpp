// The lexical layer and argument grammar of the graph IR's text form (see parse.cpp), shared by
// every parser of Ember text that embeds graph IR pieces (the loop IR's extern calls).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "ir/text_parser.h"
#include "support/text.h"

namespace ember::ir {

using text::is_digit;
using text::is_name_char;
using text::is_name_start;
using text::quoted_char;

TextParser::TextParser(std::string_view text, std::string value_prefix, std::string value_noun)
    : text_(text), value_prefix_(std::move(value_prefix)), value_noun_(std::move(value_noun)) {}

void TextParser::skip_space() {
  for (;;) {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
    if (text_.compare(pos_, 2, "//") != 0) return;
    while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
  }
}
char TextParser::peek() {
  skip_space();
  return pos_ < text_.size() ? text_[pos_] : '\0';
}
bool TextParser::consume(char c) {
  if (peek() != c) return false;
  ++pos_;
  return true;
}
void TextParser::expect(char c, const std::string& context) {
  if (!consume(c)) fail("expected '" + std::string(1, c) + "' " + context + ", found " + found());
}
// The word at the cursor, without consuming it ("" if none).
std::string_view TextParser::word() {
  skip_space();
  size_t end = pos_;
  if (end < text_.size() && is_name_start(text_[end]))
    while (end < text_.size() && is_name_char(text_[end])) ++end;
  return text_.substr(pos_, end - pos_);
}
bool TextParser::peek_word(std::string_view w) { return word() == w; }
void TextParser::expect_word(std::string_view w, const std::string& context) {
  if (!peek_word(w)) fail("expected '" + std::string(w) + "' " + context + (context.empty() ? "" : ", ") + "found " + found());
  pos_ += w.size();
}
std::string TextParser::name(const std::string& what) {
  std::string_view w = word();
  if (w.empty()) fail("expected " + what + ", found " + found());
  pos_ += w.size();
  return std::string(w);
}
std::string TextParser::found() {
  skip_space();
  if (pos_ >= text_.size()) return "end of input";
  std::string_view w = word();
  if (!w.empty()) return "'" + std::string(w) + "'";
  return quoted_char(text_[pos_]);
}

void TextParser::fail(const std::string& message) { fail_at(message, pos_); }
void TextParser::fail_at(const std::string& message, size_t at) { throw ParseError(location(at) + ": " + message); }

std::string TextParser::location(size_t at) const {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < at && i < text_.size(); ++i) {
    if (text_[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

std::string TextParser::string_literal() {
  if (peek() != '"') fail("expected a string, found " + found());
  size_t start = pos_++;
  std::string out;
  for (;;) {
    if (pos_ >= text_.size() || text_[pos_] == '\n') fail_at("unterminated string", start);
    char c = text_[pos_++];
    if (c == '"') return out;
    if (c != '\\') {
      out += c;
      continue;
    }
    char e = pos_ < text_.size() ? text_[pos_++] : '\0';
    switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'x': {
        int byte = 0;
        for (int i = 0; i < 2; ++i) {
          char h = pos_ < text_.size() ? text_[pos_] : '\0';
          int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
          if (d < 0) fail("expected two hex digits after '\\x'");
          byte = byte * 16 + d;
          ++pos_;
        }
        out += static_cast<char>(byte);
        break;
      }
      default: fail_at("unknown escape \\ followed by " + quoted_char(e) + " in a string", pos_ - 2);
    }
  }
}

int32_t TextParser::value_ref() {
  if (peek() != '%' || text_.compare(pos_, value_prefix_.size(), value_prefix_) != 0)
    fail("expected " + value_noun_ + " (" + value_prefix_ + "N), found " + found());
  size_t start = pos_;
  pos_ += value_prefix_.size();
  size_t end = pos_;
  while (end < text_.size() && is_digit(text_[end])) ++end;
  int32_t id = 0;
  auto [p, ec] = std::from_chars(text_.data() + pos_, text_.data() + end, id);
  if (end == pos_ || ec != std::errc() || id > kMaxId)
    fail_at("expected " + value_noun_ + " id from " + value_prefix_ + "0 to " + value_prefix_ + std::to_string(kMaxId) +
                " after '" + value_prefix_ + "'",
            start);
  pos_ = end;
  return id;
}

// ---- Types.
sym::Expr TextParser::expr(bool line_end) {
  skip_space();
  size_t p = pos_;
  std::string_view seen = text_;
  if (line_end) seen = text_.substr(0, std::min(text_.size(), text_.find('\n', pos_)));
  try {
    sym::Expr e = sym::parse_expr_prefix(seen, p);
    pos_ = p;
    return e;
  } catch (const sym::ExprParseError& e) {
    fail_at(e.reason, e.offset);
  }
}

std::vector<sym::Expr> TextParser::expr_list(char close, const char* what) {
  std::vector<sym::Expr> out;
  if (consume(close)) return out;
  do out.push_back(expr()); while (consume(','));
  expect(close, std::string("after the ") + what);
  return out;
}

Literal TextParser::number() {
  size_t start = (skip_space(), pos_);
  bool negative = text_[pos_] == '-';
  if (negative) ++pos_;
  auto is_word = [&](std::string_view w) {
    return text_.compare(pos_, w.size(), w) == 0 && (pos_ + w.size() >= text_.size() || !is_name_char(text_[pos_ + w.size()]));
  };
  if (is_word("inf") || is_word("nan")) {
    double v = is_word("inf") ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    pos_ += 3;
    return negative ? -v : v;
  }
  size_t end = pos_;
  auto digits = [&] {
    size_t from = end;
    while (end < text_.size() && is_digit(text_[end])) ++end;
    return end > from;
  };
  if (!digits()) fail_at("expected a number after '-'", start);
  bool is_float = false;
  if (end < text_.size() && text_[end] == '.') {
    ++end;
    digits();
    is_float = true;
  }
  if (end < text_.size() && (text_[end] == 'e' || text_[end] == 'E')) {
    ++end;
    if (end < text_.size() && (text_[end] == '+' || text_[end] == '-')) ++end;
    if (!digits()) fail_at("expected digits in the exponent", end);
    is_float = true;
  }
  if (end < text_.size() && is_name_char(text_[end])) fail_at("unexpected '" + std::string(1, text_[end]) + "' in a number", end);
  const char* first = text_.data() + start;
  const char* last = text_.data() + end;
  pos_ = end;
  if (is_float) {
    double v = 0;
    auto [p, ec] = std::from_chars(first, last, v);
    if (ec != std::errc() || p != last) fail_at("float literal out of range", start);
    return v;
  }
  int64_t v = 0;
  auto [p, ec] = std::from_chars(first, last, v);
  if (ec != std::errc() || p != last) fail_at("integer literal does not fit in int64", start);
  return v;
}

std::optional<int64_t> TextParser::slice_part() {
  if (peek_word("None")) {
    pos_ += 4;
    return std::nullopt;
  }
  size_t at = (skip_space(), pos_);
  if (peek() != '-' && !is_digit(peek())) fail("expected an integer or None in slice(...), found " + found());
  Literal l = number();
  if (!std::holds_alternative<int64_t>(l)) fail_at("slice bounds are integers or None", at);
  return std::get<int64_t>(l);
}

std::vector<Arg> TextParser::items(char close) {
  std::vector<Arg> out;
  if (consume(close)) return out;
  do out.push_back(arg()); while (consume(','));
  expect(close, "after the last item");
  return out;
}

Arg TextParser::arg() {
  // Bounded, so that hostile text fails cleanly instead of overflowing the stack.
  struct Nesting {
    explicit Nesting(TextParser& p) : parser(p) {
      if (++parser.depth_ > 256) parser.fail("arguments nested deeper than 256 levels");
    }
    ~Nesting() { --parser.depth_; }
    TextParser& parser;
  } nesting(*this);
  char c = peek();
  if (c == '%') return Arg::of_value(value_ref());
  if (c == '[') {
    ++pos_;
    return Arg::list(items(']'));
  }
  if (c == '(') {
    ++pos_;
    if (consume(')')) return Arg::tuple({});
    std::vector<Arg> xs{arg()};
    if (!consume(','))
      fail("expected ',' in a tuple, found " + found() + " (a one-item tuple is written '(x,)')");
    if (consume(')')) return Arg::tuple(std::move(xs));
    std::vector<Arg> rest = items(')');
    xs.insert(xs.end(), rest.begin(), rest.end());
    return Arg::tuple(std::move(xs));
  }
  if (c == '"') return Arg::of_literal(string_literal());
  if (c == '-' || is_digit(c)) return Arg::of_literal(number());
  if (text_.compare(pos_, 3, "...") == 0) {
    pos_ += 3;
    return Arg::of_literal(Ellipsis{});
  }
  size_t at = pos_;
  std::string w(word());
  if (w == "inf" || w == "nan") return Arg::of_literal(number());
  pos_ += w.size();
  if (w == "None") return Arg::of_literal(NoneLiteral{});
  if (w == "True") return Arg::of_literal(true);
  if (w == "False") return Arg::of_literal(false);
  if (w == "torch") {
    expect('.', "after 'torch' in a dtype");
    size_t dt_at = (skip_space(), pos_);
    std::string dt = name("a dtype name");
    auto dtype = dtype_from_torch_name(dt);
    if (!dtype) fail_at("unknown dtype 'torch." + dt + "'", dt_at);
    return Arg::of_literal(*dtype);
  }
  if (w == "device") {
    expect('(', "after 'device'");
    size_t s_at = (skip_space(), pos_);
    std::string text = string_literal();
    auto device = device_from_string(text);
    if (!device) fail_at("invalid device '" + text + "'", s_at);
    expect(')', "after the device string");
    return Arg::of_literal(*device);
  }
  if (w == "sym") {
    expect('(', "after 'sym'");
    size_t e_at = (skip_space(), pos_);
    sym::Expr e = expr();
    if (e.is_constant()) fail_at("sym(...) holds an expression of shape symbols; a constant is written as a plain integer", e_at);
    expect(')', "after the symbolic integer");
    return Arg::of_literal(e);
  }
  if (w == "slice") {
    Slice s;
    expect('(', "after 'slice'");
    s.start = slice_part();
    expect(',', "after the slice's start");
    s.stop = slice_part();
    expect(',', "after the slice's stop");
    s.step = slice_part();
    expect(')', "after the slice's step");
    return Arg::of_literal(s);
  }
  pos_ = at;
  fail("expected an argument (" + value_prefix_ + "N, a literal, a list or a tuple), found " + found());
}

void TextParser::call_args(std::vector<Arg>& args, std::vector<std::pair<std::string, Arg>>& kwargs) {
  expect('(', "before the arguments");
  if (consume(')')) return;
  do {
    std::string_view w = word();
    size_t after = pos_ + w.size();
    while (after < text_.size() && (text_[after] == ' ' || text_[after] == '\t')) ++after;
    bool keyword = !w.empty() && after < text_.size() && text_[after] == '=';
    if (keyword) {
      size_t at = pos_;
      for (const auto& kw : kwargs)
        if (kw.first == w) fail_at("keyword argument '" + std::string(w) + "' given twice", at);
      std::string key(w);
      pos_ = after + 1;
      kwargs.emplace_back(std::move(key), arg());
    } else {
      if (!kwargs.empty()) fail("positional argument after keyword arguments");
      args.push_back(arg());
    }
  } while (consume(','));
  expect(')', "after the arguments");
}

}  // namespace ember::ir
