// Exceptions inside the trace: `raise`, the exceptions the interpreter's own operations raise
// (TracedException, trace.h), the bytecode of handlers (PUSH_EXC_INFO, CHECK_EXC_MATCH,
// POP_EXCEPT, RERAISE, WITH_EXCEPT_START), and a generator's StopIteration turned into
// RuntimeError (CALL_INTRINSIC_1).
//
// An exception is a real exception instance made at trace time, held by an Object Var. It
// unwinds the C++ frames of the interpreters (one per inlined call) until one whose code has an
// exception-table entry for the instruction that was running: that interpreter cuts its stack to
// the entry's depth, pushes the exception (and lasti) and jumps to the handler, as CPython does.
//
// The compiled frame's own interpreter also remembers where each exception entered it (the
// instruction of the frame's code that raised or called the code that raised). Anything
// unsupported inside a handler of that code, or an exception no traced handler catches, is
// reported at that instruction: the frame is split there and CPython runs it, raising the same
// exception into the user's own handlers, so a traced handler never has to be rebuilt after a
// graph break and the current-exception state (sys.exc_info) is CPython's own.
#include <algorithm>

#include "frontend/interp/interpreter.h"
#include "frontend/interp/object_model.h"
#include "frontend/pyutil.h"

namespace ember::frontend {

using bytecode::Instruction;
using bytecode::Opcode;

namespace {

bool is_exception_class(PyObject* c) {
  return PyType_Check(c) && PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(c),
                                             reinterpret_cast<PyTypeObject*>(PyExc_BaseException));
}

// repr() of an exception for messages, or its type name when repr fails.
std::string exception_text(PyObject* exc) {
  PyRef r = PyRef::steal(PyObject_Repr(exc));
  if (!r) {
    PyErr_Clear();
    return Py_TYPE(exc)->tp_name;
  }
  return str_of(r.get());
}

}  // namespace

bool Interpreter::is_exception(const Var& v, PyObject* type) {
  if (v.kind != VarKind::Object) return false;
  PyObject* o = v.as<ObjectVar>().obj.get();
  return PyExceptionInstance_Check(o) && PyErr_GivenExceptionMatches(o, type);
}

void Interpreter::raise(PyObject* type, const std::string& message) {
  PyRef text = PyRef::steal(PyUnicode_FromStringAndSize(message.data(), message.size()));
  if (!text) throw PythonError();
  PyRef exc = PyRef::steal(PyObject_CallOneArg(type, text.get()));
  if (!exc) throw PythonError();
  raise_var(trace_.constant(exc));
}

void Interpreter::raise_key_error(PyObject* key) {
  // KeyError(key) keeps the key itself as its argument (str() shows its repr).
  PyRef exc = PyRef::steal(PyObject_CallOneArg(PyExc_KeyError, key));
  if (!exc) throw PythonError();
  raise_var(trace_.constant(exc));
}

PyRef Interpreter::take_exception() {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  PyRef t = PyRef::steal(type), v = PyRef::steal(value), keep_tb = PyRef::steal(tb);
  if (v) PyException_SetTraceback(v.get(), Py_None);
  return v;
}

void Interpreter::raise_taken(PyRef v, const std::string& what) {
  // The real operation raised on values the guards fix: the program sees that exception. Errors
  // that are not the program's stop the trace instead; an interrupt (Ctrl-C) aborts the call.
  if (v && !PyErr_GivenExceptionMatches(v.get(), PyExc_Exception)) {
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(v.get())), v.get());
    throw PythonError();
  }
  if (!v || !PyErr_GivenExceptionMatches(v.get(), PyExc_Exception) ||
      PyErr_GivenExceptionMatches(v.get(), PyExc_MemoryError) ||
      PyErr_GivenExceptionMatches(v.get(), PyExc_RecursionError))
    unsupported(what + " raised " + (v ? exception_text(v.get()) : std::string("an error")));
  raise_var(trace_.constant(std::move(v)));
}

