// Test fixtures for the frame hook: a FrameCompiler driven by Python callables, and a second,
// trivial eval-frame hook to check that Ember chains to a previously installed one. Used only by
// tests/eval_frame through ember._C.eval_frame; nothing in Ember's pipeline depends on them, and
// only development builds compile them (CMake option EMBER_TEST_FIXTURES).
#pragma once

#include <Python.h>

#include <memory>
#include <string>

#include "frontend/eval_frame.h"

namespace ember::frontend::testing {

// A compiler whose decisions come from `decide(code, args) -> None | (run, guard[, name])`, with
// `args` the tuple of the frame's argument slots:
//   - None declines the frame (it runs eagerly this once);
//   - otherwise the entry's guard is `guard(args) -> bool`, its failing-guard text `name` (by
//     default the guard's __name__), and it answers the frame with `run(args)`, or runs eagerly
//     when `run` is None.
// Everything the hook reports is recorded: compiles, hits, and the (code, guard) pairs passed to
// on_recompile() and on_cache_limit().
class TestCompiler final : public FrameCompiler {
 public:
  TestCompiler(PyObject* decide, int cache_limit);
  ~TestCompiler() override;
  TestCompiler(const TestCompiler&) = delete;
  TestCompiler& operator=(const TestCompiler&) = delete;

  std::unique_ptr<CacheEntry> compile(const FrameView& frame, bool* error) override;
  void on_cache_limit(PyCodeObject* code, const std::string& guard) override;
  void on_cache_hit() override { ++hits; }
  void on_recompile(PyCodeObject* code, const std::string& guard) override;

  int compiles = 0;  // calls of compile()
  int declines = 0;  // of which decide() returned None
  int hits = 0;
  PyObject* recompile_events() const { return recompiles_; }  // borrowed list of (code, guard)
  PyObject* limit_events() const { return limits_; }         // borrowed list of (code, guard)

  // Cyclic GC support: decide() often refers back to the compiler's Python object.
  int traverse(visitproc visit, void* arg);
  void clear();

 private:
  PyObject* decide_;
  PyObject* recompiles_;
  PyObject* limits_;
};

// The frame's argument slots as a tuple (new reference), or nullptr with an error set.
PyObject* frame_arguments(const FrameView& frame);

// Calls fn(*args, **kwargs) with the region paused (RegionPause), for tests written in Python.
PyObject* call_paused(PyObject* fn, PyObject* args, PyObject* kwargs);

// A hook that counts the frames it evaluates and evaluates them with the default evaluator.
// install: only over the default evaluator (false otherwise); remove: only if it is current.
bool install_counting_hook();
bool remove_counting_hook();
bool counting_hook_installed();
long counting_hook_calls();
// The code objects it evaluated since it was installed last (a new list).
PyObject* counted_codes();

// Data-stack chunks of the calling thread.
int datastack_chunk_count();

}  // namespace ember::frontend::testing
