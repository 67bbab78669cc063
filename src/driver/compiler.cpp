// Compiler: trace a frame, build its cache entry, report what happened.
#include "driver/compiler.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "driver/backend.h"
#include "driver/compiled_frame.h"
#include "pybridge/errors.h"
#include "support/stats.h"

namespace ember::driver {

// The frontend's trace, interpreter and graph-break planning, which this file drives.
using frontend::BreakCode;
using frontend::BreakCodeCache;
using frontend::BreakRange;
using frontend::CacheEntry;
using frontend::CodeInfo;
using frontend::FrameView;
using frontend::GlobalState;
using frontend::Interpreter;
using frontend::IteratorVar;
using frontend::make_tuple;
using frontend::RegionPause;
using frontend::SlotKind;
using frontend::StopAt;
using frontend::TorchTable;
using frontend::Trace;
using frontend::Unsupported;
using frontend::ValuePlan;
using frontend::VarKind;
using frontend::VarRef;
using pybridge::PythonError;
using pybridge::take_error_message;

namespace {

// Builds a Python dict from (key, new reference) pairs; steals the values.
PyObject* make_info(std::initializer_list<std::pair<const char*, PyObject*>> items) {
  PyObject* d = PyDict_New();
  for (auto& [k, v] : items) {
    if (v) PyDict_SetItemString(d, k, v);
    Py_XDECREF(v);
  }
  return d;
}

PyObject* str(const std::string& s) { return PyUnicode_FromStringAndSize(s.data(), s.size()); }

// [(stage, seconds), ...] as a Python list of tuples.
PyObject* to_python(double x) { return PyFloat_FromDouble(x); }
PyObject* to_python(const std::string& s) { return str(s); }

// [(name, value), ...] of a report's per-step lists.
template <typename T>
PyObject* step_list(const std::vector<std::pair<std::string, T>>& steps) {
  PyObject* list = PyList_New(0);
  for (const auto& [name, value] : steps) {
    PyRef step = PyRef::steal(str(name));
    PyRef v = PyRef::steal(to_python(value));
    PyRef item = PyRef::steal(PyTuple_Pack(2, step.get(), v.get()));
    PyList_Append(list, item.get());
  }
  return list;
}

PyObject* str_list(const std::vector<std::string>& items) {
  PyObject* list = PyList_New(0);
  for (const std::string& item : items) {
    PyRef s = PyRef::steal(str(item));
    PyList_Append(list, s.get());
  }
  return list;
}

std::string code_name(PyCodeObject* code) {
  const char* n = PyUnicode_AsUTF8(code->co_qualname);
  return n ? n : "<code>";
}

std::string code_file(PyCodeObject* code) {
  const char* n = PyUnicode_AsUTF8(code->co_filename);
  return n ? n : "<file>";
}

// The code cache context of every Compiler with these options' cache_dir and cxx (compiler.h:
// the sharing policy); kept until exit, like the libraries they load.
std::shared_ptr<runtime::CodeCache> shared_code_cache(const CompileOptions& options) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>, std::shared_ptr<runtime::CodeCache>> contexts;
  std::lock_guard<std::mutex> lock(mutex);
  auto& context = contexts[{options.cache_dir, options.cxx}];
  if (!context) context = std::make_shared<runtime::CodeCache>();
  return context;
}

}  // namespace

Compiler::Compiler(CompileOptions options, TorchTable table, PyObject* listener, PyObject* unsupported_error)
    : options_(std::move(options)),
      table_(std::move(table)),
      code_cache_(shared_code_cache(options_)),
      listener_(PyRef::borrow(listener)),
      unsupported_error_(PyRef::borrow(unsupported_error)) {
  cache_limit = options_.cache_limit;
}

Compiler::~Compiler() { frontend::forget_compiler(this); }

bool Compiler::emit(const char* event, PyObject* info) {
  PyRef keep = PyRef::steal(info);
  if (!listener_ || listener_.get() == Py_None) return true;
  PyRef name = PyRef::steal(PyUnicode_FromString(event));
  PyRef r = PyRef::steal(PyObject_CallFunctionObjArgs(listener_.get(), name.get(), info, nullptr));
  return static_cast<bool>(r);
}

struct Compiler::Split {
  Continuation continuation;
  ValuePlan values;       // the tuple glue takes
  std::string reason;     // why the frame broke
  std::string filename;   // where: the instruction of the frame's own code
  int line = -1;
};

