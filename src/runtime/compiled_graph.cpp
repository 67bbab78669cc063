// CompiledGraph: binds torch tensors to a generated library's buffers and runs its entry
// (compiled_graph.h). Ownership: every tensor a call creates or receives is held in Call::tensors
// until the call returns; outputs leave as new references.
#include "runtime/compiled_graph.h"
#include "runtime/aliased_inputs.h"

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <utility>
#include <variant>

#include "codegen/cpp/include/ember/runtime.h"
#include "pybridge/torch_bridge.h"

namespace ember::runtime {

namespace {

using loop_ir::Buffer;
using loop_ir::BufferId;
using pybridge::data_pointer;

const pybridge::TorchBridge& bridge_or_throw() {
  const pybridge::TorchBridge* bridge = pybridge::torch_bridge();
  if (bridge == nullptr) throw std::runtime_error("ember: compiled graphs need torch imported");
  return *bridge;
}

// `e` at the symbols' values; invalid_argument when it mentions a symbol the program does not declare.
using SymbolValues = std::map<std::string, int64_t>;

std::vector<int64_t> evaluate_all(const std::vector<sym::Expr>& es, const SymbolValues& values) {
  std::vector<int64_t> out;
  for (const sym::Expr& e : es) out.push_back(sym::evaluate(e, values));
  return out;
}

int64_t span_of(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, ir::DType dtype) {
  return span_bytes(sizes.data(), strides.data(), sizes.size(), dtype);
}

std::string describe(const Buffer& b) {
  std::string s = std::string(ir::dtype_name(b.dtype)) + "[";
  for (size_t d = 0; d < b.sizes.size(); ++d) s += (d ? ", " : "") + b.sizes[d].str();
  s += "]{";
  for (size_t d = 0; d < b.strides.size(); ++d) s += (d ? ", " : "") + b.strides[d].str();
  return s + "}";
}

std::string describe(const pybridge::RawTensorMeta& m) {
  std::string s = std::string(ir::dtype_name(m.dtype)) + "[";
  for (int d = 0; d < m.ndim; ++d) s += (d ? ", " : "") + std::to_string(m.sizes[d]);
  s += "]{";
  for (int d = 0; d < m.ndim; ++d) s += (d ? ", " : "") + std::to_string(m.strides[d]);
  return s + "} on " + pybridge::device_of(m.device).str();
}

bool is_empty(const pybridge::RawTensorMeta& m) {
  for (int d = 0; d < m.ndim; ++d)
    if (m.sizes[d] == 0) return true;
  return false;
}

PyRef int_tuple(const std::vector<int64_t>& values) {
  PyRef t = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(values.size())));
  for (size_t k = 0; k < values.size(); ++k)
    PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(k), PyLong_FromLongLong(values[k]));
  return t;
}

MemoryStats g_memory;
// The graph whose kept arena is larger than kSmallArenaBytes (at most one: compiled_graph.h).
const CompiledGraph* g_large_arena_holder = nullptr;
// The graph whose call last took an arena.
const CompiledGraph* g_last_caller = nullptr;
// The last Sized made by any graph: serials identify a plan's tensors in an arena handed between graphs.
uint64_t g_sized_serial = 0;

// The arena's length rounded up to 64 bytes, so that every dtype can view all of it.
int64_t arena_span(const memory::MemoryPlan& plan) { return (plan.arena_bytes + 63) / 64 * 64; }

std::string range_text(const sym::SymbolInfo& s) {
  return "[" + std::to_string(s.min) + ", " +
         (s.max == std::numeric_limits<int64_t>::max() ? std::string("inf") : std::to_string(s.max)) + "]";
}

// base.as_strided(sizes, strides, offset); `shape` is the (sizes, strides) tuple. New reference.
PyObject* as_strided(PyObject* base, PyObject* shape, int64_t offset) {
  return PyObject_CallMethod(base, "as_strided", "OOL", PyTuple_GET_ITEM(shape, 0), PyTuple_GET_ITEM(shape, 1),
                             static_cast<long long>(offset));
}

bool symbolic_arg(const ir::Arg& a) {
  if (a.kind == ir::Arg::Kind::Literal) return std::holds_alternative<sym::Expr>(a.literal);
  for (const ir::Arg& item : a.items)
    if (symbolic_arg(item)) return true;
  return false;
}

// Whether an extern call has an integer argument over the shape symbols (x.view(B, T, C)).
bool symbolic_args(const loop_ir::ExternCall& call) {
  for (const ir::Arg& a : call.args)
    if (symbolic_arg(a)) return true;
  for (const auto& kw : call.kwargs)
    if (symbolic_arg(kw.second)) return true;
  return false;
}

[[noreturn]] void throw_python_error() {
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  std::string message = "Python error";
  if (value != nullptr) {
    PyObject* s = PyObject_Str(value);
    if (s != nullptr && PyUnicode_Check(s)) message = PyUnicode_AsUTF8(s);
    Py_XDECREF(s);
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
  PyErr_Clear();
  throw std::runtime_error(message);
}

// A kernel's index check failed. Eager raises IndexError for an out-of-range gather or index_select
// index and RuntimeError for index_add's and scatter_add's; Ember's one check raises a class that is
// both, so code catching either catches it.
PyObject* index_error_type() {
  static PyObject* type = [] {
    PyObject* bases = PyTuple_Pack(2, PyExc_IndexError, PyExc_RuntimeError);
    PyObject* t = PyErr_NewException("ember.IndexOutOfBoundsError", bases, nullptr);
    Py_XDECREF(bases);
    return t;
  }();
  return type;
}

}  // namespace

const MemoryStats& memory_stats() { return g_memory; }

void reset_memory_stats() {
  const int64_t kept = g_memory.arena_bytes_kept;
  g_memory = MemoryStats{};
  g_memory.arena_bytes_kept = kept;
}

