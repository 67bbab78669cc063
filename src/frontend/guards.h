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
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "frontend/source.h"
#include "ir/graph.h"

namespace ember::frontend {

struct TensorMeta {
  PyTypeObject* type = nullptr;  // exact Python type (torch.Tensor, nn.Parameter, a subclass)
  ir::DType dtype = ir::DType::Float32;
  ir::Device device;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  bool requires_grad = false;
  std::string str() const;
};

// Reads a tensor's metadata. Returns false (no Python error left set) for objects that are not
// tensors Ember can describe (sparse, nested, unknown dtype).
bool read_tensor_meta(PyObject* obj, TensorMeta* out);

// Interpreter-wide state that changes what a graph computes.
struct GlobalState {
  bool grad_enabled = true;
  ir::DType default_dtype = ir::DType::Float32;
  static GlobalState current();
};

class GuardSet {
 public:
  GuardSet();
  ~GuardSet();
  GuardSet(GuardSet&&) noexcept;
  GuardSet& operator=(GuardSet&&) noexcept;

  // Checks; each is attached to the value at `source`. Adding the same check twice is harmless.
  void tensor_match(const SourceRef& source, const TensorMeta& meta);
  void id_match(const SourceRef& source, PyObject* obj);      // identity (object kept alive weakly where possible)
  void type_match(const SourceRef& source, PyTypeObject* type);
  void equals(const SourceRef& source, PyObject* value);      // exact type and ==; for None/bool/int/float/str/tuples of those
  void length(const SourceRef& source, Py_ssize_t len);       // list, tuple, dict
  void dict_keys(const SourceRef& source, PyObject* keys_tuple);  // a dict's keys, in order
  void no_hooks(const SourceRef& module_source);              // an nn.Module with no hooks of its own
  void global_state(const GlobalState& state);

  // Registers `source` as an input slot; check() stores a new reference into captured[slot].
  int capture(const SourceRef& source);
  int capture_count() const;

  // Returns true when every check passes; then `captured` (capture_count() entries) holds new
  // references. On false, `captured` holds no references. Never leaves a Python error set.
  bool check(const FrameView& frame, PyObject** captured) const;
  // The first failing check, as text ("L['x'].size()[0] == 4"), or "" when all pass.
  std::string first_failure(const FrameView& frame) const;
  // Every check, one per line, in a stable order (for explain and EMBER_LOGS=guards).
  std::string describe() const;
  size_t size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::frontend
