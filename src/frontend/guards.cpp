// The guard tree (see guards.h).
//
// Layout: one node per distinct source, children keyed by (step kind, name, index), so a prefix
// shared by many sources (L['self'], L['self']._modules...) is read once per check. A node holds
// its checks in insertion order and the capture slots it fills; checks that need no value
// (global state, global module hooks) sit at the root and run first.
//
// The check path allocates nothing of its own and builds no strings: sources keep their keys as
// interned str objects, tensor metadata is read into a stack RawTensorMeta, and every failure
// text is produced only by first_failure(), which walks the same tree with a `why` string.
//
// Ownership: every PyObject* held by a node or check is a strong reference released in ~Impl,
// except IdMatch's `identity`, which is the address compared against (kept alive by the strong
// reference in `object` or watched through the weak reference in `object`). A GuardSet must be
// destroyed with the GIL held.
#include "frontend/guards.h"

#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "frontend/guards/access.h"
#include "sym/rel_program.h"
#include "pybridge/errors.h"
#include "pybridge/torch_bridge.h"

namespace ember::frontend {

using pybridge::DeviceKey;
using pybridge::RawTensorMeta;
using pybridge::TensorReadPath;

namespace {

enum class CheckKind : uint8_t {
  TensorMatch,
  IntSlot,
  IdMatch,
  TypeMatch,
  Equals,
  Length,
  DictKeys,
  NoHooks,
  NoGlobalHooks,
  GradMode,
  DefaultDType,
  Autocast,
  AutocastState,
  Deterministic,
  Environ,
};

struct TensorExpectation {
  TensorMeta meta;  // for text; meta.type is owned by the check's `object`
  DeviceKey device;
  // Dynamic shapes: per dim, the shape-guard slot its size (stride) is stored into instead of
  // being compared, or -1. Empty: every size and stride is compared.
  std::vector<int> size_slots, stride_slots;
};

struct Check {
  CheckKind kind;
  // owned: type, expected value, keys tuple, the id target/weakref, or for Environ the tuple
  // (os.environ's byte dict, encoded key, encoded expected value or None when unset, key as str)
  PyObject* object = nullptr;
  PyObject* identity = nullptr;  // IdMatch: the address to compare (not owned)
  bool weak = false;             // IdMatch: `object` is a weak reference to `identity`
  bool flag = false;             // GradMode, Autocast: the expected state
  Py_ssize_t length = 0;         // Length
  ir::DType dtype = ir::DType::Float32;  // DefaultDType
  int tensor = -1;               // TensorMatch: index into Impl::tensors
  int slot = -1;                 // IntSlot: the shape-guard slot the int's value goes to
  int autocast = -1;             // AutocastState: index into Impl::autocast_states
};

struct Node {
  int parent = -1;
  SourceRef source;
  PyObject* key = nullptr;  // owned interned str: the name of this step (or of the variable)
  std::vector<Check> checks;
  std::vector<int> children;
  std::vector<int> captures;
  bool tensor_checked = false;  // a TensorMatch check reads the value's metadata
};

using NodeKey = std::tuple<int, int, int64_t, std::string>;

bool same_float(double a, double b) {
  // -0.0 and 0.0 compare equal but give different results (1/x, copysign); NaN never equals
  // itself but any NaN gives the same results.
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// 1 when equal with the same exact types all the way down, 0 when not, -1 with an error set.
int exact_equal(PyObject* a, PyObject* b) {
  if (a == b) return 1;
  if (Py_TYPE(a) != Py_TYPE(b)) return 0;
  if (PyFloat_CheckExact(a)) return same_float(PyFloat_AS_DOUBLE(a), PyFloat_AS_DOUBLE(b));
  if (PyComplex_CheckExact(a)) {
    Py_complex x = PyComplex_AsCComplex(a), y = PyComplex_AsCComplex(b);
    return same_float(x.real, y.real) && same_float(x.imag, y.imag);
  }
  if (PyTuple_CheckExact(a)) {
    Py_ssize_t n = PyTuple_GET_SIZE(a);
    if (PyTuple_GET_SIZE(b) != n) return 0;
    for (Py_ssize_t i = 0; i < n; ++i) {
      int eq = exact_equal(PyTuple_GET_ITEM(a, i), PyTuple_GET_ITEM(b, i));
      if (eq != 1) return eq;
    }
    return 1;
  }
  return PyObject_RichCompareBool(a, b, Py_EQ);
}

// Values whose equality is a sound guard: immutable, compared by value.
bool equals_supported(PyObject* v, const pybridge::TorchBridge* bridge) {
  if (v == Py_None || PyBool_Check(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v) ||
      PyComplex_CheckExact(v) || PyUnicode_CheckExact(v) || PyBytes_CheckExact(v)) {
    return true;
  }
  if (PyTuple_CheckExact(v) || (bridge != nullptr && bridge->size_type != nullptr && Py_IS_TYPE(v, bridge->size_type))) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v); ++i)
      if (!equals_supported(PyTuple_GET_ITEM(v, i), bridge)) return false;
    return true;
  }
  return bridge != nullptr && (Py_IS_TYPE(v, bridge->dtype_type) || Py_IS_TYPE(v, bridge->device_type));
}