int64_t span_bytes(const int64_t* sizes, const int64_t* strides, size_t rank, ir::DType dtype) {
  int64_t span = 1;
  for (size_t d = 0; d < rank; ++d) {
    if (sizes[d] == 0) return 0;
    span += (sizes[d] - 1) * strides[d];
  }
  return span * ir::dtype_itemsize(dtype);
}

int64_t span_bytes(const Buffer& b) { return span_of(evaluate_all(b.sizes, {}), evaluate_all(b.strides, {}), b.dtype); }

CppCode::CppCode(codegen::CppSource source, SplitBuild build) : source_(std::move(source)), build_(std::move(build)) {
  // compile_graph puts the entry after the kernels.
  entry_ = reinterpret_cast<int (*)(ember_ctx*, void* const*)>(build_.addresses.back());
}

// The state of one run(): what the code and the extern callback share.
struct CompiledGraph::Call final : GraphCode::Env {
  PyObject* tensor(BufferId id) override { return graph->tensor_of(*this, id); }

  const CompiledGraph* graph = nullptr;
  std::shared_ptr<const Sized> sized;  // the sizes of this call
  ember_ctx ctx{};
  std::vector<void*> pointers;  // ctx.buffers
  std::vector<PyRef> tensors;   // per buffer, once it has a torch tensor (not the arena's)
  std::vector<int64_t> storage_offsets;  // per Input/Output/Extern buffer viewed: its storage offset, or -1
  Arena own;                    // the arena, when this call cannot use the reused one
  Arena* arena = nullptr;       // &own or &graph->reused_arena_; null when the plan has no arena
  bool owns_inputs = false;     // run_owned: call.tensors holds the only references the runtime keeps
  bool outputs_alias_arena = false;  // an output is (a view of) a temporary: the arena is the caller's now
  PyThreadState* saved = nullptr;  // null while the code runs with the GIL held

  ~Call() {
    if (arena != nullptr && arena != &own) graph->give_back_arena(*this);
  }
};

CompiledGraph::CompiledGraph(loop_ir::Program program, memory::MemoryPlan plan, std::unique_ptr<GraphCode> code,
                             const std::vector<PyRef>& callables, const EagerExecutor::LiteralToPython& convert)
    : program_(std::move(program)), code_(std::move(code)), callables_(callables), convert_(convert) {
  const pybridge::TorchBridge& bridge = bridge_or_throw();
  if (callables.size() != program_.externs.size())
    throw std::invalid_argument("compiled graph: " + std::to_string(callables.size()) + " callables for " +
                                std::to_string(program_.externs.size()) + " extern calls");
  if (!program_.buffers.empty()) device_ = program_.buffers.front().device;
  if (device_.type != "cpu" && device_.type != "cuda")
    throw std::invalid_argument("compiled graph: buffers on " + device_.str() + "; compiled graphs run on cpu and cuda");
  device_key_ = pybridge::device_key(device_);
  on_cuda_ = device_.type == "cuda";
  for (const Buffer& b : program_.buffers) {
    if (b.device != device_)
      throw std::invalid_argument("compiled graph: %" + b.name() + " is on " + b.device.str() + ", %" +
                                  program_.buffers.front().name() + " on " + device_.str() +
                                  "; a compiled graph runs on one device");
  }
  std::vector<const std::vector<sym::Expr>*> input_sizes;
  for (BufferId id : program_.inputs) input_sizes.push_back(&program_.buffers.at(static_cast<size_t>(id)).sizes);
  binding_ = SymbolBinding(program_.symbols, input_sizes);
  for (size_t k = 0; k < program_.outputs.size(); ++k) {
    BufferId root = program_.outputs[k];
    while (program_.buffers.at(static_cast<size_t>(root)).kind == Buffer::Kind::View)
      root = program_.buffers[static_cast<size_t>(root)].base;
    if (program_.buffers[static_cast<size_t>(root)].kind == Buffer::Kind::Temp)
      throw std::invalid_argument("compiled graph: output " + std::to_string(k) + " (%b" +
                                  std::to_string(program_.outputs[k]) +
                                  ") lives in the per-call arena; outputs must be Output, Input or Extern buffers");
  }
  empty_strided_ = PyRef::steal(PyObject_GetAttrString(bridge.torch, "empty_strided"));
  empty_ = PyRef::steal(PyObject_GetAttrString(bridge.torch, "empty"));
  if (!empty_strided_ || !empty_) throw_python_error();
  PyRef device_name = PyRef::steal(PyUnicode_FromString(device_.str().c_str()));
  for (const Buffer& b : program_.buffers) {
    PyRef& kwargs = alloc_kwargs_[static_cast<int>(b.dtype)];
    if (kwargs) continue;
    PyObject* dtype = bridge.dtypes[static_cast<int>(b.dtype)];
    if (dtype == nullptr)
      throw std::invalid_argument(std::string("compiled graph: this torch has no dtype ") + ir::dtype_torch_name(b.dtype));
    kwargs = PyRef::steal(PyDict_New());
    PyDict_SetItemString(kwargs.get(), "dtype", dtype);
    PyDict_SetItemString(kwargs.get(), "device", device_name.get());
  }
  uint8_kwargs_ = PyRef::steal(PyDict_New());
  PyDict_SetItemString(uint8_kwargs_.get(), "dtype", bridge.dtypes[static_cast<int>(ir::DType::UInt8)]);
  PyDict_SetItemString(uint8_kwargs_.get(), "device", device_name.get());

  // Each extern call becomes a one-node graph over its buffer arguments; one with a symbolic integer
  // argument gets its step per tuple of symbol values (make_sized).
  for (size_t k = 0; k < program_.externs.size(); ++k)
    externs_.push_back(symbolic_args(program_.externs[k]) ? ExternStep{} : make_extern_step(k, {}));
  plan_releases();
  if (program_.symbols.empty()) static_sized_ = make_sized({}, std::move(plan));

  for (const loop_ir::Step& step : program_.steps) {
    if (step.kind != loop_ir::Step::Kind::Kernel) continue;
    for (const loop_ir::Node& n : program_.kernels[static_cast<size_t>(step.index)].nodes) {
      if (n.op != loop_ir::ScalarOp::Store) continue;
      const Buffer& root = program_.buffers.at(static_cast<size_t>(program_.storage_root(n.buffer)));
      if (root.kind != Buffer::Kind::Input) continue;
      const size_t k = static_cast<size_t>(root.index);
      if (std::find(written_inputs_.begin(), written_inputs_.end(), k) == written_inputs_.end()) written_inputs_.push_back(k);
    }
  }
  if (!written_inputs_.empty()) {
    PyRef torch_c = PyRef::steal(PyObject_GetAttrString(bridge.torch, "_C"));
    if (torch_c) increment_version_ = PyRef::steal(PyObject_GetAttrString(torch_c.get(), "_increment_version"));
    if (!increment_version_) throw_python_error();
  }
}

