// The loop IR parser: recursive descent over the text form that print.cpp writes (grammar in
// docs/loop-ir.md), on the graph IR's lexical layer (ir/text_parser.h), so extern calls' arguments,
// literals, strings and symbolic expressions have one grammar across Ember's IRs.
//
// Like the graph IR's parser it checks syntax only and builds the program as written (buffer and
// node ids as given, undefined references kept), so that verify() can report structural problems
// in text that tests feed in. Caught here are only what a Program cannot represent: a buffer or
// node defined twice, index variables out of order. Errors are ParseError "line:column: message".
#include <map>

#include "ir/text_parser.h"
#include "loop_ir/loop_ir.h"
#include "support/text.h"

namespace ember::loop_ir {

namespace {

using text::is_digit;
using text::is_name_char;

bool is_buffer_kind(std::string_view w) {
  return w == "input" || w == "output" || w == "temp" || w == "extern" || w == "view";
}

class ProgramParser : public ir::TextParser {
 public:
  explicit ProgramParser(std::string_view text) : TextParser(text, "%b", "a buffer") {}

  Program parse() {
    Program p;
    program_ = &p;
    expect_word("program", "at the start of a loop program");
    expect('@', "before the program's name");
    p.name = peek() == '"' ? string_literal() : name("program name");
    expect('{', "to open the program's body");
    while (peek_word("symbol")) symbol();
    for (;;) {
      std::string_view w = word();
      if (w == "buffer") {
        buffer();
      } else if (w == "kernel") {
        p.steps.push_back(Step{Step::Kind::Kernel, static_cast<int>(p.kernels.size())});
        p.kernels.push_back(kernel());
      } else if (w == "group") {
        group(p);
      } else if (w == "extern") {
        p.steps.push_back(Step{Step::Kind::Extern, static_cast<int>(p.externs.size())});
        p.externs.push_back(extern_call());
      } else if (w == "return") {
        break;
      } else {
        fail("expected 'buffer', 'kernel', 'group', 'extern' or 'return', found " + found());
      }
    }
    expect_word("return", "");
    expect('(', "after 'return'");
    if (!consume(')')) {
      do p.outputs.push_back(value_ref()); while (consume(','));
      expect(')', "after the returned buffers");
    }
    expect('}', "to close the program");
    skip_space();
    if (pos_ < text_.size()) fail("unexpected " + found() + " after the end of the program");
    // Graph input k is the Input buffer whose index is k (verify() reports gaps and repeats).
    for (const Buffer& b : p.buffers) {
      if (b.kind != Buffer::Kind::Input || b.index < 0 || b.index > kMaxId) continue;
      if (p.inputs.size() <= static_cast<size_t>(b.index)) p.inputs.resize(b.index + 1, -1);
      if (p.inputs[b.index] < 0) p.inputs[b.index] = b.id;
    }
    return p;
  }

 private:
  ir::DType dtype() {
    size_t at = (skip_space(), pos_);
    std::string dt = name("a dtype (f32, i64, ...)");
    auto parsed = ir::dtype_from_name(dt);
    if (!parsed) fail_at("unknown dtype '" + dt + "'", at);
    return *parsed;
  }

  int64_t integer(const char* what) {
    size_t at = (skip_space(), pos_);
    if (peek() != '-' && !is_digit(peek())) fail(std::string("expected ") + what + ", found " + found());
    ir::Literal l = number();
    if (!std::holds_alternative<int64_t>(l)) fail_at(std::string("expected ") + what + ", found a float", at);
    return std::get<int64_t>(l);
  }

  // `symbol s0 hint=16 range=[2, inf] divisor=1`: the rest of the line, in sym's text form.
  void symbol() {
    const size_t at = (skip_space(), pos_);
    size_t end = text_.find('\n', at);
    if (end == std::string_view::npos) end = text_.size();
    try {
      program_->symbols.push_back(sym::parse_symbol(text_.substr(at, end - at)));
    } catch (const sym::ExprParseError& e) {
      fail_at(e.reason, at + e.offset);
    }
    pos_ = end;
  }

