// ember._C.eval_frame: the frame hook, compiled regions and per-code caches (src/frontend/
// eval_frame.h). Development builds add the test fixtures (bind_eval_frame_testing.cpp).
#include <nanobind/nanobind.h>

#include "frontend/eval_frame.h"
#include "python/bind_eval_frame.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace ember::python {
namespace {

using frontend::FrameCompiler;

PyCodeObject* as_code(nb::handle code) {
  if (!PyCode_Check(code.ptr())) {
    throw nb::type_error("expected a code object");
  }
  return reinterpret_cast<PyCodeObject*>(code.ptr());
}

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
}

}  // namespace ember::python
