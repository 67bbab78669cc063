// The PEP 523 frame hook and compiled regions; the entries it runs and the compiler that makes
// them are cache_entry.h, the per-code cache in co_extra is code_cache.h, the compiler that
// applies on a thread (and RegionPause) is region.h.
//
// A compiled callable runs its target inside a CompiledRegion. The hook is installed in the
// interpreter only while at least one thread is inside a region (an installed hook slows every
// Python call 2-3x), and chains to whichever hook was installed before. For each frame that
// starts inside a region, the hook:
//   - passes through frames it must not touch: generators and coroutines, frames already started
//     or resumed with throwflag, frames a frame object already refers to, module and class bodies
//     (code without CO_OPTIMIZED), frames of torch, Ember and the standard library (decided once
//     per code object and remembered in co_extra). Passing through means evaluating the frame with
//     the previously installed hook, or the default evaluator; the region stays active, so the
//     frames it calls are seen in turn;
//   - looks up the code object's cache for the region's FrameCompiler and takes the first entry
//     whose guards pass: it runs the entry, or, for an entry that runs_eagerly(), evaluates the
//     frame as above;
//   - on a miss asks the compiler for a new entry (a recompile if the code already had entries;
//     the new entry goes first). When the code already holds `cache_limit` entries for the
//     compiler, it calls on_cache_limit() once instead, and from then on evaluates that code
//     eagerly for that compiler without looking at the cache;
//   - evaluates a frame the compiler declined (nullptr entry, no error) as above, this once:
//     nothing is cached, so the next call asks the compiler again. A compiler that wants the
//     decision remembered returns an entry that runs_eagerly(), with the guards under which the
//     decision holds.
// While looking up, compiling and running an entry, the hook is inactive on that thread: neither
// the compiler's own Python calls nor torch's are intercepted. An entry whose code should be
// compiled in turn (a resume function) re-enters a region with call_in_region().
// A frame the hook answers without evaluating it is released as its CPython version requires
// (src/frontend/cpython/shim.h). Errors from guards, the compiler, its callbacks or an entry
// propagate to the frame's caller as a Python exception. docs/frame-hook.md has the details.
#pragma once

#include <Python.h>

#include <cstdint>

#include "frontend/cache_entry.h"
#include "frontend/frame.h"
#include "frontend/region.h"

namespace ember::frontend {

// Calls fn(*args, **kwargs) with the calling thread inside a region of `compiler`. Regions nest:
// the innermost compiler applies. `args` is a tuple, `kwargs` a dict or nullptr. Returns a new
// reference or nullptr with an error set. The compiler must outlive the call.
PyObject* call_in_region(FrameCompiler* compiler, PyObject* fn, PyObject* args, PyObject* kwargs);

// Drops every cache entry of every code object, and the cache-limit marks (ember.reset()).
// An entry that is running at the time finishes first; it is freed afterwards.
void clear_all_caches();
// Drops the cache entries that belong to `compiler`. Its owner calls this before the compiler is
// destroyed, so that a later compiler at the same address starts empty.
void forget_compiler(FrameCompiler* compiler);

// Diagnostics (ember.explain, tests).
// Whether Ember's hook is the interpreter's eval-frame function right now.
bool hook_installed();
// Entries `compiler` holds for `code`.
int cache_entry_count(PyCodeObject* code, const FrameCompiler* compiler);
// Why the hook passes through every frame of `code` ("generator", "not_a_function",
// "torch_file", "ember_file", "stdlib_file", "generated"), or nullptr when it does not. nullptr with a Python
// error set on failure; check PyErr_Occurred().
const char* skip_reason(PyCodeObject* code);
// Code objects that currently hold an Ember cache in co_extra.
int cached_code_count();
// Frames answered without evaluation since the process started, and how many of them opened a
// data-stack chunk (releasing them releases the chunk: the path the 3.12 shim implements).
struct HookStats {
  uint64_t frames_replaced = 0;
  uint64_t chunk_opening_frames_replaced = 0;
};
HookStats hook_stats();

}  // namespace ember::frontend