namespace {

// Why a trace failed and where, or nothing.
struct Failure {
  std::string reason, filename;
  int line = -1;
  Unsupported unsupported{""};
  bool internal = false;  // an exception of Ember's own escaped: a bug, not a limit it reports
  // A KeyboardInterrupt or SystemExit arrived while tracing (a signal handler ran inside a meta
  // kernel): it stays set and the call aborts with it; nothing is cached.
  bool interrupted = false;
  bool failed() const { return !reason.empty() || interrupted; }
};

// Runs `f`, turning the ways a trace fails into a Failure. Leaves no Python error set, except an
// interrupt (Failure::interrupted).
template <typename F>
Failure catch_failure(F&& f) {
  Failure out;
  try {
    f();
  } catch (Unsupported& u) {
    out.reason = u.reason;
    out.filename = u.filename;
    out.line = u.line;
    out.unsupported = u;
  } catch (PythonError&) {
    out.interrupted = pybridge::interrupt_pending();
    if (!out.interrupted) out.reason = "internal error: " + take_error_message();
  } catch (std::exception& e) {
    out.interrupted = pybridge::interrupt_pending();
    if (out.interrupted) return out;
    if (PyErr_Occurred()) PyErr_Clear();
    out.reason = std::string("internal error: ") + e.what();
    out.internal = true;
  }
  return out;
}

}  // namespace

std::unique_ptr<Compiler::Split> Compiler::plan_split(const FrameView& frame, Trace& trace, const Unsupported& failed,
                                                      std::string* why_not) {
  const CodeInfo& info = codes_.get(frame.code);
  std::optional<BreakRange> range = frontend::break_range(info, failed.root_index);
  if (!range) {
    *why_not = frontend::unbreakable_reason(info, failed.root_index);
    return nullptr;
  }
  std::unique_ptr<Split> split;
  Failure f = catch_failure([&] {
    StopAt stop;
    stop.index = range->first;
    stop.visit = failed.root_visit;
    Interpreter::run_frame(trace, codes_, &stop);
    if (!stop.reached) throw std::runtime_error("the second trace did not reach the graph break");
    // Break code is made from the original code, also when this frame is a resume function.
    const BreakCodeCache::Origin* origin = breaks_.origin(frame.code);
    const CodeInfo& original = origin ? codes_.get(origin->original) : info;
    BreakRange at = *range;
    if (origin) at = BreakRange{origin->index.at(range->first), origin->index.at(range->last)};
    std::vector<SlotKind> layout;
    std::vector<VarRef> values;
    for (const VarRef& v : stop.stack) {
      if (v->kind == VarKind::Null) {
        layout.push_back(SlotKind::Null);
      } else if (v->kind == VarKind::Iterator) {
        auto& it = v->as<IteratorVar>();
        layout.push_back(SlotKind::Iterator);
        values.push_back(make_tuple(std::vector<VarRef>(it.items.begin() + it.position, it.items.end())));
      } else {
        layout.push_back(SlotKind::Value);
        values.push_back(v);
      }
    }
    size_t nlocal = original.localsplus_names.size() - original.nfree;
    std::vector<bool> bound(original.localsplus_names.size(), false);
    std::vector<VarRef> local_values(original.localsplus_names.size());
    for (size_t s = 0; s < nlocal; ++s) {
      // A cell variable crosses as its cell object, so closures made before the break and the
      // code after it share it (a cell the trace made is built once per run: ValuePlan::identity).
      VarRef v = stop.locals.at(origin ? origin->slot(static_cast<int>(s)) : static_cast<int>(s));
      if (!v) continue;
      if (original.cell[s] && v->kind != VarKind::Cell) throw std::runtime_error("a cell variable's slot holds no cell");
      bound[s] = true;
      local_values[s] = v;
    }
    const BreakCode& code = breaks_.get(original, at, layout, bound);
    // Slot 0 in place: the first argument's value, or None where it is a cell (passed as a local)
    // or was deleted (the prologue deletes it again).
    if (code.first_in_place) values.insert(values.begin(), code.first_plain ? local_values[0] : trace.none());
    for (int s : code.glue_locals) values.push_back(local_values[s]);
    split = std::make_unique<Split>();
    split->continuation = Continuation{&code, this};
    split->values = trace.finish(make_tuple(std::move(values)));
    trace.apply_specializations();
    std::vector<std::string> problems = ir::verify(trace.graph);
    if (!problems.empty()) throw std::runtime_error("the captured graph failed verification: " + problems.front());
  });
  if (f.failed()) {
    *why_not = f.reason;
    return nullptr;
  }
  split->reason = failed.reason;
  if (!failed.filename.empty() && failed.line >= 0 &&
      (failed.filename != info.filename || failed.line != info.decoded.instructions[range->last].line)) {
    split->reason += " (at " + failed.filename + ":" + std::to_string(failed.line) + ")";
  }
  split->filename = info.filename;
  split->line = info.decoded.instructions[range->last].line;
  return split;
}

