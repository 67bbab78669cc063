// C++ checks of the symbolic engine (src/sym) beyond what the Python bindings reach: evaluate,
// substitute, free_symbols, the symbol text form's errors. Built and run by test_core_cpp.py.
#include <cstdio>
#include <functional>
#include <limits>
#include <string>

#include "sym/expr.h"
#include "sym/symbols.h"

using namespace ember;
using sym::Expr;

static int failures = 0;
#define CHECK(cond)                                                 \
  do {                                                              \
    if (!(cond)) {                                                  \
      std::printf("FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                   \
    }                                                               \
  } while (0)
#define CHECK_EQ_STR(a, b)                                                                    \
  do {                                                                                        \
    std::string x_ = (a), y_ = (b);                                                           \
    if (x_ != y_) {                                                                           \
      std::printf("FAILED %s:%d: %s\n  got:  %s\n  want: %s\n", __FILE__, __LINE__, #a, x_.c_str(), y_.c_str()); \
      ++failures;                                                                             \
    }                                                                                         \
  } while (0)

template <typename E>
static bool throws(const std::function<void()>& f, const std::string& words) {
  try {
    f();
  } catch (const E& e) {
    if (std::string(e.what()).find(words) != std::string::npos) return true;
    std::printf("  message was: %s\n", e.what());
    return false;
  }
  return false;
}

static Expr E(const char* text) { return sym::parse_expr(text); }

static void check_evaluate() {
  std::map<std::string, int64_t> v = {{"s0", 7}, {"s1", -3}};
  CHECK(sym::evaluate(E("2*s0 + s1"), v) == 11);
  CHECK(sym::evaluate(E("s0 // s1"), v) == -3);   // Python floor semantics
  CHECK(sym::evaluate(E("s0 % s1"), v) == -2);
  CHECK(sym::evaluate(E("max(s0, s1) - min(s0, s1)"), v) == 10);
  CHECK(sym::evaluate(E("42"), std::map<std::string, int64_t>{}) == 42);
  auto lookup = [](const std::string& name) -> std::optional<int64_t> {
    if (name == "s0") return 4;
    return std::nullopt;
  };
  CHECK(sym::evaluate(E("s0*s0"), lookup) == 16);
  CHECK(throws<std::invalid_argument>([&] { sym::evaluate(E("s0 + s2"), lookup); }, "s2 has no value"));
  CHECK(throws<std::overflow_error>([&] { sym::evaluate(E("s0*s0*s0"), {{"s0", int64_t{1} << 32}}); }, "overflow"));
  CHECK(throws<std::overflow_error>([&] { sym::evaluate(E("s0 // -1"), {{"s0", std::numeric_limits<int64_t>::min()}}); }, "overflow"));
  CHECK(throws<std::domain_error>([&] { sym::evaluate(E("7 // s0"), {{"s0", 0}}); }, "floordiv by zero"));
  CHECK(throws<std::domain_error>([&] { sym::evaluate(E("7 % s0"), {{"s0", 0}}); }, "mod by zero"));
}

static void check_substitute() {
  // Simultaneous, and the result is canonical again.
  CHECK_EQ_STR(sym::substitute(E("8*i0 + i1"), {{"i0", E("i1")}, {"i1", E("i0")}}).str(), "i0 + 8*i1");
  CHECK_EQ_STR(sym::substitute(E("(4*i0 + i1) // 2"), {{"i0", E("r0 + 1")}}).str(), "(i1 + 4*r0 + 4) // 2");
  CHECK_EQ_STR(sym::substitute(E("max(i0, s0) % 3"), {{"s0", E("2")}, {"i0", E("5")}}).str(), "2");
  CHECK_EQ_STR(sym::substitute(E("64*s1 + s0"), {{"s9", E("1")}}).str(), "s0 + 64*s1");
  CHECK(throws<std::invalid_argument>([] { sym::substitute(E("i0"), {{"i0", E("1")}, {"i0", E("2")}}); }, "replaced twice"));
  CHECK(throws<std::domain_error>([] { sym::substitute(E("7 // s0"), {{"s0", E("0")}}); }, "by zero"));
}

static void check_free_symbols() {
  std::set<std::string> names;
  sym::free_symbols(E("max(s0, 2*s1) // (s2 + 1) + 3"), names);
  CHECK((names == std::set<std::string>{"s0", "s1", "s2"}));
  sym::free_symbols(E("s3"), names);
  CHECK(names.size() == 4);
  std::set<std::string> none;
  sym::free_symbols(E("5"), none);
  CHECK(none.empty());
}

static void check_symbol_text() {
  sym::SymbolInfo s{"s0", 16, 2, std::numeric_limits<int64_t>::max(), 1};
  CHECK_EQ_STR(sym::print_symbol(s), "symbol s0 hint=16");
  CHECK(sym::parse_symbol("symbol s0 hint=16") == s);
  CHECK(sym::parse_symbol("  symbol s0 hint=16 range=[2, inf] divisor=1  ") == s);
  sym::SymbolInfo t{"s1", 64, 16, 4096, 16};
  CHECK_EQ_STR(sym::print_symbol(t), "symbol s1 hint=64 range=[16, 4096] divisor=16");
  CHECK(sym::parse_symbol(sym::print_symbol(t)) == t);
  sym::SymbolInfo u{"s2", 8, 2, std::numeric_limits<int64_t>::max(), 4};
  CHECK_EQ_STR(sym::print_symbol(u), "symbol s2 hint=8 divisor=4");
  CHECK(sym::parse_symbol(sym::print_symbol(u)) == u);
  sym::SymbolInfo w{"s3", 5, 0, 9, 1};
  CHECK_EQ_STR(sym::print_symbol(w), "symbol s3 hint=5 range=[0, 9]");
  CHECK(sym::parse_symbol(sym::print_symbol(w)) == w);

  struct Bad {
    const char* text;
    size_t column;
    const char* words;
  };
  const Bad bad[] = {
      {"symbl s0 hint=2", 1, "expected 'symbol'"},
      {"symbol 0s hint=2", 8, "expected a symbol name"},
      {"symbol s0", 10, "expected 'hint='"},
      {"symbol s0 hint=x", 16, "expected an integer"},
      {"symbol s0 hint=99999999999999999999", 16, "does not fit in int64"},
      {"symbol s0 hint=4 range=[2 inf]", 27, "expected ','"},
      {"symbol s0 hint=4 range=[8, 2]", 18, "is empty"},
      {"symbol s0 hint=4 range=[inf, inf]", 25, "expected an integer, found 'i'"},
      {"symbol s0 hint=4 divisor=0", 26, "at least 1"},
      {"symbol s0 hint=4 divisor=2 range=[2, 8]", 28, "unexpected 'r'"},
      {"symbol s0 hint=1", 16, "outside range=[2, inf]"},
      {"symbol s0 hint=6 divisor=4", 16, "not a multiple of divisor=4"},
      {"symbol s0 hint=6x", 17, "after an integer"},
  };
  for (const Bad& b : bad) {
    try {
      sym::parse_symbol(b.text);
      std::printf("FAILED: '%s' parsed\n", b.text);
      ++failures;
    } catch (const sym::ExprParseError& e) {
      std::string want = "column " + std::to_string(b.column) + ": ";
      if (std::string(e.what()).rfind(want, 0) != 0 || std::string(e.what()).find(b.words) == std::string::npos) {
        std::printf("FAILED: '%s': %s (want %s... %s)\n", b.text, e.what(), want.c_str(), b.words);
        ++failures;
      }
    }
  }
  CHECK(throws<std::runtime_error>([] { throw sym::SymbolicUnsupported("lower: conv2d with a symbolic spatial size"); }, "conv2d"));
}

int main() {
  check_evaluate();
  check_substitute();
  check_free_symbols();
  check_symbol_text();
  if (failures) {
    std::printf("%d checks failed\n", failures);
    return 1;
  }
  std::printf("all checks passed\n");
  return 0;
}