void CompiledGraph::plan_releases() {
  // The last step that touches each storage root; outputs live to the end.
  const std::vector<std::vector<BufferId>> touched = memory::step_roots(program_);
  std::vector<int> last(program_.buffers.size(), -1);
  for (size_t s = 0; s < touched.size(); ++s)
    for (BufferId r : touched[s]) last[static_cast<size_t>(r)] = static_cast<int>(s);
  for (BufferId out : program_.outputs) last[static_cast<size_t>(program_.storage_root(out))] = INT_MAX;
  // The extern call at or after each step: code runs only there between kernels.
  std::vector<int> next_extern(touched.size() + 1, -1);
  for (size_t s = touched.size(); s-- > 0;)
    next_extern[s] = program_.steps[s].kind == loop_ir::Step::Kind::Extern ? program_.steps[s].index : next_extern[s + 1];
  release_after_extern_.assign(program_.externs.size(), {});
  for (const Buffer& b : program_.buffers) {
    const BufferId root = program_.storage_root(b.id);
    const int at = last[static_cast<size_t>(root)];
    const Buffer::Kind kind = program_.buffers[static_cast<size_t>(root)].kind;
    if ((kind != Buffer::Kind::Extern && kind != Buffer::Kind::Input) || at < 0 || at == INT_MAX) continue;
    if (next_extern[static_cast<size_t>(at)] >= 0)
      release_after_extern_[static_cast<size_t>(next_extern[static_cast<size_t>(at)])].push_back(b.id);
  }
}

CompiledGraph::~CompiledGraph() {
  g_memory.arena_bytes_kept -= reused_arena_.bytes ? reused_arena_.span : 0;
  if (g_large_arena_holder == this) g_large_arena_holder = nullptr;
  if (g_last_caller == this) g_last_caller = nullptr;
}

void CompiledGraph::drop_reused_arena() const { release_reused_arena(); }

bool CompiledGraph::stand_in_for_overlaps(Call& call, PyObject* const* inputs,
                                          std::vector<std::pair<PyObject*, PyRef>>* copies) const {
  std::vector<char> written(program_.inputs.size(), 0);
  for (size_t k : written_inputs_) written[k] = 1;
  std::vector<InputRange> ranges;
  for (size_t k = 0; k < program_.inputs.size(); ++k) {
    const size_t u = static_cast<size_t>(program_.inputs[k]);
    const int64_t bytes = span_of(call.sized->sizes[u], call.sized->strides[u], program_.buffers[u].dtype);
    if (bytes == 0) continue;
    const uintptr_t start = reinterpret_cast<uintptr_t>(call.pointers[u]);
    ranges.push_back(InputRange{start, start + static_cast<uintptr_t>(bytes), written[k] != 0, static_cast<int>(k)});
  }
  if (!written_overlap(std::move(ranges))) return true;
  for (size_t k : written_inputs_) {
    const Buffer& b = program_.buffers.at(static_cast<size_t>(program_.inputs[k]));
    PyRef copy = copy_to_planned(call, b, inputs[k]);
    if (!copy) return false;
    const size_t u = static_cast<size_t>(b.id);
    if (call.pointers[u] != nullptr && !data_pointer(copy.get(), &call.pointers[u])) return false;
    call.tensors[u] = copy;
    copies->emplace_back(inputs[k], std::move(copy));
  }
  return true;
}

bool CompiledGraph::finish_input_writes(PyObject* const* inputs,
                                        const std::vector<std::pair<PyObject*, PyRef>>& copies) const {
  for (const auto& [tensor, copy] : copies) {  // copy_ bumps the version
    PyRef done = PyRef::steal(PyObject_CallMethod(tensor, "copy_", "O", copy.get()));
    if (!done) return false;
  }
  if (!copies.empty()) return true;
  PyRef written = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(written_inputs_.size())));
  if (!written) return false;
  for (size_t j = 0; j < written_inputs_.size(); ++j) {
    Py_INCREF(inputs[written_inputs_[j]]);
    PyTuple_SET_ITEM(written.get(), static_cast<Py_ssize_t>(j), inputs[written_inputs_[j]]);
  }
  return static_cast<bool>(PyRef::steal(PyObject_CallOneArg(increment_version_.get(), written.get())));
}

