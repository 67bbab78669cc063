// The cache entries a compiled frame leaves in its code object's cache (eval_frame.h): a frame
// compiled to a graph (CompiledFrame), or a frame that runs eagerly under the guards its failed
// trace read (EagerEntry).
//
// A CompiledFrame's run, after its guards passed: suspend torch.autocast if it is on (the graph
// holds autocast's casts already), run the graph (a runtime GraphRunner), rebuild the frame's
// Python values from their plans (the return value, the values side effects store), apply the
// side effects in order, replay the autocast blocks the trace entered or left so CPython sees
// the same autocast state as after eager execution, then run the glue and resume function of a
// graph break (Continuation) when the frame was split.
//
// Needs: the GIL; a trace that finished (its graph verified). Guarantees: every value and every
// store's target is computed before the first store, and a grad mode the graph changed is
// restored when the graph fails. It lives in driver/ because it holds a runtime GraphRunner
// while its plans and guards are the frontend's.
#pragma once

#include <Python.h>

#include <memory>
#include <string>
#include <vector>

#include "frontend/eval_frame.h"
#include "frontend/graph_break.h"
#include "frontend/guards.h"
#include "frontend/interp/trace.h"
#include "frontend/interp/torch_table.h"
#include "pybridge/pyref.h"
#include "runtime/graph_runner.h"

namespace ember::driver {

// What runs after the graph of a frame that was split by a graph break (graph_break.h): the
// graph's result is the tuple of the values glue takes (the non-NULL stack values, then the
// live locals).
struct Continuation {
  const frontend::BreakCode* code = nullptr;
  frontend::FrameCompiler* compiler = nullptr;
};

// What a compiled frame does about torch.autocast around its graph (see Trace::autocast).
struct AutocastRun {
  bool suspend = false;  // autocast is on when the frame starts: off while the graph runs
  PyRef events;          // the tuple ember.autocast.replay applies after the graph; null if none
  PyRef suspend_fn, resume_fn, replay_fn;
};

// The events ember.autocast.replay takes: ((entering, device, enabled, dtype, cache), ...).
// Throws PythonError.
PyRef autocast_events_tuple(const frontend::TorchTable& table, const std::vector<frontend::Trace::AutocastEvent>& events);

// A frame compiled to a graph.
class CompiledFrame : public frontend::CacheEntry {
 public:
  CompiledFrame(frontend::GuardSet guards, frontend::AliasGuard aliases, std::unique_ptr<runtime::GraphRunner> runner,
                frontend::ValuePlan result, std::vector<frontend::SideEffect> effects, bool changes_grad_mode,
                bool initial_grad_mode, PyRef set_grad_enabled, Continuation continuation, AutocastRun autocast,
                frontend::Trace::OpLines op_lines);

  bool guards_pass(const frontend::FrameView& frame, void** state) override;
  PyObject* run(const frontend::FrameView& frame, void* state) override;
  std::string failing_guard(const frontend::FrameView& frame) override;

 private:
  void restore_grad_mode();
  // The graph runs without a Python frame: an error it raises gets a traceback entry at the
  // user's lines whose ops it ran, so the traceback names the user's file and line as eager's does.
  void add_source_to_traceback(const frontend::FrameView& frame) const;

  AutocastRun autocast_;
  Continuation continuation_;
  frontend::GuardSet guards_;
  frontend::AliasGuard aliases_;
  std::unique_ptr<runtime::GraphRunner> runner_;
  frontend::ValuePlan result_;
  std::vector<frontend::SideEffect> effects_;
  bool changes_grad_mode_;
  bool initial_grad_mode_;
  PyRef set_grad_enabled_;
  frontend::Trace::OpLines op_lines_;
};

// "Run this frame eagerly" under the guards the failed trace had read: the same inputs would
// fail the same way, so the decision is cached instead of re-tracing on every call.
class EagerEntry : public frontend::CacheEntry {
 public:
  explicit EagerEntry(frontend::GuardSet guards) : guards_(std::move(guards)) {}
  bool guards_pass(const frontend::FrameView& frame, void** state) override;
  PyObject* run(const frontend::FrameView&, void*) override;
  std::string failing_guard(const frontend::FrameView& frame) override { return guards_.first_failure(frame); }
  bool runs_eagerly() const override { return true; }

 private:
  frontend::GuardSet guards_;
};

}  // namespace ember::driver
