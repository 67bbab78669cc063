// ember._C.passes: graph passes for tests and tools. Thin: run a named pipeline step over graph IR
// text (through pipeline::run_step, verifying before and after), and run IR text on the eager executor with callables the caller resolved (tests/passes compare
// rewritten graphs with the captured ones this way).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/vector.h>

#include <stdexcept>

#include "frontend/interp/torch_table.h"
#include "frontend/pyutil.h"
#include "ir/graph.h"
#include "pipeline/pipeline.h"
#include "runtime/eager_executor.h"

namespace nb = nanobind;

namespace ember::python {

namespace {

void check_valid(const ir::Graph& g, const std::string& when) {
  std::vector<std::string> problems = ir::verify(g);
  if (problems.empty()) return;
  std::string message = when + ": the graph does not verify:";
  for (const std::string& p : problems) message += "\n  " + p;
  throw std::invalid_argument(message);
}

}  // namespace

void bind_passes(nb::module_& m) {
  m.def("names", [] {
    std::vector<std::string> names;
    for (const pipeline::Step& s : pipeline::steps())
      if (s.reads == pipeline::IRKind::Graph) names.push_back(s.name);
    return names;
  }, "The pipeline's steps that read graph IR, in order.");
  m.def(
      "node_callables",
      [](std::string_view text) {
        ir::Graph g = ir::parse(text);
        std::vector<std::pair<std::string, std::string>> out;
        for (const ir::Node& n : g.nodes())
          out.emplace_back(n.op == ir::Op::TorchCall ? "torch" : ir::op_info(n.op).name, std::string(n.callable()));
        return out;
      },
      nb::arg("text"), "Per node: (core op name or 'torch', the qualified callable).");
  m.def(
      "run_pass",
      [](std::string_view text, std::string_view name) {
        const pipeline::Step* step = pipeline::find_step(name);
        if (!step) throw std::invalid_argument("no pass named '" + std::string(name) + "'");
        pipeline::Compilation c(ir::parse(text));
        check_valid(c.graph, "input");
        pipeline::Instruments verify;
        verify.verify = true;
        pipeline::run_step(*step, c, pipeline::Target::cpu(), verify);
        return c.print();
      },
      nb::arg("text"), nb::arg("name"), "Runs one pipeline step over graph IR text; the result verified, as text.");
  m.def(
      "run_graph",
      [](std::string_view text, nb::list callables, nb::list inputs, nb::object table) {
        ir::Graph g = ir::parse(text);
        check_valid(g, "input");
        if (callables.size() != g.nodes().size())
          throw std::invalid_argument("run_graph: " + std::to_string(callables.size()) + " callables for " +
                                      std::to_string(g.nodes().size()) + " nodes");
        if (inputs.size() != g.inputs().size())
          throw std::invalid_argument("run_graph: " + std::to_string(inputs.size()) + " inputs for " +
                                      std::to_string(g.inputs().size()) + " graph inputs");
        frontend::TorchTable t = frontend::TorchTable::from_python(table.ptr());
        std::vector<PyRef> fns;
        for (nb::handle c : callables) fns.push_back(PyRef::borrow(c.ptr()));
        std::vector<PyObject*> args;
        for (nb::handle x : inputs) args.push_back(x.ptr());
        std::vector<PyRef> outputs;
        try {
          runtime::EagerExecutor executor(g, fns, [&t](const ir::Literal& lit) { return t.literal_object(lit); });
          if (!executor.run(args.data(), &outputs)) throw nb::python_error();
        } catch (pybridge::PythonError&) {
          throw nb::python_error();
        }
        nb::list out;
        for (PyRef& o : outputs) out.append(nb::borrow(o.get()));
        return out;
      },
      nb::arg("text"), nb::arg("callables"), nb::arg("inputs"), nb::arg("table"),
      "Runs graph IR text on the eager executor: callables[i] is node i's callable, `table` the "
      "ember.ops table object; returns the outputs.");
}

}  // namespace ember::python
