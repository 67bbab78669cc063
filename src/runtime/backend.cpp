#include "runtime/backend.h"

#include <chrono>
#include <map>
#include <stdexcept>

#include "frontend/interp/trace.h"
#include "frontend/pyutil.h"
#include "loop_ir/loop_ir.h"
#include "lowering/lowering.h"
#include "memory/memory_plan.h"
#include "passes/passes.h"
#include "runtime/compiled_graph.h"
#include "runtime/cpp_compiler.h"
#include "runtime/eager_executor.h"
#include "scheduler/scheduler.h"

namespace ember::runtime {

namespace {

// Why backend="ember" does not generate code for this graph, or "" when it does.
std::string reason_to_stay_eager(const ir::Graph& graph) {
  for (ir::ValueId out : graph.outputs())
    if (graph.value(out).type.requires_grad)
      return "a graph output requires grad: compiled kernels serve inference graphs until training support lands";
  for (const auto& in : graph.inputs())
    if (graph.value(in.value).type.device.type != "cpu")
      return "a graph input lives on " + graph.value(in.value).type.device.str() + ": only the CPU backend exists";
  for (const auto& v : graph.values())
    if (v.type.device.type != "cpu") return "a graph value lives on " + v.type.device.str() + ": only the CPU backend exists";
  return "";
}

class StageClock {
 public:
  explicit StageClock(BackendReport* report) : report_(report), last_(std::chrono::steady_clock::now()) {}
  void done(const char* stage) {
    auto now = std::chrono::steady_clock::now();
    report_->stage_seconds.emplace_back(stage, std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }

 private:
  BackendReport* report_;
  std::chrono::steady_clock::time_point last_;
};

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
      *reason = "extern call " + call.callable + " does not resolve to a callable: " + frontend::take_error_message();
      return false;
    }
    out->push_back(std::move(fn));
  }
  return true;
}

}  // namespace

namespace {

// The stages of backend="ember" for a graph they can serve; nullptr (with the reason in the
// report) when the graph must run on the eager executor instead.
std::unique_ptr<GraphRunner> compile_to_kernels(const ir::Graph& captured, const std::vector<PyRef>& callables,
                                                const frontend::TorchTable& table, const CompileOptions& options,
                                                BackendReport* report) {
  StageClock clock(report);
  ir::Graph graph = captured;
  passes::canonicalize(graph);
  passes::decompose(graph);
  passes::dce(graph);
  clock.done("graph passes");
  std::vector<std::string> refusals;
  loop_ir::Program program = lowering::lower(graph, &refusals);
  for (const auto& r : refusals) report->schedule += "extern: " + r + "\n";
  loop_ir::simplify_indices(program);
  clock.done("lowering");
  for (const auto& d : scheduler::schedule(program, scheduler::ScheduleOptions{})) report->schedule += d.str() + "\n";
  clock.done("scheduling");
  report->kernels = static_cast<int>(program.kernels.size());
  report->extern_calls = static_cast<int>(program.externs.size());
  if (program.kernels.empty()) {
    report->fallback_reason = "no kernels to generate: every op is an extern call";
    return nullptr;
  }
  memory::MemoryPlan plan = memory::plan_memory(program);
  report->planned_peak_bytes = plan.peak_bytes;
  report->loop_ir = loop_ir::print(program);
  clock.done("memory planning");

  CppCompileOptions cc;
  cc.compiler = options.cxx;
  cc.include_dirs = {options.include_dir};
  cc.cache_dir = options.cache_dir;
  cc.isa = detect_isa();
  cc.precompiled_header = "ember/vec.h";
  cc.precompiled_header_in_background = true;
  auto convert = [&table](const ir::Literal& lit) { return table.literal_object(lit); };
  std::vector<PyRef> externs;
  if (!extern_callables(program, captured, callables, table, &externs, &report->fallback_reason)) return nullptr;
  CompiledGraphBuild build;
  try {
    build = compile_graph(program, plan, codegen::CppOptions{}, cc, externs, convert);
  } catch (const CompileError& e) {
    report->codegen_failed = true;
    report->fallback_reason = std::string("the generated C++ did not compile: ") + e.what() + "\n" + e.compiler_output;
    return nullptr;
  }
  report->cpp_source = build.graph->source().text;
  report->cache_hit = build.cache_hit;
  clock.done(build.cache_hit ? "code generation, compile (cached)" : "code generation, compile");
  return std::move(build.graph);
}

}  // namespace

std::unique_ptr<GraphRunner> build_runner(const ir::Graph& captured, const std::vector<PyRef>& callables,
                                          const frontend::TorchTable& table, const CompileOptions& options,
                                          BackendReport* report) {
  if (options.backend == Backend::Eager) return eager_runner(captured, callables, table);
  report->fallback_reason = reason_to_stay_eager(captured);
  if (!report->fallback_reason.empty()) return eager_runner(captured, callables, table);
  std::unique_ptr<GraphRunner> runner;
  try {
    runner = compile_to_kernels(captured, callables, table, options, report);
  } catch (const CacheError& e) {
    // The user's cache directory is unusable (owner, permissions): an error to fix, not a fallback.
    PyErr_SetString(PyExc_RuntimeError, e.what());
    throw frontend::PythonError();
  } catch (const frontend::PythonError&) {
    throw;
  } catch (const std::exception& e) {
    // A stage threw: a bug, or a form it does not model without saying so. The graph stays
    // correct on the eager executor; the error is reported apart from fallbacks by design, so
    // that it is counted, warned about, and raised under strict (backend.h).
    if (PyErr_Occurred()) PyErr_Clear();
    report->internal_error = e.what();
    if (report->error_stage.empty())
      report->error_stage = report->stage_seconds.empty() ? "the first backend stage"
                                                          : "the stage after " + report->stage_seconds.back().first;
    report->fallback_reason = "internal error in the backend (" + report->error_stage + "): " + e.what();
  }
  if (!runner) return eager_runner(captured, callables, table);
  return runner;
}

}  // namespace ember::runtime
