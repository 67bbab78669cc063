// Compiler: trace a frame, build its cache entry, report what happened.
#include "frontend/compiler.h"

#include <chrono>

#include "frontend/pyutil.h"
#include "runtime/backend.h"
#include "support/stats.h"

namespace ember::frontend {

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
PyObject* stage_list(const std::vector<std::pair<std::string, double>>& stages) {
  PyObject* list = PyList_New(0);
  for (const auto& [name, seconds] : stages) {
    PyRef stage = PyRef::steal(str(name));
    PyRef time = PyRef::steal(PyFloat_FromDouble(seconds));
    PyRef item = PyRef::steal(PyTuple_Pack(2, stage.get(), time.get()));
    PyList_Append(list, item.get());
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

// Rebuilds a Python value from its plan after the graph ran.
PyObject* build_value(const ValuePlan& p, const std::vector<PyRef>& outputs, const FrameView& frame) {
  switch (p.kind) {
    case ValuePlan::Kind::Const:
      return PyRef(p.constant).release();
    case ValuePlan::Kind::GraphOutput:
      return PyRef(outputs.at(p.output)).release();
    case ValuePlan::Kind::FromSource:
      return resolve(*p.source, frame);
    case ValuePlan::Kind::Tuple:
    case ValuePlan::Kind::List:
    case ValuePlan::Kind::Named: {
      bool list = p.kind == ValuePlan::Kind::List;
      PyRef seq = PyRef::steal(list ? PyList_New(p.items.size()) : PyTuple_New(p.items.size()));
      if (!seq) return nullptr;
      for (size_t i = 0; i < p.items.size(); ++i) {
        PyObject* item = build_value(p.items[i], outputs, frame);
        if (!item) return nullptr;
        if (list) {
          PyList_SET_ITEM(seq.get(), i, item);
        } else {
          PyTuple_SET_ITEM(seq.get(), i, item);
        }
      }
      if (p.kind != ValuePlan::Kind::Named) return seq.release();
      // namedtuple types rebuild through _make; structseqs (torch.return_types) from a tuple.
      PyRef make = PyRef::steal(PyObject_GetAttrString(p.constant.get(), "_make"));
      if (!make) {
        PyErr_Clear();
        return PyObject_CallOneArg(p.constant.get(), seq.get());
      }
      return PyObject_CallOneArg(make.get(), seq.get());
    }
    case ValuePlan::Kind::Call: {
      PyRef a = PyRef::steal(build_value(p.items.at(0), outputs, frame));
      PyRef b = a ? PyRef::steal(build_value(p.items.at(1), outputs, frame)) : PyRef();
      if (!b) return nullptr;
      return PyObject_CallFunctionObjArgs(p.constant.get(), a.get(), b.get(), nullptr);
    }
    case ValuePlan::Kind::Dict: {
      PyRef d = PyRef::steal(PyDict_New());
      for (size_t i = 0; i < p.items.size(); ++i) {
        PyRef v = PyRef::steal(build_value(p.items[i], outputs, frame));
        if (!v || PyDict_SetItem(d.get(), PyTuple_GET_ITEM(p.constant.get(), i), v.get()) < 0) return nullptr;
      }
      return d.release();
    }
  }
  return nullptr;
}

// A frame compiled to a graph.
class CompiledFrame : public CacheEntry {
 public:
  CompiledFrame(GuardSet guards, std::unique_ptr<runtime::GraphRunner> runner, ValuePlan result, std::vector<SideEffect> effects,
                bool changes_grad_mode, bool initial_grad_mode, PyRef set_grad_enabled)
      : guards_(std::move(guards)),
        runner_(std::move(runner)),
        result_(std::move(result)),
        effects_(std::move(effects)),
        changes_grad_mode_(changes_grad_mode),
        initial_grad_mode_(initial_grad_mode),
        set_grad_enabled_(std::move(set_grad_enabled)) {}

  bool guards_pass(const FrameView& frame, void** state) override {
    int n = guards_.capture_count();
    auto* captured = new PyObject*[n > 0 ? n : 1];
    if (!guards_.check(frame, captured)) {
      delete[] captured;
      return false;
    }
    *state = captured;
    return true;
  }

  PyObject* run(const FrameView& frame, void* state) override {
    auto* captured = static_cast<PyObject**>(state);
    int n = guards_.capture_count();
    std::vector<PyRef> outputs;
    bool ok = runner_->run(captured, &outputs);
    for (int i = 0; i < n; ++i) Py_DECREF(captured[i]);
    delete[] captured;
    if (!ok) {
      if (changes_grad_mode_) restore_grad_mode();
      return nullptr;
    }
    // Every value is computed before any store: a value may read a source that an earlier
    // store changes (`self.steps += 1; self.total = self.steps * 10`).
    std::vector<PyRef> values;
    for (const SideEffect& e : effects_) {
      values.push_back(PyRef::steal(build_value(e.plan, outputs, frame)));
      if (!values.back()) return nullptr;
    }
    PyRef result = PyRef::steal(build_value(result_, outputs, frame));
    if (!result) return nullptr;
    for (size_t i = 0; i < effects_.size(); ++i) {
      const SideEffect& e = effects_[i];
      PyObject* value = values[i].get();
      switch (e.kind) {
        case SideEffect::Kind::SetAttr: {
          PyRef target = PyRef::steal(resolve(*e.target, frame));
          if (!target || PyObject_SetAttrString(target.get(), e.name.c_str(), value) < 0) return nullptr;
          break;
        }
        case SideEffect::Kind::SetGlobal:
          if (PyDict_SetItemString(e.globals.get(), e.name.c_str(), value) < 0) return nullptr;
          break;
        case SideEffect::Kind::SetCell:
          if (PyCell_Set(PyTuple_GET_ITEM(frame.closure(), e.cell), value) < 0) return nullptr;
          break;
      }
    }
    return result.release();
  }

  std::string failing_guard(const FrameView& frame) override { return guards_.first_failure(frame); }

 private:
  void restore_grad_mode() {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject* r = PyObject_CallOneArg(set_grad_enabled_.get(), initial_grad_mode_ ? Py_True : Py_False);
    Py_XDECREF(r);
    PyErr_Restore(type, value, tb);
  }

  GuardSet guards_;
  std::unique_ptr<runtime::GraphRunner> runner_;
  ValuePlan result_;
  std::vector<SideEffect> effects_;
  bool changes_grad_mode_;
  bool initial_grad_mode_;
  PyRef set_grad_enabled_;
};

// "Run this frame eagerly" under the guards the failed trace had read: the same inputs would
// fail the same way, so the decision is cached instead of re-tracing on every call.
class EagerEntry : public CacheEntry {
 public:
  explicit EagerEntry(GuardSet guards) : guards_(std::move(guards)) {}
  bool guards_pass(const FrameView& frame, void** state) override {
    *state = nullptr;
    int n = guards_.capture_count();
    std::vector<PyObject*> captured(n > 0 ? n : 1);
    if (!guards_.check(frame, captured.data())) return false;
    for (int i = 0; i < n; ++i) Py_DECREF(captured[i]);
    return true;
  }
  PyObject* run(const FrameView&, void*) override {
    PyErr_SetString(PyExc_RuntimeError, "ember: an eager entry was asked to run");
    return nullptr;
  }
  std::string failing_guard(const FrameView& frame) override { return guards_.first_failure(frame); }
  bool runs_eagerly() const override { return true; }

 private:
  GuardSet guards_;
};

}  // namespace

Compiler::Compiler(CompileOptions options, TorchTable table, PyObject* listener, PyObject* unsupported_error)
    : options_(std::move(options)),
      table_(std::move(table)),
      listener_(PyRef::borrow(listener)),
      unsupported_error_(PyRef::borrow(unsupported_error)) {
  cache_limit = options_.cache_limit;
}

Compiler::~Compiler() { forget_compiler(this); }

bool Compiler::emit(const char* event, PyObject* info) {
  PyRef keep = PyRef::steal(info);
  if (!listener_ || listener_.get() == Py_None) return true;
  PyRef name = PyRef::steal(PyUnicode_FromString(event));
  PyRef r = PyRef::steal(PyObject_CallFunctionObjArgs(listener_.get(), name.get(), info, nullptr));
  return static_cast<bool>(r);
}

std::unique_ptr<CacheEntry> Compiler::compile(const FrameView& frame, bool* error) {
  *error = false;
  RegionPause pause;
  auto start = std::chrono::steady_clock::now();
  Trace trace(table_, frame, options_);
  GlobalState state = GlobalState::current();
  trace.guards.global_state(state);
  std::string reason, where_file;
  int where_line = -1;
  ValuePlan plan;
  try {
    VarRef result = Interpreter::run_frame(trace, codes_);
    plan = trace.finish(result);
    std::vector<std::string> problems = ir::verify(trace.graph);
    if (!problems.empty()) reason = "internal error: the captured graph failed verification: " + problems.front();
  } catch (Unsupported& u) {
    reason = u.reason;
    where_file = u.filename;
    where_line = u.line;
  } catch (PythonError&) {
    reason = "internal error: " + take_error_message();
  } catch (std::exception& e) {
    if (PyErr_Occurred()) PyErr_Clear();
    reason = std::string("internal error: ") + e.what();
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Stats& s = stats();
  s.trace_seconds += seconds;
  if (where_file.empty()) {
    where_file = code_file(frame.code);
    where_line = frame.code->co_firstlineno;
  }

  if (!reason.empty()) {
    ++s.eager_frames;
    std::string message = reason + " (at " + where_file + ":" + std::to_string(where_line) + ", in " + code_name(frame.code) + ")";
    if (!emit("fallback", make_info({{"code", str(code_name(frame.code))},
                                     {"reason", str(reason)},
                                     {"filename", str(where_file)},
                                     {"lineno", PyLong_FromLong(where_line)}}))) {
      *error = true;
      return nullptr;
    }
    if (options_.fullgraph) {
      PyErr_SetString(unsupported_error_.get(), message.c_str());
      *error = true;
      return nullptr;
    }
    return std::make_unique<EagerEntry>(std::move(trace.guards));
  }

  ++s.frames_compiled;
  ++s.graphs;
  s.ops_captured += trace.graph.nodes().size();
  std::string graph_text = ir::print(trace.graph);
  std::string guards_text = trace.guards.describe();
  bool changes_grad_mode = false;
  for (const auto& node : trace.graph.nodes())
    if (node.op == ir::Op::TorchCall && node.result_form == ir::Node::ResultForm::None && node.results.empty() &&
        node.target == table_.name_of(table_.set_grad_enabled_fn.get()))
      changes_grad_mode = true;
  std::unique_ptr<CacheEntry> entry;
  runtime::BackendReport backend;
  try {
    std::unique_ptr<runtime::GraphRunner> runner =
        runtime::build_runner(trace.graph, trace.callables, table_, options_, &backend);
    entry = std::make_unique<CompiledFrame>(std::move(trace.guards), std::move(runner), std::move(plan),
                                            std::move(trace.side_effects), changes_grad_mode, state.grad_enabled,
                                            table_.set_grad_enabled_fn);
  } catch (PythonError&) {
    *error = true;
    return nullptr;
  }
  s.kernels_compiled += backend.kernels > 0 && backend.fallback_reason.empty() ? backend.kernels : 0;
  if (backend.codegen_failed) ++s.codegen_failures;
  if (!emit("compile", make_info({{"code", str(code_name(frame.code))},
                                  {"filename", str(code_file(frame.code))},
                                  {"lineno", PyLong_FromLong(frame.code->co_firstlineno)},
                                  {"graph", str(graph_text)},
                                  {"guards", str(guards_text)},
                                  {"ops", PyLong_FromSize_t(trace.graph.nodes().size())},
                                  {"seconds", PyFloat_FromDouble(seconds)},
                                  {"backend_fallback", str(backend.fallback_reason)},
                                  {"codegen_failed", PyBool_FromLong(backend.codegen_failed)},
                                  {"schedule", str(backend.schedule)},
                                  {"loop_ir", str(backend.loop_ir)},
                                  {"cpp_source", str(backend.cpp_source)},
                                  {"kernels", PyLong_FromLong(backend.kernels)},
                                  {"planned_peak_bytes", PyLong_FromLongLong(backend.planned_peak_bytes)},
                                  {"stage_seconds", stage_list(backend.stage_seconds)}}))) {
    *error = true;
    return nullptr;
  }
  return entry;
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

}  // namespace ember::frontend
