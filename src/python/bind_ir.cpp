// ember._C.ir: the graph IR for Python (tests, ember.explain). Thin: a Graph crosses as an opaque
// handle; parse/print/verify are the C++ functions, and simplify_expr shows the canonical form of
// a symbolic expression. ParseError is a ValueError; bad expression text raises ValueError.
// The sym_* functions expose the symbolic engine (src/sym) to tests, over text.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "ir/graph.h"
#include "sym/expr.h"
#include "sym/range.h"
#include "sym/rel_program.h"
#include "sym/relation.h"
#include "sym/symbols.h"

namespace nb = nanobind;

namespace ember::python {
namespace {
sym::Symbols parse_symbols(const std::vector<std::string>& lines) {
  sym::Symbols out;
  for (const std::string& line : lines) out.push_back(sym::parse_symbol(line));
  return out;
}
}  // namespace

void bind_ir(nb::module_& m) {
  nb::class_<ir::Graph>(m, "Graph", "An opaque graph IR handle; see print() for its contents.");
  nb::exception<ir::ParseError>(m, "ParseError", PyExc_ValueError);
  m.def("parse", [](std::string_view text) { return ir::parse(text); }, nb::arg("text"),
        "Parses graph IR text; raises ParseError naming line:column.");
  m.def("print", [](const ir::Graph& g) { return ir::print(g); }, nb::arg("graph"), "The graph's text form.");
  m.def("verify", [](const ir::Graph& g) { return ir::verify(g); }, nb::arg("graph"),
        "Structural problems, one message each; empty when the graph is valid.");
  m.def("simplify_expr", [](std::string_view text) { return sym::parse_expr(text).str(); }, nb::arg("text"),
        "Parses a symbolic integer expression and prints its canonical (simplified) form.");
  m.def("sym_symbol", [](std::string_view line) { return sym::print_symbol(sym::parse_symbol(line)); }, nb::arg("line"),
        "Parses a `symbol s0 hint=...` line and prints it back in canonical form.");
  m.def("sym_evaluate",
        [](std::string_view text, const std::map<std::string, int64_t>& values) { return sym::evaluate(sym::parse_expr(text), values); },
        nb::arg("text"), nb::arg("values"), "Evaluates an expression with the given symbol values (Python semantics).");
  // The symbols' facts cross as their text lines (`symbol s0 hint=8 range=[2, 64] divisor=2`).
  m.def("sym_bound",
        [](std::string_view text, const std::vector<std::string>& symbols) {
          sym::Interval i = sym::bound(sym::parse_expr(text), parse_symbols(symbols));
          return std::make_pair(i.lo, i.hi);
        },
        nb::arg("text"), nb::arg("symbols"), "(lo, hi) of the expression; INT64_MIN/INT64_MAX mean unbounded.");
  m.def("sym_simplify",
        [](std::string_view text, const std::vector<std::string>& symbols) { return sym::simplify(sym::parse_expr(text), parse_symbols(symbols)).str(); },
        nb::arg("text"), nb::arg("symbols"), "The range-aware simplification of the expression, printed.");
  m.def("sym_rel", [](std::string_view text) { return sym::parse_rel(text).str(); }, nb::arg("text"),
        "Parses a relation and prints its normalized form (> and >= swapped).");
  m.def("sym_statically_known",
        [](std::string_view text, const std::vector<std::string>& symbols) { return sym::statically_known(sym::parse_rel(text), parse_symbols(symbols)); },
        nb::arg("text"), nb::arg("symbols"), "True/False when the relation is decided for every allowed value, else None.");
  m.def("sym_narrow_range",
        [](std::string_view rel, const std::string& symbol) {
          sym::SymbolInfo s = sym::parse_symbol(symbol);
          sym::narrow_range(sym::parse_rel(rel), s);
          return sym::print_symbol(s);
        },
        nb::arg("rel"), nb::arg("symbol"),
        "The symbol's line after narrowing its range by the relation (true at its hint), as a guard over it does.");
  m.def("sym_multiple_of",
        [](std::string_view text, int64_t k, const std::vector<std::string>& symbols) {
          return sym::statically_known_multiple_of(sym::parse_expr(text), k, parse_symbols(symbols));
        },
        nb::arg("text"), nb::arg("k"), nb::arg("symbols"), "Whether the expression is always a multiple of k.");
  m.def("sym_rel_program",
        [](const std::vector<std::string>& rels, const std::vector<std::string>& order, const std::vector<int64_t>& values) {
          std::vector<sym::Rel> parsed;
          for (const std::string& r : rels) parsed.push_back(sym::parse_rel(r));
          if (values.size() != order.size()) throw std::invalid_argument("sym_rel_program: one value per symbol");
          return sym::RelProgram(parsed, order).first_failure(values.data());
        },
        nb::arg("rels"), nb::arg("order"), nb::arg("values"),
        "Compiles the relations over the symbols in `order` and runs them at `values`: the index of the first failing one, or None.");
}
}  // namespace ember::python
