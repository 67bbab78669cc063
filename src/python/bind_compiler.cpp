// Bindings of the compiler: CompileOptions (a typed class that python/ember/options.py fills in:
// every field has its C++ type, every closed set is an enum), a Compiler per ember.compile() call,
// the compiled callable, and the process-wide counters. Thin: no option is parsed here.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "driver/compiler.h"
#include "runtime/compiled_graph.h"
#include "support/stats.h"

namespace nb = nanobind;

namespace ember::python {

namespace {

// The callable ember.compile() returns for a function: calls it inside a compiled region.
struct CompiledFunction {
  nb::object fn;
  nb::object compiler;  // keeps the Compiler alive
  driver::Compiler* raw = nullptr;
};

void bind_options(nb::module_& m) {
  nb::enum_<Backend>(m, "Backend").value("ember", Backend::Ember).value("eager", Backend::Eager);
  nb::enum_<Mode>(m, "Mode")
      .value("default", Mode::Default)
      .value("reduce_overhead", Mode::ReduceOverhead)
      .value("max_autotune", Mode::MaxAutotune)
      .value("max_autotune_no_cudagraphs", Mode::MaxAutotuneNoCudagraphs);
  nb::enum_<Dynamic>(m, "Dynamic").value("auto", Dynamic::Auto).value("always", Dynamic::Always).value("never", Dynamic::Never);
  // The EMBER_LOGS channels by name: options.py LOG_CHANNELS must list them in this order.
  nb::enum_<LogChannel>(m, "LogChannel", nb::is_flag())
      .value("graph", kLogGraph)
      .value("graph_breaks", kLogGraphBreaks)
      .value("guards", kLogGuards)
      .value("recompiles", kLogRecompiles)
      .value("fallbacks", kLogFallbacks)
      .value("schedule", kLogSchedule)
      .value("output_code", kLogOutputCode)
      .value("perf", kLogPerf)
      .value("passes", kLogPasses)
      .value("partition", kLogPartition);
  nb::class_<CompileOptions>(m, "CompileOptions")
      .def(nb::init<>())
      .def_rw("backend", &CompileOptions::backend)
      .def_rw("mode", &CompileOptions::mode)
      .def_rw("fullgraph", &CompileOptions::fullgraph)
      .def_rw("dynamic", &CompileOptions::dynamic)
      .def_rw("cache_limit", &CompileOptions::cache_limit)
      .def_rw("inline_depth_limit", &CompileOptions::inline_depth_limit)
      .def_rw("instruction_limit", &CompileOptions::instruction_limit)
      .def_rw("logs", &CompileOptions::logs)
      .def_rw("verify_shape_rules", &CompileOptions::verify_shape_rules)
      .def_rw("verify_each_step", &CompileOptions::verify_each_step)
      .def_rw("inject_fault_after", &CompileOptions::inject_fault_after)
      .def_rw("triton_interpret", &CompileOptions::triton_interpret)
      .def_rw("triton_build_only", &CompileOptions::triton_build_only)
      .def_rw("allow_tf32", &CompileOptions::allow_tf32)
      .def_rw("activation_memory_budget", &CompileOptions::activation_memory_budget)
      .def_rw("fallback_random", &CompileOptions::fallback_random)
      .def_rw("layout_optimization", &CompileOptions::layout_optimization)
      .def_rw("cxx", &CompileOptions::cxx)
      .def_rw("cache_dir", &CompileOptions::cache_dir)
      .def_rw("include_dir", &CompileOptions::include_dir);
}

}  // namespace

void bind_compiler(nb::module_& m) {
  bind_options(m);
  nb::class_<driver::Compiler>(m, "Compiler")
      .def("__init__", [](driver::Compiler* self, const CompileOptions& options, nb::object table,
                          nb::object listener, nb::object unsupported_error) {
        new (self) driver::Compiler(options, frontend::TorchTable::from_python(table.ptr()), listener.ptr(),
                                      unsupported_error.ptr());
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
    d["kernels_reused"] = s.kernels_reused;
    d["codegen_failures"] = s.codegen_failures;
    d["cuda_graph_records"] = s.cuda_graph_records;
    d["cuda_graph_replays"] = s.cuda_graph_replays;
    d["aliased_input_calls"] = s.aliased_input_calls;
    d["tensor_reads"] = s.tensor_reads;
    d["backend_errors"] = s.backend_errors;
    d["backward_graphs_compiled"] = s.backward_graphs_compiled;
    d["autograd_islands"] = s.autograd_islands;
    d["graphs"] = s.graphs;
    d["ops_captured"] = s.ops_captured;
    d["trace_seconds"] = s.trace_seconds;
    const runtime::MemoryStats& mem = runtime::memory_stats();
    d["arena_bytes_kept"] = mem.arena_bytes_kept;
    d["arena_bytes_max"] = mem.arena_bytes_max;
    d["arenas_kept_by_outputs"] = mem.arenas_kept_by_outputs;
    d["arenas_handed_over"] = mem.arenas_handed_over;
    d["input_bytes_released"] = mem.input_bytes_released;
    return d;
  });
  m.def("reset_stats", [] {
    stats() = Stats{};
    runtime::reset_memory_stats();
  });
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