  void buffer() {
    expect_word("buffer", "");
    size_t at = (skip_space(), pos_);
    Buffer b;
    b.id = value_ref();
    auto [it, inserted] = buffer_at_.emplace(b.id, at);
    if (!inserted) fail_at("%b" + std::to_string(b.id) + " is already defined (at " + location(it->second) + ")", at);
    expect(':', "after the buffer's name");
    b.dtype = dtype();
    expect('[', "after the dtype, to open the sizes");
    b.sizes = expr_list(']', "sizes");
    expect('{', "after the sizes, to open the strides");
    b.strides = expr_list('}', "strides");
    skip_space();
    size_t dev_at = pos_;
    while (pos_ < text_.size() && (is_name_char(text_[pos_]) || text_[pos_] == ':')) ++pos_;
    std::string_view dev = text_.substr(dev_at, pos_ - dev_at);
    pos_ = dev_at;
    if (!dev.empty() && !is_buffer_kind(dev)) {
      auto device = ir::device_from_string(dev);
      if (!device) fail_at("expected a buffer kind (input, output, temp, extern, view) or a device, found '" + std::string(dev) + "'", dev_at);
      b.device = *device;
      pos_ += dev.size();
      // A device is only ever followed by the kind; otherwise the word was a misspelled kind.
      if (!is_buffer_kind(word())) {
        pos_ = dev_at;
        fail("expected a buffer kind (input, output, temp, extern, view), found " + found());
      }
    }
    size_t kind_at = (skip_space(), pos_);
    std::string kind(word());
    pos_ += kind.size();
    if (kind == "input") {
      b.kind = Buffer::Kind::Input;
      b.index = static_cast<int>(bounded(integer("the graph input's position after 'input'"), kind_at));
    } else if (kind == "output") {
      b.kind = Buffer::Kind::Output;
      if (peek() == '-' || is_digit(peek())) b.index = static_cast<int>(bounded(integer("an output position"), kind_at));
    } else if (kind == "temp") {
      b.kind = Buffer::Kind::Temp;
    } else if (kind == "extern") {
      b.kind = Buffer::Kind::Extern;
    } else if (kind == "view") {
      b.kind = Buffer::Kind::View;
      b.base = value_ref();
      expect('+', "after the view's base, before its offset");
      b.offset = expr(true);
    } else {
      pos_ = kind_at;
      fail("expected a buffer kind (input, output, temp, extern, view), found " + found());
    }
    if (b.kind != Buffer::Kind::View && peek_word("offset")) {
      pos_ += 6;
      b.offset = expr(true);
    }
    std::vector<Buffer>& buffers = program_->buffers;
    if (buffers.size() <= static_cast<size_t>(b.id)) buffers.resize(b.id + 1);  // holes keep id -1
    buffers[b.id] = std::move(b);
  }

  int64_t bounded(int64_t v, size_t at) {
    if (v < -1 || v > kMaxId) fail_at("position " + std::to_string(v) + " is out of range", at);
    return v;
  }

  ExternCall extern_call() {
    expect_word("extern", "");
    ExternCall call;
    expect('(', "to open the extern call's results");
    if (!consume(')')) {
      do call.results.push_back(value_ref()); while (consume(','));
      expect(')', "after the extern call's results");
    }
    expect('=', "after the extern call's results");
    size_t at = (skip_space(), pos_);
    call.callable = string_literal();
    if (call.callable.empty()) fail_at("an extern call needs the callable's qualified name", at);
    call_args(call.args, call.kwargs);
    call.result_form = call.results.size() == 1 ? ir::Node::ResultForm::Single : ir::Node::ResultForm::None;
    if (peek_word("single") || peek_word("none") || peek_word("tuple") || peek_word("list")) {
      std::string form(word());
      pos_ += form.size();
      call.result_form = form == "single"  ? ir::Node::ResultForm::Single
                         : form == "none"  ? ir::Node::ResultForm::None
                         : form == "tuple" ? ir::Node::ResultForm::Tuple
                                           : ir::Node::ResultForm::List;
    }
    if (peek_word("mutates")) {
      pos_ += 7;
      call.mutates_first_arg = true;
    }
    return call;
  }

  // `[i0 < 4, i1 < s0]`, absent when there are no ranges; variables numbered in order.
  std::vector<sym::Expr> ranges(char var) {
    std::vector<sym::Expr> out;
    if (!consume('[')) return out;
    if (consume(']')) return out;
    do {
      std::string expected = std::string(1, var) + std::to_string(out.size());
      if (!peek_word(expected)) fail("expected the index variable " + expected + " (numbered in order), found " + found());
      pos_ += expected.size();
      expect('<', "after " + expected);
      out.push_back(expr());
    } while (consume(','));
    expect(']', "after the ranges");
    return out;
  }

  // group @g0 { kernel ... kernel ... }: its kernels are steps, in order (loop_ir/group.h).
  void group(Program& p) {
    expect_word("group", "");
    Group g;
    expect('@', "before the group's name");
    g.name = name("a group name");
    expect('{', "to open the group");
    while (peek_word("kernel")) {
      g.kernels.push_back(static_cast<int>(p.kernels.size()));
      p.steps.push_back(Step{Step::Kind::Kernel, static_cast<int>(p.kernels.size())});
      p.kernels.push_back(kernel());
    }
    expect('}', "to close the group (it holds kernels)");
    p.groups.push_back(std::move(g));
  }

  Kernel kernel() {
    expect_word("kernel", "");
    Kernel k;
    expect('@', "before the kernel's name");
    k.name = name("a kernel name");
    k.ranges = ranges('i');
    expect('{', "to open the kernel's body");
    node_at_.clear();
    node_dtype_.clear();
    while (peek_word("loop")) {
      pos_ += 4;
      Loop loop;
      loop.ranges = ranges('r');
      k.loops.push_back(std::move(loop));
      expect('{', "to open the loop's body");
      while (!consume('}')) k.nodes.push_back(node(static_cast<int>(k.loops.size()) - 1, static_cast<NodeId>(k.nodes.size())));
    }
    expect('}', "to close the kernel (its statements are loops)");
    return k;
  }

