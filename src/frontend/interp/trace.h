// Trace: the state one symbolic interpretation of a frame builds — the graph, the guards, the
// side effects to replay (its EffectLog, effect_log.h) and the bookkeeping that makes reading the
// same source twice give the same Var. The interpreter (interpreter.h) drives it; the compiler
// (driver/compiler.cpp) turns a finished Trace into a cache entry.
#pragma once

#include <Python.h>

#include <deque>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "frontend/guards.h"
#include "frontend/interp/effect_log.h"
#include "frontend/interp/shape_env.h"
#include "frontend/interp/torch_table.h"
#include "frontend/interp/value_plan.h"
#include "frontend/interp/variables.h"
#include "ir/graph.h"
#include "pybridge/errors.h"
#include "shapes/shape_rules.h"
#include "support/options.h"

namespace ember::frontend {

// Thrown when the interpreter meets something it cannot capture; the frame then runs eagerly.
// `filename`/`line` name the user's source line where it happened.
struct Unsupported : std::exception {
  Unsupported(std::string r) : reason(std::move(r)) {}
  const char* what() const noexcept override { return reason.c_str(); }
  std::string reason;
  std::string filename;
  int line = -1;
  // The instruction of the compiled frame's own code that was running when this propagated out
  // of it (normalized index, and which execution of it: 1 = the first), where the frame could be
  // split by a graph break; -1 when it did not come from an instruction of that code.
  int root_index = -1;
  int root_visit = 0;
};

// A Python exception the traced program raises: a `raise` statement, or an operation the
// interpreter models whose outcome the guards fix (a missing attribute, an index out of range,
// an exhausted iterator, a call on constants that raised). It unwinds the interpreter's C++
// frames to the nearest handler in the exception table of the traced code (the frame's own or an
// inlined caller's). One that no traced handler catches becomes Unsupported at the compiled
// frame's instruction it came from, so that CPython runs that instruction and raises it itself.
// Not a std::exception: code that turns failures into fallbacks must not swallow it.
struct TracedException {
  VarRef value;          // an Object Var holding the exception instance
  std::string filename;  // where it was raised
  int line = -1;
};

// A Python error set during tracing that is not the user's program failing aborts the compile
// with that error (pybridge/errors.h); the interpreter throws it from many files, so it is named
// here without its layer.
using pybridge::PythonError;

// The identities a trace relies on among the lists and dicts it read from the frame, checked
// after the GuardSet on each call. Sources that reached one object during the trace share one
// Var (`f(xs, xs)`), so they must reach one object again; and a container the trace mutated was
// modelled apart from every other list or dict it read, so it must not be reachable through their
// sources either (`f(xs, ys)` called as `f(a, a)`). Empty when neither applies.
struct AliasGuard {
  struct Entry {
    SourceRef source;
    int object = 0;        // the same number for the sources of one object at trace time
    bool mutated = false;  // the trace mutated that object
  };
  std::vector<Entry> entries;
  // Whether the identities hold for `frame`; when not, `why` (if given) says which one failed.
  // Never leaves a Python error set.
  bool holds(const FrameView& frame, std::string* why = nullptr) const;
  // One line per identity it checks, for explain() and EMBER_LOGS=guards.
  std::string describe() const;
};

// An ember.autocast.AutocastExit restoring `mode` (the object a graph break passes on for an
// autocast block's exit). Throws PythonError.
PyRef autocast_exit_object(const TorchTable& table, const AutocastMode& mode);

// The literal a Python builtin constant spells: None, bool, an int that fits int64, float, str,
// Ellipsis, a slice of such ints; nullopt otherwise (torch's dtype and device objects are read by
// Trace::literal_of, which knows their types).
std::optional<ir::Literal> builtin_literal(PyObject* obj);

class Trace {
 public:
  // `state`: torch's global state when the compile began (grad mode, default dtype, autocast), read once by
  // the compiler for the trace and its guards.
  Trace(const TorchTable& table, const FrameView& frame, const CompileOptions& options, const GlobalState& state);

  const TorchTable& table;
  const FrameView& frame;
  const CompileOptions& options;

