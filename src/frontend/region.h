// Which FrameCompiler applies to the frames that start on the calling thread: the compiler of the
// innermost compiled region open on it, or none (outside regions, and while a region is paused).
// The frame hook reads it (eval_frame.cpp); a region (call_in_region) and a pause set it for a
// scope. It lives apart from the hook so that the per-code cache, which pauses the region while it
// runs Python code, needs the hook's state without depending on the hook.
//
// Needs: the GIL. Per thread: Python code run by guards and compilers may switch threads, and each
// thread keeps its own innermost compiler.
#pragma once

#include "frontend/cache_entry.h"

namespace ember::frontend {

// The calling thread's compiler, or nullptr.
FrameCompiler* region_compiler();

// Makes `compiler` (nullptr: none) the calling thread's compiler for the lifetime of the object,
// then restores the one before.
class RegionCompilerScope {
 public:
  explicit RegionCompilerScope(FrameCompiler* compiler);
  ~RegionCompilerScope();
  RegionCompilerScope(const RegionCompilerScope&) = delete;
  RegionCompilerScope& operator=(const RegionCompilerScope&) = delete;

 private:
  FrameCompiler* saved_;
};

// Suspends the region on this thread for the lifetime of the object (tracing, running entries).
class RegionPause {
 public:
  RegionPause() : scope_(nullptr) {}

 private:
  RegionCompilerScope scope_;
};

}  // namespace ember::frontend
