// The abstract values of the symbolic interpreter ("variables").
//
// Each Python value the traced code handles is a Var: a tensor (a graph value with its metadata),
// a Python object known at trace time (constants, modules, functions, classes, user objects),
// a container of Vars built or read by the trace, a function made by the trace (lambdas,
// closures), a bound method, a closure cell, an iterator, a super() proxy or a grad-mode context.
// A Var read from the frame remembers its Source, so guards can check it on later calls and the
// runtime can read it again (tensors become graph inputs through their source).
//
// Vars are shared (`VarRef`): `y = x` copies the reference, so an in-place op that moves a tensor
// Var to its new graph value is seen through every alias, as in Python.
#pragma once

#include <Python.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "pybridge/pyref.h"
#include "frontend/source.h"
#include "ir/graph.h"

namespace ember::frontend {

struct Var;
using VarRef = std::shared_ptr<Var>;
struct ValuePlan;
struct SequenceVar;
struct DictVar;

enum class VarKind : uint8_t {
  Null,         // the NULL a call sequence pushes
  Object,       // a real Python object (constant or not), maybe with a source
  Tensor,       // a graph value
  Tuple,
  List,
  Dict,
  Function,     // a function made by MAKE_FUNCTION during the trace
  BoundMethod,  // self + function (user method, or a torch method descriptor)
  Cell,         // a closure cell
  Iterator,     // a materialized iterator over Vars
  Super,        // super() proxy
  GradMode,     // torch.no_grad() / enable_grad() / set_grad_enabled(b) context
  GradModeExit, // the bound __exit__ of an entered GradMode context
  SymInt,       // an int read from an attribute, global or cell, not yet guarded by value
  Slice,        // a slice whose bounds are size SymInts (`x[:, :T]`)
  Record,       // a transformers ModelOutput built by the trace (a dataclass that is also a dict)
};

struct Var {
  explicit Var(VarKind k) : kind(k) {}
  virtual ~Var() = default;
  const VarKind kind;
  SourceRef source;  // where the frame holds this value; null if the trace made it

  // Set on a list or dict read from the frame whose contents the trace has not read yet
  // (Trace::wrap): reading them guards the container's length or keys and wraps its items.
  // as<SequenceVar>() and as<DictVar>() run it first, so no code sees unread contents; only
  // Trace::store_unread adds to such a container without reading it.
  mutable std::function<void()> read_contents;
  bool unread() const { return static_cast<bool>(read_contents); }

  template <class T>
  T& as() {
    if constexpr (std::is_same_v<T, SequenceVar> || std::is_same_v<T, DictVar>) read();
    return static_cast<T&>(*this);
  }
  template <class T>
  const T& as() const {
    if constexpr (std::is_same_v<T, SequenceVar> || std::is_same_v<T, DictVar>) read();
    return static_cast<const T&>(*this);
  }

