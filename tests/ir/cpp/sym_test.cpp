// C++ checks of the symbolic engine (src/sym) beyond what the Python bindings reach: evaluate,
// substitute, free_symbols, the symbol text form's errors, RelProgram's overflow handling. Built
// and run by test_core_cpp.py. `sym_test --bench` instead times RelProgram (docs/ir.md quotes it).
#include <ctime>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>

#include "sym/expr.h"
#include "sym/rel_program.h"
#include "sym/relation.h"
#include "sym/symbols.h"
#include "check.h"

using namespace ember;
using sym::Expr;

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

static void check_rel_program() {
  std::vector<sym::Rel> rels = {sym::parse_rel("s0 <= 4096"), sym::parse_rel("s0*s1 < 100"), sym::parse_rel("s1 // s0 == 0")};
  sym::RelProgram program(rels, {"s0", "s1"});
  CHECK(program.relations() == 3);
  int64_t ok[] = {8, 4}, big[] = {5000, 4}, overflow[] = {8, int64_t{1} << 62}, zero[] = {0, 4};
  CHECK(program.holds(ok));
  CHECK(program.first_failure(big) == std::optional<size_t>(0));
  CHECK(program.first_failure(overflow) == std::optional<size_t>(1));  // s0*s1 leaves int64
  CHECK(program.first_failure(zero) == std::optional<size_t>(2));      // s1 // 0
  CHECK(throws<std::invalid_argument>([&] { sym::RelProgram(rels, {"s0"}); }, "s1 is not among"));
}

// The guards of a typical dynamic graph: ranges, divisibility, and a size relation between inputs.
static int bench() {
  std::vector<sym::Rel> rels;
  for (const char* r : {"2 <= s0", "s0 <= 4096", "2 <= s1", "s1 <= 1024", "s0 % 16 == 0", "64*s1 == s2",
                        "s0*s1 <= 1048576", "max(s0, s1) < 8192"})
    rels.push_back(sym::parse_rel(r));
  sym::RelProgram program(rels, {"s0", "s1", "s2"});
  int64_t values[] = {512, 7, 448};
  const int iterations = 2000000;
  size_t held = 0;
  // CPU time, not wall time: the test machines are shared, and preemption is not the program's cost.
  std::clock_t start = std::clock();
  for (int i = 0; i < iterations; ++i) {
    values[1] = 7 + (i & 1);  // defeat hoisting; both values pass
    values[2] = 64 * values[1];
    held += program.holds(values);
  }
  double ns = 1e9 * static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
  std::printf("RelProgram: %zu relations, %zu instructions: %.1f ns per run, %.2f ns per relation (%zu held)\n",
              program.relations(), program.instructions(), ns / iterations, ns / iterations / rels.size(), held);

  // statically_known, the compile-time query, over the same relations with three symbols' facts.
  sym::Symbols symbols = {{"s0", 512, 16, 4096, 16}, {"s1", 7, 2, 1024, 1}, {"s2", 448, 2, 65536, 1}};
  const int queries = 20000;
  size_t decided = 0;
  start = std::clock();
  for (int i = 0; i < queries; ++i) decided += sym::statically_known(rels[i % rels.size()], symbols).has_value();
  ns = 1e9 * static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
  std::printf("statically_known: %.0f ns per query (%zu of %d decided)\n", ns / queries, decided, queries);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--bench") return bench();
  check_evaluate();
  check_substitute();
  check_free_symbols();
  check_symbol_text();
  check_rel_program();
  return finish();
}
