#include "driver/backend.h"

#include "sym/symbols.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>

#include "pipeline/pipeline.h"
#include "pybridge/errors.h"
#include "runtime/aliased_inputs.h"
#include "runtime/compiled_graph.h"
#include "runtime/cpp_compiler.h"
#include "runtime/cuda_graph_runner.h"
#include "runtime/eager_executor.h"
#include "runtime/training_runner.h"
#include "runtime/triton_code.h"

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

// Why Triton cannot serve graphs in this process ("" when it can): its compiler is a Python package.
// Asked once per process; an import error is a fallback with its reason, not a failure.
const std::string& why_no_triton() {
  static const std::string reason = [] {
    PyRef triton = PyRef::steal(PyImport_ImportModule("triton"));
    if (triton) return std::string();
    return "the GPU backend needs Triton, which does not import: " + take_error_message();
  }();
  return reason;
}

// Why backend="ember" does not generate code for this graph, or "" when it does; `target` is set
// when it does.
std::string reason_to_stay_eager(const ir::Graph& graph, const CompileOptions& options,
                                 std::optional<pipeline::Target>* target) {
  std::string reason;
  *target = pipeline::target_for(ir::Device{}, options.triton_interpret || options.triton_build_only, options.mode, &reason);  // a graph without tensors
  for (const auto& v : graph.values()) {
    std::optional<pipeline::Target> for_value = pipeline::target_for(v.type.device, options.triton_interpret || options.triton_build_only, options.mode,
                                                                               &reason);
    if (!for_value) return reason;
    if (&v != &graph.values().front() && for_value->device != (*target)->device)
      return "graph values live on " + (*target)->device.str() + " and " + for_value->device.str() +
             ": a compiled graph runs on one device";
    *target = for_value;
  }
  if ((*target)->kind == pipeline::Target::Kind::Triton && !why_no_triton().empty()) return why_no_triton();
  (*target)->triton.allow_tf32 = options.allow_tf32;
  (*target)->deterministic = options.deterministic;
  (*target)->layout_optimization = options.layout_optimization;
  return "";
}

std::unique_ptr<GraphRunner> eager_runner(const ir::Graph& graph, const std::vector<PyRef>& callables,
                                          const frontend::TorchTable& table) {
  auto convert = [&table](const ir::Literal& lit) { return table.literal_object(lit); };
  return std::make_unique<EagerExecutor>(graph, callables, convert);
}

// What extern calls resolve against: the callables the trace recorded for the captured graph's
// torch nodes, and the table that resolves the rest by name.
class Externs {
 public:
  Externs(const ir::Graph& captured, const std::vector<PyRef>& callables, const frontend::TorchTable& table)
      : captured(captured), table(table) {
    for (const ir::Node& node : captured.nodes())
      if (node.op == ir::Op::TorchCall) traced_.emplace(node.target, callables.at(static_cast<size_t>(node.id)).get());
  }

  // The callable of a call by name: the very object the trace called when a captured torch node
  // names it (some have no importable name, e.g. `operator.attrgetter('mT')`), else the one the
  // name resolves to (calls that decompositions and autograd introduce). Null, with the reason,
  // when the name does not resolve.
  PyRef resolve(const std::string& name, std::string* reason) const {
    auto found = traced_.find(name);
    if (found != traced_.end()) return PyRef::borrow(found->second);
    PyRef fn = by_name(name);
    if (!fn) *reason = "the call " + name + " does not resolve to a callable: " + take_error_message();
    return fn;
  }

  // The callable `name` resolves to by import and attribute lookup; null with the Python error set.
  PyRef by_name(const std::string& name) const {
    PyRef text = PyRef::steal(PyUnicode_FromStringAndSize(name.data(), static_cast<Py_ssize_t>(name.size())));
    return text ? PyRef::steal(PyObject_CallOneArg(table.resolve.get(), text.get())) : PyRef();
  }

  const ir::Graph& captured;
  const frontend::TorchTable& table;

 private:
  std::map<std::string, PyObject*> traced_;
};

