#include "runtime/cuda_graph_runner.h"

#include <variant>
#include <string_view>

#include "pybridge/errors.h"
#include "pybridge/torch_bridge.h"
#include "runtime/cuda/driver.h"
#include "support/stats.h"

namespace ember::runtime {

namespace {

using loop_ir::Buffer;
using loop_ir::BufferId;

// The non-view buffer whose memory `id` is.
const Buffer& root_of(const loop_ir::Program& program, BufferId id) {
  const Buffer* b = &program.buffers.at(static_cast<size_t>(id));
  while (b->kind == Buffer::Kind::View) b = &program.buffers.at(static_cast<size_t>(b->base));
  return *b;
}

// Whether a dropout call is literally in eval mode: `training` (torch.dropout's `train`), its third
// argument in every dropout of torch and torch.nn.functional, is the literal False.
bool dropout_in_eval(const loop_ir::ExternCall& call) {
  const ir::Arg* training = call.args.size() > 2 ? &call.args[2] : nullptr;
  for (const auto& [name, arg] : call.kwargs)
    if (name == "training" || name == "train") training = &arg;
  if (training == nullptr || training->kind != ir::Arg::Kind::Literal) return false;
  const bool* value = std::get_if<bool>(&training->literal);
  return value != nullptr && !*value;
}

// Whether an extern call draws random numbers (ir::draws_random_numbers; a dropout literally in eval
// mode draws none).
bool is_random(const loop_ir::ExternCall& call) {
  if (call.callable.find("dropout") != std::string::npos && dropout_in_eval(call)) return false;
  return ir::draws_random_numbers(call.callable);
}

// Per graph input, whether the program writes it; false (with `why`) when a write's target
// cannot be told apart from an input.
bool find_mutated_inputs(const loop_ir::Program& program, std::vector<bool>* mutated, std::string* why) {
  mutated->assign(program.inputs.size(), false);
  auto written = [&](BufferId id) {
    const Buffer& root = root_of(program, id);
    if (root.kind == Buffer::Kind::Input) (*mutated)[static_cast<size_t>(root.index)] = true;
    if (root.kind != Buffer::Kind::Extern) return true;
    *why = "an in-place op writes " + root.name() + ", which an extern call returned and may alias an input";
    return false;
  };
  for (const loop_ir::Kernel& k : program.kernels)
    for (const loop_ir::Node& n : k.nodes)
      if (n.op == loop_ir::ScalarOp::Store && !written(n.buffer)) return false;
  for (const loop_ir::ExternCall& call : program.externs)
    for (BufferId b : call.written_args())
      if (!written(b)) return false;
  return true;
}

PyRef call_method(PyObject* self, const char* name, PyObject* arg = nullptr) {
  return PyRef::steal(arg ? PyObject_CallMethod(self, name, "O", arg) : PyObject_CallMethod(self, name, nullptr));
}

// The address of the storage `tensor` views (tensors sharing memory share it); null for an empty
// storage, or with a Python error set on failure.
void* storage_address(PyObject* tensor) {
  PyRef storage = call_method(tensor, "untyped_storage");
  PyRef address = storage ? call_method(storage.get(), "data_ptr") : PyRef();
  return address ? PyLong_AsVoidPtr(address.get()) : nullptr;
}

}  // namespace

std::string why_no_cuda_graph(const loop_ir::Program& program) {
  for (const Buffer& b : program.buffers)
    if (b.device.type != "cuda") return "the graph runs on " + b.device.str() + ": CUDA graphs need CUDA";
  if (program.steps.size() <= 1)
    return "one step: a CUDA graph's bookkeeping costs more than the one launch it saves";
  // A new size tuple may need a cubin of a new divisibility class, compiled and loaded at its first
  // launch (triton_code.h): that must not happen inside a stream capture, and every new tuple would
  // re-record anyway. Recording per tuple, warmed up first, is the next step.
  if (!program.symbols.empty())
    return "the graph has shape symbols (" + std::to_string(program.symbols.size()) +
           "): CUDA graphs are recorded for one size; a symbolic graph runs its kernels directly";
  for (const loop_ir::ExternCall& call : program.externs)
    if (is_random(call))
      return "extern call " + call.callable + " draws random numbers, which a replay would repeat";
  std::vector<bool> mutated;
  std::string why;
  if (!find_mutated_inputs(program, &mutated, &why)) return why;
  return "";
}

CudaGraphRunner::CudaGraphRunner(std::unique_ptr<CompiledGraph> graph) : graph_(std::move(graph)) {
  std::string why;
  find_mutated_inputs(graph_->program(), &mutated_inputs_, &why);
  device_index_ = graph_->device().index < 0 ? 0 : graph_->device().index;
}

CudaGraphRunner::~CudaGraphRunner() = default;

bool CudaGraphRunner::InputShape::same_layout(const InputShape& other) const {
  return dtype == other.dtype && sizes == other.sizes && strides == other.strides;
}

bool CudaGraphRunner::read_inputs(PyObject* const* inputs, pybridge::TensorReads& reads,
                                  std::vector<InputShape>* shapes) const {
  shapes->resize(graph_->program().inputs.size());
  for (size_t k = 0; k < shapes->size(); ++k) {
    InputShape& s = (*shapes)[k];
    const pybridge::RawTensorMeta* meta = reads.get(k, inputs[k]);
    if (meta == nullptr || !pybridge::data_pointer(inputs[k], *meta, &s.data)) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "ember: graph input %zu is not a tensor Ember reads", k);
      return false;
    }
    s.dtype = meta->dtype;
    s.sizes.assign(meta->sizes, meta->sizes + meta->ndim);
    s.strides.assign(meta->strides, meta->strides + meta->ndim);
  }
  return true;
}

