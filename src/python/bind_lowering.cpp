// ember._C.lowering: graph IR text -> loop IR text, for tests (the loop IR reference interpreter
// in python/ember/testing/loop_interp.py runs the text). Thin: parse, the pipeline's `lower` step,
// print.
// A graph that does not parse raises ValueError; a lowering bug raises RuntimeError.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "pipeline/pipeline.h"

namespace nb = nanobind;

namespace ember::python {
void bind_lowering(nb::module_& m) {
  m.def(
      "lower",
      [](std::string_view graph_text) {
        pipeline::Compilation c(ir::parse(graph_text));
        pipeline::run_step(*pipeline::find_step("lower"), c, pipeline::Target::cpu(), pipeline::Instruments{});
        return std::make_pair(c.print(), c.lowering_refusals);
      },
      nb::arg("graph_text"),
      "Lowers graph IR text; returns (loop IR text, [why each core op became an extern call]).");
}
}  // namespace ember::python
