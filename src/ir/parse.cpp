// The graph IR parser: recursive descent over the text form of docs/ir.md (what print.cpp writes).
//
// It checks syntax only, and builds the graph exactly as written (value ids as given, uses of
// undefined values kept), so that verify() can report structural problems in IR text that tests
// feed in. The only structural errors caught here are those the Graph cannot represent: a value
// defined twice, a result count that does not match its types. Errors are ParseError with the
// line:column of the offending character. `//` starts a comment that runs to the end of the line.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "ir/graph.h"
#include "support/text.h"

namespace ember::ir {

namespace {
using text::is_digit;
using text::is_name_char;
using text::is_name_start;
using text::quoted_char;
// Ids index a vector, so an absurd id in the text must not allocate gigabytes.
constexpr ValueId kMaxValueId = (1 << 24) - 1;
}  // namespace

class GraphParser {
 public:
  explicit GraphParser(std::string_view text) : text_(text) {}

  Graph parse() {
    expect_word("graph", "at the start of a graph");
    expect('@', "before the graph's name");
    Graph g(peek() == '"' ? string_literal() : name("graph name"));
    graph_ = &g;
    expect('(', "to open the graph's inputs");
    if (!consume(')')) {
      do input(); while (consume(','));
      expect(')', "after the graph's inputs");
    }
    expect('{', "to open the graph's body");
    while (!peek_word("return")) statement();
    expect_word("return", "to end the graph");
    expect('(', "after 'return'");
    if (!consume(')')) {
      do g.outputs_.push_back(value_ref()); while (consume(','));
      expect(')', "after the returned values");
    }
    expect('}', "to close the graph");
    skip_space();
    if (pos_ < text_.size()) fail("unexpected " + found() + " after the end of the graph");
    return g;
  }