bool CudaGraphRunner::run(PyObject* const* inputs, std::vector<PyRef>* outputs) const {
  pybridge::TensorReads reads(graph_->program().inputs.size());
  return run_with_reads(inputs, reads, outputs);
}

bool CudaGraphRunner::run_with_reads(PyObject* const* inputs, pybridge::TensorReads& reads,
                                     std::vector<PyRef>* outputs) const {
  if (busy_ || state_ == State::Plain) return graph_->run_with_reads(inputs, reads, outputs);
  std::vector<InputShape> shapes;
  if (!read_inputs(inputs, reads, &shapes)) return false;
  busy_ = true;
  bool ok = true;
  switch (state_) {
    case State::Warmup:
      ok = graph_->run_with_reads(inputs, reads, outputs);
      if (ok) state_ = State::Record;
      break;
    case State::Replay:
      if (replayable(shapes)) {
        ok = replay(inputs, outputs);
        break;
      }
      if (++rerecords_ > kRerecordLimit) {
        ok = give_up("re-recorded " + std::to_string(kRerecordLimit) +
                     " times (input addresses or shapes keep changing)") &&
             graph_->run(inputs, outputs);
        break;
      }
      [[fallthrough]];
    case State::Record:
      ok = record(inputs, shapes, outputs);
      break;
    case State::Plain:
      ok = graph_->run_with_reads(inputs, reads, outputs);
      break;
  }
  last_shapes_ = std::move(shapes);
  busy_ = false;
  return ok;
}

bool CudaGraphRunner::replayable(const std::vector<InputShape>& shapes) const {
  for (size_t k = 0; k < shapes.size(); ++k) {
    if (!shapes[k].same_layout(slots_[k].shape)) return false;
    if (!slots_[k].copy && shapes[k].data != slots_[k].shape.data) return false;
  }
  return true;
}

void CudaGraphRunner::drop_recording() const {
  slots_.clear();
  static_outputs_.clear();
  output_is_input_.clear();
  exec_ = nullptr;
  cuda_graph_ = PyRef();
}

bool CudaGraphRunner::give_up(const std::string& reason) const {
  drop_recording();
  state_ = State::Plain;
  plain_reason_ = reason;
  // Visible under EMBER_LOGS=fallbacks, as the backend's own fallbacks are.
  PyRef logging = PyRef::steal(PyImport_ImportModule("logging"));
  PyRef logger = logging ? PyRef::steal(PyObject_CallMethod(logging.get(), "getLogger", "s", "ember.fallbacks")) : PyRef();
  PyRef done = logger ? PyRef::steal(PyObject_CallMethod(logger.get(), "info", "sss",
                                                         "graph %s runs without CUDA graphs: %s",
                                                         graph_->program().name.c_str(), reason.c_str()))
                      : PyRef();
  return static_cast<bool>(done);
}

