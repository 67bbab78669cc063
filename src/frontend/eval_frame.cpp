// The PEP 523 eval-frame hook and compiled regions (contract: eval_frame.h).
//
// Needs: the GIL, held by CPython whenever it calls the hook and by every caller of the functions
// here. Guarantees: the hook is installed exactly while some region is open on some thread; every
// frame is either evaluated (by the previous hook or the default evaluator, which then own it) or
// answered and released through the version shim, exactly once; no C++ exception crosses into
// CPython.
// Thread model: which compiler applies is per thread (region.h); installation is per
// interpreter and counted across threads. Python code run by guards, compilers and entries may
// switch threads, so nothing here holds a pointer into a cache across such a call except through
// the shared snapshots code_cache.h hands out.
#include "frontend/eval_frame.h"

#include <nanobind/nanobind.h>

#include <exception>
#include <utility>

#include "frontend/code_cache.h"
#include "frontend/cpython/shim.h"
#include "pybridge/errors.h"

namespace ember::frontend {
namespace {

// Regions open on all threads together. The hook is installed while this is positive.
int g_open_regions = 0;
// The eval-frame function that was installed when Ember installed its hook; null for the default.
_PyFrameEvalFunction g_previous = nullptr;
HookStats g_stats;

PyObject* ember_eval_frame(PyThreadState* tstate, struct _PyInterpreterFrame* frame, int throwflag);

PyObject* evaluate(PyThreadState* tstate, struct _PyInterpreterFrame* frame, int throwflag) {
  _PyFrameEvalFunction previous = g_previous;
  if (previous != nullptr) {
    return previous(tstate, frame, throwflag);
  }
  return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
}

void install_hook() {
  PyInterpreterState* interp = PyInterpreterState_Get();
  _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(interp);
  if (current == &ember_eval_frame) {
    return;
  }
  g_previous = (current == nullptr || current == &_PyEval_EvalFrameDefault) ? nullptr : current;
  _PyInterpreterState_SetEvalFrameFunc(interp, &ember_eval_frame);
}

void remove_hook() {
  PyInterpreterState* interp = PyInterpreterState_Get();
  // A hook installed over Ember's since (a debugger, say) stays: removing it is its owner's call.
  if (_PyInterpreterState_GetEvalFrameFunc(interp) != &ember_eval_frame) {
    return;
  }
  _PyInterpreterState_SetEvalFrameFunc(
      interp, g_previous != nullptr ? g_previous : &_PyEval_EvalFrameDefault);
}

// One open region on the calling thread, from construction to destruction: counted (the hook is
// installed while any is open), then its compiler applies on this thread (region.h). Members are
// destroyed in reverse: the thread's compiler is restored before the count drops.
class OpenRegion {
 public:
  explicit OpenRegion(FrameCompiler* compiler) : scope_(compiler) {}

