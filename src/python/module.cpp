// The extension module ember._C: thin bindings only; each area registers its own submodule.
#include <nanobind/nanobind.h>

namespace nb = nanobind;

namespace ember::python {
void bind_ir(nb::module_& m);
void bind_bytecode(nb::module_& m);
void bind_guards(nb::module_& m);
void bind_eval_frame(nb::module_& m);
void bind_compiler(nb::module_& m);
void bind_shapes(nb::module_& m);
void bind_codecache(nb::module_& m);
void bind_lowering(nb::module_& m);
void bind_codegen(nb::module_& m);
void bind_passes(nb::module_& m);
void bind_cuda(nb::module_& m);
#ifdef EMBER_TEST_FIXTURES
void bind_eval_frame_testing(nb::module_& m);
#endif
}  // namespace ember::python

NB_MODULE(_C, m) {
  using namespace ember::python;
  // Compiled callables legitimately live until interpreter exit (module globals, caches).
  nb::set_leak_warnings(false);
  auto ir = m.def_submodule("ir", "Graph IR: parse, print, verify");
  bind_ir(ir);
  auto bytecode = m.def_submodule("bytecode", "Normalized bytecode decoder");
  bind_bytecode(bytecode);
  auto guards = m.def_submodule("guards", "Guards and tensor metadata");
  bind_guards(guards);
  auto eval_frame = m.def_submodule("eval_frame", "Frame hook and compiled regions");
  bind_eval_frame(eval_frame);
#ifdef EMBER_TEST_FIXTURES
  bind_eval_frame_testing(eval_frame);
#endif
  bind_compiler(m);
  auto shapes = m.def_submodule("shapes", "Shape rules of core ops (tests, measurements)");
  bind_shapes(shapes);
  auto codecache = m.def_submodule("codecache", "C++ compiler driver and disk code cache");
  bind_codecache(codecache);
  auto lowering = m.def_submodule("lowering", "Graph IR to loop IR (tests)");
  bind_lowering(lowering);
  auto codegen = m.def_submodule("codegen", "C++ code generation and compiled graphs (tests, tools)");
  bind_codegen(codegen);
  auto passes = m.def_submodule("passes", "Graph passes over IR text; IR text on the eager executor (tests)");
  bind_passes(passes);
  auto cuda = m.def_submodule("cuda", "Triton cubin cache and the CUDA launcher (tests, tools)");
  bind_cuda(cuda);
}