  ir::Graph graph{"frame"};
  GuardSet guards;
  // Dynamic shapes (docs/dynamic-shapes.md): which input dimensions become symbols, the symbols
  // made, and the guards on them (produced into `guards` by finish_shapes, after the backend).
  DynamicPolicy dynamic;
  ShapeEnv shapes;
  std::vector<PyRef> callables;  // per node: the callable the executor applies
  EffectLog effects;  // the stores to replay after the graph (effect_log.h)
  bool grad_enabled = true;      // grad mode at this point of the trace
  // The line of the frame's own instruction being traced (an inlined callee's ops count at the
  // line that called it), and the first and last such lines that added ops to the graph: a graph
  // that raises when it runs has no Python frame, so its traceback entry names these lines.
  int root_line = -1;
  // The instruction being traced, in whichever (inlined) function: for the reasons of guards.
  const std::string* file = nullptr;
  int line = -1;
  struct OpLines {
    int first = -1, last = -1;
  } op_lines;
  // What the trace did differently from running the code line by line, where the result is the
  // same by argument but not by construction (a functools.lru_cache bypassed or folded): the
  // compile event carries them to EMBER_LOGS=graph_breaks and ember.explain's `notes`.
  std::vector<std::string> notes;
  // torch.nn layers the trace built (construct_stateless_module): callable without a source, since
  // nothing outside the trace can reach or change them.
  std::vector<PyRef> built_modules;
  void note(const std::string& what) {
    std::string at = file ? " (at " + *file + ":" + std::to_string(line) + ")" : "";
    notes.push_back(what + at);
  }
  void note_op_line() {
    if (root_line < 0) return;
    if (op_lines.first < 0 || root_line < op_lines.first) op_lines.first = root_line;
    if (root_line > op_lines.last) op_lines.last = root_line;
  }
  // The exceptions traced handlers are handling, innermost last (what sys.exc_info() would give
  // inside them): PUSH_EXC_INFO pushes, POP_EXCEPT pops.
  std::vector<VarRef> handling;
  // Exception instances the trace made (`raise E(...)`): the only ones whose __context__ and
  // __cause__ the trace sets, as CPython does when they are raised.
  std::vector<PyRef> made_exceptions;
  // Where each exception was last raised by a raise statement or an operation: RERAISE (the end
  // of a handler that did not match, a finally block) keeps that place, as CPython's traceback does.
  struct RaiseSite {
    PyRef exception;
    std::string filename;
    int line = -1;
  };
  std::vector<RaiseSite> raise_sites;
  int64_t instructions = 0;

  // Reads a value the frame reaches through `source`: guards it and wraps it (tensors become
  // graph inputs). Reading the same source again returns the same Var.
  VarRef wrap(PyObject* obj, const SourceRef& source);
  // Wraps a value made at trace time (no source, no guard).
  VarRef constant(PyRef obj);
  VarRef none();

  // Applies a torch callable to Vars: a graph node whose result metadata comes from running
  // the callable on meta tensors. Returns the result Var(s); metadata queries return constants.
  VarRef call_torch(PyObject* callable, const std::vector<VarRef>& args,
                    const std::vector<std::pair<std::string, VarRef>>& kwargs);
  // A graph node `callable(condition, message)` that returns nothing and raises when the tensor
  // `condition` is false at run time (torch._assert); `message` must be a literal.
  void record_check(PyObject* callable, const VarRef& condition, const VarRef& message);
  // x[index] where x's sizes or the index's ints mention shape symbols, for a basic index (ints,
  // slices with int bounds, None, Ellipsis): canonical select, slice and unsqueeze nodes, Python's
  // clamping decided by size_relation (trace_subscript.cpp). nullptr for any other index, a
  // static one, or an index torch would refuse (the caller records getitem).
  VarRef symbolic_subscript(const VarRef& x, const VarRef& index);
  // Records a grad-mode change as a graph node and applies it to later meta computations.
  void set_grad_enabled(bool enabled);

  // torch.autocast (trace_autocast.cpp). `autocast` is the state at this point of the trace (the
  // frame's at the start); while it is on for a device type, call_torch adds autocast's casts
  // for that type's tensors as explicit nodes. The graph's casts are all explicit, so the
  // compiled frame runs it with autocast off, then brings CPython to the state the trace ended
  // in by replaying `autocast_events`: the block entries and exits not cancelled by a later exit
  // or entry of the same trace, in order.
  AutocastState autocast;
  struct AutocastEvent {
    bool enter = true;
    AutocastMode mode;  // what the entry sets, or what the exit restores
  };
  std::vector<AutocastEvent> autocast_events;
  // Enters a block that sets `mode`; returns the mode its exit restores.
  AutocastMode autocast_enter(const AutocastMode& mode);
  void autocast_exit(const AutocastMode& restore);
  // The trace depends on the whole autocast state (it read a default or a flag of it, or changes
  // it): the frame's state becomes a guard.
  void depend_on_autocast();

