// What the per-code cache holds and who fills it: the two interfaces between the frame hook
// (eval_frame.h), the per-code cache (code_cache.h) and the compiler that makes entries
// (driver/compiler.h). They live apart from both users so that the hook depends on the cache
// and the cache on these interfaces, never the other way round.
#pragma once

#include <Python.h>

#include <memory>
#include <string>

#include "frontend/frame.h"

namespace ember::frontend {

// One compiled version of a frame: its guards and the code that produces its return value.
class CacheEntry {
 public:
  virtual ~CacheEntry() = default;
  // Runs the guards. On success `state` receives what run() needs (e.g. captured inputs), and the
  // hook calls run() next, always. Returning false with a Python error set aborts the call with
  // that error.
  virtual bool guards_pass(const FrameView& frame, void** state) = 0;
  // Produces the frame's return value (new reference) or nullptr with a Python error set.
  // Consumes `state` from a successful guards_pass().
  virtual PyObject* run(const FrameView& frame, void* state) = 0;
  // The first failing guard for `frame`, as text. Called only after guards_pass() failed; may
  // leave a Python error set, which aborts the call.
  virtual std::string failing_guard(const FrameView& frame) = 0;
  // True for an entry that records "evaluate this frame normally" under its guards: run() is
  // never called, and guards_pass() must leave `state` null.
  virtual bool runs_eagerly() const { return false; }
};

// Compiles frames for one ember.compile() call.
class FrameCompiler {
 public:
  virtual ~FrameCompiler() = default;
  // A new entry for this frame (its guards must pass for this frame), or nullptr when the frame
  // must run eagerly this once (the compiler records why). To abort the call, as fullgraph=True
  // does, sets *error = true and a Python exception and returns nullptr.
  virtual std::unique_ptr<CacheEntry> compile(const FrameView& frame, bool* error) = 0;
  // Called once per (code object, compiler) when the code reaches the cache limit; `guard` is the
  // first failing guard of the most recent entry. May raise (aborts the call).
  virtual void on_cache_limit(PyCodeObject* code, const std::string& guard) = 0;
  // Counters. on_cache_hit() follows an entry's successful run() (for an entry that runs
  // eagerly: its passing guards); on_recompile() precedes compile() on a miss when the code
  // already has entries, with the first failing guard of the most recent one. Either may raise
  // (aborts the call).
  virtual void on_cache_hit() = 0;
  virtual void on_recompile(PyCodeObject* code, const std::string& guard) = 0;
  // Entries per code object before it runs eagerly for this compiler; at least 1.
  int cache_limit = 8;
};

}  // namespace ember::frontend