std::string repr_of(PyObject* v) {
  PyObject* r = PyObject_Repr(v);
  if (r == nullptr) {
    PyErr_Clear();
    return std::string("<") + Py_TYPE(v)->tp_name + ">";
  }
  const char* text = PyUnicode_AsUTF8(r);
  std::string out = text ? text : "<unprintable>";
  if (text == nullptr) PyErr_Clear();
  Py_DECREF(r);
  return out;
}

// The text of the pending Python error ("KeyError: 'x'"); clears it.
std::string take_error_text() {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  std::string text = type ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "error";
  if (value != nullptr) {
    PyObject* s = PyObject_Str(value);
    const char* utf8 = s ? PyUnicode_AsUTF8(s) : nullptr;
    if (utf8 != nullptr && *utf8 != '\0') text += std::string(": ") + utf8;
    Py_XDECREF(s);
    PyErr_Clear();
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return text;
}

const char* type_name(PyTypeObject* t) { return t ? t->tp_name : "?"; }

bool dims_equal(const int64_t* a, const int64_t* b, int n) {
  for (int i = 0; i < n; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// dims_equal, except that a dim with a slot (>= 0) is stored into `slots` instead of compared.
bool dims_match(const int64_t* actual, const int64_t* expected, const std::vector<int>& slot_of, int n, int64_t* slots) {
  if (slot_of.empty()) return dims_equal(actual, expected, n);
  for (int i = 0; i < n; ++i) {
    int slot = slot_of[static_cast<size_t>(i)];
    if (slot >= 0) {
      slots[slot] = actual[i];
    } else if (actual[i] != expected[i]) {
      return false;
    }
  }
  return true;
}

// "[1]": the dims that have a slot.
std::string dynamic_dims_text(const std::vector<int>& slot_of) {
  std::string out;
  for (size_t i = 0; i < slot_of.size(); ++i)
    if (slot_of[i] >= 0) out += (out.empty() ? "" : ", ") + std::to_string(i);
  return "[" + out + "]";
}

// PyWeakref_GetObject is deprecated from 3.13 in favour of PyWeakref_GetRef (3.13+); both
// exist on every version Ember supports and this borrowed read is the one that allocates nothing.
PyObject* weak_target(PyObject* ref) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  return PyWeakref_GetObject(ref);
#pragma GCC diagnostic pop
}

}  // namespace

struct GuardSet::Impl {
  std::vector<Check> root_checks;
  std::vector<Node> nodes;
  std::vector<int> roots;
  std::map<NodeKey, int> node_index;
  std::vector<TensorExpectation> tensors;
  std::vector<AutocastState> autocast_states;
  int capture_count = 0;
  size_t check_count = 0;
  // Dynamic shapes: the values tensor_match stores (slot_count of them), then the relations that
  // must hold over them, checked after every other check passed.
  int slot_count = 0;
  std::unique_ptr<sym::RelProgram> shape_program;
  std::vector<std::string> shape_texts;  // per relation: its text and why the trace relied on it
  PyObject* global_hook_dicts[4] = {};  // torch.nn.modules.module's global hook dicts (owned)

  ~Impl() {
    for (Check& c : root_checks) Py_XDECREF(c.object);
    for (Node& n : nodes) {
      Py_XDECREF(n.key);
      for (Check& c : n.checks) Py_XDECREF(c.object);
    }
    for (PyObject* d : global_hook_dicts) Py_XDECREF(d);
  }

  int node_for(const SourceRef& source);
  void add(const SourceRef& source, Check check);
  void add_root(Check check);
  bool same_check(const Check& a, const Check& b) const;

  // `into`: where a tensor check reads the tensor's metadata (null: a local read).
  bool passes(const Check& c, PyObject* v, int64_t* slots, RawTensorMeta* into = nullptr) const;
  std::string text(const Node* node, const Check& c) const;
  // failure_text(nullptr, c, nullptr) describes a root check.
  std::string failure_text(const Node* node, const Check& c, PyObject* v) const;
  // What one walk over the tree fills: captured inputs (or null), their tensor reads (or null),
  // the shape slots, and the first failure's text (or null).
  struct Walk {
    PyObject** captured = nullptr;
    pybridge::TensorReads* reads = nullptr;
    int64_t* slots = nullptr;
    std::string* why = nullptr;
  };
  // Whether every check of `checks` passes on v; the first failure's text goes to *walk.why. A tensor
  // check reads into `into` when given.
  bool all_pass(const Node* node, const std::vector<Check>& checks, PyObject* v, const Walk& walk,
                RawTensorMeta* into = nullptr) const;
  bool walk(int node, PyObject* v, const Walk& walk) const;
  // walk() over `value`, a new reference read from node `id`'s source, or null where the read raised.
  bool walk_read(int id, PyObject* value, const Walk& walk) const;
  bool run(const FrameView& frame, Walk walk) const;
  bool run_with_slots(const FrameView& frame, const Walk& walk) const;
};

int GuardSet::Impl::node_for(const SourceRef& source) {
  if (!source) throw std::invalid_argument("guard source is null");
  int parent = source->base ? node_for(source->base) : -1;
  NodeKey key{parent, static_cast<int>(source->kind), source->index, source->name};
  auto found = node_index.find(key);
  if (found != node_index.end()) return found->second;
  Node node;
  node.parent = parent;
  node.source = source;
  node.key = PyUnicode_InternFromString(source->name.c_str());
  if (node.key == nullptr) {
    PyErr_Clear();
    throw std::invalid_argument("guard source name is not valid UTF-8: " + source->str());
  }
  int id = static_cast<int>(nodes.size());
  nodes.push_back(std::move(node));
  (parent < 0 ? roots : nodes[parent].children).push_back(id);
  node_index.emplace(std::move(key), id);
  return id;
}

bool GuardSet::Impl::same_check(const Check& a, const Check& b) const {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case CheckKind::TensorMatch: {
      const TensorExpectation& x = tensors[a.tensor];
      const TensorExpectation& y = tensors[b.tensor];
      return x.meta.type == y.meta.type && x.meta.dtype == y.meta.dtype && x.device == y.device &&
             x.meta.sizes == y.meta.sizes && x.meta.strides == y.meta.strides &&
             x.meta.requires_grad == y.meta.requires_grad && x.size_slots == y.size_slots &&
             x.stride_slots == y.stride_slots;
    }
    case CheckKind::IntSlot: return a.slot == b.slot;
    case CheckKind::IdMatch: return a.identity == b.identity;
    case CheckKind::TypeMatch: return a.object == b.object;
    case CheckKind::Equals:
    case CheckKind::DictKeys:
    case CheckKind::Environ: {
      int eq = exact_equal(a.object, b.object);
      if (eq < 0) PyErr_Clear();
      return eq == 1;
    }
    case CheckKind::Length: return a.length == b.length;
    case CheckKind::NoHooks:
    case CheckKind::NoGlobalHooks: return true;
    case CheckKind::GradMode:
    case CheckKind::Autocast:
    case CheckKind::Deterministic: return a.flag == b.flag;
    case CheckKind::AutocastState: return autocast_states[a.autocast] == autocast_states[b.autocast];
    case CheckKind::DefaultDType: return a.dtype == b.dtype;
  }
  return false;
}

