// Compiler: trace a frame, build its cache entry, report what happened.
#include "frontend/compiler.h"

#include <algorithm>
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

std::string code_name(PyCodeObject* code) {
  const char* n = PyUnicode_AsUTF8(code->co_qualname);
  return n ? n : "<code>";
}

std::string code_file(PyCodeObject* code) {
  const char* n = PyUnicode_AsUTF8(code->co_filename);
  return n ? n : "<file>";
}

// Rebuilds Python values from their plans after the graph ran. One builder per call: a list or
// dict with a ValuePlan::identity is built once and shared by every plan that names it.
struct ValueBuilder {
  const std::vector<PyRef>& outputs;
  const FrameView& frame;
  std::vector<PyRef> built;  // by identity

  PyObject* build(const ValuePlan& p) {
    if (p.identity < 0) return build_new(p);
    if (static_cast<size_t>(p.identity) >= built.size()) built.resize(p.identity + 1);
    if (!built[p.identity] && (p.kind == ValuePlan::Kind::Function || p.kind == ValuePlan::Kind::Cell))
      return build_closure_part(p);
    if (!built[p.identity] && p.kind == ValuePlan::Kind::Object) {
      // Registered before its attributes are built: an attribute may refer back to the object.
      PyObject* cls = PyTuple_GET_ITEM(p.constant.get(), 0);
      PyObject* names = PyTuple_GET_ITEM(p.constant.get(), 1);
      built[p.identity] = PyRef::steal(PyObject_CallMethod(reinterpret_cast<PyObject*>(&PyBaseObject_Type), "__new__", "O", cls));
      if (!built[p.identity]) return nullptr;
      PyObject* obj = built[p.identity].get();
      for (size_t i = 0; i < p.items.size(); ++i) {
        PyRef value = PyRef::steal(build(p.items[i]));
        if (!value || PyObject_GenericSetAttr(obj, PyTuple_GET_ITEM(names, i), value.get()) < 0) return nullptr;
      }
    }
    if (!built[p.identity]) {
      built[p.identity] = PyRef::steal(build_new(p));
      if (!built[p.identity]) return nullptr;
    }
    return PyRef(built[p.identity]).release();
  }

  // A function made by MAKE_FUNCTION, or a cell: registered before its items are built (a
  // closure may reach itself through a cell), then completed.
  PyObject* build_closure_part(const ValuePlan& p) {
    bool function = p.kind == ValuePlan::Kind::Function;
    built[p.identity] = PyRef::steal(function ? PyFunction_New(PyTuple_GET_ITEM(p.constant.get(), 0),
                                                               PyTuple_GET_ITEM(p.constant.get(), 1))
                                              : PyCell_New(nullptr));
    PyObject* obj = built[p.identity].get();
    if (!obj) return nullptr;
    std::vector<PyRef> items;
    for (const ValuePlan& item : p.items) {
      items.push_back(PyRef::steal(build(item)));
      if (!items.back()) return nullptr;
    }
    if (!function) {
      if (!items.empty() && PyCell_Set(obj, items[0].get()) < 0) return nullptr;
      return PyRef(built[p.identity]).release();
    }
    if (items.size() != 4) {
      PyErr_SetString(PyExc_SystemError, "ember: a function plan without its four parts");
      return nullptr;
    }
    if (PyFunction_SetDefaults(obj, items[0].get()) < 0 || PyFunction_SetKwDefaults(obj, items[1].get()) < 0 ||
        PyFunction_SetClosure(obj, items[2].get()) < 0)
      return nullptr;
    if (items[3].get() != Py_None) {
      // MAKE_FUNCTION's flat (name, value, ...) tuple; a function's __annotations__ is a dict.
      PyObject* flat = items[3].get();
      PyRef annotations = PyRef::steal(PyDict_New());
      for (Py_ssize_t i = 0; annotations && i + 1 < PyTuple_GET_SIZE(flat); i += 2)
        if (PyDict_SetItem(annotations.get(), PyTuple_GET_ITEM(flat, i), PyTuple_GET_ITEM(flat, i + 1)) < 0) return nullptr;
      if (!annotations || PyFunction_SetAnnotations(obj, annotations.get()) < 0) return nullptr;
    }
    return PyRef(built[p.identity]).release();
  }