void Interpreter::raise_var(const VarRef& exc, bool reraise) {
  PyObject* e = exc->as<ObjectVar>().obj.get();
  // CPython links an exception raised inside a handler to the one being handled.
  if (!reraise && !trace_.handling.empty() && made_by_trace(e)) {
    PyObject* context = trace_.handling.back()->as<ObjectVar>().obj.get();
    if (context != e) PyException_SetContext(e, Py_NewRef(context));
  }
  TracedException t;
  t.value = exc;
  t.filename = info_.filename;
  t.line = current_ ? current_->line : -1;
  auto site = std::find_if(trace_.raise_sites.begin(), trace_.raise_sites.end(),
                           [&](const Trace::RaiseSite& r) { return r.exception.get() == e; });
  if (site == trace_.raise_sites.end()) {
    trace_.raise_sites.push_back({PyRef::borrow(e), t.filename, t.line});
  } else if (reraise) {
    t.filename = site->filename;
    t.line = site->line;
  } else {
    site->filename = t.filename;
    site->line = t.line;
  }
  throw t;
}

bool Interpreter::made_by_trace(PyObject* exc) const {
  for (const PyRef& m : trace_.made_exceptions)
    if (m.get() == exc) return true;
  return false;
}

VarRef Interpreter::make_exception(PyObject* cls, const std::vector<VarRef>& args, const Kwargs& kwargs) {
  // Exception classes are built for real from constant arguments. A Python __init__ (a user
  // exception that stores fields) runs for real too: exception constructors only set fields of
  // the new instance, which the trace owns.
  PyRef t = PyRef::steal(PyTuple_New(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    PyRef c = Trace::materialize(*args[i]);
    if (!c || !pinned(*args[i])) unsupported("constructing " + trace_.table.name_of(cls) + " from " + describe(*args[i]));
    PyTuple_SET_ITEM(t.get(), i, c.release());
  }
  PyRef kw;
  if (!kwargs.empty()) {
    kw = PyRef::steal(PyDict_New());
    for (const auto& [k, v] : kwargs) {
      PyRef c = Trace::materialize(*v);
      if (!c || !pinned(*v)) unsupported("constructing " + trace_.table.name_of(cls) + " from " + describe(*v));
      if (PyDict_SetItemString(kw.get(), k.c_str(), c.get()) < 0) throw PythonError();
    }
  }
  PyRef exc = PyRef::steal(PyObject_Call(cls, t.get(), kw.get()));
  if (!exc) {
    std::string why = take_error_message();
    unsupported("constructing " + trace_.table.name_of(cls) + " raised " + why);
  }
  trace_.made_exceptions.push_back(exc);
  return trace_.constant(std::move(exc));
}

bool Interpreter::is_exception_class_var(const Var& v) {
  PyObject* c = Trace::as_constant(v);
  return c && is_exception_class(c);
}

VarRef Interpreter::raisable(const VarRef& v) {
  PyObject* c = Trace::as_constant(*v);
  if (c && is_exception_class(c)) return make_exception(c, {}, {});
  if (c && PyExceptionInstance_Check(c)) return v;
  unsupported("raise of " + describe(*v) + ", which is not an exception known at trace time");
}

bool Interpreter::handle(const TracedException& e) {
  int at = static_cast<int>(ip_) - 1;
  for (const auto& h : info_.decoded.exception_table) {
    if (at < h.start || at >= h.end) continue;
    if (stack_.size() < static_cast<size_t>(h.depth)) unsupported("exception handler deeper than the stack");
    stack_.resize(h.depth);
    if (h.lasti) {
      // RERAISE restores the frame's last instruction from this; nothing in a trace reads it.
      push(trace_.constant(PyRef::steal(PyLong_FromLong(info_.decoded.instructions[at].offset / 2))));
    }
    push(e.value);
    ip_ = h.target;
    return true;
  }
  return false;
}

Interpreter::Origin Interpreter::origin_of(const Var& exc) const {
  // Inside a handler of the frame's code, everything is reported where the outermost handled
  // exception came from; else where this one was first seen.
  if (!handler_origins_.empty()) return handler_origins_.front();
  for (const auto& [seen, origin] : exc_origins_)
    if (seen.get() == &exc) return origin;
  int at = static_cast<int>(ip_) - 1;
  return Origin{at, visits_.at(at)};
}

Unsupported Interpreter::uncaught(const TracedException& e) const {
  PyObject* exc = e.value->as<ObjectVar>().obj.get();
  Unsupported u("exception " + exception_text(exc) + " is not caught in the traced code");
  u.filename = e.filename;
  u.line = e.line;
  return u;
}

void Interpreter::step_call_intrinsic_1(const Instruction& ins) {
  if (ins.arg == 3) {
    // INTRINSIC_STOPITERATION_ERROR (3.12+, a generator's own handler): a StopIteration that
    // escapes a generator body becomes RuntimeError (PEP 479); any other exception is kept.
    VarRef exc = pop();
    if (!is_exception(*exc, PyExc_StopIteration)) {
      push(exc);
      return;
    }
    push(make_exception(PyExc_RuntimeError, {trace_.constant(PyRef::steal(PyUnicode_FromString("generator raised StopIteration")))}, {}));
    return;
  }
  unsupported("CALL_INTRINSIC_1 " + std::to_string(ins.arg));
}

void Interpreter::exception_op(const Instruction& ins) {
  if (ins.op == Opcode::RaiseVarargs) {
    if (ins.arg == 0) {
      if (trace_.handling.empty()) unsupported("bare raise with no exception being handled in the trace");
      raise_var(trace_.handling.back(), /*reraise=*/true);
    }
    VarRef cause = ins.arg == 2 ? pop() : nullptr;
    VarRef exc = raisable(pop());
    if (cause) {
      PyObject* e = exc->as<ObjectVar>().obj.get();
      PyObject* c = Trace::as_constant(*cause);
      if (!made_by_trace(e)) unsupported("raise ... from ... of an exception not made in the trace");
      if (c && is_exception_class(c)) c = Trace::as_constant(*make_exception(c, {}, {}));
      if (!c || (c != Py_None && !PyExceptionInstance_Check(c))) unsupported("raise ... from " + describe(*cause));
      PyException_SetCause(e, c == Py_None ? nullptr : Py_NewRef(c));
      // `from None` also hides the context.
      if (PyObject_SetAttrString(e, "__suppress_context__", Py_True) < 0) throw PythonError();
    }
    raise_var(exc);
  }
  if (ins.op == Opcode::PushExcInfo) {
    VarRef exc = pop();
    push(trace_.handling.empty() ? trace_.none() : trace_.handling.back());
    push(exc);
    trace_.handling.push_back(exc);
    if (depth_ == 0) handler_origins_.push_back(origin_of(*exc));
    return;
  }
  if (ins.op == Opcode::PopExcept) {
    pop();  // the exception handled before this one: `handling` keeps it already
    if (trace_.handling.empty()) unsupported("POP_EXCEPT without a handled exception");
    trace_.handling.pop_back();
    if (depth_ == 0 && !handler_origins_.empty()) handler_origins_.pop_back();
    return;
  }
  if (ins.op == Opcode::CheckExcMatch) {
    VarRef type = pop();
    PyRef keep = Trace::materialize(*type);  // a class, or a tuple of classes built by the code
    PyObject* t = keep.get();
    const VarRef& exc = peek();
    if (!t || exc->kind != VarKind::Object) unsupported("except clause with a class not known at trace time");
    bool ok = is_exception_class(t);
    if (PyTuple_Check(t)) {
      ok = true;
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); ++i) ok = ok && is_exception_class(PyTuple_GET_ITEM(t, i));
    }
    if (!ok) unsupported("except clause with " + describe(*type) + ", which is not an exception class");
    bool match = PyErr_GivenExceptionMatches(exc->as<ObjectVar>().obj.get(), t);
    push(trace_.constant(PyRef::borrow(match ? Py_True : Py_False)));
    return;
  }
  if (ins.op == Opcode::Reraise) {
    VarRef exc = pop();  // with an argument, lasti stays under it (only CPython's f_lasti reads it)
    if (exc->kind != VarKind::Object || !PyExceptionInstance_Check(exc->as<ObjectVar>().obj.get()))
      unsupported("RERAISE of " + describe(*exc));
    raise_var(exc, /*reraise=*/true);
  }
  if (ins.op == Opcode::WithExceptStart) {
    // [exit, lasti, previous exception, exception]: exit(type, exception, traceback).
    VarRef exc = peek(1);
    VarRef exit = peek(4);
    PyObject* e = exc->as<ObjectVar>().obj.get();
    VarRef type = trace_.constant(PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(e))));
    push(call(exit, {type, exc, trace_.none()}, {}));
    return;
  }
  unsupported(std::string("exception handling (") + ins.opname + ")");
}

}  // namespace ember::frontend
