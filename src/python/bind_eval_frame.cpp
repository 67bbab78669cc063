// ember._C.eval_frame: the frame hook, compiled regions and per-code caches (src/frontend/
// eval_frame.h), plus the test fixtures of src/frontend/eval_frame_testing.h, named as such.
#include <nanobind/nanobind.h>

#include "frontend/eval_frame.h"
#include "frontend/eval_frame_testing.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace ember::python {
namespace {

using frontend::FrameCompiler;
using frontend::testing::TestCompiler;

nb::object steal_or_throw(PyObject* result) {
  if (result == nullptr) {
    throw nb::python_error();
  }
  return nb::steal(result);
}

PyCodeObject* as_code(nb::handle code) {
  if (!PyCode_Check(code.ptr())) {
    throw nb::type_error("expected a code object");
  }
  return reinterpret_cast<PyCodeObject*>(code.ptr());
}

PyObject* optional_dict(nb::handle kwargs) { return kwargs.is_none() ? nullptr : kwargs.ptr(); }

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

void bind_eval_frame(nb::module_& m) {
  nb::class_<FrameCompiler>(m, "FrameCompiler", "Compiles the frames of one compiled region.")
      .def_rw("cache_limit", &FrameCompiler::cache_limit);

  m.def(
      "call_in_region",
      [](FrameCompiler* compiler, nb::handle fn, nb::tuple args, nb::handle kwargs) {
        return steal_or_throw(
            frontend::call_in_region(compiler, fn.ptr(), args.ptr(), optional_dict(kwargs)));
      },
      "compiler"_a, "fn"_a, "args"_a = nb::tuple(), "kwargs"_a = nb::none(),
      "Calls fn(*args, **kwargs) inside a region of `compiler`.");
  m.def("clear_all_caches", &frontend::clear_all_caches);
  m.def("forget_compiler", &frontend::forget_compiler, "compiler"_a);
  m.def("hook_installed", &frontend::hook_installed);
  m.def(
      "cache_entry_count",
      [](nb::handle code, const FrameCompiler* compiler) {
        return frontend::cache_entry_count(as_code(code), compiler);
      },
      "code"_a, "compiler"_a);
  m.def(
      "skip_reason",
      [](nb::handle code) -> nb::object {
        const char* reason = frontend::skip_reason(as_code(code));
        if (reason == nullptr && PyErr_Occurred()) {
          throw nb::python_error();
        }
        return reason != nullptr ? nb::object(nb::str(reason)) : nb::object(nb::none());
      },
      "code"_a);
  m.def("cached_code_count", &frontend::cached_code_count);
  m.def("hook_stats", [] {
    frontend::HookStats stats = frontend::hook_stats();
    nb::dict out;
    out["frames_replaced"] = stats.frames_replaced;
    out["chunk_opening_frames_replaced"] = stats.chunk_opening_frames_replaced;
    return out;
  });

  // Test fixtures (tests/eval_frame).
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
