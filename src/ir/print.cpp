// The graph IR printer: the text form of docs/ir.md, which parse.cpp reads back to an equal graph.
//
// Output depends only on the graph (value names are ids, kwargs keep their order), so printing
// is deterministic. Literals are spelled so that they parse back to the same variant alternative
// and the same bits: a float always shows '.', 'e', inf or nan, and uses the shortest digits that
// round-trip (std::to_chars); strings escape quotes, backslashes, control bytes and bytes that
// are not well-formed UTF-8, so the text is always valid UTF-8.
#include <charconv>
#include <cmath>
#include <cstdio>

#include "ir/graph.h"
#include "ir/text_form.h"

namespace ember::ir {

std::string format_float(double v) {
  if (std::isnan(v)) return std::signbit(v) ? "-nan" : "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) throw std::logic_error("format_float: to_chars failed");
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

namespace {

// The length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, no surrogates)
// starting at s[i], or 0 if none does.
size_t utf8_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  auto cont = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) { return byte(k) >= lo && byte(k) <= hi; };
  unsigned b = byte(0);
  if (b >= 0xC2 && b <= 0xDF) return cont(1) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    bool second = b == 0xE0 ? cont(1, 0xA0) : b == 0xED ? cont(1, 0x80, 0x9F) : cont(1);
    return second && cont(2) ? 3 : 0;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    bool second = b == 0xF0 ? cont(1, 0x90) : b == 0xF4 ? cont(1, 0x80, 0x8F) : cont(1);
    return second && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

// Printable ASCII and well-formed UTF-8 stay as they are (the text stays valid UTF-8); every
// other byte is escaped.
std::string quote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else if (size_t n = u >= 0x80 ? utf8_length(s, i) : 0) {
      out.append(s.substr(i, n));
      i += n - 1;
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", u);
      out += esc;
    }
  }
  return out + "\"";
}

bool is_identifier(std::string_view s) {
  auto start = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (s.empty() || !start(s[0])) return false;
  for (char c : s)
    if (!start(c) && !(c >= '0' && c <= '9')) return false;
  return true;
}

namespace {

std::string optional_int(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "None"; }

struct LiteralPrinter {
  std::string operator()(NoneLiteral) const { return "None"; }
  std::string operator()(bool b) const { return b ? "True" : "False"; }
  std::string operator()(int64_t i) const { return std::to_string(i); }
  std::string operator()(double d) const { return format_float(d); }
  std::string operator()(const std::string& s) const { return quote(s); }
  std::string operator()(DType dt) const { return std::string("torch.") + dtype_torch_name(dt); }
  std::string operator()(const Device& d) const { return "device(" + quote(d.str()) + ")"; }
  std::string operator()(const Slice& s) const {
    return "slice(" + optional_int(s.start) + ", " + optional_int(s.stop) + ", " + optional_int(s.step) + ")";
  }
  std::string operator()(Ellipsis) const { return "..."; }
  std::string operator()(const sym::Expr& e) const { return "sym(" + e.str() + ")"; }
};

}  // namespace

std::string print_arg(const Arg& arg, std::string_view value_prefix) {
  auto items = [&] {
    std::string out;
    for (size_t i = 0; i < arg.items.size(); ++i) out += (i ? ", " : "") + print_arg(arg.items[i], value_prefix);
    return out;
  };
  switch (arg.kind) {
    case Arg::Kind::Value: return std::string(value_prefix) + std::to_string(arg.value);
    case Arg::Kind::Literal: return std::visit(LiteralPrinter{}, arg.literal);
    case Arg::Kind::List: return "[" + items() + "]";
    case Arg::Kind::Tuple: return "(" + items() + (arg.items.size() == 1 ? ",)" : ")");
  }
  throw std::logic_error("print_arg: corrupt Arg::Kind");
}

namespace {

std::string value_ids(const std::vector<ValueId>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", %" : "%") + std::to_string(ids[i]);
  return out;
}

std::string print_node(const Graph& graph, const Node& node) {
  std::string out = "  ";
  if (!node.results.empty()) out += value_ids(node.results) + " = ";
  out += node.op == Op::TorchCall ? "torch " + quote(node.target) : std::string(op_info(node.op).name);
  out += "(";
  bool first = true;
  for (const Arg& a : node.args) {
    out += (first ? "" : ", ") + print_arg(a);
    first = false;
  }
  for (const auto& [name, a] : node.kwargs) {
    out += (first ? "" : ", ") + name + "=" + print_arg(a);
    first = false;
  }
  out += ")";
  auto types = [&] {
    std::string t;
    for (size_t i = 0; i < node.results.size(); ++i) t += (i ? ", " : "") + graph.value(node.results[i]).type.str();
    return t;
  };
  switch (node.result_form) {
    case Node::ResultForm::Single:
      // A malformed single-result node (verify() reports it) prints its results as a tuple, so the
      // text still says what the graph holds.
      if (node.results.size() == 1) return out + " : " + types();
      return out + " : tuple(" + types() + ")";
    case Node::ResultForm::Tuple: return out + " : tuple(" + types() + ")";
    case Node::ResultForm::List: return out + " : list(" + types() + ")";
    case Node::ResultForm::None: return out;
  }
  throw std::logic_error("print_node: corrupt ResultForm");
}

}  // namespace

std::string print(const Graph& graph) {
  std::string out;
  for (const sym::SymbolInfo& s : graph.symbols) out += sym::print_symbol(s) + "\n";
  out += "graph @" + (is_identifier(graph.name()) ? graph.name() : quote(graph.name())) + "(";
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const GraphInput& in = graph.inputs()[i];
    out += (i ? ", %" : "%") + std::to_string(in.value) + ": " + graph.value(in.value).type.str() + " " + quote(in.source);
  }
  out += ") {\n";
  for (const Node& node : graph.nodes()) out += print_node(graph, node) + "\n";
  out += "  return (" + value_ids(graph.outputs()) + ")\n}\n";
  return out;
}

}  // namespace ember::ir
