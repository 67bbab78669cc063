// GraphRunner: what a compiled frame calls to run its graph. Two kinds exist: the eager executor
// (every node through torch) and a compiled graph (generated C++ kernels and extern calls).
#pragma once

#include <Python.h>

#include <vector>

#include "pybridge/pyref.h"
#include "pybridge/torch_bridge.h"

namespace ember::runtime {

class GraphRunner {
 public:
  virtual ~GraphRunner() = default;
  // Runs the graph on `inputs` (borrowed, one per graph input). On success fills `outputs` with
  // new references (one per graph output) and returns true; on failure returns false with the
  // Python error set and every intermediate released.
  virtual bool run(PyObject* const* inputs, std::vector<PyRef>* outputs) const = 0;
  // The same, given what this call has read of its inputs' metadata so far (the guards' reads of
  // the inputs they captured: pybridge::TensorReads, one entry per graph input), which a runner
  // that reads its inputs uses and adds to. By default the reads are not used.
  virtual bool run_with_reads(PyObject* const* inputs, pybridge::TensorReads& reads,
                              std::vector<PyRef>* outputs) const {
    (void)reads;
    return run(inputs, outputs);
  }
  // The same with the caller's references handed over: a runner may drop an input as soon as no
  // step reads it any more (the backward's saved tensors, freed as it goes, as eager's autograd frees
  // each node's). By default held to the end of the call.
  virtual bool run_owned(std::vector<PyRef> inputs, std::vector<PyRef>* outputs) const;
};

inline bool GraphRunner::run_owned(std::vector<PyRef> inputs, std::vector<PyRef>* outputs) const {
  std::vector<PyObject*> borrowed;
  for (const PyRef& t : inputs) borrowed.push_back(t.get());
  return run(borrowed.data(), outputs);
}

}  // namespace ember::runtime