CompiledGraph::ExternStep CompiledGraph::make_extern_step(size_t k, const std::map<std::string, int64_t>& at) const {
  const loop_ir::ExternCall& call = program_.externs[k];
  ExternStep step;
  ir::Graph graph("extern" + std::to_string(k));
  std::vector<ir::ValueId> value_of(program_.buffers.size(), -1);
  std::function<ir::Arg(const ir::Arg&)> remap = [&](const ir::Arg& a) -> ir::Arg {
    switch (a.kind) {
      case ir::Arg::Kind::Value: {
        const Buffer& b = program_.buffers.at(static_cast<size_t>(a.value));
        if (value_of[static_cast<size_t>(b.id)] < 0) {
          ir::TensorType type;
          type.dtype = b.dtype;
          type.sizes = b.sizes;
          type.strides = b.strides;
          type.device = b.device;
          value_of[static_cast<size_t>(b.id)] = graph.add_input(type, "%" + b.name());
          step.inputs.push_back(b.id);
        }
        return ir::Arg::of_value(value_of[static_cast<size_t>(b.id)]);
      }
      case ir::Arg::Kind::Literal: {
        const sym::Expr* e = std::get_if<sym::Expr>(&a.literal);
        if (e == nullptr || at.empty()) return a;
        return ir::Arg::of_literal(sym::evaluate(*e, at));
      }
      case ir::Arg::Kind::List:
      case ir::Arg::Kind::Tuple: {
        std::vector<ir::Arg> items;
        for (const ir::Arg& item : a.items) items.push_back(remap(item));
        return a.kind == ir::Arg::Kind::List ? ir::Arg::list(std::move(items)) : ir::Arg::tuple(std::move(items));
      }
    }
    throw std::logic_error("unknown argument kind");
  };
  std::vector<ir::Arg> args;
  for (const ir::Arg& a : call.args) args.push_back(remap(a));
  std::vector<std::pair<std::string, ir::Arg>> kwargs;
  for (const auto& kw : call.kwargs) kwargs.emplace_back(kw.first, remap(kw.second));
  std::vector<ir::TensorType> result_types;
  for (BufferId r : call.results) {
    const Buffer& b = program_.buffers.at(static_cast<size_t>(r));
    ir::TensorType type;
    type.dtype = b.dtype;
    type.sizes = b.sizes;
    type.strides = b.strides;
    type.device = b.device;
    result_types.push_back(type);
  }
  ir::NodeId node = graph.add_node(ir::Op::TorchCall, call.callable, std::move(args), std::move(kwargs),
                                   std::move(result_types), call.result_form);
  graph.set_outputs(graph.node(node).results);
  step.results = call.results;
  step.executor = std::make_unique<EagerExecutor>(graph, std::vector<PyRef>{callables_[k]}, convert_);
  return step;
}

std::shared_ptr<const CompiledGraph::Sized> CompiledGraph::make_sized(std::vector<int64_t> values,
                                                                      memory::MemoryPlan plan) const {
  auto sized = std::make_shared<Sized>();
  sized->serial = ++g_sized_serial;
  SymbolValues at;
  for (size_t k = 0; k < values.size(); ++k) at.emplace(program_.symbols[k].name, values[k]);
  sized->values = std::move(values);
  sized->plan = std::move(plan);
  sized->placement.resize(program_.buffers.size());
  for (const Buffer& b : program_.buffers) {
    sized->sizes.push_back(evaluate_all(b.sizes, at));
    sized->strides.push_back(evaluate_all(b.strides, at));
    sized->alloc_args.push_back(
        PyRef::steal(PyTuple_Pack(2, int_tuple(sized->sizes.back()).get(), int_tuple(sized->strides.back()).get())));
    if (!sized->alloc_args.back()) throw_python_error();
    Placement& p = sized->placement[static_cast<size_t>(b.id)];
    p.root = b.id;
    while (p.root >= 0 && program_.buffers[static_cast<size_t>(p.root)].kind == Buffer::Kind::View) {
      const Buffer& view = program_.buffers[static_cast<size_t>(p.root)];
      p.offset += sym::evaluate(view.offset, at);
      p.root = program_.buffers.at(static_cast<size_t>(view.base)).dtype == view.dtype ? view.base : -1;
    }
    if (b.kind == Buffer::Kind::Temp &&
        sized->plan.offsets.at(static_cast<size_t>(b.id)) % ir::dtype_itemsize(b.dtype) != 0)
      throw std::invalid_argument("compiled graph: %" + b.name() + " is not aligned to its dtype in the arena");
  }
  sized->externs.resize(program_.externs.size());
  for (size_t k = 0; k < program_.externs.size(); ++k)
    if (!at.empty() && symbolic_args(program_.externs[k]))
      sized->externs[k] = std::make_shared<const ExternStep>(make_extern_step(k, at));
  return sized;
}

std::shared_ptr<const CompiledGraph::Sized> CompiledGraph::sized_for(PyObject* const* inputs,
                                                                     pybridge::TensorReads& reads) const {
  if (program_.symbols.empty()) return static_sized_;
  std::vector<int64_t> values(program_.symbols.size());
  if (!binding_.read(inputs, reads, values.data())) return nullptr;
  for (size_t k = 0; k < values.size(); ++k) {
    const sym::SymbolInfo& s = program_.symbols[k];
    const int64_t v = values[k];
    if (v < s.min || v > s.max || (s.divisor > 1 && v % s.divisor != 0)) {
      PyErr_Format(PyExc_RuntimeError, "ember: compiled program @%s: %s is %lld, outside %s or not a multiple of %lld",
                   program_.name.c_str(), s.name.c_str(), static_cast<long long>(v), range_text(s).c_str(),
                   static_cast<long long>(s.divisor));
      return nullptr;
    }
  }
  for (size_t i = 0; i < sized_cache_.size(); ++i) {
    if (sized_cache_[i]->values != values) continue;
    std::rotate(sized_cache_.begin(), sized_cache_.begin() + static_cast<std::ptrdiff_t>(i),
                sized_cache_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    return sized_cache_.front();
  }
  try {
    memory::MemoryPlan plan = memory::plan_memory(program_, values);
    sized_cache_.insert(sized_cache_.begin(), make_sized(std::move(values), std::move(plan)));
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_RuntimeError, "ember: compiled program @%s: %s", program_.name.c_str(), e.what());
    return nullptr;
  }
  if (sized_cache_.size() > kSizedCacheSize) sized_cache_.pop_back();
  return sized_cache_.front();
}

