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
      written_(std::move(written)),
      names_(std::move(names)),
      static_bytes_(std::move(static_bytes)) {}

bool AliasedInputsRunner::must_run_eagerly(PyObject* const* inputs, bool* ok) const {
  *ok = true;
  std::vector<InputRange> ranges;
  ranges.reserve(written_.size());
  std::optional<std::pair<int, int>> pair;
  for (size_t k = 0; k < written_.size() && !pair; ++k) {
    int64_t bytes = static_bytes_[k];
    void* start = nullptr;
    pybridge::RawTensorMeta m;  // read when the span is not static; its DLPack read keeps the address
    if (bytes < 0) {
      // A tensor the guards would not pass (a negative or conjugate view) has no range to compare: eagerly.
      if (!pybridge::read_raw_tensor_meta(inputs[k], &m, pybridge::TensorReadPath::Auto)) {
        pair.emplace(k, k);
        break;
      }
      bytes = span_bytes(m.sizes, m.strides, static_cast<size_t>(m.ndim), m.dtype);
    }
    if (bytes == 0) continue;
    if (!pybridge::data_pointer(inputs[k], m, &start)) {
      *ok = false;
      return false;
    }
    const auto at = reinterpret_cast<uintptr_t>(start);
    ranges.push_back(InputRange{at, at + static_cast<uintptr_t>(bytes), written_[k], static_cast<int>(k)});
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
  bool ok = true;
  const bool eagerly = must_run_eagerly(inputs, &ok);
  if (!ok) return false;
  return (eagerly ? eager_ : compiled_)->run(inputs, outputs);
}

bool AliasedInputsRunner::run_owned(std::vector<PyRef> inputs, std::vector<PyRef>* outputs) const {
  std::vector<PyObject*> borrowed;
  for (const PyRef& t : inputs) borrowed.push_back(t.get());
  bool ok = true;
  const bool eagerly = must_run_eagerly(borrowed.data(), &ok);
  if (!ok) return false;
  return (eagerly ? eager_ : compiled_)->run_owned(std::move(inputs), outputs);
}

}  // namespace ember::runtime