  NodeId node_ref() {
    if (peek() != '%' || text_.compare(pos_, 2, "%t") != 0) fail("expected a node (%tN), found " + found());
    size_t start = pos_;
    pos_ += 2;
    size_t end = pos_;
    while (end < text_.size() && is_digit(text_[end])) ++end;
    if (end == pos_ || end - pos_ > 8) fail_at("expected a node id from %t0 to %t" + std::to_string(kMaxId) + " after '%t'", start);
    int64_t id = std::stoll(std::string(text_.substr(pos_, end - pos_)));
    if (id > kMaxId) fail_at("expected a node id from %t0 to %t" + std::to_string(kMaxId) + " after '%t'", start);
    pos_ = end;
    return static_cast<NodeId>(id);
  }

  std::vector<sym::Expr> access(Node& n) {
    n.buffer = value_ref();
    expect('[', "after the buffer, to open the index");
    return expr_list(']', "index");
  }

  Scalar scalar() {
    if (peek_word("true") || peek_word("false")) {
      bool b = peek_word("true");
      pos_ += b ? 4 : 5;
      return b;
    }
    if (peek() == '-' || is_digit(peek()) || peek_word("inf") || peek_word("nan")) {
      ir::Literal l = number();
      if (std::holds_alternative<int64_t>(l)) return std::get<int64_t>(l);
      return std::get<double>(l);
    }
    fail("expected a constant (a number, inf, nan, true or false), found " + found());
  }

  // Stores define no value and print no id, but every node has one: a store's is its position in
  // the kernel, which is what every node's id is when ids are dense (so `store` after %t4 takes
  // id 5, and the next value is %t6).
  Node node(int loop, NodeId position) {
    Node n;
    n.loop = loop;
    size_t at = (skip_space(), pos_);
    if (peek_word("store")) {
      pos_ += 5;
      n.op = ScalarOp::Store;
      n.index = access(n);
      skip_space();
      if (peek() == '+') {
        ++pos_;
        n.accumulate = true;
      }
      expect('=', "after the store's destination");
      n.operands.push_back(node_ref());
      // A store's dtype is its operand's; an undefined operand is verify()'s to report.
      auto d = node_dtype_.find(n.operands[0]);
      if (d != node_dtype_.end()) n.dtype = d->second;
      n.id = position;
      define(n.id, at, true);
      return n;
    }
    n.id = node_ref();
    define(n.id, at, false);
    expect('=', "after the node's name");
    size_t op_at = (skip_space(), pos_);
    std::string op_name = name("an op name");
    auto op = op_from_name(op_name);
    if (!op) fail_at("unknown op '" + op_name + "'", op_at);
    if (*op == ScalarOp::Store) fail_at("a store defines no value: write 'store %bN[...] = %tM'", at);
    n.op = *op;
    if (n.op == ScalarOp::Load) {
      n.index = access(n);
      if (peek_word("if")) {
        pos_ += 2;
        n.operands.push_back(node_ref());
        expect_word("else", "after the load's mask");
        n.constant = scalar();
      }
    } else if (n.op == ScalarOp::Constant) {
      n.constant = scalar();
    } else if (n.op == ScalarOp::Index) {
      n.index.push_back(expr());
    } else if (n.op == ScalarOp::CheckIndex) {
      n.operands.push_back(node_ref());
      expect('<', "after check_index's operand, before its bound");
      n.bound = expr();
    } else if (peek() != ':') {
      do n.operands.push_back(node_ref()); while (consume(','));
    }
    expect(':', "before the node's dtype");
    n.dtype = dtype();
    node_dtype_[n.id] = n.dtype;
    return n;
  }

  void define(NodeId id, size_t at, bool store) {
    auto [it, inserted] = node_at_.emplace(id, std::pair<size_t, bool>{at, store});
    if (inserted) return;
    auto [where, was_store] = it->second;
    if (was_store)
      fail_at("%t" + std::to_string(id) + " is the id of the store at " + location(where) +
                  " (a store's id is its position in the kernel; number the next value after it)", at);
    if (store)
      fail_at("this store's id is its position, " + std::to_string(id) + ", but %t" + std::to_string(id) +
                  " is already defined (at " + location(where) + ")", at);
    fail_at("%t" + std::to_string(id) + " is already defined (at " + location(where) + ")", at);
  }

  Program* program_ = nullptr;
  std::map<BufferId, size_t> buffer_at_;
  std::map<NodeId, std::pair<size_t, bool>> node_at_;  // where defined; a store?
  std::map<NodeId, ir::DType> node_dtype_;
};

}  // namespace

Program parse(std::string_view text) {
  try {
    return ProgramParser(text).parse();
  } catch (const ir::ParseError& e) {
    throw ParseError(e.what());
  }
}

}  // namespace ember::loop_ir