 private:
  // ---- Characters and tokens.
  void skip_space() {
    for (;;) {
      while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
        ++pos_;
      if (text_.compare(pos_, 2, "//") != 0) return;
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    }
  }
  char peek() {
    skip_space();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool consume(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c, const std::string& context) {
    if (!consume(c)) fail("expected '" + std::string(1, c) + "' " + context + ", found " + found());
  }
  // The word at the cursor, without consuming it ("" if none).
  std::string_view word() {
    skip_space();
    size_t end = pos_;
    if (end < text_.size() && is_name_start(text_[end]))
      while (end < text_.size() && is_name_char(text_[end])) ++end;
    return text_.substr(pos_, end - pos_);
  }
  bool peek_word(std::string_view w) { return word() == w; }
  void expect_word(std::string_view w, const std::string& context) {
    if (!peek_word(w)) fail("expected '" + std::string(w) + "' " + context + (context.empty() ? "" : ", ") + "found " + found());
    pos_ += w.size();
  }
  std::string name(const std::string& what) {
    std::string_view w = word();
    if (w.empty()) fail("expected " + what + ", found " + found());
    pos_ += w.size();
    return std::string(w);
  }
  std::string found() {
    skip_space();
    if (pos_ >= text_.size()) return "end of input";
    std::string_view w = word();
    if (!w.empty()) return "'" + std::string(w) + "'";
    return quoted_char(text_[pos_]);
  }

  [[noreturn]] void fail(const std::string& message) { fail_at(message, pos_); }
  [[noreturn]] void fail_at(const std::string& message, size_t at) { throw ParseError(location(at) + ": " + message); }
  std::string location(size_t at) const {
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

  std::string string_literal() {
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

  ValueId value_ref() {
    if (peek() != '%') fail("expected a value (%N), found " + found());
    size_t start = pos_++;
    size_t end = pos_;
    while (end < text_.size() && is_digit(text_[end])) ++end;
    ValueId id = 0;
    auto [p, ec] = std::from_chars(text_.data() + pos_, text_.data() + end, id);
    if (end == pos_ || ec != std::errc() || id > kMaxValueId)
      fail_at("expected a value id from %0 to %" + std::to_string(kMaxValueId) + " after '%'", start);
    pos_ = end;
    return id;
  }

  // ---- Types.
  sym::Expr expr() {
    skip_space();
    size_t p = pos_;
    try {
      sym::Expr e = sym::parse_expr_prefix(text_, p);
      pos_ = p;
      return e;
    } catch (const sym::ExprParseError& e) {
      fail_at(e.reason, e.offset);
    }
  }

  std::vector<sym::Expr> expr_list(char close, const char* what) {
    std::vector<sym::Expr> out;
    if (consume(close)) return out;
    do out.push_back(expr()); while (consume(','));
    expect(close, std::string("after the ") + what);
    return out;
  }

  TensorType type() {
    TensorType t;
    size_t at = (skip_space(), pos_);
    std::string dt = name("a dtype (f32, i64, ...)");
    auto dtype = dtype_from_name(dt);
    if (!dtype) fail_at("unknown dtype '" + dt + "'", at);
    t.dtype = *dtype;
    expect('[', "after the dtype, to open the sizes");
    t.sizes = expr_list(']', "sizes");
    expect('{', "after the sizes, to open the strides");
    t.strides = expr_list('}', "strides");
    skip_space();
    at = pos_;
    while (pos_ < text_.size() && (is_name_char(text_[pos_]) || text_[pos_] == ':')) ++pos_;
    std::string_view dev = text_.substr(at, pos_ - at);
    // Keywords are never devices: `f32[4]{1}` followed by `return` lacks its device.
    if (dev.empty() || dev == "return" || dev == "grad" || dev == "torch") {
      pos_ = at;
      fail("expected a device (cpu, cuda:0, ...) after the strides, found " + found());
    }
    auto device = device_from_string(dev);
    if (!device) fail_at("invalid device '" + std::string(dev) + "'", at);
    t.device = *device;
    if (peek_word("grad")) {
      pos_ += 4;
      t.requires_grad = true;
    }
    return t;
  }

  // ---- Arguments.
  Literal number() {
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

  std::optional<int64_t> slice_part() {
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

  std::vector<Arg> items(char close) {
    std::vector<Arg> out;
    if (consume(close)) return out;
    do out.push_back(arg()); while (consume(','));
    expect(close, "after the last item");
    return out;
  }

  Arg arg() {
    // Bounded, so that hostile text fails cleanly instead of overflowing the stack.
    struct Nesting {
      explicit Nesting(GraphParser& p) : parser(p) {
        if (++parser.depth_ > 256) parser.fail("arguments nested deeper than 256 levels");
      }
      ~Nesting() { --parser.depth_; }
      GraphParser& parser;
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
    fail("expected an argument (%N, a literal, a list or a tuple), found " + found());
  }

  void call_args(Node& node) {
    expect('(', "before the arguments");
    if (consume(')')) return;
    do {
      std::string_view w = word();
      size_t after = pos_ + w.size();
      while (after < text_.size() && (text_[after] == ' ' || text_[after] == '\t')) ++after;
      bool keyword = !w.empty() && after < text_.size() && text_[after] == '=';
      if (keyword) {
        size_t at = pos_;
        for (const auto& kw : node.kwargs)
          if (kw.first == w) fail_at("keyword argument '" + std::string(w) + "' given twice", at);
        std::string key(w);
        pos_ = after + 1;
        node.kwargs.emplace_back(std::move(key), arg());
      } else {
        if (!node.kwargs.empty()) fail("positional argument after keyword arguments");
        node.args.push_back(arg());
      }
    } while (consume(','));
    expect(')', "after the arguments");
  }

  // ---- Definitions and statements.
  void define(ValueId id, TensorType type, NodeId producer, size_t at) {
    auto [it, inserted] = defined_at_.emplace(id, at);
    if (!inserted) fail_at("%" + std::to_string(id) + " is already defined (at " + location(it->second) + ")", at);
    if (graph_->values_.size() <= static_cast<size_t>(id)) graph_->values_.resize(id + 1);  // holes keep id -1
    graph_->values_[id] = Value{id, std::move(type), producer};
  }

  void input() {
    size_t at = (skip_space(), pos_);
    ValueId id = value_ref();
    expect(':', "after the input's name");
    TensorType t = type();
    std::string source = string_literal();
    define(id, std::move(t), -1, at);
    graph_->inputs_.push_back(GraphInput{id, std::move(source)});
  }

  void statement() {
    std::vector<std::pair<ValueId, size_t>> results;
    if (peek() == '%') {
      do {
        size_t at = (skip_space(), pos_);
        results.emplace_back(value_ref(), at);
      } while (consume(','));
      expect('=', "after the results");
    }
    Node node;
    node.id = static_cast<NodeId>(graph_->nodes_.size());
    size_t op_at = (skip_space(), pos_);
    std::string op = name("an op name or 'torch'");
    if (op == "torch") {
      node.op = Op::TorchCall;
      node.target = string_literal();
      if (node.target.empty()) fail_at("a torch node needs the callable's qualified name", op_at);
    } else {
      auto core = op_from_name(op);
      if (!core || *core == Op::TorchCall) fail_at("unknown op '" + op + "' (ops outside ops.def are written torch \"qualified.name\")", op_at);
      node.op = *core;
    }
    call_args(node);

    std::vector<TensorType> types;
    size_t call_end = pos_;
    size_t colon_at = (skip_space(), pos_);
    if (consume(':')) {
      std::string_view w = word();
      size_t after = pos_ + w.size();
      while (after < text_.size() && (text_[after] == ' ' || text_[after] == '\t')) ++after;
      if ((w == "tuple" || w == "list") && after < text_.size() && text_[after] == '(') {
        node.result_form = w == "tuple" ? Node::ResultForm::Tuple : Node::ResultForm::List;
        pos_ = after + 1;
        if (!consume(')')) {
          do types.push_back(type()); while (consume(','));
          expect(')', "after the result types");
        }
        if (types.size() != results.size())
          fail_at(std::to_string(results.size()) + " results but " + std::to_string(types.size()) + " result types", colon_at);
      } else {
        node.result_form = Node::ResultForm::Single;
        types.push_back(type());
        if (results.size() != 1)
          fail_at(std::to_string(results.size()) + " results with a single type; several results are typed tuple(...) or list(...)", colon_at);
      }
    } else {
      node.result_form = Node::ResultForm::None;
      if (!results.empty()) fail_at("expected ':' and the result types after the call", call_end);
    }
    for (size_t i = 0; i < results.size(); ++i) {
      define(results[i].first, std::move(types[i]), node.id, results[i].second);
      node.results.push_back(results[i].first);
    }
    graph_->nodes_.push_back(std::move(node));
  }

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
  Graph* graph_ = nullptr;
  std::map<ValueId, size_t> defined_at_;
};

Graph parse(std::string_view text) { return GraphParser(text).parse(); }

}  // namespace ember::ir
