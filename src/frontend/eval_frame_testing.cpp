// Test fixtures for the frame hook (contract: eval_frame_testing.h).
#include "frontend/eval_frame_testing.h"

#include <stdexcept>
#include <utility>

#include "frontend/cpython/shim.h"

namespace ember::frontend::testing {
namespace {

class TestEntry final : public CacheEntry {
 public:
  TestEntry(PyObject* run, PyObject* guard, std::string name)
      : run_(Py_NewRef(run)), guard_(Py_NewRef(guard)), name_(std::move(name)) {}
  ~TestEntry() override {
    Py_DECREF(run_);
    Py_DECREF(guard_);
  }
  TestEntry(const TestEntry&) = delete;
  TestEntry& operator=(const TestEntry&) = delete;

  bool guards_pass(const FrameView& frame, void** state) override {
    PyObject* args = frame_arguments(frame);
    if (args == nullptr) {
      return false;
    }
    PyObject* verdict = PyObject_CallOneArg(guard_, args);
    int passed = verdict != nullptr ? PyObject_IsTrue(verdict) : -1;
    Py_XDECREF(verdict);
    if (passed == 1 && !runs_eagerly()) {
      *state = args;  // consumed by run()
    } else {
      Py_DECREF(args);
    }
    return passed == 1;
  }

  PyObject* run(const FrameView& frame, void* state) override {
    PyObject* args = static_cast<PyObject*>(state);
    PyObject* result = PyObject_CallOneArg(run_, args);
    Py_DECREF(args);
    return result;
  }

  std::string failing_guard(const FrameView& frame) override { return name_; }

  bool runs_eagerly() const override { return run_ == Py_None; }

 private:
  PyObject* run_;
  PyObject* guard_;
  std::string name_;
};

std::string guard_name(PyObject* guard, PyObject* name) {
  PyObject* text = name != nullptr ? Py_NewRef(name) : PyObject_GetAttrString(guard, "__name__");
  if (text == nullptr) {
    PyErr_Clear();
    return "guard";
  }
  const char* utf8 = PyUnicode_Check(text) ? PyUnicode_AsUTF8(text) : nullptr;
  std::string result = utf8 != nullptr ? utf8 : "guard";
  if (utf8 == nullptr) {
    PyErr_Clear();
  }
  Py_DECREF(text);
  return result;
}

long g_counting_calls = 0;
PyObject* g_counted_codes = nullptr;  // list of the code objects evaluated, while installed

PyObject* counting_hook(PyThreadState* tstate, struct _PyInterpreterFrame* frame, int throwflag) {
  ++g_counting_calls;
  EmberFrameFields fields;
  ember_shim_read_frame(frame, &fields);
  if (fields.code != nullptr && g_counted_codes != nullptr &&
      PyList_Append(g_counted_codes, reinterpret_cast<PyObject*>(fields.code)) < 0) {
    PyErr_Clear();  // a test fixture: a lost record shows up as a failing test
  }
  return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
}

_PyFrameEvalFunction current_hook() {
  return _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
}

}  // namespace

TestCompiler::TestCompiler(PyObject* decide, int limit)
    : decide_(Py_NewRef(decide)), recompiles_(PyList_New(0)), limits_(PyList_New(0)) {
  if (limit < 1) {
    Py_DECREF(decide_);
    Py_XDECREF(recompiles_);
    Py_XDECREF(limits_);
    throw std::invalid_argument("TestCompiler: cache_limit must be at least 1");
  }
  if (recompiles_ == nullptr || limits_ == nullptr) {
    Py_DECREF(decide_);
    Py_XDECREF(recompiles_);
    Py_XDECREF(limits_);
    throw std::bad_alloc();
  }
  cache_limit = limit;
}

TestCompiler::~TestCompiler() {
  forget_compiler(this);
  clear();
}

int TestCompiler::traverse(visitproc visit, void* arg) {
  Py_VISIT(decide_);
  Py_VISIT(recompiles_);
  Py_VISIT(limits_);
  return 0;
}

void TestCompiler::clear() {
  Py_CLEAR(decide_);
  Py_CLEAR(recompiles_);
  Py_CLEAR(limits_);
}

std::unique_ptr<CacheEntry> TestCompiler::compile(const FrameView& frame, bool* error) {
  ++compiles;
  if (decide_ == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "TestCompiler: used after the garbage collector cleared it");
    *error = true;
    return nullptr;
  }
  PyObject* args = frame_arguments(frame);
  if (args == nullptr) {
    *error = true;
    return nullptr;
  }
  PyObject* decision = PyObject_CallFunctionObjArgs(
      decide_, reinterpret_cast<PyObject*>(frame.code), args, nullptr);
  Py_DECREF(args);
  if (decision == nullptr) {
    *error = true;
    return nullptr;
  }
  if (decision == Py_None) {
    Py_DECREF(decision);
    ++declines;
    return nullptr;
  }
  Py_ssize_t size = PyTuple_Check(decision) ? PyTuple_GET_SIZE(decision) : 0;
  PyObject* run = size >= 2 ? PyTuple_GET_ITEM(decision, 0) : nullptr;
  PyObject* guard = size >= 2 ? PyTuple_GET_ITEM(decision, 1) : nullptr;
  PyObject* name = size == 3 ? PyTuple_GET_ITEM(decision, 2) : nullptr;
  if ((size != 2 && size != 3) || !PyCallable_Check(guard) ||
      (run != Py_None && !PyCallable_Check(run)) || (name != nullptr && !PyUnicode_Check(name))) {
    Py_DECREF(decision);
    PyErr_SetString(PyExc_TypeError,
                    "TestCompiler: decide() must return None or (run, guard[, name]) with "
                    "callable guard, run callable or None, name a str");
    *error = true;
    return nullptr;
  }
  auto entry = std::make_unique<TestEntry>(run, guard, guard_name(guard, name));
  Py_DECREF(decision);
  return entry;
}