void GuardSet::Impl::add(const SourceRef& source, Check check) {
  Node& node = nodes[node_for(source)];
  for (const Check& existing : node.checks) {
    if (same_check(existing, check)) {
      Py_XDECREF(check.object);
      return;
    }
  }
  node.tensor_checked |= check.kind == CheckKind::TensorMatch;
  node.checks.push_back(check);
  ++check_count;
}

void GuardSet::Impl::add_root(Check check) {
  for (const Check& existing : root_checks) {
    if (same_check(existing, check)) {
      Py_XDECREF(check.object);
      return;
    }
  }
  root_checks.push_back(check);
  ++check_count;
}

bool GuardSet::Impl::passes(const Check& c, PyObject* v, int64_t* slots, RawTensorMeta* into) const {
  switch (c.kind) {
    case CheckKind::TensorMatch: {
      const TensorExpectation& t = tensors[c.tensor];
      if (Py_TYPE(v) != t.meta.type) return false;
      RawTensorMeta local;
      RawTensorMeta& raw = into != nullptr ? *into : local;
      if (!pybridge::read_raw_tensor_meta(v, &raw, TensorReadPath::Auto)) return false;
      int ndim = static_cast<int>(t.meta.sizes.size());
      return raw.dtype == t.meta.dtype && raw.device == t.device && raw.ndim == ndim &&
             raw.requires_grad == t.meta.requires_grad &&
             dims_match(raw.sizes, t.meta.sizes.data(), t.size_slots, ndim, slots) &&
             dims_match(raw.strides, t.meta.strides.data(), t.stride_slots, ndim, slots);
    }
    case CheckKind::IntSlot: {
      if (!PyLong_CheckExact(v)) return false;  // exactly int: a bool (or an int subclass) is another graph
      int overflow = 0;
      long long value = PyLong_AsLongLongAndOverflow(v, &overflow);
      if (overflow) return false;
      slots[c.slot] = value;
      return true;
    }
    case CheckKind::IdMatch:
      return v == c.identity && (!c.weak || weak_target(c.object) == v);
    case CheckKind::TypeMatch:
      return reinterpret_cast<PyObject*>(Py_TYPE(v)) == c.object;
    case CheckKind::Equals:
      return exact_equal(v, c.object) == 1;
    case CheckKind::Length: {
      Py_ssize_t n;
      if (PyList_CheckExact(v) || PyTuple_CheckExact(v)) {
        n = Py_SIZE(v);
      } else if (PyDict_CheckExact(v)) {
        n = PyDict_GET_SIZE(v);
      } else {
        n = PyObject_Length(v);
      }
      return n == c.length;
    }
    case CheckKind::DictKeys: {
      if (!PyDict_Check(v)) return false;
      Py_ssize_t n = PyTuple_GET_SIZE(c.object);
      if (PyDict_GET_SIZE(v) != n) return false;
      if (PyDict_CheckExact(v)) {
        Py_ssize_t pos = 0, i = 0;
        PyObject *key, *value;
        while (PyDict_Next(v, &pos, &key, &value)) {
          if (exact_equal(key, PyTuple_GET_ITEM(c.object, i++)) != 1) return false;
        }
        return true;
      }
      // A subclass (OrderedDict) may keep its own order: ask it.
      PyObject* it = PyObject_GetIter(v);
      if (it == nullptr) return false;
      bool same = true;
      for (Py_ssize_t i = 0; same && i < n; ++i) {
        PyObject* key = PyIter_Next(it);
        same = key != nullptr && exact_equal(key, PyTuple_GET_ITEM(c.object, i)) == 1;
        Py_XDECREF(key);
      }
      Py_DECREF(it);
      return same;
    }
    case CheckKind::NoHooks: {
      PyObject* dict = guards::instance_dict(v);
      if (dict == nullptr) return false;
      const guards::InternedNames& n = guards::interned_names();
      bool none = true;
      for (PyObject* name : {n.forward_hooks, n.forward_pre_hooks, n.backward_hooks, n.backward_pre_hooks}) {
        PyObject* hooks = PyDict_GetItemWithError(dict, name);  // borrowed
        if (hooks == nullptr || !PyDict_Check(hooks) || PyDict_GET_SIZE(hooks) != 0) {
          none = false;
          break;
        }
      }
      Py_DECREF(dict);
      return none;
    }
    case CheckKind::NoGlobalHooks:
      for (PyObject* d : global_hook_dicts)
        if (PyDict_GET_SIZE(d) != 0) return false;
      return true;
    case CheckKind::GradMode: {
      bool enabled;
      return pybridge::read_grad_enabled(&enabled) && enabled == c.flag;
    }
    case CheckKind::DefaultDType: {
      ir::DType dt;
      return pybridge::read_default_dtype(&dt) && dt == c.dtype;
    }
    case CheckKind::Autocast: {
      bool on;
      return pybridge::read_autocast(&on) && on == c.flag;
    }
    case CheckKind::Deterministic: {
      bool on;
      return pybridge::read_deterministic(&on) && on == c.flag;
    }
    case CheckKind::AutocastState: {
      AutocastState now;
      if (!read_autocast_state(&now)) {
        PyErr_Clear();
        return false;
      }
      return now == autocast_states[c.autocast];
    }
    case CheckKind::Environ: {
      PyObject* value = PyDict_GetItemWithError(PyTuple_GET_ITEM(c.object, 0), PyTuple_GET_ITEM(c.object, 1));
      PyObject* expected = PyTuple_GET_ITEM(c.object, 2);
      if (value == nullptr) return !PyErr_Occurred() && expected == Py_None;
      return expected != Py_None && exact_equal(value, expected) == 1;
    }
  }
  return false;
}