// The eager executor of a graph the pipeline derived from the captured one (a training graph's
// forward or backward); null, with the reason, when a call does not resolve.
std::unique_ptr<GraphRunner> eager_runner_for(const ir::Graph& graph, const Externs& x, std::string* reason) {
  std::vector<PyRef> callables;
  for (const ir::Node& node : graph.nodes()) {
    if (node.op != ir::Op::TorchCall) {
      callables.push_back(x.table.op_callables.at(static_cast<size_t>(node.op)));
      continue;
    }
    PyRef fn = x.resolve(node.target, reason);
    if (!fn) return nullptr;
    callables.push_back(std::move(fn));
  }
  return eager_runner(graph, callables, x.table);
}

// The callable each extern call of `program` runs (Externs::resolve). Returns false, with the
// reason, when a name does not resolve.
bool extern_callables(const loop_ir::Program& program, const Externs& x, std::vector<PyRef>* out, std::string* reason) {
  for (const auto& call : program.externs) {
    PyRef fn = x.resolve(call.callable, reason);
    if (!fn) return false;
    out->push_back(std::move(fn));
  }
  return true;
}

}  // namespace

namespace {

// The pipeline for a graph it can serve, then the C++ compiler; nullptr (with the reason in the
// report) when the graph must run on the eager executor instead.
pipeline::Instruments instruments_for(const CompileOptions& options, BackendReport* report) {
  pipeline::Instruments instruments;
  instruments.verify = options.verify_each_step;
  instruments.print_changed = (options.logs & kLogPasses) != 0;
  instruments.inject_fault_after = options.inject_fault_after;
  instruments.on_step = [report](const pipeline::StepRecord& step) {
    report->stage_seconds.emplace_back(step.name, step.seconds);
    if (!step.ir.empty()) report->step_ir.emplace_back(step.name, step.ir);
  };
  return instruments;
}

// The pipeline from where `c` stands, then the C++ compiler or Triton; nullptr (with the reason in
// the report) when the graph must run on the eager executor instead.
std::unique_ptr<GraphRunner> compile_to_kernels(pipeline::Compilation& c, const Externs& x,
                                                const pipeline::Target& target, const CompileOptions& options,
                                                runtime::CodeCache& code_cache, BackendReport* report) {
  pipeline::Instruments instruments = instruments_for(options, report);
  instruments.stop_after = "schedule";
  pipeline::compile(c, target, instruments);
  for (const auto& r : c.lowering_refusals) report->schedule += "extern: " + r + "\n";
  for (const auto& d : c.decisions) report->schedule += d.str() + "\n";
  report->kernels = static_cast<int>(c.program.kernels.size());
  report->extern_calls = static_cast<int>(c.program.externs.size());
  if (target.device.type == "cuda")
    for (const loop_ir::Kernel& k : c.program.kernels)
      for (const loop_ir::Node& n : k.nodes) report->atomic_adds = report->atomic_adds || n.accumulate;
  if (c.program.kernels.empty()) {
    report->fallback_reason = "no kernels to generate: every op is an extern call";
    return nullptr;
  }
  instruments.stop_after = "";
  const size_t scheduled = c.decisions.size();
  pipeline::compile(c, target, instruments);
  // The `group` step's decisions (after planning; scheduler.h, group_kernels).
  for (size_t d = scheduled; d < c.decisions.size(); ++d) report->schedule += c.decisions[d].str() + "\n";
  report->planned_peak_bytes = c.plan->peak_bytes;
  report->loop_ir = loop_ir::print(c.program);

  auto start = std::chrono::steady_clock::now();
  auto convert = [&table = x.table](const ir::Literal& lit) { return table.literal_object(lit); };
  std::vector<PyRef> externs;
  if (!extern_callables(c.program, x, &externs, &report->fallback_reason)) return nullptr;
  std::unique_ptr<runtime::CompiledGraph> graph;
  switch (target.kind) {
    case pipeline::Target::Kind::Cpu: {
      report->code_language = "C++";
      report->code = c.source->text;
      CppCompileOptions cc;
      cc.compiler = options.cxx;
      cc.include_dirs = {options.include_dir};
      cc.cache_dir = options.cache_dir;
      cc.isa = detect_isa();
      cc.precompiled_header = "ember/vec.h";
      cc.precompiled_header_in_background = true;
      CompiledGraphBuild build;
      try {
        // One compiler per core: the graph's kernels split into that many units (compile_split).
        build = compile_graph(std::move(c.program), std::move(*c.plan), std::move(*c.source), code_cache, cc,
                              /*jobs=*/0, externs, convert);
      } catch (const CompileError& e) {
        report->codegen_failed = true;
        report->fallback_reason =
            std::string("the generated C++ did not compile: ") + e.what() + "\n" + e.compiler_output;
        return nullptr;
      }
      report->cache_hit = build.cache_hit;
      report->kernels_reused = build.kernels_reused;
      graph = std::move(build.graph);
      break;
    }
    case pipeline::Target::Kind::Triton: {
      report->code_language = "Triton";
      report->code = codegen::print(*c.triton);
      runtime::TritonBuildOptions tb;
      tb.cache_dir = options.cache_dir;
      std::vector<std::vector<runtime::TritonCode::Runnable>> runnables;
      // Build only: the cubins a CUDA device would run, for a graph whose tensors are on the CPU.
      const ir::Device build_for = options.triton_build_only ? ir::Device{"cuda", 0} : target.device;
      try {
        runnables = runtime::build_runnables(*c.triton, build_for, tb, &report->cache_hit);
      } catch (const runtime::TritonBuildError& e) {
        report->codegen_failed = true;
        report->fallback_reason = std::string("a generated Triton kernel did not compile: ") + e.what() + "\n" + e.detail;
        return nullptr;
      }
      if (options.triton_build_only) {
        report->stage_seconds.emplace_back(report->cache_hit ? "compile (cached)" : "compile",
                                           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        report->fallback_reason = "triton_build_only: the kernels' cubins were built; the graph runs eagerly";
        return nullptr;
      }
      report->size_assumptions = c.triton->assumptions();
      runtime::TuneOptions tune;
      tune.coordinate_descent = target.coordinate_descent;
      tune.cache_dir = options.cache_dir;
      tune.log_perf = (options.logs & kLogPerf) != 0;
      auto code = std::make_unique<runtime::TritonCode>(c.program, *c.plan, std::move(*c.triton), std::move(runnables),
                                                        std::move(tune));
      graph = std::make_unique<runtime::CompiledGraph>(std::move(c.program), std::move(*c.plan), std::move(code),
                                                        externs, convert);
      break;
    }
  }
  report->stage_seconds.emplace_back(report->cache_hit ? "compile (cached)" : "compile",
                                     std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (replays_cuda_graphs(options.mode)) {
    report->cuda_graph_skip = runtime::why_no_cuda_graph(graph->program());
    if (report->cuda_graph_skip.empty()) return std::make_unique<runtime::CudaGraphRunner>(std::move(graph));
  }
  return graph;
}

// A training graph: joint, partition, then its forward and backward each through the rest of the
// pipeline (or the eager executor, when a part has nothing for kernels to do), joined by torch
// autograd (runtime/training_runner.h). nullptr, with the reason, when the graph runs eagerly.
std::unique_ptr<GraphRunner> compile_training(const Externs& x, const pipeline::Target& target,
                                              const CompileOptions& options, runtime::CodeCache& code_cache,
                                              BackendReport* report) {
  pipeline::Compilation c(x.captured);
  c.joint_options.exact_random = options.fallback_random;
  c.partition_options.memory_budget = options.activation_memory_budget;
  pipeline::Instruments instruments = instruments_for(options, report);
  instruments.stop_after = "partition";
  pipeline::compile(c, target, instruments);
  if (!c.partition) {
    report->fallback_reason = "the training graph cannot be differentiated ahead of time: " + c.not_differentiable;
    return nullptr;
  }
  const autograd::Partition& p = *c.partition;
  // The runtime half in Python (the autograd.Function, islands' backward); imported here, not with
  // the package, because it imports torch.
  if (!PyRef::steal(PyImport_ImportModule("ember.autograd"))) throw PythonError();
  // An island's backward finds its callable by name (ember.autograd.island_backward).
  for (const std::string& name : p.layout.islands) {
    if (!x.by_name(name)) {
      report->fallback_reason = "the training graph cannot be differentiated ahead of time: " + name +
                                " has no derivative rule and no importable name for torch autograd to run it by: " +
                                take_error_message();
      return nullptr;
    }
  }
  report->training = true;
  report->autograd_islands = p.layout.islands;
  report->partition = autograd::print(p);
  pipeline::Compilation backward(p.backward, "lower");
  std::shared_ptr<const GraphRunner> parts[2];
  pipeline::Compilation* compilations[2] = {&c, &backward};
  for (int i = 0; i < 2; ++i) {
    BackendReport part;
    std::unique_ptr<GraphRunner> runner = compile_to_kernels(*compilations[i], x, target, options, code_cache, &part);
    if (!runner) {
      runner = eager_runner_for(compilations[i]->graph, x, &report->fallback_reason);
      if (!runner) return nullptr;
    }
    report->merge(part, i == 0 ? "forward" : "backward");
    parts[i] = std::move(runner);
  }
  auto make_list = [](const std::vector<int>& xs) {
    PyRef list = PyRef::steal(PyList_New(static_cast<Py_ssize_t>(xs.size())));
    for (size_t i = 0; list && i < xs.size(); ++i) PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(i), PyLong_FromLong(xs[i]));
    return list;
  };
  std::vector<int> grad_of_primal;
  for (int j : p.layout.grad_output_of_primal) grad_of_primal.push_back(j < 0 ? -1 : j - p.layout.forward_outputs);
  std::string reason;
  PyRef graph_type = x.resolve("ember.autograd.TrainingGraph", &reason);
  PyRef apply = x.resolve("ember.autograd.CompiledFunction.apply", &reason);
  if (!graph_type || !apply) {
    PyErr_SetString(PyExc_RuntimeError, ("ember: the training runtime does not import: " + reason).c_str());
    throw PythonError();
  }
  std::vector<int> output_is_input, passthrough;
  for (ir::ValueId out : x.captured.outputs()) {
    int input = -1;
    for (size_t i = 0; i < x.captured.inputs().size(); ++i)
      if (x.captured.inputs()[i].value == out) input = static_cast<int>(i);
    if (input >= 0) passthrough.push_back(static_cast<int>(output_is_input.size()));
    output_is_input.push_back(input);
  }
  // The layout the backward expects of each saved value: an extern call's result may come back laid
  // out otherwise than torch's meta kernel said (2.0 ** x.t() is dense either way).
  PyRef saved_strides = PyRef::steal(PyList_New(0));
  for (int i = 0; i < p.saved; ++i) {
    const ir::TensorType& t = p.backward.value(p.backward.inputs()[static_cast<size_t>(i)].value).type;
    std::vector<int> strides;
    bool known = true;
    for (const sym::Expr& st : t.strides) {
      known = known && st.is_constant();
      if (known) strides.push_back(static_cast<int>(st.constant()));
    }
    PyRef item = known ? make_list(strides) : PyRef::borrow(Py_None);
    if (!saved_strides || !item || PyList_Append(saved_strides.get(), item.get()) != 0) throw PythonError();
  }
  PyRef tangents_of_gradient = PyRef::steal(PyList_New(0));
  for (const std::vector<int>& deps : p.layout.tangents_of_gradient)
    if (!tangents_of_gradient || PyList_Append(tangents_of_gradient.get(), make_list(deps).get()) != 0) throw PythonError();
  PyRef graph = PyRef::steal(PyObject_CallFunction(
      graph_type.get(), "NNiNNNNNN", runtime::python_callable(parts[0]).release(), runtime::python_callable(parts[1]).release(),
      p.layout.forward_outputs, make_list(p.layout.tangent_of_output).release(), make_list(grad_of_primal).release(),
      make_list(p.saved_primals).release(), make_list(passthrough).release(), tangents_of_gradient.release(),
      saved_strides.release()));
  if (!graph) throw PythonError();
  auto runner = std::make_unique<runtime::TrainingRunner>(std::move(apply), std::move(graph));
  // The graph's tensors, then its int symbols' values (runtime::SymbolBinding): the forward reads them.
  runner->inputs = x.captured.inputs().size();
  for (const sym::SymbolInfo& s : x.captured.symbols) runner->inputs += s.from_int;
  runner->output_is_input = std::move(output_is_input);
  runner->grad_mode_at_end = p.layout.grad_mode_at_end;
  runner->set_grad_enabled = x.table.set_grad_enabled_fn;
  return runner;
}

}  // namespace

void BackendReport::merge(const BackendReport& part, const std::string& name) {
  auto section = [&name](const std::string& text) { return text.empty() ? text : "// " + name + "\n" + text; };
  schedule += section(part.schedule);
  loop_ir += section(part.loop_ir);
  code += section(part.code);
  if (code_language.empty()) code_language = part.code_language;
  codegen_failed = codegen_failed || part.codegen_failed;
  atomic_adds = atomic_adds || part.atomic_adds;
  kernels += part.kernels;
  extern_calls += part.extern_calls;
  planned_peak_bytes = std::max(planned_peak_bytes, part.planned_peak_bytes);
  cache_hit = cache_hit || part.cache_hit;
  kernels_reused += part.kernels_reused;
  for (const auto& [step, seconds] : part.stage_seconds) stage_seconds.emplace_back(name + " " + step, seconds);
  for (const auto& [step, ir] : part.step_ir) step_ir.emplace_back(name + " " + step, ir);
  for (const sym::Rel& rel : part.size_assumptions)
    if (std::find(size_assumptions.begin(), size_assumptions.end(), rel) == size_assumptions.end())
      size_assumptions.push_back(rel);
}

namespace {

// `runner` for `captured`, or, when the captured graph writes one of its inputs, `runner` in an
// AliasedInputsRunner, which runs a call where that input shares memory with another on the eager
// executor (runtime/aliased_inputs.h).
std::unique_ptr<GraphRunner> with_aliasing_checked(const ir::Graph& captured, const std::vector<PyRef>& callables,
                                                   const frontend::TorchTable& table,
                                                   std::unique_ptr<GraphRunner> runner) {
  const std::vector<bool> written = ir::written_storage(captured);
  std::vector<bool> written_inputs;
  std::vector<std::string> names;
  std::vector<int64_t> static_bytes;  // the guards hold an input to constant sizes and strides
  for (const ir::GraphInput& in : captured.inputs()) {
    written_inputs.push_back(written[static_cast<size_t>(in.value)]);
    names.push_back(in.source);
    const ir::TensorType& t = captured.value(in.value).type;
    std::vector<int64_t> sizes, strides;
    for (size_t d = 0; d < t.sizes.size(); ++d) {
      if (!t.sizes[d].is_constant() || !t.strides[d].is_constant()) break;
      sizes.push_back(t.sizes[d].constant());
      strides.push_back(t.strides[d].constant());
    }
    const bool constant = sizes.size() == t.sizes.size();
    static_bytes.push_back(constant ? runtime::span_bytes(sizes.data(), strides.data(), sizes.size(), t.dtype) : -1);
  }
  if (std::find(written_inputs.begin(), written_inputs.end(), true) == written_inputs.end()) return runner;
  return std::make_unique<runtime::AliasedInputsRunner>(std::move(runner), eager_runner(captured, callables, table),
                                                         std::move(written_inputs), std::move(names),
                                                         std::move(static_bytes));
}

}  // namespace

std::unique_ptr<GraphRunner> build_runner(const ir::Graph& captured, const std::vector<PyRef>& callables,
                                          const frontend::TorchTable& table, const CompileOptions& options,
                                          runtime::CodeCache& code_cache, BackendReport* report) {
  if (options.backend == Backend::Eager) return eager_runner(captured, callables, table);
  std::optional<pipeline::Target> target;
  report->fallback_reason = reason_to_stay_eager(captured, options, &target);
  if (!report->fallback_reason.empty()) return eager_runner(captured, callables, table);
  Externs x(captured, callables, table);
  std::unique_ptr<GraphRunner> runner;
  try {
    if (autograd::is_training_graph(captured)) {
      runner = compile_training(x, *target, options, code_cache, report);
    } else {
      pipeline::Compilation c(captured);
      runner = compile_to_kernels(c, x, *target, options, code_cache, report);
    }
  } catch (const CacheError& e) {
    // The user's cache directory is unusable (owner, permissions): an error to fix, not a fallback.
    PyErr_SetString(PyExc_RuntimeError, e.what());
    throw PythonError();
  } catch (const PythonError&) {
    throw;
  } catch (const sym::SymbolicUnsupported&) {
    throw;  // the compiler specializes the symbols and builds again
  } catch (const std::exception& e) {
    // A Ctrl-C (or SystemExit) that landed in a Python call a stage made is the user's: it stays set
    // and aborts the call, never cleared into a fallback.
    if (pybridge::interrupt_pending()) throw PythonError();
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
  return with_aliasing_checked(captured, callables, table, std::move(runner));
}

}  // namespace ember::driver