static void record_event(PyObject* list, PyCodeObject* code, const std::string& guard) {
  if (list == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "TestCompiler: used after the garbage collector cleared it");
    return;
  }
  PyObject* event = Py_BuildValue("(Os)", reinterpret_cast<PyObject*>(code), guard.c_str());
  if (event != nullptr) {
    PyList_Append(list, event);
    Py_DECREF(event);
  }
}

void TestCompiler::on_cache_limit(PyCodeObject* code, const std::string& guard) {
  record_event(limits_, code, guard);
}

void TestCompiler::on_recompile(PyCodeObject* code, const std::string& guard) {
  record_event(recompiles_, code, guard);
}

PyObject* frame_arguments(const FrameView& frame) {
  int count = frame.argument_count();
  PyObject* args = PyTuple_New(count);
  if (args == nullptr) {
    return nullptr;
  }
  for (int i = 0; i < count; ++i) {
    PyObject* value = frame.localsplus[i];
    if (value == nullptr) {
      Py_DECREF(args);
      PyErr_Format(PyExc_SystemError, "TestCompiler: argument slot %d of %U is empty", i,
                   frame.code->co_qualname);
      return nullptr;
    }
    PyTuple_SET_ITEM(args, i, Py_NewRef(value));
  }
  return args;
}

PyObject* call_paused(PyObject* fn, PyObject* args, PyObject* kwargs) {
  RegionPause pause;
  return PyObject_Call(fn, args, kwargs);
}

bool install_counting_hook() {
  _PyFrameEvalFunction current = current_hook();
  if (current != nullptr && current != &_PyEval_EvalFrameDefault) {
    return false;
  }
  Py_XSETREF(g_counted_codes, PyList_New(0));
  _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), &counting_hook);
  return g_counted_codes != nullptr;
}

bool remove_counting_hook() {
  if (current_hook() != &counting_hook) {
    return false;
  }
  _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), &_PyEval_EvalFrameDefault);
  return true;
}

bool counting_hook_installed() { return current_hook() == &counting_hook; }

long counting_hook_calls() { return g_counting_calls; }

PyObject* counted_codes() {
  return g_counted_codes != nullptr ? PyList_GetSlice(g_counted_codes, 0, PY_SSIZE_T_MAX)
                                    : PyList_New(0);
}

int datastack_chunk_count() { return ember_shim_datastack_chunk_count(PyThreadState_Get()); }

}  // namespace ember::frontend::testing