std::string GuardSet::Impl::text(const Node* node, const Check& c) const {
  std::string s = node ? node->source->str() : std::string();
  switch (c.kind) {
    case CheckKind::TensorMatch: {
      const TensorExpectation& t = tensors[c.tensor];
      if (t.size_slots.empty()) return s + " tensor: " + t.meta.str();
      return s + " tensor: " + t.meta.str() + ", dynamic sizes " + dynamic_dims_text(t.size_slots) + " and strides " +
             dynamic_dims_text(t.stride_slots) + " (shape guard)";
    }
    case CheckKind::IntSlot: return "type(" + s + ") is int (its value in the shape guard)";
    case CheckKind::IdMatch: return "id(" + s + ") matches";
    case CheckKind::TypeMatch: return "type(" + s + ") is " + type_name(reinterpret_cast<PyTypeObject*>(c.object));
    case CheckKind::Equals: return s + " == " + repr_of(c.object);
    case CheckKind::Length: return "len(" + s + ") == " + std::to_string(c.length);
    case CheckKind::DictKeys: return s + ".keys() == " + repr_of(c.object);
    case CheckKind::NoHooks: return s + " has no hooks";
    case CheckKind::NoGlobalHooks: return "no global module hooks";
    case CheckKind::GradMode: return c.flag ? "grad mode enabled" : "grad mode disabled";
    case CheckKind::DefaultDType: return std::string("default dtype ") + ir::dtype_torch_name(c.dtype);
    case CheckKind::Autocast: return c.flag ? "autocast active" : "autocast inactive";
    case CheckKind::Deterministic:
      return c.flag ? "deterministic algorithms enabled" : "deterministic algorithms disabled";
    case CheckKind::AutocastState: return "autocast state: " + autocast_states[c.autocast].str();
    case CheckKind::Environ: {
      std::string key = repr_of(PyTuple_GET_ITEM(c.object, 3));
      if (PyTuple_GET_ITEM(c.object, 2) == Py_None) return key + " not in os.environ";
      return "os.environ[" + key + "] == " + repr_of(PyTuple_GET_ITEM(c.object, 2));
    }
  }
  return s;
}