  PyObject* build_new(const ValuePlan& p) {
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
          PyObject* item = build(p.items[i]);
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
        PyRef a = PyRef::steal(build(p.items.at(0)));
        PyRef b = a ? PyRef::steal(build(p.items.at(1))) : PyRef();
        if (!b) return nullptr;
        return PyObject_CallFunctionObjArgs(p.constant.get(), a.get(), b.get(), nullptr);
      }
      case ValuePlan::Kind::Object:
      case ValuePlan::Kind::Function:
      case ValuePlan::Kind::Cell:
        PyErr_SetString(PyExc_SystemError, "ember: an object, function or cell plan without an identity");
        return nullptr;
      case ValuePlan::Kind::FrameCell: {
        PyObject* cells = frame.closure();
        if (!cells || p.output >= PyTuple_GET_SIZE(cells)) {
          PyErr_SetString(PyExc_SystemError, "ember: the frame has no such closure cell");
          return nullptr;
        }
        return Py_NewRef(PyTuple_GET_ITEM(cells, p.output));
      }
      case ValuePlan::Kind::Dict: {
        PyRef d = PyRef::steal(PyDict_New());
        for (size_t i = 0; i < p.items.size(); ++i) {
          PyRef v = PyRef::steal(build(p.items[i]));
          if (!v || PyDict_SetItem(d.get(), PyTuple_GET_ITEM(p.constant.get(), i), v.get()) < 0) return nullptr;
        }
        return d.release();
      }
    }
    return nullptr;
  }
};

// What runs after the graph of a frame that was split by a graph break (graph_break.h): the
// graph's result is the tuple of the values glue takes (the non-NULL stack values, then the
// live locals).
struct Continuation {
  const BreakCode* code = nullptr;
  FrameCompiler* compiler = nullptr;
};

// A new function running `code` with the frame's globals and closure.
PyRef function_for(PyObject* code, const FrameView& frame) {
  PyRef fn = PyRef::steal(PyFunction_New(code, frame.globals));
  if (fn && frame.closure() && PyFunction_SetClosure(fn.get(), frame.closure()) < 0) return PyRef();
  return fn;
}

// Runs the glue of a break with `values`, then the resume function of the successor glue took.
PyObject* continue_after_break(const Continuation& c, PyObject* values, const FrameView& frame) {
  const BreakCode& bc = *c.code;
  PyRef glue = function_for(bc.glue.get(), frame);
  if (!glue) return nullptr;
  PyRef r = PyRef::steal(call_in_region(c.compiler, glue.get(), values, nullptr));
  if (!r) return nullptr;
  PyObject* t = r.get();
  if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 2 || PyTuple_GET_ITEM(t, 0) != BreakCodeCache::marker()) {
    return r.release();  // the user's code handled an exception and finished the frame in the glue
  }
  long edge = PyLong_AsLong(PyTuple_GET_ITEM(t, 1));
  Py_ssize_t lower = 0, operands = 0;
  for (SlotKind k : bc.lower) lower += k != SlotKind::Null;
  for (SlotKind k : bc.operands) operands += k != SlotKind::Null;
  Py_ssize_t pushed = PyTuple_GET_SIZE(t) - 2;
  // Layouts (graph_break.h): glue took [first argument?, stack values, other locals]; the
  // resume function takes [first argument?, lower stack values, pushed values, other locals].
  Py_ssize_t first = bc.first_in_place ? 1 : 0;
  const std::vector<int>& locals = bc.resume_locals[edge];
  PyRef args = PyRef::steal(PyTuple_New(first + lower + pushed + static_cast<Py_ssize_t>(locals.size())));
  Py_ssize_t at = 0;
  auto put = [&](PyObject* v) {
    Py_INCREF(v);
    PyTuple_SET_ITEM(args.get(), at++, v);
  };
  if (first) put(PyTuple_GET_ITEM(values, 0));
  for (Py_ssize_t i = 0; i < lower; ++i) put(PyTuple_GET_ITEM(values, first + i));
  for (Py_ssize_t i = 0; i < pushed; ++i) put(PyTuple_GET_ITEM(t, 2 + i));
  for (int slot : locals) {
    Py_ssize_t pos = std::find(bc.glue_locals.begin(), bc.glue_locals.end(), slot) - bc.glue_locals.begin();
    put(PyTuple_GET_ITEM(values, first + lower + operands + pos));
  }
  PyRef resume = function_for(bc.resume[edge].get(), frame);
  if (!resume) return nullptr;
  return call_in_region(c.compiler, resume.get(), args.get(), nullptr);
}

// The events ember.autocast.replay takes: ((entering, device, enabled, dtype, cache), ...).
PyRef autocast_events_tuple(const TorchTable& table, const std::vector<Trace::AutocastEvent>& events) {
  PyRef out = PyRef::steal(PyTuple_New(events.size()));
  if (!out) throw PythonError();
  for (size_t i = 0; i < events.size(); ++i) {
    const AutocastMode& m = events[i].mode;
    PyObject* e = Py_BuildValue("(OsOOO)", events[i].enter ? Py_True : Py_False, m.device.c_str(),
                                m.enabled ? Py_True : Py_False, table.dtype_object(m.dtype), m.cache ? Py_True : Py_False);
    if (!e) throw PythonError();
    PyTuple_SET_ITEM(out.get(), i, e);
  }
  return out;
}

