#include "driver/backend.h"

#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>

#include "pipeline/pipeline.h"
#include "pybridge/errors.h"
#include "runtime/compiled_graph.h"
#include "runtime/cpp_compiler.h"
#include "runtime/eager_executor.h"

namespace ember::driver {

// The runtime's executables and compiler driver, which this file wires to the pipeline.
using runtime::CacheError;
using runtime::compile_graph;
using runtime::CompiledGraphBuild;
using runtime::CompileError;
using runtime::CppCompileOptions;
using runtime::detect_isa;
using runtime::EagerExecutor;
using runtime::GraphRunner;
using pybridge::PythonError;
using pybridge::take_error_message;

namespace {

// Why backend="ember" does not generate code for this graph, or "" when it does; `target` is set
// when it does.
std::string reason_to_stay_eager(const ir::Graph& graph, std::optional<pipeline::Target>* target) {
  for (ir::ValueId out : graph.outputs())
    if (graph.value(out).type.requires_grad)
      return "a graph output requires grad: compiled kernels serve inference graphs until training support lands";
  std::string reason;
  *target = pipeline::target_for(ir::Device{}, &reason);  // a graph without tensors
  for (const auto& v : graph.values())
    if (!(*target = pipeline::target_for(v.type.device, &reason))) return reason;
  return "";
}

std::unique_ptr<GraphRunner> eager_runner(const ir::Graph& graph, const std::vector<PyRef>& callables,
                                          const frontend::TorchTable& table) {
  auto convert = [&table](const ir::Literal& lit) { return table.literal_object(lit); };
  return std::make_unique<EagerExecutor>(graph, callables, convert);
}

// The callable each extern call of `program` runs: the very object the trace called when the
// call is a captured torch node (some have no importable name, e.g. `operator.attrgetter('mT')`),
// else the one its qualified name resolves to (calls that decompositions introduce). Returns
// false, with the reason, when a name does not resolve.
bool extern_callables(const loop_ir::Program& program, const ir::Graph& captured, const std::vector<PyRef>& callables,
                      const frontend::TorchTable& table, std::vector<PyRef>* out, std::string* reason) {
  std::map<std::string, PyObject*> traced;
  for (const ir::Node& node : captured.nodes())
    if (node.op == ir::Op::TorchCall) traced.emplace(node.target, callables.at(static_cast<size_t>(node.id)).get());
  for (const auto& call : program.externs) {
    auto found = traced.find(call.callable);
    if (found != traced.end()) {
      out->push_back(PyRef::borrow(found->second));
      continue;
    }
    PyRef name = PyRef::steal(PyUnicode_FromStringAndSize(call.callable.data(), call.callable.size()));
    PyRef fn = PyRef::steal(PyObject_CallOneArg(table.resolve.get(), name.get()));
    if (!fn) {
      *reason = "extern call " + call.callable + " does not resolve to a callable: " + take_error_message();
      return false;
    }
    out->push_back(std::move(fn));
  }
  return true;
}

}  // namespace

namespace {

// The pipeline for a graph it can serve, then the C++ compiler; nullptr (with the reason in the
// report) when the graph must run on the eager executor instead.
std::unique_ptr<GraphRunner> compile_to_kernels(const ir::Graph& captured, const std::vector<PyRef>& callables,
                                                const frontend::TorchTable& table, const pipeline::Target& target,
                                                const CompileOptions& options, runtime::CodeCache& code_cache,
                                                BackendReport* report) {
  pipeline::Compilation c(captured);
  pipeline::Instruments instruments;
  instruments.verify = options.verify_each_step;
  instruments.print_changed = (options.logs & kLogPasses) != 0;
  instruments.inject_fault_after = options.inject_fault_after;
  instruments.on_step = [report](const pipeline::StepRecord& step) {
    report->stage_seconds.emplace_back(step.name, step.seconds);
    if (!step.ir.empty()) report->step_ir.emplace_back(step.name, step.ir);
  };
  instruments.stop_after = "schedule";
  pipeline::compile(c, target, instruments);
  for (const auto& r : c.lowering_refusals) report->schedule += "extern: " + r + "\n";
  for (const auto& d : c.decisions) report->schedule += d.str() + "\n";
  report->kernels = static_cast<int>(c.program.kernels.size());
  report->extern_calls = static_cast<int>(c.program.externs.size());
  if (c.program.kernels.empty()) {
    report->fallback_reason = "no kernels to generate: every op is an extern call";
    return nullptr;
  }
  instruments.stop_after = "";
  pipeline::compile(c, target, instruments);
  report->planned_peak_bytes = c.plan->peak_bytes;
  report->loop_ir = loop_ir::print(c.program);
  report->cpp_source = c.source->text;

  auto start = std::chrono::steady_clock::now();
  CppCompileOptions cc;
  cc.compiler = options.cxx;
  cc.include_dirs = {options.include_dir};
  cc.cache_dir = options.cache_dir;
  cc.isa = detect_isa();
  cc.precompiled_header = "ember/vec.h";
  cc.precompiled_header_in_background = true;
  auto convert = [&table](const ir::Literal& lit) { return table.literal_object(lit); };
  std::vector<PyRef> externs;
  if (!extern_callables(c.program, captured, callables, table, &externs, &report->fallback_reason)) return nullptr;
  CompiledGraphBuild build;
  try {
    build = compile_graph(std::move(c.program), std::move(*c.plan), std::move(*c.source), code_cache, cc, externs,
                          convert);
  } catch (const CompileError& e) {
    report->codegen_failed = true;
    report->fallback_reason = std::string("the generated C++ did not compile: ") + e.what() + "\n" + e.compiler_output;
    return nullptr;
  }
  report->cache_hit = build.cache_hit;
  report->stage_seconds.emplace_back(build.cache_hit ? "compile (cached)" : "compile",
                                     std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return std::move(build.graph);
}

}  // namespace

std::unique_ptr<GraphRunner> build_runner(const ir::Graph& captured, const std::vector<PyRef>& callables,
                                          const frontend::TorchTable& table, const CompileOptions& options,
                                          runtime::CodeCache& code_cache, BackendReport* report) {
  if (options.backend == Backend::Eager) return eager_runner(captured, callables, table);
  std::optional<pipeline::Target> target;
  report->fallback_reason = reason_to_stay_eager(captured, &target);
  if (!report->fallback_reason.empty()) return eager_runner(captured, callables, table);
  std::unique_ptr<GraphRunner> runner;
  try {
    runner = compile_to_kernels(captured, callables, table, *target, options, code_cache, report);
  } catch (const CacheError& e) {
    // The user's cache directory is unusable (owner, permissions): an error to fix, not a fallback.
    PyErr_SetString(PyExc_RuntimeError, e.what());
    throw PythonError();
  } catch (const PythonError&) {
    throw;
  } catch (const std::exception& e) {
    // A stage threw: a bug, or a form it does not model without saying so. The graph stays
    // correct on the eager executor; the error is reported apart from fallbacks by design, so
    // that it is counted, warned about, and raised under strict (backend.h).
    if (PyErr_Occurred()) PyErr_Clear();
    report->internal_error = e.what();
    auto* step = dynamic_cast<const pipeline::StepError*>(&e);
    report->error_stage = step ? step->step : "compile";
    report->fallback_reason = "internal error in the backend (" + report->error_stage + "): " + e.what();
  }
  if (!runner) return eager_runner(captured, callables, table);
  return runner;
}

}  // namespace ember::driver
