// The PEP 523 frame hook, the per-code cache in co_extra, and compiled regions.
//
// A compiled callable runs its target inside a CompiledRegion. The hook is installed in the
// interpreter only while at least one thread is inside a region (an installed hook slows every
// Python call 2-3x), and chains to whichever hook was installed before. For each frame that
// starts inside a region, the hook:
//   - passes through frames it must not touch: generators and coroutines, frames already started
//     or resumed with throwflag, frames of torch, Ember and the standard library (decided once per
//     code object and remembered in co_extra);
//   - looks up the code object's cache for the region's FrameCompiler and runs the first entry
//     whose guards pass; on a miss it asks the compiler for a new entry (a recompile if the code
//     already had entries). After `cache_limit` entries the code runs eagerly for that compiler,
//     with one warning naming the guard that failed;
//   - runs a frame the compiler declined (nullptr entry) with the default evaluator, still inside
//     the region, so the frames it calls are compiled in turn.
// While tracing and while running a compiled entry, the hook is inactive on that thread: neither
// the compiler's own Python calls nor torch's are intercepted.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <string>

#include "frontend/frame.h"

namespace ember::frontend {

// One compiled version of a frame: its guards and the code that produces its return value.
class CacheEntry {
 public:
  virtual ~CacheEntry() = default;
  // Runs the guards. On success `state` receives what run() needs (e.g. captured inputs).
  virtual bool guards_pass(const FrameView& frame, void** state) = 0;
  // Produces the frame's return value (new reference) or nullptr with a Python error set.
  // Consumes `state` from a successful guards_pass().
  virtual PyObject* run(const FrameView& frame, void* state) = 0;
  // The first failing guard for `frame`, as text.
  virtual std::string failing_guard(const FrameView& frame) = 0;
};

// Compiles frames for one ember.compile() call.
class FrameCompiler {
 public:
  virtual ~FrameCompiler() = default;
  // A new entry for this frame, or nullptr when the frame must run eagerly (the compiler records
  // why). May raise a Python exception (returns nullptr with the error set) to abort the call,
  // as fullgraph=True does.
  virtual std::unique_ptr<CacheEntry> compile(const FrameView& frame, bool* error) = 0;
  // Called once per code object when it reaches the cache limit; `guard` is the failing guard.
  virtual void on_cache_limit(PyCodeObject* code, const std::string& guard) = 0;
  // Counters (cache hits, recompiles) are reported through these.
  virtual void on_cache_hit() = 0;
  virtual void on_recompile(PyCodeObject* code, const std::string& guard) = 0;
  int cache_limit = 8;
};

// Calls fn(*args, **kwargs) with the calling thread inside a region of `compiler`. Regions nest:
// the innermost compiler applies. Returns a new reference or nullptr with an error set.
PyObject* call_in_region(FrameCompiler* compiler, PyObject* fn, PyObject* args, PyObject* kwargs);

// Suspends the region on this thread for the lifetime of the object (tracing, running entries).
class RegionPause {
 public:
  RegionPause();
  ~RegionPause();
  RegionPause(const RegionPause&) = delete;
  RegionPause& operator=(const RegionPause&) = delete;

 private:
  void* saved_;
};

// Drops every cache entry of every code object (ember.reset()).
void clear_all_caches();
// Drops the cache entries that belong to `compiler` (its owner is going away).
void forget_compiler(FrameCompiler* compiler);

}  // namespace ember::frontend
