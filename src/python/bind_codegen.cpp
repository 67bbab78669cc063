// Bindings of the C++ code generator and compiled graphs as ember._C.codegen, for tests and
// tools: loop IR text in, C++ text or a runnable compiled program out, or Triton kernels (as the
// printed text, or as dicts a test runner launches through Triton's interpreter). The real pipeline builds
// CompiledGraph from graphs in C++; this is the doorway to test it on hand-written loop IR.
// Options arrive resolved (compiler, include dirs, cache dir); `plan` is None (the memory
// planner's plan) or (arena_bytes, [offset per buffer]); `code_cache` is the compile context
// (ember._C.codecache.CodeCache) to compile in, None for a fresh one per call.
// CodegenError becomes ember._C.codegen.CodegenError (a RuntimeError); compiler failures raise
// ember._C.codecache.CompileError (translated by the codecache binding).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "codegen/cpp/cpp_codegen.h"
#include "codegen/triton/triton_codegen.h"
#include "frontend/interp/torch_table.h"
#include "loop_ir/loop_ir.h"
#include "pipeline/pipeline.h"
#include "runtime/compiled_graph.h"
#include "runtime/isa.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace ember::python {

namespace {

PyObject* codegen_error_type = nullptr;

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const codegen::CodegenError& e) {
    PyErr_SetString(codegen_error_type, e.what());
  }
}

using PlanArg = std::optional<std::tuple<int64_t, std::vector<int64_t>>>;

loop_ir::Program parse_verified(const std::string& text) {
  loop_ir::Program program = loop_ir::parse(text);
  std::vector<std::string> problems = loop_ir::verify(program);
  if (!problems.empty()) {
    std::string message = "invalid loop IR:";
    for (const std::string& p : problems) message += "\n  " + p;
    throw nb::value_error(message.c_str());
  }
  return program;
}

memory::MemoryPlan plan_of(const loop_ir::Program& program, const PlanArg& plan) {
  if (!plan) return memory::plan_memory(program);
  memory::MemoryPlan p;
  p.arena_bytes = std::get<0>(*plan);
  p.offsets = std::get<1>(*plan);
  return p;
}

codegen::CppOptions codegen_options(bool openmp, int64_t parallel_threshold) {
  codegen::CppOptions o;
  o.openmp = openmp;
  o.parallel_threshold = parallel_threshold;
  return o;
}

// A size: its int when constant, else its expression's text ("s0*s1").
nb::object size_value(const sym::Expr& e) {
  if (e.is_constant()) return nb::int_(e.constant());
  return nb::str(e.str().c_str());
}

nb::dict kernel_dict(const codegen::TritonKernel& k) {
  static const char* kKinds[] = {"pointwise", "persistent_reduction", "looped_reduction", "matmul", "group"};
  static_assert(sizeof kKinds / sizeof kKinds[0] == static_cast<size_t>(codegen::TritonKernel::Kind::Group) + 1);
  nb::dict d;
  d["name"] = k.name;
  d["kind"] = kKinds[static_cast<int>(k.kind)];
  d["members"] = k.members;
  d["launched_by"] = k.launched_by;
  d["source"] = k.source;
  nb::list params;
  for (const codegen::TritonParam& p : k.params) {
    nb::dict pd;
    pd["name"] = p.name;
    pd["type"] = p.type;
    if (p.kind == codegen::TritonParam::Kind::Pointer) {
      pd["buffer"] = p.buffer;
      static const char* kUses[] = {"", "load", "store", "load_store"};
      pd["use"] = kUses[static_cast<int>(p.use)];
    } else {
      pd["value"] = size_value(p.value);
      pd["hint"] = p.hint;
    }
    params.append(pd);
  }
  d["params"] = params;
  nb::list configs;
  for (const codegen::TritonConfig& c : k.configs) {
    nb::dict blocks;
    for (const auto& [name, value] : c.blocks) blocks[name.c_str()] = value;
    nb::dict cd;
    cd["blocks"] = blocks;
    cd["num_warps"] = c.num_warps;
    cd["num_stages"] = c.num_stages;
    configs.append(cd);
  }
  d["configs"] = configs;
  d["xnumel"] = size_value(k.xnumel);
  d["rnumel"] = size_value(k.rnumel);
  d["check_sites"] = k.check_sites;
  nb::list assumed;
  for (const sym::Rel& rel : k.assumptions) assumed.append(rel.str());
  d["assumptions"] = assumed;
  d["signature"] = k.signature();
  return d;
}