bool CudaGraphRunner::record(PyObject* const* inputs, const std::vector<InputShape>& shapes,
                             std::vector<PyRef>* outputs) const {
  drop_recording();
  // Every failure below is the capture's (an op that synchronizes or allocates outside the pool,
  // aliasing the copies would break): the graph then runs plainly, with the reason logged.
  auto plainly = [&](const std::string& why) {
    return give_up(why + (PyErr_Occurred() ? ": " + pybridge::take_error_message() : "")) &&
           graph_->run(inputs, outputs);
  };
  PyRef torch = PyRef::steal(PyImport_ImportModule("torch"));
  PyRef cuda = torch ? PyRef::steal(PyObject_GetAttrString(torch.get(), "cuda")) : PyRef();
  if (!cuda) return plainly("torch.cuda is unavailable");
  if (!pool_) pool_ = PyRef::steal(PyObject_CallMethod(cuda.get(), "graph_pool_handle", nullptr));
  if (!pool_) return plainly("no graph pool");

  const size_t n = shapes.size();
  slots_.resize(n);
  std::vector<PyObject*> args(n);
  std::vector<void*> storages(n);
  for (size_t k = 0; k < n; ++k) {
    Slot& slot = slots_[k];
    slot.shape = shapes[k];
    slot.mutated = mutated_inputs_[k];
    const bool in_place = k < last_shapes_.size() && shapes[k].data != nullptr && shapes[k].data == last_shapes_[k].data;
    args[k] = inputs[k];
    if (!in_place) {
      PyRef sizes = call_method(inputs[k], "size"), strides = call_method(inputs[k], "stride");
      PyRef dtype = PyRef::steal(PyObject_GetAttrString(inputs[k], "dtype"));
      PyRef device = PyRef::steal(PyObject_GetAttrString(inputs[k], "device"));
      if (!sizes || !strides || !dtype || !device) return plainly("cannot read an input");
      PyRef empty_strided = PyRef::steal(PyObject_GetAttrString(torch.get(), "empty_strided"));
      PyRef positional = PyRef::steal(PyTuple_Pack(2, sizes.get(), strides.get()));
      PyRef kwargs = PyRef::steal(Py_BuildValue("{s:O,s:O}", "dtype", dtype.get(), "device", device.get()));
      slot.copy = empty_strided ? PyRef::steal(PyObject_Call(empty_strided.get(), positional.get(), kwargs.get())) : PyRef();
      if (!slot.copy || !call_method(slot.copy.get(), "copy_", inputs[k]))
        return plainly("input " + std::to_string(k) + " cannot be copied into a graph-owned tensor");
      args[k] = slot.copy.get();
    }
    storages[k] = storage_address(args[k]);
    if (PyErr_Occurred()) return plainly("cannot read input " + std::to_string(k) + "'s storage");
  }
  for (size_t k = 0; k < n; ++k)
    for (size_t j = 0; j < n; ++j)
      if (j != k && slots_[k].mutated && storages[k] && storages[j] == storages[k])
        return plainly("input " + std::to_string(k) + " is written in place and shares memory with input " +
                       std::to_string(j));

  PyRef graph = PyRef::steal(PyObject_CallMethod(cuda.get(), "CUDAGraph", nullptr));
  PyRef graph_fn = PyRef::steal(PyObject_GetAttrString(cuda.get(), "graph"));
  PyRef positional = graph ? PyRef::steal(PyTuple_Pack(1, graph.get())) : PyRef();
  PyRef kwargs = PyRef::steal(Py_BuildValue("{s:O,s:s}", "pool", pool_.get(), "capture_error_mode", "thread_local"));
  PyRef capture = graph_fn && positional ? PyRef::steal(PyObject_Call(graph_fn.get(), positional.get(), kwargs.get())) : PyRef();
  if (!capture || !call_method(capture.get(), "__enter__")) return plainly("cannot begin a capture");
  std::vector<PyRef> captured;
  if (!graph_->run(args.data(), &captured)) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    PyRef exit = PyRef::steal(PyObject_CallMethod(capture.get(), "__exit__", "OOO", type ? type : Py_None,
                                                  value ? value : Py_None, traceback ? traceback : Py_None));
    if (!exit) PyErr_Clear();
    PyErr_Restore(type, value, traceback);
    return plainly("the graph cannot be captured");
  }
  if (!PyRef::steal(PyObject_CallMethod(capture.get(), "__exit__", "OOO", Py_None, Py_None, Py_None)))
    return plainly("the capture failed");
  PyRef exec = call_method(graph.get(), "raw_cuda_graph_exec");
  if (!exec) return plainly("torch.cuda.CUDAGraph has no raw_cuda_graph_exec (torch >= 2.9 is needed)");

  output_is_input_.assign(captured.size(), -1);
  std::vector<void*> output_storages(captured.size(), nullptr);
  for (size_t i = 0; i < captured.size(); ++i) {
    for (size_t k = 0; k < n; ++k)
      if (captured[i].get() == args[k]) output_is_input_[i] = static_cast<int>(k);
    if (output_is_input_[i] >= 0) continue;
    void* storage = storage_address(captured[i].get());
    if (!storage && PyErr_Occurred()) return plainly("cannot read an output's storage");
    for (size_t k = 0; k < n; ++k)
      if (storage && storage == storages[k])
        return plainly("output " + std::to_string(i) + " shares memory with input " + std::to_string(k));
    for (size_t j = 0; j < i; ++j)
      if (storage && storage == output_storages[j] && captured[j].get() != captured[i].get())
        return plainly("outputs " + std::to_string(j) + " and " + std::to_string(i) + " share memory");
    output_storages[i] = storage;
  }
  cuda_graph_ = std::move(graph);
  exec_ = PyLong_AsVoidPtr(exec.get());
  static_outputs_ = std::move(captured);
  state_ = State::Replay;
  ++stats().cuda_graph_records;
  // The capture ran nothing: this call's results come from the graph's first launch.
  return replay(inputs, outputs);
}

