// The graph IR parser: recursive descent over the text form of docs/ir.md (what print.cpp writes).
//
// It checks syntax only, and builds the graph exactly as written (value ids as given, uses of
// undefined values kept), so that verify() can report structural problems in IR text that tests
// feed in. The only structural errors caught here are those the Graph cannot represent: a value
// defined twice, a result count that does not match its types. Errors are ParseError with the
// line:column of the offending character. `//` starts a comment that runs to the end of the line.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "ir/graph.h"
#include "ir/text_parser.h"
#include "support/text.h"

namespace ember::ir {

namespace {
using text::is_digit;
using text::is_name_char;
using text::is_name_start;
using text::quoted_char;
}  // namespace

class GraphParser : public TextParser {
 public:
  explicit GraphParser(std::string_view text) : TextParser(text) {}

  Graph parse() {
    sym::Symbols symbols;
    while (peek_word("symbol")) symbols.push_back(symbol_line());
    expect_word("graph", "at the start of a graph");
    expect('@', "before the graph's name");
    Graph g(peek() == '"' ? string_literal() : name("graph name"));
    g.symbols = std::move(symbols);
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

  // One `symbol` line (sym::parse_symbol reads it); a name declared twice is an error here.
  sym::SymbolInfo symbol_line() {
    size_t start = pos_;
    size_t end = std::min({text_.size(), text_.find('\n', start), text_.find("//", start)});  // a comment may follow
    sym::SymbolInfo s;
    try {
      s = sym::parse_symbol(text_.substr(start, end - start));
    } catch (const sym::ExprParseError& e) {
      fail_at(e.reason, start + e.offset);
    }
    if (!declared_.emplace(s.name, start).second)
      fail_at("symbol " + s.name + " is already declared (at " + location(declared_.at(s.name)) + ")", start);
    pos_ = end;
    return s;
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
    call_args(node.args, node.kwargs);

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

  Graph* graph_ = nullptr;
  std::map<ValueId, size_t> defined_at_;
  std::map<std::string, size_t> declared_;  // symbol name -> where its line starts
};

Graph parse(std::string_view text) { return GraphParser(text).parse(); }

}  // namespace ember::ir