  // A write to a real cell read through a source (wrap_cell): `cell_contents` set after the graph.
  void record_cell_write(const VarRef& cell, const VarRef& value);
  // Real cells the trace reaches without a source of the cell object: the compiled function's
  // own closure cells (`var` made by the interpreter, contents read through C[...]), and the cells
  // of a function known only as a constant (cell_of makes a CellVar without a source: its
  // contents become constants). Either way one CellVar per cell object (closures.cpp).
  void register_frame_cell(PyObject* cell, const VarRef& var);
  VarRef cell_of(PyObject* cell);
  // Called before the trace mutates `container` (its Var is then changed in place by the
  // caller, so later reads see the new contents). For a list or dict read from the frame, the
  // first call records a Contents side effect at this point of the program order; containers the
  // trace built need nothing. `stored`: the values the mutation puts into it, which must be
  // values a plan can rebuild after the graph (else Unsupported, before anything changed).
  void record_mutation(const VarRef& container, const std::vector<VarRef>& stored = {});
  // `xs.append(value)` (key null) or `d[key] = value` (a str key) on a list or dict of the
  // caller whose contents the trace has not read (Var::unread): recorded without reading them,
  // so no guard on its length or keys; replayed as the caller's contents plus the stores.
  // False, doing nothing, when the container's contents were read (the caller then mutates them).
  bool store_unread(const VarRef& container, PyObject* key, const VarRef& value);

  // A SymInt for an int read through `source` (no value guard yet; its type is guarded).
  VarRef sym_int(PyObject* value, const SourceRef& source);
  // `op(a, b)` on SymInts and int constants as a SymInt, or nullptr when that is not arithmetic
  // a SymInt can carry (the caller then specializes).
  VarRef sym_int_arith(PyObject* op, const VarRef& a, const VarRef& b);
  // `result`, the size SymInt `op(a, b)` made by size arithmetic, with the plan that recomputes it
  // from the frame when both operands have one (dynamic ints and int constants: SymIntVar).
  VarRef with_int_plan(VarRef result, PyObject* op, const VarRef& a, const VarRef& b);
  // Guards a SymInt's sources by value (a size SymInt: the symbols it mentions) and returns the
  // constant it stands for; a SliceVar becomes a constant slice; other Vars are returned as they
  // are. `use` says what needed the value ("an argument of range()"), for the guard's reason.
  VarRef specialize(const VarRef& v, const std::string& use = std::string());
  // specialize() on the size SymInts `v` holds, through tuples, lists and dicts, in place.
  void specialize_sizes(Var& v, const std::string& use = std::string());
  // `index` with its slices of symbolic bounds (SliceVar, alone or in a tuple) made constant
  // slices: for subscripts that are not basic tensor subscripts (trace_subscript.cpp).
  VarRef specialize_slices(const VarRef& index);
  // An int of value `e` over the shape symbols: a size SymInt, or a constant when `e` is one.
  VarRef size_int(const sym::Expr& e);
  // `x.shape` (a torch.Size when `torch_size`) or `x.stride()`: a constant when every entry is
  // one, else a tuple of size ints.
  VarRef size_tuple(const std::vector<sym::Expr>& xs, bool torch_size);
  // Whether size SymInts were made (the interpreter then specializes them at uses it does not model).
  bool has_size_ints() const { return has_size_ints_; }
  // Whether `e` names a shape symbol not yet specialized.
  bool symbolic(const sym::Expr& e) const { return !shapes.resolve(e).is_constant(); }
  bool symbolic(const ir::TensorType& t) const;
  // A Python-visible relation on sizes (`T <= 1024`, `B == 1`): decided as ShapeEnv::evaluate
  // decides it, naming the user's line in the guard.
  bool size_relation(const sym::Rel& rel);
  // After the backend compiled the graph: the guards on the shape symbols (ShapeEnv::guards, each
  // symbol >= its min, every dynamic size and stride of an input equal to its expression). The
  // backend may have specialized more symbols (`specialized`: their names).
  void finish_shapes();
  // Replaces the specialized symbols in every type and `sym(...)` argument of the graph, and sets
  // graph.symbols to those still symbolic (after finish(), and again when the backend specializes).
  void apply_specializations();

