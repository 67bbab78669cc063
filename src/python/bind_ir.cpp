// ember._C.ir: the graph IR for Python (tests, ember.explain). Thin: a Graph crosses as an opaque
// handle; parse/print/verify are the C++ functions, and simplify_expr shows the canonical form of
// a symbolic expression. ParseError is a ValueError; bad expression text raises ValueError.
// The sym_* functions expose the symbolic engine (src/sym) to tests, over text.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "ir/graph.h"
#include "sym/expr.h"
#include "sym/symbols.h"

namespace nb = nanobind;

namespace ember::python {
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
}
}  // namespace ember::python
