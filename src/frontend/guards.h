// Guards: the conditions under which a compiled frame may be reused, checked in C++ on every call.
//
// A GuardSet is built by the symbolic interpreter as it reads values from the frame: each check
// is attached to a source (source.h). Checks are organised as a tree keyed by source, so a shared
// prefix such as L['self']._modules is resolved once per call. The same walk captures the graph's
// inputs: a source registered with capture() is stored into its slot, so reading parameters costs
// nothing beyond the guard walk.
//
// Tensor metadata (dtype, device, sizes, strides) is read through DLPack's C exchange API
// (torch.Tensor.__dlpack_c_exchange_api__) when torch provides it, else through attributes.
// requires_grad and the negative/conjugate view bits are always read through attributes.
//
// Everything here runs with the GIL held; a GuardSet must also be destroyed with the GIL held
// and kept alive while check() runs (an Attr step can run Python code).
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/source.h"
#include "ir/graph.h"
#include "sym/relation.h"

namespace ember::pybridge {
class TensorReads;
}

namespace ember::frontend {

struct TensorMeta {
  PyTypeObject* type = nullptr;  // exact Python type (torch.Tensor, nn.Parameter, a subclass)
  ir::DType dtype = ir::DType::Float32;
  ir::Device device;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  bool requires_grad = false;
  // "f32[4, 8]{8, 1} cpu", "Parameter f32[8]{1} cpu grad": the type's name leads when it is not
  // torch.Tensor itself.
  std::string str() const;
};

// Reads a tensor's metadata. Returns false (no Python error left set) for objects that are not
// tensors Ember can describe (sparse, nested, unknown dtype, negative or conjugate views).
bool read_tensor_meta(PyObject* obj, TensorMeta* out);
// The same through Python attributes only (the fallback path), for tests and measurements.
bool read_tensor_meta_via_attributes(PyObject* obj, TensorMeta* out);

// torch.autocast's state for the device types Ember traces: per device whether autocast is on and
// its lower-precision dtype (which a block without `dtype=` takes even while off), and the cast
// cache flag (restored exactly by a block's exit).
struct AutocastState {
  struct Device {
    bool enabled = false;
    ir::DType dtype = ir::DType::BFloat16;
    bool operator==(const Device& o) const { return enabled == o.enabled && dtype == o.dtype; }
  };
  Device cpu{false, ir::DType::BFloat16};
  Device cuda{false, ir::DType::Float16};
  bool cache = true;
  bool other = false;  // autocast on for a device type other than cpu and cuda (not traced)
  bool any() const { return cpu.enabled || cuda.enabled || other; }
  // The state of device type "cpu" or "cuda"; nullptr for any other name.
  Device* device(std::string_view type);
  const Device* device(std::string_view type) const;
  bool operator==(const AutocastState& o) const {
    return cpu == o.cpu && cuda == o.cuda && cache == o.cache && other == o.other;
  }
  // "cpu on bfloat16, cuda off float16, cache on"
  std::string str() const;
};

// Interpreter-wide state that changes what a graph computes.
struct GlobalState {
  bool grad_enabled = true;
  ir::DType default_dtype = ir::DType::Float32;
  bool autocast = false;  // torch.autocast active for some device
  AutocastState autocast_state;
  // torch.use_deterministic_algorithms: on CUDA, index_add and scatter_add then stay torch's calls
  // (their kernels would add atomically, in any order). Guarded only by graphs that add atomically.
  bool deterministic = false;
  // Reads torch's state now. Throws std::runtime_error where torch raised, and pybridge::PythonError
  // (the error left set) for an interrupt that landed in one of the calls.
  static GlobalState current();
};
// Reads torch.autocast's state now; false with a Python error set where torch raised.
bool read_autocast_state(AutocastState* out);

class GuardSet {
 public:
  GuardSet();
  ~GuardSet();
  GuardSet(GuardSet&&) noexcept;
  GuardSet& operator=(GuardSet&&) noexcept;

  // Checks; each is attached to the value at `source`. Adding the same check twice is harmless.
  // Bad arguments throw std::invalid_argument naming the source.
  void tensor_match(const SourceRef& source, const TensorMeta& meta);
  // Dynamic shapes (docs/dynamic-shapes.md): the same, except that a dimension whose slot is >= 0
  // is not compared: its size (stride) is stored into that slot of the shape guard's values.
  void tensor_match(const SourceRef& source, const TensorMeta& meta, std::vector<int> size_slots,
                    std::vector<int> stride_slots);
  // Dynamic ints: the value at `source` is exactly an int (not a bool) that fits int64, and is
  // stored into that slot of the shape guard's values.
  void int_slot(const SourceRef& source, int slot);
  // The shape guard: once every other check passed, each of `relations` holds over the slot
  // values, slot k named names[k] in them (sym/rel_program.h). texts[i] describes relation i and
  // why the trace relied on it (describe, first_failure). Replaces an earlier shape guard.
  void shape_relations(const std::vector<sym::Rel>& relations, const std::vector<std::string>& names,
                       std::vector<std::string> texts);
  void id_match(const SourceRef& source, PyObject* obj);      // identity (object kept alive weakly where possible)
  void type_match(const SourceRef& source, PyTypeObject* type);
  // Exact type, then ==, recursively through tuples (so 1, True and 1.0 differ; floats compare
  // -0.0 != 0.0 and NaN == NaN). For None/bool/int/float/complex/str/bytes/torch.dtype/
  // torch.device and tuples of those; anything else throws.
  void equals(const SourceRef& source, PyObject* value);
  void length(const SourceRef& source, Py_ssize_t len);       // list, tuple, dict
  void dict_keys(const SourceRef& source, PyObject* keys_tuple);  // a dict's keys, in order
  // An nn.Module with no forward/backward (pre-)hooks of its own, and none registered globally
  // (torch.nn.modules.module must be imported; its global hook dicts are cached here).
  void no_hooks(const SourceRef& module_source);
  void global_state(const GlobalState& state);
  // The whole autocast state (per device enabled and dtype, cache flag) is still `state`: added
  // by traces that run under autocast or read or change its state (global_state checks only
  // whether autocast is active, which costs one call).
  void autocast_state(const AutocastState& state);
  // torch.are_deterministic_algorithms_enabled() is still `enabled`: added by graphs whose kernels
  // add atomically (compiled while it was off).
  void deterministic_algorithms(bool enabled);
  // The variable `key` of the process environment, read through `environ` (os.environ), still
  // has the value it has now, or is still unset. Throws std::runtime_error when os.environ does
  // not keep its variables as CPython's does.
  void environ_entry(PyObject* environ, PyObject* key);

  // Registers `source` as an input slot; check() stores a new reference into captured[slot].
  // Capturing the same source again returns the same slot.
  int capture(const SourceRef& source);
  int capture_count() const;

  // Returns true when every check passes; then `captured` (capture_count() entries) holds new
  // references, and `reads` (when given, capture_count() entries) keeps the metadata the tensor
  // checks read of the captured tensors. On false, `captured` holds no references. Never leaves a
  // Python error set.
  bool check(const FrameView& frame, PyObject** captured, pybridge::TensorReads* reads = nullptr) const;
  // The first failing check, as text ("G['FLAG'] == True", "L['x'] tensor: expected
  // f32[4, 8]{8, 1} cpu, got f32[5, 8]{8, 1} cpu", "cannot read L['self'].w: AttributeError: ..."),
  // or "" when all pass.
  std::string first_failure(const FrameView& frame) const;
  // Every check, one per line, in a stable order (for explain and EMBER_LOGS=guards).
  std::string describe() const;
  size_t size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::frontend