std::unique_ptr<CacheEntry> Compiler::compile(const FrameView& frame, bool* error) {
  *error = false;
  RegionPause pause;
  auto start = std::chrono::steady_clock::now();
  GlobalState state = GlobalState::current();
  frontend::DynamicPolicy policy{options_.dynamic, &seen_shapes(frame.code)};
  auto trace = std::make_unique<Trace>(table_, frame, options_, state);
  trace->dynamic = policy;
  ValuePlan plan;
  Failure failure = catch_failure([&] {
    if (state.autocast_state.other)
      throw Unsupported("torch.autocast is active for a device type other than cpu and cuda (Ember traces autocast for those two)");
    VarRef result = Interpreter::run_frame(*trace, codes_);
    plan = trace->finish(result);
    trace->apply_specializations();
    std::vector<std::string> problems = ir::verify(trace->graph);
    if (!problems.empty()) throw std::runtime_error("the captured graph failed verification: " + problems.front());
  });
  // A frame that fails at an instruction of its own code is split there (unless fullgraph).
  std::unique_ptr<Split> split;
  if (failure.interrupted) {
    *error = true;
    return nullptr;
  }
  if (failure.failed() && failure.unsupported.root_index >= 0 && !options_.fullgraph) {
    auto retrace = std::make_unique<Trace>(table_, frame, options_, state);
    retrace->dynamic = policy;
    std::string why_not;
    split = plan_split(frame, *retrace, failure.unsupported, &why_not);
    if (!split && pybridge::interrupt_pending()) {
      *error = true;
      return nullptr;
    }
    if (split) {
      trace = std::move(retrace);
      plan = split->values;
      failure = Failure();
    } else {
      failure.reason += "; the frame could not be split there: " + why_not;
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Stats& s = stats();
  s.trace_seconds += seconds;
  if (failure.filename.empty()) {
    failure.filename = code_file(frame.code);
    failure.line = frame.code->co_firstlineno;
  }

  if (failure.failed()) {
    ++s.eager_frames;
    std::string message = failure.reason + " (at " + failure.filename + ":" + std::to_string(failure.line) + ", in " +
                          code_name(frame.code) + ")";
    if (!emit("fallback", make_info({{"code", str(code_name(frame.code))},
                                     {"reason", str(failure.reason)},
                                     {"internal_error", PyBool_FromLong(failure.internal)},
                                     {"filename", str(failure.filename)},
                                     {"lineno", PyLong_FromLong(failure.line)}}))) {
      *error = true;
      return nullptr;
    }
    if (options_.fullgraph) {
      PyErr_SetString(unsupported_error_.get(), message.c_str());
      *error = true;
      return nullptr;
    }
    return std::make_unique<EagerEntry>(std::move(trace->guards));
  }

  if (split) {
    ++s.graph_breaks;
    if (!emit("graph_break", make_info({{"code", str(code_name(frame.code))},
                                        {"reason", str(split->reason)},
                                        {"filename", str(split->filename)},
                                        {"lineno", PyLong_FromLong(split->line)}}))) {
      *error = true;
      return nullptr;
    }
  }
  ++s.frames_compiled;
  ++s.graphs;
  s.ops_captured += trace->graph.nodes().size();
  bool changes_grad_mode = false;
  for (const auto& node : trace->graph.nodes())
    if (node.op == ir::Op::TorchCall && node.result_form == ir::Node::ResultForm::None && node.results.empty() &&
        node.target == table_.name_of(table_.set_grad_enabled_fn.get()))
      changes_grad_mode = true;
  AutocastRun autocast;
  autocast.suspend = state.autocast_state.cpu.enabled || state.autocast_state.cuda.enabled;
  autocast.suspend_fn = table_.autocast_suspend;
  autocast.resume_fn = table_.autocast_resume;
  autocast.replay_fn = table_.autocast_replay;
  std::unique_ptr<CacheEntry> entry;
  CompileOptions graph_options = options_;
  graph_options.deterministic = state.deterministic;
  BackendReport backend;
  std::string graph_text, guards_text;
  try {
    if (!trace->autocast_events.empty()) autocast.events = autocast_events_tuple(table_, trace->autocast_events);
    std::unique_ptr<runtime::GraphRunner> runner;
    try {
      runner = build_runner(trace->graph, trace->callables, table_, graph_options, *code_cache_, &backend);
    } catch (const sym::SymbolicUnsupported& e) {
      // A stage cannot serve the graph's symbols: compile it for the traced sizes, guarded.
      for (const sym::SymbolInfo& symbol : trace->graph.symbols)
        trace->shapes.specialize(sym::Expr::symbol(symbol.name), std::string("the backend needs static sizes: ") + e.what());
      trace->apply_specializations();
      backend = BackendReport();
      backend.shape_fallback = e.what();
      runner = build_runner(trace->graph, trace->callables, table_, graph_options, *code_cache_, &backend);
    }
    if (backend.atomic_adds) trace->guards.deterministic_algorithms(false);
    for (const sym::Rel& rel : backend.size_assumptions)
      if (!trace->shapes.evaluate(rel, "int32 indexing of the graph's Triton kernels"))
        throw std::logic_error("the backend assumed " + rel.str() + ", false on the traced call");
    trace->finish_shapes();
    graph_text = ir::print(trace->graph);
    guards_text = trace->guards.describe() + trace->aliases.describe();
    entry = std::make_unique<CompiledFrame>(std::move(trace->guards), std::move(trace->aliases), std::move(runner), std::move(plan),
                                            trace->effects.take(), changes_grad_mode, state.grad_enabled,
                                            table_.set_grad_enabled_fn, split ? split->continuation : Continuation{},
                                            std::move(autocast), trace->op_lines);
  } catch (PythonError&) {
    *error = true;
    return nullptr;
  }
  s.kernels_compiled += backend.kernels > 0 && backend.fallback_reason.empty() ? backend.kernels : 0;
  s.kernels_reused += backend.fallback_reason.empty() ? static_cast<uint64_t>(backend.kernels_reused) : 0;
  if (backend.codegen_failed) ++s.codegen_failures;
  if (!backend.internal_error.empty()) ++s.backend_errors;
  if (backend.training && backend.fallback_reason.empty()) {
    ++s.backward_graphs_compiled;
    s.autograd_islands += backend.autograd_islands.size();
  }
  if (!emit("compile", make_info({{"code", str(code_name(frame.code))},
                                  {"filename", str(code_file(frame.code))},
                                  {"lineno", PyLong_FromLong(frame.code->co_firstlineno)},
                                  {"graph", str(graph_text)},
                                  {"guards", str(guards_text)},
                                  {"ops", PyLong_FromSize_t(trace->graph.nodes().size())},
                                  {"seconds", PyFloat_FromDouble(seconds)},
                                  {"backend_fallback", str(backend.fallback_reason)},
                                  {"codegen_failed", PyBool_FromLong(backend.codegen_failed)},
                                  {"cuda_graph_skip", str(backend.cuda_graph_skip)},
                                  {"backend_error", str(backend.internal_error)},
                                  {"backend_error_stage", str(backend.error_stage)},
                                  {"schedule", str(backend.schedule)},
                                  {"loop_ir", str(backend.loop_ir)},
                                  {"code_language", str(backend.code_language)},
                                  {"code_text", str(backend.code)},
                                  {"kernels", PyLong_FromLong(backend.kernels)},
                                  {"planned_peak_bytes", PyLong_FromLongLong(backend.planned_peak_bytes)},
                                  {"stage_seconds", step_list(backend.stage_seconds)},
                                  {"step_ir", step_list(backend.step_ir)},
                                  {"partition", str(backend.partition)},
                                  {"autograd_islands", str_list(backend.autograd_islands)},
                                  {"notes", str_list(trace->notes)},
                                  {"symbols", PyLong_FromSize_t(trace->graph.symbols.size())},
                                  {"shape_fallback", str(backend.shape_fallback)}}))) {
    *error = true;
    return nullptr;
  }
  return entry;
}

std::map<std::string, std::vector<int64_t>>& Compiler::seen_shapes(PyCodeObject* code) {
  SeenShapes& seen = seen_shapes_[code];
  if (!seen.code) seen.code = PyRef::borrow(reinterpret_cast<PyObject*>(code));  // the key stays this code
  return seen.sizes;
}

void Compiler::on_cache_limit(PyCodeObject* code, const std::string& guard) {
  emit("cache_limit", make_info({{"code", str(code_name(code))},
                                 {"filename", str(code_file(code))},
                                 {"lineno", PyLong_FromLong(code->co_firstlineno)},
                                 {"guard", str(guard)},
                                 {"limit", PyLong_FromLong(cache_limit)}}));
}

void Compiler::on_cache_hit() { ++stats().cache_hits; }

void Compiler::on_recompile(PyCodeObject* code, const std::string& guard) {
  ++stats().recompiles;
  emit("recompile", make_info({{"code", str(code_name(code))}, {"guard", str(guard)}}));
}

}  // namespace ember::driver