 private:
  void read() const {
    if (!read_contents) return;
    std::function<void()> f = std::move(read_contents);
    read_contents = nullptr;
    f();
  }
};

struct NullVar : Var {
  NullVar() : Var(VarKind::Null) {}
};

struct ObjectVar : Var {
  explicit ObjectVar(PyRef o) : Var(VarKind::Object), obj(std::move(o)) {}
  PyRef obj;
  // Read through its source without a guard (an attribute of an object guarded by its type
  // alone, e.g. a generator's bound `send`): it may be another object on the next call, so the
  // trace passes it on (rebuilt from its source) but never computes with or calls it.
  bool opaque = false;
  // Set when `obj` is the instance __dict__ of `dict_owner`, read lazily: lookups guard only the
  // keys they read (config objects keep dozens of entries, some with int keys), and attribute
  // writes the trace recorded on the owner show through.
  PyRef dict_owner;
  // Set when the trace constructed this instance (`cls(...)` of a plain Python class): `obj` is a
  // placeholder of the class with an empty __dict__ that the program never sees; the instance's
  // attributes are these, in assignment order, and each run builds a fresh instance from them
  // (ValuePlan::Kind::Object). Such an object is never a trace constant.
  std::shared_ptr<std::vector<std::pair<std::string, VarRef>>> made_attrs;
};

struct TensorVar : Var {
  TensorVar() : Var(VarKind::Tensor) {}
  ir::ValueId value = -1;
  ir::TensorType type;
  // A meta-device tensor with the same dtype, sizes, strides and requires_grad, made when a meta
  // computation needs it (Trace::meta_of). A proxy is made from the type alone (results typed by
  // Ember's shape rules): a leaf, so it cannot answer autograd questions.
  PyRef meta;
  bool meta_is_proxy = false;
  PyRef py_type;  // the Python type (torch.Tensor, nn.Parameter, a subclass)
};

// Tuple and List share the item vector. A List (or Dict) read from the frame is one Var per
// object; the trace mutates it like one it built, and Trace::record_mutation makes the caller's
// object follow after the graph.
struct SequenceVar : Var {
  SequenceVar(VarKind k, std::vector<VarRef> xs) : Var(k), items(std::move(xs)) {}
  std::vector<VarRef> items;
  PyRef named_type;  // a namedtuple / torch.Size type to rebuild, or null for plain tuple/list
  VarRef added;      // while unread(): a list the trace made, of the values appended
};

struct DictVar : Var {
  DictVar() : Var(VarKind::Dict) {}
  std::vector<PyRef> keys;  // constant keys, insertion order
  std::vector<VarRef> values;
  int find(PyObject* key) const;  // -1 if absent; may set a Python error on unhashable keys
  // `d[key] = value`: a key already present keeps its place, as in a Python dict.
  void put(PyObject* key, const VarRef& value);
  VarRef added;  // while unread(): a dict the trace made, of the items stored
};

struct FunctionVar : Var {
  FunctionVar() : Var(VarKind::Function) {}
  PyRef code;
  PyRef globals;
  SourceRef globals_source;  // a source for `globals` when it is not the frame's globals
  PyRef name, qualname;
  std::vector<VarRef> defaults;
  std::shared_ptr<DictVar> kwdefaults;  // may be null
  std::vector<VarRef> closure;          // CellVars
  VarRef annotations;                   // MAKE_FUNCTION's flat (name, value, ...) tuple; may be null
};

struct BoundMethodVar : Var {
  BoundMethodVar(VarRef s, VarRef f) : Var(VarKind::BoundMethod), self(std::move(s)), func(std::move(f)) {}
  VarRef self;
  VarRef func;
};

// A cell the trace made (MAKE_CELL: `real` is null), or a real cell object read lazily through
// `source`, which names its contents: C['x'] for the compiled function's own closure, or
// `<where the cell object is>.cell_contents` for a cell reached through a local or a function's
// __closure__ (Trace::wrap_cell: one CellVar per cell object).
struct CellVar : Var {
  CellVar() : Var(VarKind::Cell) {}
  VarRef contents;      // null while empty (or not yet read from `real`)
  PyRef real;
};

struct IteratorVar : Var {
  explicit IteratorVar(std::vector<VarRef> xs) : Var(VarKind::Iterator), items(std::move(xs)) {}
  std::vector<VarRef> items;
  size_t position = 0;
};

struct SuperVar : Var {
  SuperVar(PyRef c, VarRef s) : Var(VarKind::Super), cls(std::move(c)), self(std::move(s)) {}
  PyRef cls;  // lookups start after this class in type(self).__mro__
  VarRef self;
};

// The autocast state a torch.autocast block sets for one device type ("cpu" or "cuda"), or that
// its exit restores.
struct AutocastMode {
  std::string device;
  bool enabled = false;
  ir::DType dtype = ir::DType::BFloat16;
  bool cache = true;
};

struct GradModeVar : Var {
  explicit GradModeVar(bool e) : Var(VarKind::GradMode), enabled(e) {}
  bool enabled;
  // torch.set_grad_enabled(b) changes the mode when called; its block's exit restores the mode
  // from before that call, not from before the block.
  int restores = -1;  // -1: the mode at BEFORE_WITH; else 0/1
  // contextlib.nullcontext(enter_result): a block that changes nothing (`enabled` is unused);
  // entering it gives `enter_result` (None when not given).
  bool null = false;
  VarRef enter_result;
  // torch.autocast(...): a block that sets this autocast mode (`enabled` is unused); entering it
  // gives the context itself.
  std::optional<AutocastMode> autocast;
};

// The exit of an entered GradModeVar: restores grad mode `previous`, or, for a null context
// (restores_mode false), does nothing; for an autocast block (`autocast` set, the others
// unused), closes the block and restores that autocast mode.
struct GradModeExitVar : Var {
  explicit GradModeExitVar(bool p, bool restores = true)
      : Var(VarKind::GradModeExit), previous(p), restores_mode(restores) {}
  explicit GradModeExitVar(AutocastMode restore)
      : Var(VarKind::GradModeExit), previous(false), restores_mode(false), autocast(std::move(restore)) {}
  bool previous;
  bool restores_mode;
  std::optional<AutocastMode> autocast;
};

// An int the trace read through a source (`self.steps`) and has so far only done arithmetic on.
// Its value is known, but not yet guarded: arithmetic on it is recorded (`expr`, evaluated again
// on each call), so `self.steps += 1` replays as "read, add one, store" instead of baking the
// value in. Any other use specializes it: equality guards on its sources, then a constant.
// SymInts live only on the stack and in locals (see Interpreter::specialize).
//
// A size SymInt (`size` set) is an int computed from symbolic tensor sizes (`T = x.size(1)` with
// that dimension dynamic, docs/dynamic-shapes.md): `value` is its value on the traced call, `size`
// its expression over the shape symbols, `expr` and `leaves` are unused. It may also travel in
// tuples and lists and into torch calls (a `sym(...)` argument); a comparison guards a relation;
// any other use specializes it (Trace::specialize: a guard `s == value` on its symbols).
//
// A dynamic int (a Python int of the frame the policy left dynamic: docs/dynamic-shapes.md, "Python
// ints") is a size SymInt whose expression is over int symbols only: it also keeps `expr`, how to
// compute it from the frame, so storing it (`self.calls += 1`) or returning it replays the
// arithmetic instead of specializing it.
struct SymIntVar : Var {
  SymIntVar() : Var(VarKind::SymInt) {}
  PyRef value;                                       // the value at trace time
  std::shared_ptr<const struct ValuePlan> expr;      // how to compute it from the frame
  std::vector<std::pair<SourceRef, PyRef>> leaves;   // the sources it reads, with their values
  std::optional<sym::Expr> size;
  bool is_size() const { return size.has_value(); }
};

// `slice(start, stop, step)` built by BUILD_SLICE with a size SymInt among its bounds: a tensor
// subscript keeps the bounds as expressions (trace_subscript.cpp); any other use specializes it
// into a constant slice (Trace::specialize). Each bound is None, an int constant or a size SymInt.
struct SliceVar : Var {
  SliceVar(VarRef a, VarRef b, VarRef c) : Var(VarKind::Slice), start(std::move(a)), stop(std::move(b)), step(std::move(c)) {}
  VarRef start, stop, step;
};

// A ModelOutput made during the trace: its dataclass fields in order, each value a Var (None
// when unset). As ModelOutput does, the fields whose value is not None are its dict keys, in
// field order: to_tuple(), [int], len() and iteration see only those.
// A class with construction code of its own (an __init__ or __post_init__ other than the
// dataclass's and the base's: diffusers' deprecated aliases warn first) is built after the graph
// (`built_after` says which code: "its own __init__"): what its
// fields become is that code's business, so the trace keeps the call's arguments instead (`values`:
// the first `positional` by position, the rest by the keywords in `fields`), reads nothing from it,
// and the compiled frame may only return it; the runtime calls the class with them after the graph.
struct RecordVar : Var {
  RecordVar() : Var(VarKind::Record) {}
  PyRef cls;
  std::vector<std::string> fields;
  std::vector<VarRef> values;
  std::string built_after;
  size_t positional = 0;
};

inline bool is_size_int(const VarRef& v) { return v->kind == VarKind::SymInt && v->as<SymIntVar>().is_size(); }
// The expression of a size SymInt, or of an int constant (not a bool); nullopt for anything else.
std::optional<sym::Expr> size_expr(const VarRef& v);

inline VarRef make_null() { return std::make_shared<NullVar>(); }
VarRef make_object(PyRef obj, SourceRef source = nullptr);
VarRef make_tuple(std::vector<VarRef> items);
VarRef make_list(std::vector<VarRef> items);

// A short description for messages: "tensor f32[4, 8]", "int 3", "list[2]", "function foo".
std::string describe(const Var& v);

}  // namespace ember::frontend