std::string GuardSet::Impl::failure_text(const Node* node, const Check& c, PyObject* v) const {
  if (c.kind != CheckKind::TensorMatch) return text(node, c);
  std::string got;
  TensorMeta actual;
  if (read_tensor_meta(v, &actual)) {
    actual.type = Py_TYPE(v);
    got = actual.str();
  } else {
    got = std::string(Py_TYPE(v)->tp_name) + " (not a tensor Ember can describe)";
  }
  return node->source->str() + " tensor: expected " + tensors[c.tensor].meta.str() + ", got " + got;
}

bool GuardSet::Impl::all_pass(const Node* node, const std::vector<Check>& checks, PyObject* v, const Walk& walk,
                              RawTensorMeta* into) const {
  for (const Check& c : checks) {
    if (!passes(c, v, walk.slots, into)) {
      if (walk.why != nullptr) {
        *walk.why = failure_text(node, c, v);
        if (PyErr_Occurred()) *walk.why += " (raised " + take_error_text() + ")";
      }
      PyErr_Clear();
      return false;
    }
  }
  return true;
}

bool GuardSet::Impl::walk_read(int id, PyObject* value, const Walk& w) const {
  if (value == nullptr) {
    if (w.why != nullptr) *w.why = "cannot read " + nodes[id].source->str() + ": " + take_error_text();
    PyErr_Clear();
    return false;
  }
  bool ok = walk(id, value, w);
  Py_DECREF(value);
  return ok;
}

bool GuardSet::Impl::walk(int id, PyObject* v, const Walk& w) const {
  const Node& node = nodes[id];
  // A captured input's tensor check reads into the call's reads, which the graph's runner reuses. Each
  // slot belongs to one node, visited once.
  const int slot = node.captures.empty() ? -1 : node.captures.front();
  RawTensorMeta* into = w.reads != nullptr && slot >= 0 ? w.reads->slot(static_cast<size_t>(slot)) : nullptr;
  if (!all_pass(&node, node.checks, v, w, into)) return false;
  if (w.captured != nullptr && slot >= 0) {
    w.captured[slot] = Py_NewRef(v);
    if (into != nullptr && node.tensor_checked) w.reads->keep(static_cast<size_t>(slot));
  }
  for (int child_id : node.children) {
    const Node& child = nodes[child_id];
    PyObject* child_value = guards::read_step(child.source->kind, v, child.key, child.source->index);
    if (!walk_read(child_id, child_value, w)) return false;
  }
  return true;
}

bool GuardSet::Impl::run_with_slots(const FrameView& frame, const Walk& w) const {
  if (!all_pass(nullptr, root_checks, nullptr, w)) return false;
  for (int id : roots) {
    const Node& root = nodes[id];
    PyObject* value = guards::read_root(root.source->kind, root.key, root.source->index, frame);
    if (!walk_read(id, value, w)) return false;
  }
  if (!shape_program) return true;
  std::optional<size_t> failed = shape_program->first_failure(w.slots);
  if (!failed) return true;
  if (w.why != nullptr) *w.why = "shape guard: " + shape_texts[*failed];
  return false;
}

bool GuardSet::Impl::run(const FrameView& frame, Walk w) const {
  // The slots live on the stack (no allocation per call) unless a frame has unusually many.
  constexpr int kStackSlots = 64;
  if (slot_count <= kStackSlots) {
    int64_t slots[kStackSlots];
    w.slots = slots;
    return run_with_slots(frame, w);
  }
  std::vector<int64_t> slots(static_cast<size_t>(slot_count));
  w.slots = slots.data();
  return run_with_slots(frame, w);
}

// ---- TensorMeta, read_tensor_meta, GlobalState ----