  // The plan that rebuilds `v` after the graph runs; adds graph outputs as needed.
  ValuePlan plan_value(const VarRef& v);
  // How many ValuePlan identities the plans made so far use.
  int identity_count() const { return static_cast<int>(identities_.size()); }
  // Ends the trace: plans the return value and the side effects, sets the graph's outputs and
  // fills `aliases`.
  ValuePlan finish(const VarRef& result);
  AliasGuard aliases;

  // The meta tensor of `t`, made from its type when it has none yet (borrowed). Made for a value
  // the program computed (not `leaf`), one that requires grad has a grad_fn, as eager's has, so
  // in-place ops on it are checked as eager checks them.
  PyObject* meta_of(TensorVar& t, bool leaf = false);

  // A borrowed Python value for a Var that must be a trace-time constant, or nullptr.
  static PyObject* as_constant(const Var& v);
  // A real Python value for a Var built only of constants (tuples and lists of constants are
  // rebuilt), or a null PyRef.
  static PyRef materialize(const Var& v);
  // The core op's callable (ops.def torch target), borrowed.
  PyObject* op_callable(ir::Op op) const { return table.op_callables[static_cast<size_t>(op)].get(); }
  bool is_tensor_type(PyObject* type) const;
  // Whether wrap() guards `obj` by value or identity (not by its type alone): what Python
  // computes from such an object at trace time holds on every call the guards admit.
  bool guarded_by_value(PyObject* obj) const;