 private:
  struct Count {
    Count() {
      if (g_open_regions++ == 0) {
        install_hook();
      }
    }
    ~Count() {
      if (--g_open_regions == 0) {
        remove_hook();
      }
    }
  };
  Count count_;
  RegionCompilerScope scope_;
};

// What the hook does with a frame once the cache and the compiler have been consulted.
enum class Outcome {
  answered,  // an entry produced the result
  evaluate,  // evaluate the frame normally, region active
  failed,    // a Python error is set
};

bool error_set() { return PyErr_Occurred() != nullptr; }

Outcome run_entry(CacheEntry& entry, const FrameView& view, void* state, FrameCompiler* compiler,
                  PyObject** result) {
  if (entry.runs_eagerly()) {
    compiler->on_cache_hit();
    return error_set() ? Outcome::failed : Outcome::evaluate;
  }
  *result = entry.run(view, state);
  if (*result == nullptr) {
    if (!error_set()) {
      PyErr_SetString(PyExc_SystemError, "Ember: a cache entry failed without setting an error");
    }
    return Outcome::failed;
  }
  compiler->on_cache_hit();
  if (error_set()) {
    Py_CLEAR(*result);
    return Outcome::failed;
  }
  return Outcome::answered;
}

// Compiles the frame after a miss and runs the new entry.
Outcome compile_and_run(const FrameView& view, CodeCache& cache, FrameCompiler* compiler,
                        PyObject** result) {
  bool error = false;
  std::unique_ptr<CacheEntry> compiled = compiler->compile(view, &error);
  if (error || error_set()) {
    if (!error_set()) {
      PyErr_SetString(PyExc_SystemError, "Ember: the compiler failed without setting an error");
    }
    return Outcome::failed;
  }
  if (compiled == nullptr) {
    return Outcome::evaluate;
  }
  // Tracing runs Python code, so another thread may have compiled the same frame meanwhile: an
  // entry that already accepts this frame wins, and the new one is dropped (no duplicate
  // entries filling the cache limit). The call still counts as the compile it was.
  std::shared_ptr<CacheEntry> entry;
  void* state = nullptr;
  if (const CompilerCache* current = cache.find(compiler)) {
    EntryListRef entries = current->entries;
    for (size_t i = 0; entries && i < entries->size() && !entry; ++i) {
      if ((*entries)[i]->guards_pass(view, &state)) entry = (*entries)[i];
      if (error_set()) return Outcome::failed;
    }
  }
  if (!entry) {
    entry = std::shared_ptr<CacheEntry>(std::move(compiled));
    cache.add_entry(compiler, entry);
    if (!entry->guards_pass(view, &state)) {
      if (!error_set()) {
        std::string guard = entry->failing_guard(view);
        if (!error_set()) {
          PyErr_Format(PyExc_RuntimeError,
                       "Ember: the guards of the entry just compiled for %U reject the frame it was "
                       "compiled from (failing guard: %s)",
                       view.code->co_qualname, guard.c_str());
        }
      }
      return Outcome::failed;
    }
  }
  if (entry->runs_eagerly()) {
    return Outcome::evaluate;
  }
  *result = entry->run(view, state);
  if (*result == nullptr && !error_set()) {
    PyErr_SetString(PyExc_SystemError, "Ember: a cache entry failed without setting an error");
  }
  return *result != nullptr ? Outcome::answered : Outcome::failed;
}

// The cache lookup, and on a miss the cache limit, the recompile notice and the compiler. Runs
// with the region paused. `entries` is a snapshot: guards and compilers may run Python code that
// changes the cache (another thread compiling, ember.reset()) without invalidating it.
Outcome look_up(const FrameView& view, CodeCache& cache, FrameCompiler* compiler,
                PyObject** result) {
  EntryListRef entries;
  if (const CompilerCache* state = cache.find(compiler)) {
    if (state->over_limit) {
      return Outcome::evaluate;
    }
    entries = state->entries;
  }
  if (entries == nullptr || entries->empty()) {
    return compile_and_run(view, cache, compiler, result);
  }
  for (size_t i = 0; i < entries->size(); ++i) {
    const std::shared_ptr<CacheEntry>& entry = (*entries)[i];
    void* state = nullptr;
    if (entry->guards_pass(view, &state)) {
      cache.note_hit(compiler, entry.get(), i);
      return run_entry(*entry, view, state, compiler, result);
    }
    if (error_set()) {
      return Outcome::failed;
    }
  }
  std::string guard = entries->front()->failing_guard(view);
  if (error_set()) {
    return Outcome::failed;
  }
  if (static_cast<int>(entries->size()) >= compiler->cache_limit) {
    bool newly_marked = false;
    EntryListRef dropped = cache.mark_over_limit(compiler, &newly_marked);
    if (newly_marked) {
      compiler->on_cache_limit(view.code, guard);
    }
    return error_set() ? Outcome::failed : Outcome::evaluate;
  }
  compiler->on_recompile(view.code, guard);
  if (error_set()) {
    return Outcome::failed;
  }
  return compile_and_run(view, cache, compiler, result);
}

// look_up() behind a C++ exception barrier: the hook's callers are C.
Outcome look_up_guarded(const FrameView& view, CodeCache& cache, FrameCompiler* compiler,
                        PyObject** result) {
  try {
    return look_up(view, cache, compiler, result);
  } catch (nanobind::python_error& e) {
    e.restore();
  } catch (const pybridge::PythonError&) {
    // A Python error is set (an interrupt landing in one of Ember's Python calls): it reaches the caller.
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_RuntimeError, "Ember: C++ exception in the frame hook: %s", e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "Ember: unknown C++ exception in the frame hook");
  }
  Py_CLEAR(*result);
  return Outcome::failed;
}

// Releases a frame the hook answered without evaluating it (see shim.h for the per-version rule)
// and returns `result`, which is null when answering failed.
PyObject* release_answered_frame(PyThreadState* tstate, struct _PyInterpreterFrame* frame,
                                 PyObject* result) {
  ++g_stats.frames_replaced;
  if (ember_shim_frame_starts_chunk(tstate, frame)) {
    ++g_stats.chunk_opening_frames_replaced;
  }
  ember_shim_dispose_unrun_frame(tstate, frame);
  return result;
}

PyObject* ember_eval_frame(PyThreadState* tstate, struct _PyInterpreterFrame* frame,
                           int throwflag) {
  FrameCompiler* compiler = region_compiler();
  // Frames resumed with throwflag must run their exception handlers; started frames (resumed
  // generators) cannot be replaced; a frame object would need its data handed over.
  if (compiler == nullptr || throwflag != 0 || !ember_shim_frame_owned_by_thread(frame) ||
      ember_shim_frame_started(frame) || ember_shim_frame_has_frame_object(frame)) {
    return evaluate(tstate, frame, throwflag);
  }
  EmberFrameFields fields;
  ember_shim_read_frame(frame, &fields);
  if (fields.code == nullptr || ember_shim_code_is_generator(fields.code)) {
    return evaluate(tstate, frame, throwflag);
  }
  CodeCache* cache = code_cache_for(fields.code);
  if (cache == nullptr) {
    return release_answered_frame(tstate, frame, nullptr);
  }
  if (cache->skip() != SkipReason::none) {
    return evaluate(tstate, frame, throwflag);
  }
  FrameView view;
  view.code = fields.code;
  view.func = fields.func;
  view.globals = fields.globals;
  view.builtins = fields.builtins;
  view.localsplus = fields.localsplus;
  view.nlocalsplus = fields.nlocalsplus;

  PyObject* result = nullptr;
  Outcome outcome;
  {
    RegionPause pause;
    outcome = look_up_guarded(view, *cache, compiler, &result);
  }
  // The cache must not be touched from here on: releasing the frame may free the code object.
  switch (outcome) {
    case Outcome::evaluate:
      return evaluate(tstate, frame, throwflag);
    case Outcome::answered:
    case Outcome::failed:
      return release_answered_frame(tstate, frame, result);
  }
  return release_answered_frame(tstate, frame, result);
}

}  // namespace

