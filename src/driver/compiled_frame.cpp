// The compiled entry: running a frame's graph, rebuilding its Python values, applying its side
// effects, replaying autocast and continuing after a graph break (see compiled_frame.h).
#include "driver/compiled_frame.h"

#include <algorithm>

#include "frontend/pyutil.h"
#include "frontend/source.h"
#include "pybridge/errors.h"

namespace ember::driver {

using frontend::AliasGuard;
using frontend::AutocastMode;
using frontend::BreakCode;
using frontend::BreakCodeCache;
using frontend::call_in_region;
using frontend::FrameView;
using frontend::GuardSet;
using frontend::SideEffect;
using frontend::SlotKind;
using frontend::TorchTable;
using frontend::Trace;
using frontend::ValuePlan;
using pybridge::PythonError;

namespace {

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

}  // namespace

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

CompiledFrame::CompiledFrame(GuardSet guards, AliasGuard aliases, std::unique_ptr<runtime::GraphRunner> runner,
                             ValuePlan result, std::vector<SideEffect> effects, bool changes_grad_mode,
                             bool initial_grad_mode, PyRef set_grad_enabled, Continuation continuation,
                             AutocastRun autocast, Trace::OpLines op_lines)
    : autocast_(std::move(autocast)),
      continuation_(continuation),
      guards_(std::move(guards)),
      aliases_(std::move(aliases)),
      runner_(std::move(runner)),
      result_(std::move(result)),
      effects_(std::move(effects)),
      changes_grad_mode_(changes_grad_mode),
      initial_grad_mode_(initial_grad_mode),
      set_grad_enabled_(std::move(set_grad_enabled)),
      op_lines_(op_lines) {}

namespace {

// What guards_pass hands to run: the graph's inputs the guards captured (new references) and what the
// guards read of them, which the runner reuses (each input read from torch once a call).
struct CallState {
  explicit CallState(int n) : captured(static_cast<size_t>(n), nullptr), reads(static_cast<size_t>(n)) {}
  ~CallState() {
    for (PyObject* o : captured) Py_XDECREF(o);
  }
  std::vector<PyObject*> captured;
  pybridge::TensorReads reads;
};

}  // namespace

bool CompiledFrame::guards_pass(const FrameView& frame, void** state) {
  auto call = std::make_unique<CallState>(guards_.capture_count());
  if (!guards_.check(frame, call->captured.data(), &call->reads) || !aliases_.holds(frame)) return false;
  *state = call.release();
  return true;
}

PyObject* CompiledFrame::run(const FrameView& frame, void* state) {
  std::unique_ptr<CallState> call(static_cast<CallState*>(state));
  std::vector<PyRef> outputs;
  PyRef suspended;
  if (autocast_.suspend) {
    suspended = PyRef::steal(PyObject_CallNoArgs(autocast_.suspend_fn.get()));
    if (!suspended) return nullptr;
  }
  bool ok = runner_->run_with_reads(call->captured.data(), call->reads, &outputs);
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
  call.reset();
  if (!ok) {
    if (changes_grad_mode_) restore_grad_mode();
    add_source_to_traceback(frame);
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

std::string CompiledFrame::failing_guard(const FrameView& frame) {
  std::string failure = guards_.first_failure(frame);
  if (failure.empty()) aliases_.holds(frame, &failure);
  return failure;
}

void CompiledFrame::restore_grad_mode() {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyObject* r = PyObject_CallOneArg(set_grad_enabled_.get(), initial_grad_mode_ ? Py_True : Py_False);
  Py_XDECREF(r);
  PyErr_Restore(type, value, tb);
}

bool EagerEntry::guards_pass(const FrameView& frame, void** state) {
  *state = nullptr;
  int n = guards_.capture_count();
  std::vector<PyObject*> captured(n > 0 ? n : 1);
  if (!guards_.check(frame, captured.data())) return false;
  for (int i = 0; i < n; ++i) Py_DECREF(captured[i]);
  return true;
}

void CompiledFrame::add_source_to_traceback(const FrameView& frame) const {
  if (op_lines_.first < 0 || !PyErr_Occurred()) return;
  PyCodeObject* code = frame.code;
  const char* fn = PyUnicode_AsUTF8(code->co_name);
  if (!fn) return;  // never for a code name (ASCII, its UTF-8 kept by the str)
  std::string name = fn;
  if (op_lines_.last != op_lines_.first)
    name += " (Ember graph of lines " + std::to_string(op_lines_.first) + "-" + std::to_string(op_lines_.last) + ")";
  frontend::add_traceback_entry(code->co_filename, name, op_lines_.first, frame.globals);
}

PyObject* EagerEntry::run(const FrameView&, void*) {
  PyErr_SetString(PyExc_RuntimeError, "ember: an eager entry was asked to run");
  return nullptr;
}

}  // namespace ember::driver