struct CompiledProgram {
  // compile_program builds C++ code only.
  const runtime::CppCode& cpp() const { return static_cast<const runtime::CppCode&>(graph->code()); }
  std::unique_ptr<runtime::CompiledGraph> graph;
  bool cache_hit = false;
  double compile_seconds = 0;
};

}  // namespace

void bind_codegen(nb::module_& m) {
  codegen_error_type = PyErr_NewException("ember._C.codegen.CodegenError", PyExc_RuntimeError, nullptr);
  m.attr("CodegenError") = nb::handle(codegen_error_type);
  nb::register_exception_translator(translate);

  m.def(
      "emit_cpp",
      [](const std::string& text, bool openmp, int64_t parallel_threshold, const PlanArg& plan) {
        loop_ir::Program program = parse_verified(text);
        return codegen::emit_cpp(program, plan_of(program, plan), codegen_options(openmp, parallel_threshold)).text;
      },
      "loop_ir"_a, "openmp"_a = true, "parallel_threshold"_a = codegen::CppOptions{}.parallel_threshold,
      "plan"_a = nb::none());

  // `schedule`: run the pipeline's simplify and schedule steps first (programs straight from
  // lowering), as the compiler does; `grouped`: then its plan, collapse and group steps (grouped
  // kernels; `plan` must be None); `split_*` override the Triton target's SplitOptions (-1:
  // the target's). Returns the
  // printed kernels (`printed`), else {"kernels": [dict per kernel], "program": the loop IR they
  // run, "arena_bytes", "offsets"}.
  m.def(
      "emit_triton",
      [](const std::string& text, bool schedule, int64_t persistent_max_rnumel, int max_configs, bool printed,
         const PlanArg& plan, int64_t split_min_programs, int64_t split_min_rnumel, bool matmul_templates,
         bool allow_tf32, bool grouped) -> nb::object {
        pipeline::Compilation c(parse_verified(text));
        pipeline::Target target = pipeline::Target::gpu();
        target.triton.persistent_max_rnumel = persistent_max_rnumel;
        target.triton.max_configs = max_configs;
        target.triton.matmul_templates = matmul_templates;
        target.triton.allow_tf32 = allow_tf32;
        if (split_min_programs >= 0) target.split.min_programs = split_min_programs;
        if (split_min_rnumel >= 0) target.split.min_split_rnumel = target.split.min_outer_split_rnumel = split_min_rnumel;
        if (schedule) {
          for (const char* step : {"simplify", "schedule"})
            pipeline::run_step(*pipeline::find_step(step), c, target, pipeline::Instruments{});
        }
        if (grouped) {
          if (plan) throw std::invalid_argument("emit_triton: `grouped` plans the program itself");
          for (const char* step : {"plan", "collapse", "group"})
            pipeline::run_step(*pipeline::find_step(step), c, target, pipeline::Instruments{});
        } else {
          c.plan = plan_of(c.program, plan);
        }
        codegen::TritonSource source = codegen::emit_triton(c.program, *c.plan, target.triton);
        if (printed) return nb::cast(codegen::print(source));
        nb::list kernels;
        for (const codegen::TritonKernel& k : source.kernels) kernels.append(kernel_dict(k));
        nb::dict result;
        result["kernels"] = kernels;
        nb::list templates;
        for (const codegen::MatmulTemplate& t : source.matmul_templates) {
          nb::dict d;
          d["extern"] = t.extern_index;
          d["epilogue"] = t.epilogue;
          d["kernel"] = kernel_dict(t.kernel);
          d["batch"] = t.batch;
          d["m"] = t.m;
          d["n"] = t.n;
          d["k"] = t.k;
          templates.append(d);
        }
        result["matmul_templates"] = templates;
        result["matmul_refusals"] = source.matmul_refusals;
        result["program"] = loop_ir::print(c.program);
        result["arena_bytes"] = c.plan->arena_bytes;
        result["offsets"] = c.plan->offsets;
        return result;
      },
      "loop_ir"_a, "schedule"_a = false, "persistent_max_rnumel"_a = codegen::TritonOptions{}.persistent_max_rnumel,
      "max_configs"_a = 1, "printed"_a = false, "plan"_a = nb::none(), "split_min_programs"_a = -1,
      "split_min_rnumel"_a = -1, "matmul_templates"_a = false, "allow_tf32"_a = false, "grouped"_a = false);

  nb::class_<CompiledProgram>(m, "CompiledProgram")
      .def("run",
           [](const CompiledProgram& self, nb::list inputs) {
             std::vector<PyObject*> args;
             for (nb::handle h : inputs) args.push_back(h.ptr());
             std::vector<PyRef> outputs;
             if (!self.graph->run(args.data(), &outputs)) throw nb::python_error();
             nb::list result;
             for (PyRef& o : outputs) result.append(nb::steal(o.release()));
             return result;
           })
      .def_prop_ro("source", [](const CompiledProgram& self) { return self.cpp().source().text; })
      .def_prop_ro("library_path", [](const CompiledProgram& self) { return self.cpp().build().libraries.back()->path(); })
      .def_prop_ro("kernel_functions", [](const CompiledProgram& self) { return self.cpp().source().kernels.size(); })
      .def_prop_ro("kernels_reused",
                   [](const CompiledProgram& self) {
                     const std::vector<bool>& reused = self.cpp().build().reused;
                     return std::count(reused.begin(), reused.end() - 1, true);  // the last: the entry
                   })
      .def_prop_ro("kernels_compiled",
                   [](const CompiledProgram& self) {
                     const std::vector<bool>& reused = self.cpp().build().reused;
                     return std::count(reused.begin(), reused.end() - 1, false);
                   })
      .def_prop_ro("units", [](const CompiledProgram& self) { return self.cpp().build().units; })
      .def_prop_ro("cache_hit", [](const CompiledProgram& self) { return self.cache_hit; })
      .def_prop_ro("compile_seconds", [](const CompiledProgram& self) { return self.compile_seconds; });

  m.def(
      "compile_program",
      [](const std::string& text, std::vector<nb::object> callables, std::vector<std::string> include_dirs,
         std::string cache_dir, std::string compiler, std::optional<std::string> isa, bool openmp,
         int64_t parallel_threshold, const PlanArg& plan, runtime::CodeCache* code_cache, int jobs) {
        loop_ir::Program program = parse_verified(text);
        runtime::CppCompileOptions co;
        co.compiler = std::move(compiler);
        co.include_dirs = std::move(include_dirs);
        co.cache_dir = std::move(cache_dir);
        co.isa = isa ? runtime::parse_isa(isa->c_str()) : runtime::detect_isa();
        co.openmp = openmp;
        std::vector<PyRef> refs;
        for (const nb::object& c : callables) refs.push_back(PyRef::borrow(c.ptr()));
        memory::MemoryPlan p = plan_of(program, plan);
        // Literals of extern calls convert as the compiler converts them: through the torch table.
        auto table = std::make_shared<frontend::TorchTable>(
            frontend::TorchTable::from_python(nb::module_::import_("ember.ops").attr("table").ptr()));
        codegen::CppSource source = codegen::emit_cpp(program, p, codegen_options(openmp, parallel_threshold));
        runtime::CodeCache fresh;  // when the caller passes no context: one of its own for this compile
        runtime::CompiledGraphBuild build = runtime::compile_graph(
            std::move(program), std::move(p), std::move(source), code_cache ? *code_cache : fresh, co, jobs, refs,
            [table](const ir::Literal& lit) { return table->literal_object(lit); });
        auto result = std::make_unique<CompiledProgram>();
        result->graph = std::move(build.graph);
        result->cache_hit = build.cache_hit;
        result->compile_seconds = build.compile_seconds;
        return result.release();
      },
      "loop_ir"_a, "callables"_a, "include_dirs"_a, "cache_dir"_a, "compiler"_a = "g++", "isa"_a = nb::none(),
      "openmp"_a = true, "parallel_threshold"_a = codegen::CppOptions{}.parallel_threshold, "plan"_a = nb::none(),
      "code_cache"_a.none() = nb::none(), "jobs"_a = 0, nb::rv_policy::take_ownership);
}

}  // namespace ember::python
