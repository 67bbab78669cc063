// Bindings of the compiler: a Compiler per ember.compile() call, the compiled callable, and the
// process-wide counters. Thin: options arrive already parsed (python/ember/options.py).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <stdexcept>

#include "driver/compiler.h"
#include "support/stats.h"

namespace nb = nanobind;

namespace ember::python {

namespace {

CompileOptions options_from(const nb::dict& d) {
  CompileOptions o;
  std::string backend = nb::cast<std::string>(d["backend"]);
  if (backend == "ember") {
    o.backend = Backend::Ember;
  } else if (backend == "eager") {
    o.backend = Backend::Eager;
  } else {
    throw std::invalid_argument("unknown backend '" + backend + "'");
  }
  std::string mode = nb::cast<std::string>(d["mode"]);
  o.mode = mode == "reduce-overhead" ? Mode::ReduceOverhead : mode == "max-autotune" ? Mode::MaxAutotune : Mode::Default;
  o.fullgraph = nb::cast<bool>(d["fullgraph"]);
  o.dynamic = nb::cast<bool>(d["dynamic"]);
  o.cache_limit = nb::cast<int>(d["cache_limit"]);
  o.logs = nb::cast<uint32_t>(d["logs"]);
  o.verify_shape_rules = nb::cast<bool>(d["verify_shape_rules"]);
  o.verify_each_step = nb::cast<bool>(d["verify_each_step"]);
  o.cxx = nb::cast<std::string>(d["cxx"]);
  o.cache_dir = nb::cast<std::string>(d["cache_dir"]);
  o.include_dir = nb::cast<std::string>(d["include_dir"]);
  return o;
}

// The callable ember.compile() returns for a function: calls it inside a compiled region.
struct CompiledFunction {
  nb::object fn;
  nb::object compiler;  // keeps the Compiler alive
  driver::Compiler* raw = nullptr;
};

}  // namespace

void bind_compiler(nb::module_& m) {
  nb::class_<driver::Compiler>(m, "Compiler")
      .def("__init__", [](driver::Compiler* self, nb::dict options, nb::object table, nb::object listener,
                          nb::object unsupported_error) {
        new (self) driver::Compiler(options_from(options), frontend::TorchTable::from_python(table.ptr()),
                                      listener.ptr(), unsupported_error.ptr());
      });

  nb::class_<CompiledFunction>(m, "CompiledFunction", nb::dynamic_attr())
      .def("__init__",
           [](CompiledFunction* self, nb::object fn, nb::object compiler) {
             new (self) CompiledFunction{fn, compiler, nb::cast<driver::Compiler*>(compiler)};
           })
      .def("__call__",
           [](CompiledFunction& self, nb::args args, nb::kwargs kwargs) {
             PyObject* r = frontend::call_in_region(self.raw, self.fn.ptr(), args.ptr(),
                                                    PyDict_GET_SIZE(kwargs.ptr()) ? kwargs.ptr() : nullptr);
             if (!r) throw nb::python_error();
             return nb::steal(r);
           })
      .def_prop_ro("fn", [](CompiledFunction& self) { return self.fn; })
      .def_prop_ro("compiler", [](CompiledFunction& self) { return self.compiler; });

  m.def("stats", [] {
    const Stats& s = stats();
    nb::dict d;
    d["frames_compiled"] = s.frames_compiled;
    d["cache_hits"] = s.cache_hits;
    d["recompiles"] = s.recompiles;
    d["graph_breaks"] = s.graph_breaks;
    d["eager_frames"] = s.eager_frames;
    d["kernels_compiled"] = s.kernels_compiled;
    d["codegen_failures"] = s.codegen_failures;
    d["graphs"] = s.graphs;
    d["ops_captured"] = s.ops_captured;
    d["trace_seconds"] = s.trace_seconds;
    return d;
  });
  m.def("reset_stats", [] { stats() = Stats{}; });
  m.def("clear_all_caches", [] { frontend::clear_all_caches(); });
  // ember.disable(): runs fn with the calling thread's compiled region paused.
  m.def("call_disabled", [](nb::object fn, nb::tuple args, nb::dict kwargs) {
    frontend::RegionPause pause;
    PyObject* r = PyObject_Call(fn.ptr(), args.ptr(), kwargs.ptr());
    if (!r) throw nb::python_error();
    return nb::steal(r);
  });
}

}  // namespace ember::python