namespace {

bool convert(PyObject* obj, const RawTensorMeta& raw, TensorMeta* out) {
  out->type = Py_TYPE(obj);
  out->dtype = raw.dtype;
  out->device = pybridge::device_of(raw.device);
  out->sizes.assign(raw.sizes, raw.sizes + raw.ndim);
  out->strides.assign(raw.strides, raw.strides + raw.ndim);
  out->requires_grad = raw.requires_grad;
  return true;
}

void append_dims(std::string& out, const std::vector<int64_t>& dims) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(dims[i]);
  }
}

}  // namespace

std::string TensorMeta::str() const {
  std::string out;
  const pybridge::TorchBridge* bridge = pybridge::torch_bridge();
  if (type != nullptr && (bridge == nullptr || type != bridge->tensor_type)) {
    out += type->tp_name;
    out += ' ';
  }
  out += ir::dtype_name(dtype);
  out += '[';
  append_dims(out, sizes);
  out += "]{";
  append_dims(out, strides);
  out += "} ";
  out += device.type;
  if (device.index >= 0) out += ":" + std::to_string(device.index);
  if (requires_grad) out += " grad";
  return out;
}

bool read_tensor_meta(PyObject* obj, TensorMeta* out) {
  RawTensorMeta raw;
  return pybridge::read_raw_tensor_meta(obj, &raw, TensorReadPath::Auto) && convert(obj, raw, out);
}

bool read_tensor_meta_via_attributes(PyObject* obj, TensorMeta* out) {
  RawTensorMeta raw;
  return pybridge::read_raw_tensor_meta(obj, &raw, TensorReadPath::Attributes) && convert(obj, raw, out);
}

AutocastState::Device* AutocastState::device(std::string_view type) {
  if (type == "cpu") return &cpu;
  if (type == "cuda") return &cuda;
  return nullptr;
}

const AutocastState::Device* AutocastState::device(std::string_view type) const {
  return const_cast<AutocastState*>(this)->device(type);
}

std::string AutocastState::str() const {
  auto one = [](const char* name, const Device& d) {
    return std::string(name) + (d.enabled ? " on " : " off ") + ir::dtype_torch_name(d.dtype);
  };
  std::string out = one("cpu", cpu) + ", " + one("cuda", cuda) + (cache ? ", cache on" : ", cache off");
  if (other) out += ", on for another device type";
  return out;
}

bool read_autocast_state(AutocastState* out) {
  bool any = false;
  if (!pybridge::read_autocast(&any)) return false;
  if (!pybridge::read_autocast_device("cpu", &out->cpu.enabled, &out->cpu.dtype) ||
      !pybridge::read_autocast_device("cuda", &out->cuda.enabled, &out->cuda.dtype) ||
      !pybridge::read_autocast_cache(&out->cache)) {
    return false;
  }
  out->other = any && !out->cpu.enabled && !out->cuda.enabled;
  return true;
}

GlobalState GlobalState::current() {
  GlobalState state;
  if (!pybridge::read_grad_enabled(&state.grad_enabled) || !pybridge::read_default_dtype(&state.default_dtype) ||
      !pybridge::read_autocast(&state.autocast) || !read_autocast_state(&state.autocast_state) ||
      !pybridge::read_deterministic(&state.deterministic)) {
    if (pybridge::interrupt_pending()) throw pybridge::PythonError();  // the user's Ctrl-C: it stays set
    throw std::runtime_error("cannot read torch's global state: " + take_error_text());
  }
  return state;
}

// ---- GuardSet ----

GuardSet::GuardSet() : impl_(std::make_unique<Impl>()) {}
GuardSet::~GuardSet() = default;
GuardSet::GuardSet(GuardSet&&) noexcept = default;
GuardSet& GuardSet::operator=(GuardSet&&) noexcept = default;

void GuardSet::tensor_match(const SourceRef& source, const TensorMeta& meta) {
  if (meta.type == nullptr) throw std::invalid_argument("tensor_match: TensorMeta has no type");
  if (meta.sizes.size() != meta.strides.size()) {
    throw std::invalid_argument("tensor_match: sizes and strides differ in length for " + source->str());
  }
  TensorExpectation t{meta, pybridge::device_key(meta.device)};
  Check c{CheckKind::TensorMatch};
  c.object = Py_NewRef(reinterpret_cast<PyObject*>(meta.type));
  c.tensor = static_cast<int>(impl_->tensors.size());
  impl_->tensors.push_back(std::move(t));
  size_t before = impl_->check_count;
  impl_->add(source, c);
  if (impl_->check_count == before) impl_->tensors.pop_back();  // a duplicate
}

