#include "runtime/aliased_inputs.h"

#include <algorithm>

#include "pybridge/torch_bridge.h"
#include "runtime/compiled_graph.h"
#include "support/stats.h"

namespace ember::runtime {

std::optional<std::pair<int, int>> written_overlap(std::vector<InputRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const InputRange& a, const InputRange& b) { return a.start < b.start; });
  // Any overlapping pair (a starts first) has b.start < a.end <= the furthest end seen before b: the
  // ranges reaching furthest so far, any and written, are the ones to name.
  const InputRange* furthest = nullptr;
  const InputRange* furthest_written = nullptr;
  for (const InputRange& r : ranges) {
    if (furthest_written != nullptr && r.start < furthest_written->end) return std::make_pair(furthest_written->input, r.input);
    if (r.written && furthest != nullptr && r.start < furthest->end) return std::make_pair(r.input, furthest->input);
    if (furthest == nullptr || r.end > furthest->end) furthest = &r;
    if (r.written && (furthest_written == nullptr || r.end > furthest_written->end)) furthest_written = &r;
  }
  return std::nullopt;
}

AliasedInputsRunner::AliasedInputsRunner(std::unique_ptr<GraphRunner> compiled, std::unique_ptr<GraphRunner> eager,
                                         std::vector<bool> written, std::vector<std::string> names,
                                         std::vector<int64_t> static_bytes)
    : compiled_(std::move(compiled)),
      eager_(std::move(eager)),
      written_(written.begin(), written.end()),
      names_(std::move(names)),
      static_bytes_(std::move(static_bytes)) {}

bool AliasedInputsRunner::must_run_eagerly(PyObject* const* inputs, pybridge::TensorReads& reads, bool* ok) const {
  *ok = true;
  std::vector<InputRange> ranges;
  ranges.reserve(written_.size());
  std::optional<std::pair<int, int>> pair;
  for (size_t k = 0; k < written_.size() && !pair; ++k) {
    // A tensor the guards would not pass (a negative or conjugate view) has no range to compare: eagerly.
    const pybridge::RawTensorMeta* m = reads.get(k, inputs[k]);
    if (m == nullptr) {
      pair.emplace(k, k);
      break;
    }
    const int64_t bytes = static_bytes_[k] >= 0 ? static_bytes_[k]
                                                : span_bytes(m->sizes, m->strides, static_cast<size_t>(m->ndim), m->dtype);
    if (bytes == 0) continue;
    void* start = nullptr;
    if (!pybridge::data_pointer(inputs[k], *m, &start)) {
      *ok = false;
      return false;
    }
    const auto at = reinterpret_cast<uintptr_t>(start);
    ranges.push_back(InputRange{at, at + static_cast<uintptr_t>(bytes), written_[k] != 0, static_cast<int>(k)});
  }
  if (!pair) pair = written_overlap(std::move(ranges));
  if (!pair) return false;
  ++stats().aliased_input_calls;
  if (!warned_) {
    warned_ = true;
    const std::string& a = names_[static_cast<size_t>(pair->first)];
    const std::string& b = names_[static_cast<size_t>(pair->second)];
    const std::string what = a == b ? a + " is a tensor whose memory Ember cannot compare with the other inputs'"
                                    : a + " shares memory with " + b;
    const std::string line = "ember: " + what + " and the compiled graph writes an input: calls like this one run the "
                             "graph op by op through torch";
    if (PyErr_WarnEx(PyExc_RuntimeWarning, line.c_str(), 1) < 0) {
      *ok = false;
      return false;
    }
  }
  return true;
}

bool AliasedInputsRunner::run(PyObject* const* inputs, std::vector<PyRef>* outputs) const {
  pybridge::TensorReads reads(written_.size());
  return run_with_reads(inputs, reads, outputs);
}

bool AliasedInputsRunner::run_with_reads(PyObject* const* inputs, pybridge::TensorReads& reads,
                                         std::vector<PyRef>* outputs) const {
  bool ok = true;
  const bool eagerly = must_run_eagerly(inputs, reads, &ok);
  if (!ok) return false;
  return eagerly ? eager_->run(inputs, outputs) : compiled_->run_with_reads(inputs, reads, outputs);
}

bool AliasedInputsRunner::run_owned(std::vector<PyRef> inputs, std::vector<PyRef>* outputs) const {
  std::vector<PyObject*> borrowed;
  for (const PyRef& t : inputs) borrowed.push_back(t.get());
  pybridge::TensorReads reads(written_.size());
  bool ok = true;
  const bool eagerly = must_run_eagerly(borrowed.data(), reads, &ok);
  if (!ok) return false;
  return (eagerly ? eager_ : compiled_)->run_owned(std::move(inputs), outputs);
}

}  // namespace ember::runtime