 private:
  VarRef wrap_tensor(PyObject* obj, const SourceRef& source);
  // A graph node `op` (a core op, or ir::Op::TorchCall named `name`) applying `callable` to the
  // Vars, whose result types (device included) the caller knows: one result Var per type.
  VarRef record_typed(ir::Op op, const std::string& name, PyObject* callable, const std::vector<VarRef>& args,
                      const std::vector<std::pair<std::string, VarRef>>& kwargs, std::vector<ir::TensorType> types);
  // call_torch without autocast's casts.
  VarRef record_call(PyObject* callable, const std::vector<VarRef>& args,
                     const std::vector<std::pair<std::string, VarRef>>& kwargs);
  // Replaces the arguments of a call recorded while autocast is on with autocast's casts of them;
  // Unsupported where Ember does not know what autocast does to `callable`.
  void apply_autocast(PyObject* callable, std::vector<VarRef>& args,
                      std::vector<std::pair<std::string, VarRef>>& kwargs);
  // The mode an ember.autocast.AutocastExit object read through `source` restores (guarded).
  AutocastMode read_autocast_exit(PyObject* exit, const SourceRef& source);
  AutocastState initial_autocast_;
  bool autocast_guarded_ = false;
  // A cell object read from the frame (a resume function's cell variable, an item of a
  // function's __closure__): one CellVar per cell object, however many sources reach it, and
  // `aliases` requires those sources to reach one cell again (closures.cpp).
  VarRef wrap_cell(PyObject* cell, const SourceRef& source);
  // A closure is made anew on every call of the frame that makes it: guarded by its code and
  // globals, not its identity; the trace reads its defaults and cells through their sources.
  void guard_closure(PyObject* fn, const SourceRef& source);
  // Plans of functions made by MAKE_FUNCTION and of cells (closures.cpp).
  ValuePlan plan_function(const VarRef& v);
  ValuePlan plan_cell(const VarRef& v);
  // Appends the identity checks of the cells read from the frame to `aliases` (closures.cpp).
  void alias_cells(int first_object);
  struct FrameCell {
    VarRef var;
    bool written = false;
  };
  std::vector<FrameCell> cells_;
  std::unordered_map<PyObject*, int> cell_index_;               // by identity
  std::vector<std::pair<SourceRef, int>> cell_sources_;         // every source that reached one
  bool is_equality_guarded(PyObject* obj) const;  // besides plain constants
  bool is_identity_guarded(PyObject* obj) const;
  // The IR argument for `v`; with `meta_value`, also the Python value a meta computation takes.
  ir::Arg lower_arg(const VarRef& v, PyRef* meta_value);
  // Result types from Ember's shape rules (shape_rules.h), or nullopt to run the meta kernel:
  // core op `op`'s rule, or for ir::Op::TorchCall the rule of the callable named `name`.
  // `pins` (symbol -> its hint) are substituted into the operands first.
  std::optional<std::vector<ir::TensorType>> rule_types(ir::Op op, const std::string& name,
                                                        const std::vector<VarRef>& args,
                                                        const std::vector<std::pair<std::string, VarRef>>& kwargs,
                                                        const sym::Replacements& pins = {});
  // A call's arguments as the shape rules see them (shapes::Operand; constants converted as nodes'
  // literal arguments are, symbols specialized so far replaced, then `pins`); operand types live in
  // `storage`. nullopt where an argument has no operand form.
  struct RuleOperands {
    std::vector<shapes::Operand> args;
    std::vector<std::pair<std::string, shapes::Operand>> kwargs;
  };
  std::optional<RuleOperands> rule_operands(const std::vector<VarRef>& args,
                                            const std::vector<std::pair<std::string, VarRef>>& kwargs,
                                            const sym::Replacements& pins, std::deque<ir::TensorType>& storage);
  // The symbolic result sizes of a call: the size formulas of src/shapes (shapes::infer_result_sizes:
  // conv, torch.max/min's reduction forms, advanced getitem; their assumptions made to hold by
  // ShapeEnv::evaluate, a guard each where the symbols' facts do not decide them) where `formulas`, else
  // the trace's own factory shapes (symbolic_factory_shape) where `factories`. One type per result, or
  // one for every result; sizes and contiguous strides, which the meta kernel's at the traced values
  // must agree with. record_call asks the formulas before the fewest-pins search (which would pin conv's
  // spatial sizes), the factories after it.
  std::optional<std::vector<ir::TensorType>> symbolic_result_shapes(const std::string& name, const std::vector<VarRef>& args,
                                                                    const std::vector<std::pair<std::string, VarRef>>& kwargs,
                                                                    bool formulas, bool factories);
  // When no rule answers with every symbol of a call symbolic: the rule's answer with the fewest
  // of them pinned to their hints (first by count, then in order of appearance), and those
  // symbols specialized with `why`; nullopt when even pinning all of them does not help. Why:
  // one size a rule needs constant (`F.linear`'s in_features against its weight, layer_norm's
  // normalized_shape) must not make the batch static too. (conv's channels: its size formula's
  // assumption, symbolic_result_shapes.)
  std::optional<std::vector<ir::TensorType>> rule_types_pinning_fewest(ir::Op op, const std::string& name,
                                                                       const std::vector<VarRef>& args,
                                                                       const std::vector<std::pair<std::string, VarRef>>& kwargs,
                                                                       const std::string& why);
  static bool core_op_applies(ir::Op op, const std::vector<VarRef>& args,
                              const std::vector<std::pair<std::string, VarRef>>& kwargs);
  std::optional<ir::Literal> literal_of(PyObject* obj) const;
  ir::Device infer_device(PyObject* callable, const std::vector<VarRef>& args,
                          const std::vector<std::pair<std::string, VarRef>>& kwargs) const;