void GuardSet::tensor_match(const SourceRef& source, const TensorMeta& meta, std::vector<int> size_slots,
                            std::vector<int> stride_slots) {
  size_t rank = meta.sizes.size();
  if (size_slots.size() != rank || stride_slots.size() != rank)
    throw std::invalid_argument("tensor_match: one slot per dimension expected for " + source->str());
  for (const auto* slots : {&size_slots, &stride_slots})
    for (int slot : *slots) impl_->slot_count = std::max(impl_->slot_count, slot + 1);
  tensor_match(source, meta);
  // The check just added (or the identical static one found) takes the slots.
  for (Check& c : impl_->nodes[impl_->node_for(source)].checks) {
    if (c.kind != CheckKind::TensorMatch) continue;
    TensorExpectation& t = impl_->tensors[c.tensor];
    if (t.meta.sizes == meta.sizes && t.meta.strides == meta.strides && t.size_slots.empty()) {
      t.size_slots = std::move(size_slots);
      t.stride_slots = std::move(stride_slots);
      return;
    }
  }
}

void GuardSet::int_slot(const SourceRef& source, int slot) {
  if (slot < 0) throw std::invalid_argument("int_slot: a slot >= 0 expected for " + source->str());
  impl_->slot_count = std::max(impl_->slot_count, slot + 1);
  Check c{CheckKind::IntSlot};
  c.slot = slot;
  impl_->add(source, c);
}

void GuardSet::shape_relations(const std::vector<sym::Rel>& relations, const std::vector<std::string>& names,
                               std::vector<std::string> texts) {
  if (texts.size() != relations.size())
    throw std::invalid_argument("shape_relations: one text per relation expected");
  if (static_cast<int>(names.size()) < impl_->slot_count)
    throw std::invalid_argument("shape_relations: a name is needed for every slot");
  impl_->shape_program = std::make_unique<sym::RelProgram>(relations, names);
  impl_->shape_texts = std::move(texts);
  impl_->check_count += relations.size();
}

void GuardSet::id_match(const SourceRef& source, PyObject* obj) {
  if (obj == nullptr) throw std::invalid_argument("id_match: null object for " + source->str());
  Check c{CheckKind::IdMatch};
  c.identity = obj;
  if (PyType_SUPPORTS_WEAKREFS(Py_TYPE(obj))) {
    c.object = PyWeakref_NewRef(obj, nullptr);
    if (c.object == nullptr) throw std::runtime_error("id_match: cannot make a weak reference: " + take_error_text());
    c.weak = true;
  } else {
    c.object = Py_NewRef(obj);
  }
  impl_->add(source, c);
}

void GuardSet::type_match(const SourceRef& source, PyTypeObject* type) {
  if (type == nullptr) throw std::invalid_argument("type_match: null type for " + source->str());
  Check c{CheckKind::TypeMatch};
  c.object = Py_NewRef(reinterpret_cast<PyObject*>(type));
  impl_->add(source, c);
}

void GuardSet::equals(const SourceRef& source, PyObject* value) {
  if (value == nullptr || !equals_supported(value, pybridge::torch_bridge())) {
    throw std::invalid_argument(
"equals: " + source->str() + " needs None, bool, int, float, complex, str, bytes, torch.dtype, " +
        "torch.device or a tuple (or torch.Size) of those; got " + (value ? Py_TYPE(value)->tp_name : "null"));
  }
  Check c{CheckKind::Equals};
  c.object = Py_NewRef(value);
  impl_->add(source, c);
}

void GuardSet::length(const SourceRef& source, Py_ssize_t len) {
  if (len < 0) throw std::invalid_argument("length: negative length for " + source->str());
  Check c{CheckKind::Length};
  c.length = len;
  impl_->add(source, c);
}

void GuardSet::dict_keys(const SourceRef& source, PyObject* keys_tuple) {
  if (keys_tuple == nullptr || !PyTuple_CheckExact(keys_tuple)) {
    throw std::invalid_argument("dict_keys: keys of " + source->str() + " must be a tuple");
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keys_tuple); ++i) {
    if (!equals_supported(PyTuple_GET_ITEM(keys_tuple, i), pybridge::torch_bridge())) {
      throw std::invalid_argument("dict_keys: key of " + source->str() + " is a " +
                                  Py_TYPE(PyTuple_GET_ITEM(keys_tuple, i))->tp_name +
                                  ", not a value compared by equality (str, int, ...)");
    }
  }
  Check c{CheckKind::DictKeys};
  c.object = Py_NewRef(keys_tuple);
  impl_->add(source, c);
}