bool CompiledGraph::same_dims(const Call& call, BufferId id, const pybridge::RawTensorMeta& m,
                              bool* strides_equal) const {
  const std::vector<int64_t>& sizes = call.sized->sizes[static_cast<size_t>(id)];
  const std::vector<int64_t>& strides = call.sized->strides[static_cast<size_t>(id)];
  if (m.ndim != static_cast<int>(sizes.size())) return false;
  *strides_equal = true;
  for (int d = 0; d < m.ndim; ++d) {
    if (m.sizes[d] != sizes[static_cast<size_t>(d)]) return false;
    // A dimension of size 1 (or an empty tensor) is never stepped along: its stride is free.
    if (m.sizes[d] > 1 && m.strides[d] != strides[static_cast<size_t>(d)]) *strides_equal = false;
  }
  return true;
}

PyRef CompiledGraph::empty_like_buffer(const Call& call, const Buffer& b) const {
  return PyRef::steal(PyObject_Call(empty_strided_.get(), call.sized->alloc_args[static_cast<size_t>(b.id)].get(),
                                    alloc_kwargs_[static_cast<int>(b.dtype)].get()));
}

PyRef CompiledGraph::copy_to_planned(const Call& call, const Buffer& b, PyObject* tensor) const {
  PyRef copy = empty_like_buffer(call, b);
  if (!copy) return copy;
  // A planned stride of 0 (an expand) makes one memory location of many elements, which copy_ refuses to
  // write: copy the one slice each such dim repeats.
  PyRef from = PyRef::borrow(tensor), into = copy;
  const std::vector<int64_t>& sizes = call.sized->sizes[static_cast<size_t>(b.id)];
  const std::vector<int64_t>& strides = call.sized->strides[static_cast<size_t>(b.id)];
  for (size_t d = 0; d < strides.size(); ++d) {
    if (strides[d] != 0 || sizes[d] < 2) continue;
    const Py_ssize_t dim = static_cast<Py_ssize_t>(d);
    from = PyRef::steal(PyObject_CallMethod(from.get(), "narrow", "nnn", dim, Py_ssize_t{0}, Py_ssize_t{1}));
    if (!from) return from;
    into = PyRef::steal(PyObject_CallMethod(into.get(), "narrow", "nnn", dim, Py_ssize_t{0}, Py_ssize_t{1}));
    if (!into) return into;
  }
  PyRef done = PyRef::steal(PyObject_CallMethod(into.get(), "copy_", "O", from.get()));
  if (!done) return done;
  return copy;
}

bool CompiledGraph::bind_input(Call& call, size_t k, PyObject* tensor, pybridge::TensorReads& reads) const {
  const Buffer& b = program_.buffers.at(static_cast<size_t>(program_.inputs[k]));
  const pybridge::RawTensorMeta* read = reads.get(k, tensor);
  if (read == nullptr) {
    PyErr_Format(PyExc_TypeError, "ember: input %zu of compiled program @%s must be a tensor %s", k,
                 program_.name.c_str(), describe(b).c_str());
    return false;
  }
  const pybridge::RawTensorMeta& meta = *read;
  bool strides_equal = false;
  if (meta.device != device_key_ || meta.dtype != b.dtype || !same_dims(call, b.id, meta, &strides_equal) ||
      !strides_equal) {
    if (!program_.symbols.empty() && meta.ndim == static_cast<int>(b.sizes.size())) {
      // Name the first dimension that disagrees with its expression at this call's symbol values.
      const std::vector<int64_t>& sizes = call.sized->sizes[static_cast<size_t>(b.id)];
      const std::vector<int64_t>& strides = call.sized->strides[static_cast<size_t>(b.id)];
      for (int d = 0; d < meta.ndim; ++d) {
        const size_t u = static_cast<size_t>(d);
        const bool size_ok = meta.sizes[d] == sizes[u];
        if (size_ok && (meta.sizes[d] <= 1 || meta.strides[d] == strides[u])) continue;
        const std::string expected = size_ok ? "stride " + b.strides[u].str() + " = " + std::to_string(strides[u])
                                             : "size " + b.sizes[u].str() + " = " + std::to_string(sizes[u]);
        const long long actual = size_ok ? meta.strides[d] : meta.sizes[d];
        PyErr_Format(PyExc_RuntimeError, "ember: input %zu of compiled program @%s, dimension %d: expected %s, got %lld",
                     k, program_.name.c_str(), d, expected.c_str(), actual);
        return false;
      }
    }
    PyErr_Format(PyExc_ValueError, "ember: input %zu of compiled program @%s must be a %s tensor %s, got %s", k,
                 program_.name.c_str(), device_.str().c_str(), describe(b).c_str(), describe(meta).c_str());
    return false;
  }
  call.tensors[static_cast<size_t>(b.id)] = PyRef::borrow(tensor);
  if (is_empty(meta)) return true;  // never dereferenced; its data pointer may be null
  return data_pointer(tensor, meta, &call.pointers[static_cast<size_t>(b.id)]);
}

bool CompiledGraph::adopt_result(Call& call, BufferId id, PyObject* tensor) const {
  const Buffer& b = program_.buffers.at(static_cast<size_t>(id));
  pybridge::RawTensorMeta meta;
  bool strides_equal = false;
  if (!pybridge::read_raw_tensor_meta(tensor, &meta, pybridge::TensorReadPath::Auto) || meta.device != device_key_ ||
      meta.dtype != b.dtype || !same_dims(call, id, meta, &strides_equal)) {
    PyErr_Format(PyExc_RuntimeError, "ember: extern call result %%%s should be a %s tensor %s, got %s",
                 b.name().c_str(), device_.str().c_str(), describe(b).c_str(),
                 meta.ndim >= 0 && meta.sizes ? describe(meta).c_str() : "something else");
    return false;
  }
  // Kernels have the planned strides compiled in: a result laid out otherwise is copied into a tensor laid
  // out that way. A result whose data lies in the arena (a view of a temporary, an in-place op's argument)
  // is kept as it is: it aliases the temporary, which the planner keeps alive as long as it (plan.cpp).
  PyRef held = strides_equal ? PyRef::borrow(tensor) : copy_to_planned(call, b, tensor);
  if (!held) return false;
  call.tensors[static_cast<size_t>(id)] = held;
  if (is_empty(meta)) return true;
  void** out = &call.pointers[static_cast<size_t>(id)];
  return strides_equal ? data_pointer(tensor, meta, out) : data_pointer(held.get(), out);
}

