// GraphRunner: what a compiled frame calls to run its graph. Two kinds exist: the eager executor
// (every node through torch) and a compiled graph (generated C++ kernels and extern calls).
#pragma once

#include <Python.h>

#include <vector>

#include "pybridge/pyref.h"

namespace ember::runtime {

class GraphRunner {
 public:
  virtual ~GraphRunner() = default;
  // Runs the graph on `inputs` (borrowed, one per graph input). On success fills `outputs` with
  // new references (one per graph output) and returns true; on failure returns false with the
  // Python error set and every intermediate released.
  virtual bool run(PyObject* const* inputs, std::vector<PyRef>* outputs) const = 0;
};

}  // namespace ember::runtime