// What a compiled frame does about torch.autocast around its graph (see Trace::autocast).
struct AutocastRun {
  bool suspend = false;  // autocast is on when the frame starts: off while the graph runs
  PyRef events;          // the tuple ember.autocast.replay applies after the graph; null if none
  PyRef suspend_fn, resume_fn, replay_fn;
};

// A frame compiled to a graph.
class CompiledFrame : public CacheEntry {
 public:
  CompiledFrame(GuardSet guards, AliasGuard aliases, std::unique_ptr<runtime::GraphRunner> runner, ValuePlan result,
                std::vector<SideEffect> effects, bool changes_grad_mode, bool initial_grad_mode, PyRef set_grad_enabled,
                Continuation continuation, AutocastRun autocast)
      : autocast_(std::move(autocast)),
        continuation_(continuation),
        guards_(std::move(guards)),
        aliases_(std::move(aliases)),
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
    if (!aliases_.holds(frame)) {
      for (int i = 0; i < n; ++i) Py_DECREF(captured[i]);
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
    PyRef suspended;
    if (autocast_.suspend) {
      suspended = PyRef::steal(PyObject_CallNoArgs(autocast_.suspend_fn.get()));
      if (!suspended) {
        for (int i = 0; i < n; ++i) Py_DECREF(captured[i]);
        delete[] captured;
        return nullptr;
      }
    }
    bool ok = runner_->run(captured, &outputs);
    if (suspended) {
      PyObject *type, *value, *tb;
      PyErr_Fetch(&type, &value, &tb);
      PyRef r = PyRef::steal(PyObject_CallOneArg(autocast_.resume_fn.get(), suspended.get()));
      if (!r) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        ok = false;
      } else {
        PyErr_Restore(type, value, tb);
      }
    }
    for (int i = 0; i < n; ++i) Py_DECREF(captured[i]);
    delete[] captured;
    if (!ok) {
      if (changes_grad_mode_) restore_grad_mode();
      return nullptr;
    }
    // Every value and every store's target is computed before any store: a value may read a
    // source that an earlier store changes (`self.steps += 1; self.total = self.steps * 10`), and
    // a target's source names the object the trace saw (`xs.insert(0, a); xs[1].flag = 1`).
    ValueBuilder builder{outputs, frame, {}};
    std::vector<PyRef> values, targets;
    for (const SideEffect& e : effects_) {
      values.push_back(PyRef::steal(builder.build(e.plan)));
      if (!values.back()) return nullptr;
      targets.push_back(e.target ? PyRef::steal(resolve(*e.target, frame)) : PyRef());
      if (e.target && !targets.back()) return nullptr;
    }
    PyRef result = PyRef::steal(builder.build(result_));
    if (!result) return nullptr;
    for (size_t i = 0; i < effects_.size(); ++i) {
      const SideEffect& e = effects_[i];
      PyObject* value = values[i].get();
      PyObject* target = targets[i].get();
      switch (e.kind) {
        case SideEffect::Kind::SetAttr:
          if (PyObject_SetAttrString(target, e.name.c_str(), value) < 0) return nullptr;
          break;
        case SideEffect::Kind::SetGlobal:
          if (PyDict_SetItemString(e.globals.get(), e.name.c_str(), value) < 0) return nullptr;
          break;
        case SideEffect::Kind::SetCell:
          if (PyCell_Set(PyTuple_GET_ITEM(frame.closure(), e.cell), value) < 0) return nullptr;
          break;
        case SideEffect::Kind::Contents:
          // In place, so every reference to the caller's object sees the new contents; a dict
          // is cleared first so that its keys come out in the trace's final order.
          if (PyList_CheckExact(target)) {
            if (PyList_SetSlice(target, 0, PyList_GET_SIZE(target), value) < 0) return nullptr;
          } else if (PyDict_CheckExact(target)) {
            PyDict_Clear(target);
            if (PyDict_Merge(target, value, 1) < 0) return nullptr;
          } else {
            PyErr_Format(PyExc_RuntimeError, "ember: %s is no longer a list or dict", e.target->str().c_str());
            return nullptr;
          }
          break;
      }
    }
    // CPython now enters and leaves the autocast blocks the trace left open or closed.
    if (autocast_.events) {
      PyRef r = PyRef::steal(PyObject_CallOneArg(autocast_.replay_fn.get(), autocast_.events.get()));
      if (!r) return nullptr;
    }
    if (continuation_.code) return continue_after_break(continuation_, result.get(), frame);
    return result.release();
  }

  std::string failing_guard(const FrameView& frame) override {
    std::string failure = guards_.first_failure(frame);
    if (failure.empty()) aliases_.holds(frame, &failure);
    return failure;
  }

 private:
  void restore_grad_mode() {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject* r = PyObject_CallOneArg(set_grad_enabled_.get(), initial_grad_mode_ ? Py_True : Py_False);
    Py_XDECREF(r);
    PyErr_Restore(type, value, tb);
  }

  AutocastRun autocast_;
  Continuation continuation_;
  GuardSet guards_;
  AliasGuard aliases_;
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
  bool failed() const { return !reason.empty(); }
};