PyObject* call_in_region(FrameCompiler* compiler, PyObject* fn, PyObject* args,
                         PyObject* kwargs) {
  if (compiler == nullptr) {
    PyErr_SetString(PyExc_TypeError, "Ember: call_in_region() needs a compiler");
    return nullptr;
  }
  if (args == nullptr || !PyTuple_Check(args)) {
    PyErr_SetString(PyExc_TypeError, "Ember: call_in_region() arguments must be a tuple");
    return nullptr;
  }
  if (kwargs != nullptr && !PyDict_Check(kwargs)) {
    PyErr_SetString(PyExc_TypeError, "Ember: call_in_region() keyword arguments must be a dict");
    return nullptr;
  }
  if (!prepare_code_caches()) {
    return nullptr;
  }
  OpenRegion region(compiler);
  return PyObject_Call(fn, args, kwargs);
}

void clear_all_caches() { clear_all_code_caches(); }

void forget_compiler(FrameCompiler* compiler) { forget_compiler_everywhere(compiler); }

bool hook_installed() {
  return _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()) == &ember_eval_frame;
}

int cache_entry_count(PyCodeObject* code, const FrameCompiler* compiler) {
  CodeCache* cache = existing_code_cache(code);
  if (cache == nullptr) {
    return 0;
  }
  const CompilerCache* state = cache->find(compiler);
  return state != nullptr && state->entries != nullptr ? static_cast<int>(state->entries->size())
                                                       : 0;
}

const char* skip_reason(PyCodeObject* code) {
  if (!prepare_code_caches()) {
    return nullptr;
  }
  CodeCache* cache = code_cache_for(code);
  return cache != nullptr ? skip_reason_name(cache->skip()) : nullptr;
}

int cached_code_count() { return registered_code_count(); }

HookStats hook_stats() { return g_stats; }

}  // namespace ember::frontend
