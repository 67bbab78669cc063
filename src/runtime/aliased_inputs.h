// Inputs that share memory in a graph that writes one of them.
//
// Compiled code, and every graph pass before it, takes a graph's inputs to be distinct values: a
// write to one is not seen through another. Python means that only when the written input shares no
// memory with the others. The trace makes one input of one tensor object however many names reach it
// (an alias guard keeps it one object, frontend/interp/trace.h); distinct tensors that share storage
// (`f(x[:2], x[1:3])`, `f(x, x.view(-1))`, or one tensor passed where the trace saw two) are found at
// run time, on every call of a graph that writes an input, by the inputs' address ranges.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/graph_runner.h"

namespace ember::runtime {

// The bytes one input spans on this call.
struct InputRange {
  uintptr_t start = 0, end = 0;
  bool written = false;  // the graph writes this input
  int input = -1;        // its graph input index
};

// A (written input, other input) pair whose ranges overlap, or nullopt: one sort and one sweep.
std::optional<std::pair<int, int>> written_overlap(std::vector<InputRange> ranges);

// A graph that writes some of its inputs in place: `compiled` runs each call, except a call where a
// written input overlaps another input, which `eager` runs (the captured graph node by node through
// torch: it writes and reads the caller's memory in program order, as eager does). Each such call is
// counted (stats()["aliased_input_calls"]); the first of each graph warns (a RuntimeWarning naming the
// two inputs).
class AliasedInputsRunner : public GraphRunner {
 public:
  // `written[k]`: the graph writes input k; `names[k]`: its source, for the warning; `static_bytes[k]`: the bytes
  // it spans when its sizes and strides are constants (the guards hold it to them), else -1 (read per call).
  AliasedInputsRunner(std::unique_ptr<GraphRunner> compiled, std::unique_ptr<GraphRunner> eager,
                      std::vector<bool> written, std::vector<std::string> names, std::vector<int64_t> static_bytes);

  bool run(PyObject* const* inputs, std::vector<PyRef>* outputs) const override;
  bool run_with_reads(PyObject* const* inputs, pybridge::TensorReads& reads,
                      std::vector<PyRef>* outputs) const override;
  bool run_owned(std::vector<PyRef> inputs, std::vector<PyRef>* outputs) const override;

 private:
  // Whether this call must run on `eager_` (false with a Python error set on failure: *ok false).
  bool must_run_eagerly(PyObject* const* inputs, pybridge::TensorReads& reads, bool* ok) const;

  std::unique_ptr<GraphRunner> compiled_, eager_;
  std::vector<char> written_;  // not vector<bool>: indexed per input per call
  std::vector<std::string> names_;
  std::vector<int64_t> static_bytes_;
  mutable bool warned_ = false;
};

}  // namespace ember::runtime