PyObject* CompiledGraph::tensor_of(Call& call, BufferId id) const {
  PyRef& slot = call.tensors[static_cast<size_t>(id)];
  if (slot) return slot.get();
  const Buffer& b = program_.buffers.at(static_cast<size_t>(id));
  const Placement& p = call.sized->placement[static_cast<size_t>(id)];
  switch (b.kind) {
    case Buffer::Kind::Input:
    case Buffer::Kind::Output:
    case Buffer::Kind::Extern:
      PyErr_Format(PyExc_RuntimeError, "ember: %%%s is used before the step that defines it", b.name().c_str());
      return nullptr;
    case Buffer::Kind::Temp: return arena_tensor(call, id);
    case Buffer::Kind::View: {
      if (p.root < 0) {
        PyErr_Format(PyExc_NotImplementedError, "ember: view %%%s reinterprets its base's dtype; not supported",
                     b.name().c_str());
        return nullptr;
      }
      if (program_.buffers[static_cast<size_t>(p.root)].kind == Buffer::Kind::Temp) return arena_tensor(call, id);
      // One as_strided over the root: the caller's or torch's tensor, whose storage offset is read once per call.
      PyObject* root = tensor_of(call, p.root);
      if (root == nullptr) return nullptr;
      int64_t& root_offset = call.storage_offsets[static_cast<size_t>(p.root)];
      if (root_offset < 0) {
        PyRef offset = PyRef::steal(PyObject_CallMethod(root, "storage_offset", nullptr));
        if (!offset) return nullptr;
        root_offset = PyLong_AsLongLong(offset.get());
      }
      slot = PyRef::steal(as_strided(root, call.sized->alloc_args[static_cast<size_t>(id)].get(), root_offset + p.offset));
      return slot.get();
    }
  }
  return nullptr;
}

PyObject* CompiledGraph::arena_tensor(Call& call, BufferId id) const {
  if (call.arena == nullptr) {
    // A plan of 0 bytes takes no arena (take_arena): every temporary is empty, and an extern call that reads
    // one gets a new tensor without elements, laid out as planned.
    PyRef& slot = call.tensors[static_cast<size_t>(id)];
    slot = empty_like_buffer(call, program_.buffers.at(static_cast<size_t>(id)));
    return slot.get();
  }
  Arena& arena = *call.arena;
  PyRef& slot = arena.tensors[static_cast<size_t>(id)];
  if (slot) return slot.get();
  const Buffer& b = program_.buffers.at(static_cast<size_t>(id));
  const Placement& p = call.sized->placement[static_cast<size_t>(id)];
  PyRef& typed = arena.typed[static_cast<int>(b.dtype)];
  if (!typed) {
    PyRef bytes = PyRef::steal(PyObject_CallMethod(arena.bytes.get(), "narrow", "iLL", 0,
                                                   static_cast<long long>(arena.pad), static_cast<long long>(arena.span)));
    if (!bytes) return nullptr;
    typed = PyRef::steal(PyObject_CallMethod(bytes.get(), "view", "O",
                                             pybridge::torch_bridge()->dtypes[static_cast<int>(b.dtype)]));
    if (!typed) return nullptr;
  }
  const int64_t at = call.sized->plan.offsets.at(static_cast<size_t>(p.root)) / ir::dtype_itemsize(b.dtype) + p.offset;
  slot = PyRef::steal(as_strided(typed.get(), call.sized->alloc_args[static_cast<size_t>(id)].get(), at));
  return slot.get();
}

bool CompiledGraph::new_arena(Arena* arena, const Sized& sized, Arena donor) const {
  const int64_t span = arena_span(sized.plan);
  if (donor.bytes && donor.span >= span) {
    *arena = std::move(donor);
    ++g_memory.arenas_handed_over;
    auto mine = arena->parked.find(sized.serial);
    if (mine != arena->parked.end()) {
      arena->tensors = std::move(mine->second);
      arena->parked.erase(mine);
    } else {
      arena->tensors.assign(program_.buffers.size(), PyRef());
    }
    arena->sized_serial = sized.serial;
    return true;
  }
  donor = Arena{};  // too small: its memory goes back before the new block is allocated
  *arena = Arena{};
  arena->span = span;
  arena->sized_serial = sized.serial;
  // Over-allocated by 64 bytes so that its start can be rounded up to a 64-byte boundary.
  PyRef size = PyRef::steal(Py_BuildValue("(L)", static_cast<long long>(span + 64)));
  arena->bytes = PyRef::steal(PyObject_Call(empty_.get(), size.get(), uint8_kwargs_.get()));
  void* base = nullptr;
  if (!arena->bytes || !data_pointer(arena->bytes.get(), &base)) return false;
  arena->pad = static_cast<int64_t>((64 - reinterpret_cast<uintptr_t>(base) % 64) % 64);
  arena->start = static_cast<char*>(base) + arena->pad;
  arena->tensors.resize(program_.buffers.size());
  return true;
}

CompiledGraph::Arena CompiledGraph::release_reused_arena() const {
  if (reused_arena_busy_ || !reused_arena_.bytes) return Arena{};
  g_memory.arena_bytes_kept -= reused_arena_.span;
  Arena arena = std::exchange(reused_arena_, Arena{});
  arena.parked[arena.sized_serial] = std::move(arena.tensors);
  arena.tensors.clear();
  return arena;
}

