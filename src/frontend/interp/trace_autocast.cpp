// Trace under torch.autocast: the autocast state of the trace, the blocks it enters and exits,
// and autocast's casts as explicit graph nodes (python/ember/autocast.py holds the policy table).
//
// Needs: the frame's autocast state (GlobalState) and the policy of each torch callable per
// device type. Guarantees: a call recorded while autocast is on for a device type sees its
// inputs cast as torch's autocast casts them (so meta kernels and shape rules give autocast's
// dtypes), or is Unsupported when the policy is unknown; a trace whose graph depends on the
// autocast state guards all of it.
#include <algorithm>

#include "frontend/interp/trace.h"
#include "frontend/pyutil.h"

namespace ember::frontend {

namespace {

bool eligible(const Var& v, const std::string& device) {
  if (v.kind != VarKind::Tensor) return false;
  const ir::TensorType& t = v.as<TensorVar>().type;
  if (t.device.type != device) return false;
  return ir::is_floating_point(t.dtype) && t.dtype != ir::DType::Float64;  // autocast leaves float64 alone
}

// Calls `fn` on every argument that may be a tensor autocast looks at: the arguments,
// the items of list and tuple arguments (cat, stack), and the keyword arguments.
template <class Fn>
void for_each_slot(std::vector<VarRef>& args, std::vector<std::pair<std::string, VarRef>>& kwargs, Fn fn) {
  auto visit = [&](VarRef& slot) {
    if (slot->kind == VarKind::List || slot->kind == VarKind::Tuple) {
      auto& seq = slot->as<SequenceVar>();
      for (VarRef& item : seq.items) fn(item);
    } else {
      fn(slot);
    }
  };
  for (VarRef& a : args) visit(a);
  for (auto& kv : kwargs) visit(kv.second);
}

}  // namespace

PyRef autocast_exit_object(const TorchTable& table, const AutocastMode& mode) {
  PyRef r = PyRef::steal(PyObject_CallFunction(table.autocast_exit_type.get(), "sOOO", mode.device.c_str(),
                                               mode.enabled ? Py_True : Py_False, table.dtype_object(mode.dtype),
                                               mode.cache ? Py_True : Py_False));
  if (!r) throw PythonError();
  return r;
}

AutocastMode Trace::read_autocast_exit(PyObject* exit, const SourceRef& source) {
  AutocastMode mode;
  auto attr = [&](const char* name) {
    PyRef v = PyRef::steal(PyObject_GetAttrString(exit, name));
    if (!v) throw PythonError();
    guards.equals(Source::attr(source, name), v.get());
    return v;
  };
  PyRef device = attr("device"), enabled = attr("enabled"), dtype = attr("dtype"), cache = attr("cache");
  const char* name = PyUnicode_Check(device.get()) ? PyUnicode_AsUTF8(device.get()) : nullptr;
  if (!name || !autocast.device(name)) throw Unsupported("an autocast block's exit for an unknown device type");
  mode.device = name;
  mode.enabled = enabled.get() == Py_True;
  mode.cache = cache.get() == Py_True;
  bool found = false;
  for (int i = 0; i <= static_cast<int>(ir::DType::Float8E5M2); ++i) {
    if (table.dtype_object(static_cast<ir::DType>(i)) == dtype.get()) {
      mode.dtype = static_cast<ir::DType>(i);
      found = true;
    }
  }
  if (!found) throw Unsupported("an autocast block's exit restoring a dtype Ember does not model");
  return mode;
}

void Trace::depend_on_autocast() {
  if (autocast_guarded_) return;
  autocast_guarded_ = true;
  guards.autocast_state(initial_autocast_);
}

AutocastMode Trace::autocast_enter(const AutocastMode& mode) {
  depend_on_autocast();
  AutocastState::Device* state = autocast.device(mode.device);
  if (!state) throw Unsupported("torch.autocast(" + mode.device + ") (Ember traces autocast for cpu and cuda)");
  AutocastMode previous{mode.device, state->enabled, state->dtype, autocast.cache};
  state->enabled = mode.enabled;
  state->dtype = mode.dtype;
  autocast.cache = mode.cache;
  autocast_events.push_back(AutocastEvent{true, mode});
  return previous;
}

void Trace::autocast_exit(const AutocastMode& restore) {
  depend_on_autocast();
  AutocastState::Device* state = autocast.device(restore.device);
  if (!state) throw Unsupported("an autocast block's exit for device type " + restore.device);
  state->enabled = restore.enabled;
  state->dtype = restore.dtype;
  autocast.cache = restore.cache;
  // A block entered and exited within this trace changes nothing CPython must see: its casts are
  // in the graph, and the state after it is the state before it.
  if (!autocast_events.empty() && autocast_events.back().enter && autocast_events.back().mode.device == restore.device) {
    autocast_events.pop_back();
    return;
  }
  autocast_events.push_back(AutocastEvent{false, restore});
}

VarRef Trace::call_torch(PyObject* callable, const std::vector<VarRef>& args,
                         const std::vector<std::pair<std::string, VarRef>>& kwargs) {
  // Metadata queries (size, dim, ...) compute nothing autocast could change.
  if ((!autocast.cpu.enabled && !autocast.cuda.enabled) || table.classify(callable).kind == CallableKind::Query)
    return record_call(callable, args, kwargs);
  std::vector<VarRef> cast_args = args;
  std::vector<std::pair<std::string, VarRef>> cast_kwargs = kwargs;
  apply_autocast(callable, cast_args, cast_kwargs);
  return record_call(callable, cast_args, cast_kwargs);
}

void Trace::apply_autocast(PyObject* callable, std::vector<VarRef>& args,
                           std::vector<std::pair<std::string, VarRef>>& kwargs) {
  for (const char* device : {"cpu", "cuda"}) {
    const AutocastState::Device& state = *autocast.device(device);
    if (!state.enabled) continue;
    // Autocast casts nothing when no input is eligible: no policy needed.
    bool any = false;
    for_each_slot(args, kwargs, [&](const VarRef& v) { any = any || eligible(*v, device); });
    if (!any) continue;
    const TorchTable::AutocastPolicy& policy = table.autocast_policy(callable, device);
    std::optional<ir::DType> target;
    bool first_only = false;
    switch (policy.kind) {
      case TorchTable::AutocastPolicy::None:
        continue;
      case TorchTable::AutocastPolicy::Unknown:
        throw Unsupported(policy.detail);
      case TorchTable::AutocastPolicy::Lower:
        target = state.dtype;
        break;
      case TorchTable::AutocastPolicy::Fp32:
        target = ir::DType::Float32;
        break;
      case TorchTable::AutocastPolicy::Fp32OptDType: {
        // float32 unless the call names its dtype; torch looks at the first tensor argument only.
        auto given = std::find_if(kwargs.begin(), kwargs.end(), [](const auto& kv) { return kv.first == "dtype"; });
        if (given != kwargs.end() && !(given->second->kind == VarKind::Object && Trace::as_constant(*given->second) == Py_None))
          continue;
        target = ir::DType::Float32;
        first_only = true;
        break;
      }
      case TorchTable::AutocastPolicy::Promote: {
        // The widest of the autocast dtype and the eligible inputs; torch refuses mixing the two
        // lower-precision types.
        ir::DType widest = state.dtype;
        for_each_slot(args, kwargs, [&](const VarRef& v) {
          if (!eligible(*v, device)) return;
          ir::DType dt = v->as<TensorVar>().type.dtype;
          if (dt == ir::DType::Float32 || widest == ir::DType::Float32) {
            widest = ir::DType::Float32;
          } else if (dt != widest) {
            throw Unsupported(table.name_of(callable) + " under torch.autocast on tensors of " +
                              ir::dtype_torch_name(dt) + " and " + ir::dtype_torch_name(widest) + " (torch raises)");
          }
        });
        target = widest;
        break;
      }
    }
    bool done = false;  // fp32_opt_dtype: after the first tensor
    auto cast_one = [&](VarRef& v) {
      if (done) return false;
      if (first_only && v->kind == VarKind::Tensor) done = true;
      if (!eligible(*v, device) || v->as<TensorVar>().type.dtype == *target) return false;
      v = record_call(table.tensor_to.get(), {v, constant(PyRef::borrow(table.dtype_object(*target)))}, {});
      return true;
    };
    auto visit = [&](VarRef& slot) {
      if (slot->kind != VarKind::List && slot->kind != VarKind::Tuple) {
        cast_one(slot);
        return;
      }
      // A list or tuple argument (cat, stack): a copy holding the casts; the caller's Var is
      // left alone.
      const auto& seq = slot->as<SequenceVar>();
      std::vector<VarRef> items = seq.items;
      bool changed = false;
      for (VarRef& item : items) changed = cast_one(item) || changed;
      if (!changed) return;
      auto copy = std::make_shared<SequenceVar>(slot->kind, std::move(items));
      copy->named_type = seq.named_type;
      slot = copy;
    };
    for (VarRef& a : args) visit(a);
    for (auto& kv : kwargs) visit(kv.second);
  }
}

}  // namespace ember::frontend