// Runs `f`, turning the ways a trace fails into a Failure.
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
    out.reason = "internal error: " + take_error_message();
  } catch (std::exception& e) {
    if (PyErr_Occurred()) PyErr_Clear();
    out.reason = std::string("internal error: ") + e.what();
  }
  return out;
}

}  // namespace

std::unique_ptr<Compiler::Split> Compiler::plan_split(const FrameView& frame, Trace& trace, const Unsupported& failed,
                                                      std::string* why_not) {
  const CodeInfo& info = codes_.get(frame.code);
  std::optional<BreakRange> range = break_range(info, failed.root_index);
  if (!range) {
    *why_not = unbreakable_reason(info, failed.root_index);
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
  auto trace = std::make_unique<Trace>(table_, frame, options_);
  trace->guards.global_state(state);
  ValuePlan plan;
  Failure failure = catch_failure([&] {
    if (state.autocast_state.other)
      throw Unsupported("torch.autocast is active for a device type other than cpu and cuda (Ember traces autocast for those two)");
    VarRef result = Interpreter::run_frame(*trace, codes_);
    plan = trace->finish(result);
    std::vector<std::string> problems = ir::verify(trace->graph);
    if (!problems.empty()) throw std::runtime_error("the captured graph failed verification: " + problems.front());
  });
  // A frame that fails at an instruction of its own code is split there (unless fullgraph).
  std::unique_ptr<Split> split;
  if (failure.failed() && failure.unsupported.root_index >= 0 && !options_.fullgraph) {
    auto retrace = std::make_unique<Trace>(table_, frame, options_);
    retrace->guards.global_state(state);
    std::string why_not;
    split = plan_split(frame, *retrace, failure.unsupported, &why_not);
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
  std::string graph_text = ir::print(trace->graph);
  std::string guards_text = trace->guards.describe() + trace->aliases.describe();
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
  runtime::BackendReport backend;
  try {
    if (!trace->autocast_events.empty()) autocast.events = autocast_events_tuple(table_, trace->autocast_events);
    std::unique_ptr<runtime::GraphRunner> runner =
        runtime::build_runner(trace->graph, trace->callables, table_, options_, &backend);
    entry = std::make_unique<CompiledFrame>(std::move(trace->guards), std::move(trace->aliases), std::move(runner), std::move(plan),
                                            std::move(trace->side_effects), changes_grad_mode, state.grad_enabled,
                                            table_.set_grad_enabled_fn, split ? split->continuation : Continuation{},
                                            std::move(autocast));
  } catch (PythonError&) {
    *error = true;
    return nullptr;
  }
  s.kernels_compiled += backend.kernels > 0 && backend.fallback_reason.empty() ? backend.kernels : 0;
  if (backend.codegen_failed) ++s.codegen_failures;
  if (!backend.internal_error.empty()) ++s.backend_errors;
  if (!emit("compile", make_info({{"code", str(code_name(frame.code))},
                                  {"filename", str(code_file(frame.code))},
                                  {"lineno", PyLong_FromLong(frame.code->co_firstlineno)},
                                  {"graph", str(graph_text)},
                                  {"guards", str(guards_text)},
                                  {"ops", PyLong_FromSize_t(trace->graph.nodes().size())},
                                  {"seconds", PyFloat_FromDouble(seconds)},
                                  {"backend_fallback", str(backend.fallback_reason)},
                                  {"codegen_failed", PyBool_FromLong(backend.codegen_failed)},
                                  {"backend_error", str(backend.internal_error)},
                                  {"backend_error_stage", str(backend.error_stage)},
                                  {"schedule", str(backend.schedule)},
                                  {"loop_ir", str(backend.loop_ir)},
                                  {"cpp_source", str(backend.cpp_source)},
                                  {"kernels", PyLong_FromLong(backend.kernels)},
                                  {"planned_peak_bytes", PyLong_FromLongLong(backend.planned_peak_bytes)},
                                  {"stage_seconds", step_list(backend.stage_seconds)},
                                  {"step_ir", step_list(backend.step_ir)}}))) {
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
