// The runner of a training graph: a forward and a backward executable joined by torch autograd.
//
// Torch's autograd engine calls into compiled code only through a torch.autograd.Function (Ember
// does not link libtorch, so it cannot define a C++ autograd node). `ember.autograd.CompiledFunction`
// is that Function: its forward runs the forward executable and saves what it returns past the
// user's outputs; its backward runs the backward executable on the saved values and the incoming
// gradients. This runner calls `CompiledFunction.apply(graph, *inputs)`, where `graph` is an
// `ember.autograd.TrainingGraph` holding the two executables as Python callables and the layout
// (autograd::Partition) the Function needs.
//
// Ownership: each executable is shared between this runner and the Python callable that runs it, so
// an autograd graph that outlives the compiled frame (ember.reset() before backward()) still has
// its backward.
#pragma once

#include <Python.h>

#include <memory>
#include <optional>
#include <vector>

#include "pybridge/pyref.h"
#include "runtime/graph_runner.h"

namespace ember::runtime {

// A Python callable `f(tensors) -> list of tensors` that runs `runner`. Given a list, f empties it and
// hands its references to the runner (GraphRunner::run_owned), so that a compiled graph frees each input
// after its last use when the caller holds no other reference (the backward's saved tensors; Inductor's
// generated code does `args.clear()` for the same reason); given a tuple, the inputs are borrowed.
PyRef python_callable(std::shared_ptr<const GraphRunner> runner);

class TrainingRunner : public GraphRunner {
 public:
  // `apply` is CompiledFunction.apply; `graph` the TrainingGraph passed to it.
  TrainingRunner(PyRef apply, PyRef graph) : apply_(std::move(apply)), graph_(std::move(graph)) {}

  bool run(PyObject* const* inputs, std::vector<PyRef>* outputs) const override;

  // How many inputs and outputs the graph has, and per output the input it is (returned as it is,
  // outside the Function) or -1 (set by the driver).
  size_t inputs = 0;
  std::vector<int> output_is_input;
  // When the graph changes grad mode inside it (autograd::JointLayout::grad_mode_at_end): the mode
  // it leaves, and torch._C._set_grad_enabled to set it. Grad is enabled around the call (torch
  // records the Function only then; a graph may start with grad disabled and enable it inside).
  std::optional<bool> grad_mode_at_end;
  PyRef set_grad_enabled;

 private:
  PyRef apply_;
  PyRef graph_;
};

}  // namespace ember::runtime