bool CudaGraphRunner::replay(PyObject* const* inputs, std::vector<PyRef>* outputs) const {
  std::string why_not;
  const cuda::Driver* driver = cuda::Driver::get(&why_not);
  if (driver == nullptr) {
    PyErr_Format(PyExc_RuntimeError, "ember: %s", why_not.c_str());
    return false;
  }
  void* stream = nullptr;
  if (!pybridge::current_cuda_stream(device_index_, &stream)) return false;
  // The slots and static outputs are shared by every replay: work queued on the previous stream
  // (the clones of its outputs) must finish before this stream overwrites them.
  if (replayed_ && stream != last_stream_) {
    if (cuda::CUresult s = driver->cuStreamSynchronize(static_cast<cuda::CUstream>(last_stream_))) {
      PyErr_Format(PyExc_RuntimeError, "ember: cuStreamSynchronize: %s", driver->describe(s).c_str());
      return false;
    }
  }
  for (size_t k = 0; k < slots_.size(); ++k)
    if (slots_[k].copy && !call_method(slots_[k].copy.get(), "copy_", inputs[k])) return false;
  cuda::CUcontext context = nullptr;
  driver->cuCtxGetCurrent(&context);
  if (context == nullptr) {
    // A thread that never ran CUDA work: torch's replay makes the device's context current.
    if (!call_method(cuda_graph_.get(), "replay")) return false;
  } else if (cuda::CUresult s = driver->cuGraphLaunch(static_cast<cuda::CUgraphExec>(exec_),
                                                      static_cast<cuda::CUstream>(stream))) {
    PyErr_Format(PyExc_RuntimeError, "ember: cuGraphLaunch: %s", driver->describe(s).c_str());
    return false;
  }
  last_stream_ = stream;
  replayed_ = true;
  for (size_t k = 0; k < slots_.size(); ++k)
    if (slots_[k].copy && slots_[k].mutated && !call_method(inputs[k], "copy_", slots_[k].copy.get())) return false;
  outputs->clear();
  for (size_t i = 0; i < static_outputs_.size(); ++i) {
    if (output_is_input_[i] >= 0) {
      outputs->push_back(PyRef::borrow(inputs[output_is_input_[i]]));
      continue;
    }
    size_t same = 0;
    while (same < i && static_outputs_[same].get() != static_outputs_[i].get()) ++same;
    if (same < i) {
      outputs->push_back(PyRef::borrow((*outputs)[same].get()));
      continue;
    }
    PyRef clone = call_method(static_outputs_[i].get(), "clone");
    if (!clone) return false;
    outputs->push_back(std::move(clone));
  }
  ++stats().cuda_graph_replays;
  return true;
}

}  // namespace ember::runtime