bool CompiledGraph::take_arena(Call& call) const {
  // Another graph runs: the large arena kept by the graph before it is this call's if it needs one
  // (its pages are already mapped: in training the forward and the backward take turns with one
  // block instead of each faulting in a new one per call), and freed otherwise, since it would only
  // add to this call's peak.
  Arena donor;
  if (g_last_caller != this && g_large_arena_holder != nullptr && g_large_arena_holder != this) {
    Arena released = g_large_arena_holder->release_reused_arena();
    if (g_large_arena_holder->device() == device_) donor = std::move(released);
    g_large_arena_holder = nullptr;
  }
  g_last_caller = this;
  const Sized& sized = *call.sized;
  if (sized.plan.arena_bytes == 0) return true;
  g_memory.arena_bytes_max = std::max(g_memory.arena_bytes_max, arena_span(sized.plan));
  if (reused_arena_busy_) {
    call.arena = &call.own;
    return new_arena(&call.own, sized, std::move(donor));
  }
  reused_arena_busy_ = true;
  call.arena = &reused_arena_;
  // The kept arena serves any plan it is large enough for (it grows to the largest plan seen);
  // its tensors are those of one plan.
  if (!reused_arena_.bytes || reused_arena_.span < sized.plan.arena_bytes) {
    g_memory.arena_bytes_kept -= reused_arena_.bytes ? reused_arena_.span : 0;
    if (!new_arena(&reused_arena_, sized, std::move(donor))) return false;
    g_memory.arena_bytes_kept += reused_arena_.span;
    return true;
  }
  if (reused_arena_.sized_serial != sized.serial) {
    reused_arena_.tensors.assign(program_.buffers.size(), PyRef());
    reused_arena_.sized_serial = sized.serial;
  }
  return true;
}

void CompiledGraph::give_back_arena(Call& call) const {
  reused_arena_busy_ = false;
  // An output that aliases the kept arena (an extern returned a view of a temporary, or its argument,
  // written in place) belongs to the caller: the next call gets a new arena instead of overwriting it.
  if (call.outputs_alias_arena) {
    drop_reused_arena();
    if (g_large_arena_holder == this) g_large_arena_holder = nullptr;
    return;
  }
  if (!reused_arena_.bytes || reused_arena_.span <= kSmallArenaBytes || g_large_arena_holder == this) return;
  if (g_large_arena_holder != nullptr) g_large_arena_holder->drop_reused_arena();
  g_large_arena_holder = this;
}

int CompiledGraph::call_extern(ember_ctx* ctx, int32_t index) {
  Call* call = static_cast<Call*>(ctx->runtime);
  if (call->saved == nullptr) return call->graph->run_extern(*call, index) ? 0 : 1;
  PyEval_RestoreThread(call->saved);
  const bool ok = call->graph->run_extern(*call, index);
  call->saved = PyEval_SaveThread();
  return ok ? 0 : 1;
}

bool CompiledGraph::run_extern(Call& call, int32_t index) const {
  const std::shared_ptr<const ExternStep>& at_sizes = call.sized->externs.at(static_cast<size_t>(index));
  const ExternStep& step = at_sizes ? *at_sizes : externs_.at(static_cast<size_t>(index));
  std::vector<PyObject*> args;
  for (BufferId id : step.inputs) {
    PyObject* t = tensor_of(call, id);
    if (t == nullptr) return false;
    args.push_back(t);
  }
  std::vector<PyRef> results;
  if (!step.executor->run(args.data(), &results)) return false;
  for (size_t k = 0; k < step.inputs.size(); ++k)
    if (in_arena(call, step.inputs[k]) && !still_as_planned(call, step.inputs[k], args[k]))
      call.arena->tensors[static_cast<size_t>(step.inputs[k])] = PyRef();  // an in-place view op (unsqueeze_) changed it
  for (size_t k = 0; k < step.results.size(); ++k)
    if (!adopt_result(call, step.results[k], results.at(k).get())) return false;
  for (BufferId id : release_after_extern_[static_cast<size_t>(index)]) {
    const Placement& p = call.sized->placement[static_cast<size_t>(id)];
    if (program_.buffers[static_cast<size_t>(program_.storage_root(id))].kind == Buffer::Kind::Input) {
      if (!call.owns_inputs) continue;
      if (p.root == id && call.tensors[static_cast<size_t>(id)])
        g_memory.input_bytes_released += span_of(call.sized->sizes[static_cast<size_t>(id)],
                                                 call.sized->strides[static_cast<size_t>(id)], program_.buffers[static_cast<size_t>(id)].dtype);
    }
    call.tensors[static_cast<size_t>(id)] = PyRef();
  }
  return true;
}

bool CompiledGraph::in_arena(const Call& call, BufferId id) const {
  if (call.arena == nullptr) return false;  // a plan of 0 bytes: no temporary has an element (arena_tensor)
  const BufferId root = call.sized->placement[static_cast<size_t>(id)].root;
  return root >= 0 && program_.buffers[static_cast<size_t>(root)].kind == Buffer::Kind::Temp;
}

bool CompiledGraph::still_as_planned(const Call& call, BufferId id, PyObject* tensor) const {
  const Buffer& b = program_.buffers[static_cast<size_t>(id)];
  const Placement& p = call.sized->placement[static_cast<size_t>(id)];
  pybridge::RawTensorMeta meta;
  bool strides_equal = false;
  void* data = nullptr;
  const bool ok = pybridge::read_raw_tensor_meta(tensor, &meta, pybridge::TensorReadPath::Auto) &&
                  meta.dtype == b.dtype && same_dims(call, id, meta, &strides_equal) && strides_equal &&
                  (is_empty(meta) || data_pointer(tensor, meta, &data));
  PyErr_Clear();
  const char* planned = call.arena->start + call.sized->plan.offsets[static_cast<size_t>(p.root)] +
                        p.offset * ir::dtype_itemsize(b.dtype);
  return ok && (is_empty(meta) || data == planned);
}

bool CompiledGraph::run(PyObject* const* inputs, std::vector<PyRef>* outputs) const {
  pybridge::TensorReads reads(program_.inputs.size());
  return run_call(inputs, reads, nullptr, outputs);
}