void GuardSet::no_hooks(const SourceRef& module_source) {
  if (impl_->global_hook_dicts[0] == nullptr) {
    PyObject* name = PyUnicode_FromString("torch.nn.modules.module");
    PyObject* module = name ? PyImport_GetModule(name) : nullptr;
    Py_XDECREF(name);
    if (module == nullptr) {
      PyErr_Clear();
      throw std::runtime_error("no_hooks: torch.nn.modules.module is not imported");
    }
    const char* names[4] = {"_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                            "_global_backward_pre_hooks"};
    PyObject* dicts[4] = {};
    bool ok = true;
    for (int i = 0; i < 4 && ok; ++i) {
      dicts[i] = PyObject_GetAttrString(module, names[i]);
      ok = dicts[i] != nullptr && PyDict_Check(dicts[i]);
    }
    Py_DECREF(module);
    if (!ok) {
      std::string why = PyErr_Occurred() ? take_error_text() : "not a dict";
      for (PyObject* d : dicts) Py_XDECREF(d);
      throw std::runtime_error("no_hooks: cannot read torch's global module hooks: " + why);
    }
    for (int i = 0; i < 4; ++i) impl_->global_hook_dicts[i] = dicts[i];
  }
  impl_->add_root(Check{CheckKind::NoGlobalHooks});
  impl_->add(module_source, Check{CheckKind::NoHooks});
}

void GuardSet::global_state(const GlobalState& state) {
  Check grad{CheckKind::GradMode};
  grad.flag = state.grad_enabled;
  impl_->add_root(grad);
  Check dtype{CheckKind::DefaultDType};
  dtype.dtype = state.default_dtype;
  impl_->add_root(dtype);
  Check autocast{CheckKind::Autocast};
  autocast.flag = state.autocast;
  impl_->add_root(autocast);
  if (state.autocast) autocast_state(state.autocast_state);
}

void GuardSet::autocast_state(const AutocastState& state) {
  Check c{CheckKind::AutocastState};
  c.autocast = static_cast<int>(impl_->autocast_states.size());
  impl_->autocast_states.push_back(state);
  impl_->add_root(c);
}

void GuardSet::deterministic_algorithms(bool enabled) {
  Check c{CheckKind::Deterministic};
  c.flag = enabled;
  impl_->add_root(c);
}

void GuardSet::environ_entry(PyObject* environ, PyObject* key) {
  if (key == nullptr || !PyUnicode_CheckExact(key)) throw std::invalid_argument("environ_entry: the key must be a str");
  // os.environ keeps the process environment in `_data`, keyed and valued by `encodekey` and
  // `encodevalue` (bytes on POSIX): reading it directly costs one dict lookup per call, where
  // os.environ.get would raise and catch KeyError in Python code for an unset variable.
  PyObject* data = PyObject_GetAttrString(environ, "_data");
  PyObject* encoded = data ? PyObject_CallMethod(environ, "encodekey", "O", key) : nullptr;
  PyObject* value = encoded && PyDict_Check(data) ? PyDict_GetItemWithError(data, encoded) : nullptr;  // borrowed
  Check c{CheckKind::Environ};
  if (encoded && PyDict_Check(data) && !PyErr_Occurred())
    c.object = PyTuple_Pack(4, data, encoded, value ? value : Py_None, key);
  Py_XDECREF(data);
  Py_XDECREF(encoded);
  if (c.object == nullptr) {
    std::string why = PyErr_Occurred() ? take_error_text() : "os.environ._data is not a dict";
    throw std::runtime_error("environ_entry: cannot read os.environ's variables: " + why);
  }
  impl_->add_root(c);
}

int GuardSet::capture(const SourceRef& source) {
  Node& node = impl_->nodes[impl_->node_for(source)];
  if (!node.captures.empty()) return node.captures.front();
  node.captures.push_back(impl_->capture_count);
  return impl_->capture_count++;
}

int GuardSet::capture_count() const { return impl_->capture_count; }

bool GuardSet::check(const FrameView& frame, PyObject** captured, pybridge::TensorReads* reads) const {
  if (impl_->capture_count > 0 && captured == nullptr) return false;
  for (int i = 0; i < impl_->capture_count; ++i) captured[i] = nullptr;
  Impl::Walk walk;
  walk.captured = impl_->capture_count > 0 ? captured : nullptr;
  walk.reads = walk.captured != nullptr ? reads : nullptr;
  bool ok = impl_->run(frame, walk);
  if (!ok) {
    for (int i = 0; i < impl_->capture_count; ++i) Py_CLEAR(captured[i]);
  }
  return ok;
}

std::string GuardSet::first_failure(const FrameView& frame) const {
  std::string why;
  Impl::Walk walk;
  walk.why = &why;
  impl_->run(frame, walk);
  return why;
}

std::string GuardSet::describe() const {
  std::string out;
  for (const Check& c : impl_->root_checks) out += impl_->text(nullptr, c) + "\n";
  // Depth-first in creation order: the order the checks run in.
  std::vector<int> stack(impl_->roots.rbegin(), impl_->roots.rend());
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    const Node& node = impl_->nodes[id];
    for (const Check& c : node.checks) out += impl_->text(&node, c) + "\n";
    stack.insert(stack.end(), node.children.rbegin(), node.children.rend());
  }
  for (const std::string& t : impl_->shape_texts) out += "shape guard: " + t + "\n";
  return out;
}

size_t GuardSet::size() const { return impl_->check_count; }

}  // namespace ember::frontend
