// C++ spellings the emitter shares: dtypes, literals, index expressions, and the affine analysis
// that decides whether an access is contiguous along a loop variable.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>

#include "codegen/cpp/emit_internal.h"

namespace ember::codegen::detail {

const char* storage_type(DType dt) {
  const char* t = dtype_spelling(dt).storage;
  if (!t) throw CodegenError(std::string("C++ code generation does not support dtype ") + ir::dtype_name(dt));
  return t;
}

const char* value_type(DType dt) {
  storage_type(dt);  // throws for dtypes without a spelling
  return dtype_spelling(dt).value;
}

ValueKind value_kind(DType dt) { return dtype_spelling(dt).kind; }

bool is_integer(DType dt) { return value_kind(dt) == ValueKind::Int; }

void require_supported(DType dt, const std::string& what) {
  if (value_kind(dt) == ValueKind::None)
    throw CodegenError(what + ": C++ code generation does not support dtype " + ir::dtype_name(dt));
}

std::string round_to_storage(DType dt, const std::string& x) {
  const DTypeSpelling& s = dtype_spelling(dt);
  return expand(s.load, {expand(s.store, {x})});
}

namespace {

// `e` with `var // D` replaced by a fresh symbol (fixed within an aligned chunk) and `var % D` by
// `var` (the same within a chunk up to a fixed term), for D a multiple of kMaxVectorLanes; nullopt
// when `var` occurs anywhere else but bare.
std::optional<sym::Expr> within_chunk(const sym::Expr& e, const std::string& var) {
  using sym::ExprKind;
  const std::vector<sym::Expr>& ops = e.operands();
  if ((e.kind() == ExprKind::FloorDiv || e.kind() == ExprKind::Mod) && ops[0].kind() == ExprKind::Symbol &&
      ops[0].symbol_name() == var) {
    if (!ops[1].is_constant() || ops[1].constant() % kMaxVectorLanes != 0) return std::nullopt;
    return e.kind() == ExprKind::Mod ? ops[0] : sym::Expr::symbol(var + "_chunk");
  }
  if (e.kind() == ExprKind::Constant || e.kind() == ExprKind::Symbol) return e;
  std::vector<sym::Expr> parts;
  for (const sym::Expr& o : ops) {
    std::optional<sym::Expr> p = within_chunk(o, var);
    if (!p) return std::nullopt;
    parts.push_back(*p);
  }
  sym::Expr out = parts[0];
  for (size_t k = 1; k < parts.size(); ++k) {
    switch (e.kind()) {
      case ExprKind::Add: out = out + parts[k]; break;
      case ExprKind::Mul: out = out * parts[k]; break;
      case ExprKind::FloorDiv: out = floordiv(out, parts[k]); break;
      case ExprKind::Mod: out = mod(out, parts[k]); break;
      case ExprKind::Max: out = max(out, parts[k]); break;
      case ExprKind::Min: out = min(out, parts[k]); break;
      case ExprKind::Constant:
      case ExprKind::Symbol: break;
    }
  }
  return out;
}

// Shortest text that reads back as the same value, with a decimal point so C++ sees a floating
// literal.
std::string float_text(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string integer_text(int64_t v) {
  if (v == std::numeric_limits<int64_t>::min()) return "(-INT64_C(9223372036854775807) - 1)";
  if (v > INT32_MAX || v < INT32_MIN) return "INT64_C(" + std::to_string(v) + ")";
  return std::to_string(v);
}

double as_double(const loop_ir::Scalar& value) {
  if (const bool* b = std::get_if<bool>(&value)) return *b ? 1.0 : 0.0;
  if (const int64_t* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  return std::get<double>(value);
}

int64_t as_int(const loop_ir::Scalar& value) {
  if (const bool* b = std::get_if<bool>(&value)) return *b ? 1 : 0;
  if (const int64_t* i = std::get_if<int64_t>(&value)) return *i;
  return static_cast<int64_t>(std::get<double>(value));
}

std::string float_literal(double v, bool single) {
  const char* t = single ? "float" : "double";
  if (std::isnan(v)) return std::string("std::numeric_limits<") + t + ">::quiet_NaN()";
  if (std::isinf(v)) return std::string(v < 0 ? "-" : "") + "std::numeric_limits<" + t + ">::infinity()";
  if (single) return float_text(static_cast<float>(v), 9) + "f";
  return float_text(v, 17);
}

}  // namespace

std::string literal(const loop_ir::Scalar& value, DType dt) {
  switch (value_kind(dt)) {
    case ValueKind::Bool: return as_double(value) != 0.0 ? "true" : "false";
    case ValueKind::Int: return integer_text(as_int(value));
    case ValueKind::F32: return round_to_storage(dt, float_literal(as_double(value), true));
    case ValueKind::F64: return float_literal(as_double(value), false);
    case ValueKind::None: break;
  }
  throw CodegenError(std::string("no C++ literal for dtype ") + ir::dtype_name(dt));
}

int64_t constant_of(const sym::Expr& e, const std::string& what) {
  if (!e.is_constant())
    throw CodegenError(what + " is symbolic (" + e.str() + "): C++ code generation needs constant sizes");
  return e.constant();
}

bool is_shape_symbol(const Program& program, const std::string& name) {
  for (const sym::SymbolInfo& s : program.symbols)
    if (s.name == name) return true;
  return false;
}

int64_t hint_of(const Program& program, const sym::Expr& e, const std::string& what) {
  if (e.is_constant()) return e.constant();
  std::map<std::string, int64_t> hints;
  for (const sym::SymbolInfo& s : program.symbols) hints.emplace(s.name, s.hint);
  try {
    return sym::evaluate(e, hints);
  } catch (const std::invalid_argument&) {
    throw CodegenError(what + " (" + e.str() + ") is symbolic over a symbol the program does not declare");
  }
}

void collect_shape_symbols(const Program& program, const sym::Expr& e, std::set<std::string>& names) {
  if (e.kind() == sym::ExprKind::Symbol && is_shape_symbol(program, e.symbol_name())) names.insert(e.symbol_name());
  for (const sym::Expr& o : e.operands()) collect_shape_symbols(program, o, names);
}

namespace {

bool is_loop_variable(const std::string& name) {
  if (name.size() < 2 || (name[0] != 'i' && name[0] != 'r')) return false;
  for (size_t k = 1; k < name.size(); ++k)
    if (name[k] < '0' || name[k] > '9') return false;
  return true;
}

bool names_shape_symbol(const IndexSymbols& symbols, const std::string& name) {
  return symbols.program != nullptr && is_shape_symbol(*symbols.program, name);
}

// True when `e` is certainly >= 0: loop variables and sizes are, and so are values a check_index
// passed.
bool non_negative(const sym::Expr& e, const IndexSymbols& symbols) {
  switch (e.kind()) {
    case sym::ExprKind::Constant: return e.constant() >= 0;
    case sym::ExprKind::Symbol: {
      if (is_loop_variable(e.symbol_name()) || names_shape_symbol(symbols, e.symbol_name())) return true;
      const Node* n = symbols.node_of ? symbols.node_of(e.symbol_name()) : nullptr;
      return n != nullptr && n->op == ScalarOp::CheckIndex;
    }
    case sym::ExprKind::Add:
    case sym::ExprKind::Mul:
    case sym::ExprKind::Max:
    case sym::ExprKind::Min:
      for (const sym::Expr& o : e.operands())
        if (!non_negative(o, symbols)) return false;
      return true;
    case sym::ExprKind::FloorDiv:
    case sym::ExprKind::Mod:
      return non_negative(e.operands()[0], symbols) && e.operands()[1].is_constant() &&
             e.operands()[1].constant() > 0;
  }
  return false;
}

bool is_negative_constant(const sym::Expr& e) { return e.is_constant() && e.constant() < 0; }

std::string print_index(const sym::Expr& e, const IndexSymbols& symbols);

// An operand of * / %: parenthesized unless it is a symbol or a non-negative constant, since C's
// * / % associate left to right (`5*(x / 5)` is not `5*x / 5`).
std::string operand(const sym::Expr& e, const IndexSymbols& symbols) {
  std::string s = print_index(e, symbols);
  bool atom = e.kind() == sym::ExprKind::Symbol || (e.is_constant() && !is_negative_constant(e)) ||
              e.kind() == sym::ExprKind::Max || e.kind() == sym::ExprKind::Min;
  return atom ? s : "(" + s + ")";
}

// A term of a sum, with its sign pulled out so sums print as `a - 4*b`, not `a + -4*b`.
std::string unsigned_term(const sym::Expr& term, const IndexSymbols& symbols, bool* negative) {
  *negative = false;
  if (is_negative_constant(term)) {
    *negative = true;
    return integer_text(-term.constant());
  }
  if (term.kind() == sym::ExprKind::Mul && is_negative_constant(term.operands()[0])) {
    *negative = true;
    int64_t c = -term.operands()[0].constant();
    std::string rest;
    for (size_t k = 1; k < term.operands().size(); ++k)
      rest += (rest.empty() ? "" : "*") + operand(term.operands()[k], symbols);
    return c == 1 ? rest : integer_text(c) + "*" + rest;
  }
  return print_index(term, symbols);
}

std::string print_index(const sym::Expr& e, const IndexSymbols& symbols) {
  switch (e.kind()) {
    case sym::ExprKind::Constant: return integer_text(e.constant());
    case sym::ExprKind::Symbol: {
      const std::string& name = e.symbol_name();
      if (is_loop_variable(name) || names_shape_symbol(symbols, name)) return name;
      const Node* n = symbols.node_of ? symbols.node_of(name) : nullptr;
      if (n == nullptr)
        throw CodegenError("index symbol '" + name +
                           "' is neither a loop variable, a shape symbol nor an integer node");
      if (n->dtype == DType::Int64) return name;
      return "static_cast<int64_t>(" + name + ")";
    }
    case sym::ExprKind::Add: {
      std::string s;
      for (const sym::Expr& term : e.operands()) {
        bool negative = false;
        std::string t = unsigned_term(term, symbols, &negative);
        if (s.empty()) {
          s = negative ? "-" + t : t;
        } else {
          s += (negative ? " - " : " + ") + t;
        }
      }
      return s;
    }
    case sym::ExprKind::Mul: {
      std::string s;
      for (const sym::Expr& f : e.operands()) s += (s.empty() ? "" : "*") + operand(f, symbols);
      return s;
    }
    case sym::ExprKind::FloorDiv:
    case sym::ExprKind::Mod: {
      const sym::Expr& a = e.operands()[0];
      const sym::Expr& b = e.operands()[1];
      bool floor_div = e.kind() == sym::ExprKind::FloorDiv;
      // C's / and % round toward zero; they agree with Python's when both sides are >= 0.
      if (non_negative(a, symbols) && b.is_constant() && b.constant() > 0)
        return operand(a, symbols) + (floor_div ? " / " : " % ") + operand(b, symbols);
      return std::string(floor_div ? "ember::rt::floordiv_int" : "ember::rt::mod_int") + "<int64_t>(" +
             print_index(a, symbols) + ", " + print_index(b, symbols) + ")";
    }
    case sym::ExprKind::Max:
    case sym::ExprKind::Min: {
      std::string s = e.kind() == sym::ExprKind::Max ? "std::max<int64_t>(" : "std::min<int64_t>(";
      // Max and Min may hold more than two operands; nest them.
      const auto& ops = e.operands();
      std::string acc = print_index(ops[0], symbols);
      for (size_t k = 1; k < ops.size(); ++k) acc = s + acc + ", " + print_index(ops[k], symbols) + ")";
      return acc;
    }
  }
  throw CodegenError("unknown index expression kind");
}

}  // namespace

std::string c_index(const sym::Expr& e, const IndexSymbols& symbols) { return print_index(e, symbols); }

bool chunk_contiguous(const sym::Expr& offset, const std::string& var) {
  const std::optional<sym::Expr> w = within_chunk(offset, var);
  return w && linear_coefficient(*w, var) == std::optional<int64_t>(1);
}

bool chunk_uniform(const sym::Expr& offset, const std::string& var) {
  const std::optional<sym::Expr> w = within_chunk(offset, var);
  return w && linear_coefficient(*w, var) == std::optional<int64_t>(0);
}

bool reads_node_values(const sym::Expr& e) {
  if (e.kind() == sym::ExprKind::Symbol) return !e.symbol_name().empty() && e.symbol_name()[0] == 't';
  for (const sym::Expr& o : e.operands())
    if (reads_node_values(o)) return true;
  return false;
}

}  // namespace ember::codegen::detail