  // Dynamic shapes: the dimensions of `meta` (read through `source`, of Python type `obj`'s) the
  // policy makes symbolic.
  std::vector<bool> dynamic_dims(PyObject* obj, const SourceRef& source, const TensorMeta& meta) const;
  // Dynamic shapes: whether the exact int `obj` read through `source` becomes an int symbol
  // (DynamicPolicy); records its value for automatic dynamic.
  bool dynamic_int(PyObject* obj, const SourceRef& source) const;
  // The size SymInt of a new int symbol for `obj` (dynamic_int said so): guarded exactly int, its
  // value stored into a shape-guard slot, and replayed from `source` where it is stored.
  VarRef int_symbol(PyObject* obj, const SourceRef& source);
  // Makes the `dyn` dimensions of an input's `type` symbols and its strides expressions of its
  // sizes, and gives each symbolic size and stride a shape-guard slot (size_slots/stride_slots:
  // per dim, -1 for a static one). Leaves all three unchanged when the layout is not dense in
  // some dimension order (the tensor stays static).
  void symbolize_input(const SourceRef& source, const TensorMeta& meta, const std::vector<bool>& dyn,
                       ir::TensorType* type, std::vector<int>* size_slots, std::vector<int>* stride_slots);
  // A slot of the shape guard: the value a dynamic input size or stride must have, or (dim -1)
  // the value of a dynamic int.
  struct ShapeSlot {
    sym::Expr expr;
    SourceRef source;
    int dim = 0;
    bool stride = false;
  };
  // " (file.py:12)": the user's line being traced, for guard reasons.
  std::string where() const;
  std::vector<ShapeSlot> shape_slots_;
  bool has_size_ints_ = false;
  // x.size(), x.size(d), x.numel(), x.stride(), len(x) of a tensor with symbolic sizes, or null
  // for a query whose answer the sizes do not decide (the meta tensor answers it).
  VarRef size_query(const std::string& query, const std::vector<VarRef>& args,
                    const std::vector<std::pair<std::string, VarRef>>& kwargs);
  // Whether a call's arguments mention shape symbols (symbolic tensor types, size SymInts).
  bool has_symbols(const std::vector<VarRef>& args, const std::vector<std::pair<std::string, VarRef>>& kwargs) const;
  // The sizes and strides a torch factory (arange, zeros, ones, empty, full, rand, randn, and the
  // `x.new_*` methods) makes from symbolic arguments, a call that keeps its tensor's (the *_like
  // factories, `.to`, dtype casts, clone, detach, cumsum, cumprod: a dense input's layout is
  // preserved), or torch.diff; nullopt where it cannot tell (the caller then specializes). Dtype and
  // device come from the meta kernel, which must agree at the traced values (sizes and strides too).
  // These read the trace's Python arguments (size ints, sequences of them); formulas over tensor
  // operands' sizes are src/shapes' (symbolic_result_shapes).
  std::optional<ir::TensorType> symbolic_factory_shape(const std::string& name, const std::vector<VarRef>& args,
                                                       const std::vector<std::pair<std::string, VarRef>>& kwargs);
  // ShapeEnv::specialize on every symbol a call's arguments mention.
  void specialize_symbols(const std::vector<VarRef>& args, const std::vector<std::pair<std::string, VarRef>>& kwargs,
                          const std::string& why);
  // `t` with every size and stride at its value on the traced call.
  ir::TensorType at_hints(const ir::TensorType& t) const;

  ir::DType default_dtype_ = ir::DType::Float32;
  std::unordered_map<std::string, VarRef> by_source_;
  std::unordered_map<ir::ValueId, int> output_index_;
  std::unordered_map<const Var*, int> identities_;  // ValuePlan::identity of lists, dicts, objects
  std::unordered_set<const Var*> planning_;          // constructed objects plan_value is inside
  // Tensors, lists and dicts read from the frame: one Var per object, however many sources reach it.
  struct Container {
    PyRef object;
    VarRef var;
    bool mutated = false;
  };
  std::vector<Container> containers_;
  std::unordered_map<PyObject*, int> container_index_;            // by identity
  std::unordered_map<const Var*, int> container_of_;              // by Var
  std::vector<std::pair<SourceRef, int>> container_sources_;      // every source that reached one
  std::vector<PyObject*> wrapping_;  // the lists and dicts whose items wrap() is reading
  int mutated_dicts_ = 0;
  // Unsupported when the mutated dict `c` is the instance __dict__ of `owner`, an object read
  // from the frame (the trace reads its attributes apart from the dict).
  void refuse_instance_dict(const Container& c, const Var& owner) const;
  // Records a tensor, list or dict read from the frame through `source` (its Var `v`, not yet filled).
  void register_container(PyObject* obj, const VarRef& v, const SourceRef& source);
  // Fills `v` with the items of the tuple, list or dict `obj` read through `source` (guarding its
  // length or keys), then applies what store_unread added.
  void read_contents(PyObject* obj, Var& v, const SourceRef& source);
  // Whether a plan can rebuild `v` after the graph (plan_value would not refuse it).
  bool plannable(const Var& v) const;
  // A list or dict holding the current contents of a container Var (a Contents effect's value).
  ValuePlan plan_contents(const VarRef& container);
  // Makes `p` the Dict plan of `d`'s keys and values.
  void plan_dict_items(const DictVar& d, ValuePlan& p);
  std::vector<ir::ValueId> outputs_;
};

}  // namespace ember::frontend