bool CompiledGraph::run_with_reads(PyObject* const* inputs, pybridge::TensorReads& reads,
                                   std::vector<PyRef>* outputs) const {
  return run_call(inputs, reads, nullptr, outputs);
}

bool CompiledGraph::run_owned(std::vector<PyRef> inputs, std::vector<PyRef>* outputs) const {
  std::vector<PyObject*> borrowed;
  for (const PyRef& t : inputs) borrowed.push_back(t.get());
  pybridge::TensorReads reads(program_.inputs.size());
  return run_call(borrowed.data(), reads, &inputs, outputs);
}

bool CompiledGraph::run_call(PyObject* const* inputs, pybridge::TensorReads& reads, std::vector<PyRef>* owned,
                             std::vector<PyRef>* outputs) const {
  Call call;
  call.graph = this;
  call.sized = sized_for(inputs, reads);
  if (!call.sized) return false;
  call.pointers.assign(program_.buffers.size(), nullptr);
  call.tensors.resize(program_.buffers.size());
  for (size_t k = 0; k < program_.inputs.size(); ++k)
    if (!bind_input(call, k, inputs[k], reads)) return false;
  // Written inputs are read again after the run (finish_input_writes): those calls keep them all.
  if (owned != nullptr && written_inputs_.empty()) {
    owned->clear();  // call.tensors holds the inputs now; `inputs` is not read past this point
    call.owns_inputs = true;
  }
  std::vector<std::pair<PyObject*, PyRef>> input_copies;
  if (!written_inputs_.empty() && !stand_in_for_overlaps(call, inputs, &input_copies)) return false;
  for (const Buffer& b : program_.buffers) {
    if (b.kind != Buffer::Kind::Output) continue;
    PyRef t = empty_like_buffer(call, b);
    if (!t) return false;
    const size_t u = static_cast<size_t>(b.id);
    if (span_of(call.sized->sizes[u], call.sized->strides[u], b.dtype) > 0 && !data_pointer(t.get(), &call.pointers[static_cast<size_t>(b.id)])) return false;
    call.tensors[static_cast<size_t>(b.id)] = std::move(t);
  }
  call.storage_offsets.assign(program_.buffers.size(), -1);
  if (!take_arena(call)) return false;
  if (call.arena != nullptr) call.ctx.arena = call.arena->start;
  if (!program_.symbols.empty()) {
    // Generated code with shape symbols addresses temporaries through ctx->buffers (its plan is this call's).
    call.ctx.sym = call.sized->values.data();
    for (const Buffer& b : program_.buffers)
      if (b.kind == Buffer::Kind::Temp && call.arena != nullptr)
        call.pointers[static_cast<size_t>(b.id)] = call.arena->start + call.sized->plan.offsets[static_cast<size_t>(b.id)];
  }
  call.ctx.buffers = call.pointers.data();
  call.ctx.call_extern = &CompiledGraph::call_extern;
  call.ctx.runtime = &call;

  if (on_cuda_) {
    call.device_index = device_key_.index;
    if (!pybridge::current_cuda_stream(device_key_.index, &call.stream)) return false;
  }

  int status = 0;
  if (code_->needs_gil()) {
    status = code_->run(&call.ctx, call);
  } else {
    call.saved = PyEval_SaveThread();
    status = code_->run(&call.ctx, call);
    PyEval_RestoreThread(call.saved);
    call.saved = nullptr;
  }

  if (status != 0) {
    if (call.ctx.error == EMBER_ERROR_INDEX) {
      const std::string& site = code_->check_sites().at(static_cast<size_t>(call.ctx.error_site));
      PyErr_Format(index_error_type(), "index %lld is out of bounds for dimension with size %lld (ember kernel %s)",
                   static_cast<long long>(call.ctx.error_value), static_cast<long long>(call.ctx.error_bound),
                   site.c_str());
    } else if (!PyErr_Occurred()) {
      PyErr_Format(PyExc_RuntimeError, "ember: generated code for @%s failed (status %d)", program_.name.c_str(), status);
    }
    return false;
  }
  if (!written_inputs_.empty() && !finish_input_writes(inputs, input_copies)) return false;
  outputs->clear();
  for (BufferId id : program_.outputs) {
    PyObject* t = tensor_of(call, id);
    if (t == nullptr) return false;
    outputs->push_back(PyRef::borrow(t));
    void* data = nullptr;
    if (call.arena != nullptr && data_pointer(t, &data) && data >= call.arena->start &&
        data < call.arena->start + call.arena->span)
      call.outputs_alias_arena = true;
    PyErr_Clear();  // a tensor without data (empty) aliases nothing
  }
  if (call.outputs_alias_arena) ++g_memory.arenas_kept_by_outputs;
  return true;
}

CompiledGraphBuild compile_graph(loop_ir::Program program, memory::MemoryPlan plan, codegen::CppSource source,
                                 CodeCache& code_cache, const CppCompileOptions& compile_options, int jobs,
                                 const std::vector<PyRef>& callables, const EagerExecutor::LiteralToPython& convert) {
  SplitSource split{source.prelude, {}};
  for (const codegen::CppKernel& k : source.kernels) split.functions.emplace_back(k.name, k.text);
  split.functions.emplace_back(source.entry, source.entry_code);
  SplitBuild compiled = compile_split(code_cache, split, compile_options, jobs);
  CompiledGraphBuild build;
  build.cache_hit = compiled.cache_hit;
  build.compile_seconds = compiled.seconds;
  build.kernels_reused = static_cast<int>(std::count(compiled.reused.begin(), compiled.reused.end() - 1, true));
  build.graph = std::make_unique<CompiledGraph>(std::move(program), std::move(plan),
                                                std::make_unique<CppCode>(std::move(source), std::move(compiled)),
                                                callables, convert);
  return build;
}

}  // namespace ember::runtime
