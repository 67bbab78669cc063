// ember._C.lowering: graph IR text -> loop IR text, for tests (the loop IR reference interpreter
// in python/ember/testing/loop_interp.py runs the text). Thin: parse, lower, print.
// A graph that does not parse raises ValueError; a lowering bug raises RuntimeError.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "ir/graph.h"
#include "loop_ir/loop_ir.h"
#include "lowering/lowering.h"

namespace nb = nanobind;

namespace ember::python {
void bind_lowering(nb::module_& m) {
  m.def(
      "lower",
      [](std::string_view graph_text) {
        std::vector<std::string> refusals;
        loop_ir::Program program = lowering::lower(ir::parse(graph_text), &refusals);
        return std::make_pair(loop_ir::print(program), refusals);
      },
      nb::arg("graph_text"),
      "Lowers graph IR text; returns (loop IR text, [why each core op became an extern call]).");
}
}  // namespace ember::python
