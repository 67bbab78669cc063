// ember._C.eval_frame's test fixtures (src/frontend/eval_frame_testing.h): a FrameCompiler driven
// by Python callables and a second eval-frame hook. Built only into development builds
// (CMake option EMBER_TEST_FIXTURES, on for `make build`, off for `pip install .`), so the
// extension Ember ships carries no test code.
#include <nanobind/nanobind.h>

#include "frontend/eval_frame.h"
#include "frontend/eval_frame_testing.h"
#include "python/bind_eval_frame.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace ember::python {
namespace {

using frontend::FrameCompiler;
using frontend::testing::TestCompiler;

int test_compiler_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) {
    return 0;
  }
  return nb::inst_ptr<TestCompiler>(self)->traverse(visit, arg);
}

int test_compiler_clear(PyObject* self) {
  if (nb::inst_ready(self)) {
    nb::inst_ptr<TestCompiler>(self)->clear();
  }
  return 0;
}

PyType_Slot test_compiler_slots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(test_compiler_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(test_compiler_clear)},
    {0, nullptr}};

}  // namespace

void bind_eval_frame_testing(nb::module_& m) {
  nb::class_<TestCompiler, FrameCompiler>(m, "TestCompiler",
                                          "Test fixture: a compiler driven by decide(code, args).",
                                          nb::type_slots(test_compiler_slots))
      .def(
          "__init__",
          [](TestCompiler* self, nb::handle decide, int cache_limit) {
            new (self) TestCompiler(decide.ptr(), cache_limit);
          },
          "decide"_a, "cache_limit"_a = 8)
      .def_ro("compiles", &TestCompiler::compiles)
      .def_ro("declines", &TestCompiler::declines)
      .def_ro("hits", &TestCompiler::hits)
      .def_prop_ro("recompiles",
                   [](const TestCompiler& c) { return nb::borrow(c.recompile_events()); })
      .def_prop_ro("limit_events",
                   [](const TestCompiler& c) { return nb::borrow(c.limit_events()); });
  m.def(
      "testing_call_paused",
      [](nb::handle fn, nb::tuple args, nb::handle kwargs) {
        return steal_or_throw(
            frontend::testing::call_paused(fn.ptr(), args.ptr(), optional_dict(kwargs)));
      },
      "fn"_a, "args"_a = nb::tuple(), "kwargs"_a = nb::none());
  m.def("testing_install_counting_hook", &frontend::testing::install_counting_hook);
  m.def("testing_remove_counting_hook", &frontend::testing::remove_counting_hook);
  m.def("testing_counting_hook_installed", &frontend::testing::counting_hook_installed);
  m.def("testing_counting_hook_calls", &frontend::testing::counting_hook_calls);
  m.def("testing_counted_codes",
        [] { return steal_or_throw(frontend::testing::counted_codes()); });
  m.def("testing_datastack_chunk_count", &frontend::testing::datastack_chunk_count);
}

}  // namespace ember::python
