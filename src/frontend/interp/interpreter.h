// The symbolic interpreter: runs one code object's normalized bytecode (bytecode/ops.def) over
// Vars instead of Python objects, recording tensor operations into the Trace's graph.
//
// One Interpreter runs one frame: the compiled frame itself, or a function it calls, which is
// inlined by running a child Interpreter over the callee's code with the same Trace. Python
// values known at trace time are computed for real (constant folding); tensor operations become
// graph nodes; anything else throws Unsupported, and the compiler splits the frame there (a graph
// break, graph_break.h) or, where it cannot, runs the whole frame eagerly.
// Loops are unrolled: the interpreter simply follows the jumps.
#pragma once

#include <Python.h>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "frontend/bytecode/instruction.h"
#include "frontend/interp/trace.h"
#include "frontend/interp/variables.h"

namespace ember::frontend {

// What the interpreter needs to know about a code object, computed once per code.
struct CodeInfo {
  PyRef code;
  bytecode::DecodedCode decoded;
  std::vector<std::string> localsplus_names;  // varnames, then cells that are not arguments, then frees
  int argcount = 0, posonlyargcount = 0, kwonlyargcount = 0;
  bool varargs = false, varkeywords = false;
  int nfree = 0;
  std::vector<bool> cell;  // per localsplus slot: a cell variable (named in co_cellvars)
  std::string filename, name;
  // Per normalized instruction (and one past the end), the local slots live on entry (live_locals,
  // graph_break.h). Computed by the first graph break in this code, as most code never breaks.
  mutable std::optional<std::vector<std::vector<bool>>> live;
};

class CodeInfoCache {
 public:
  CodeInfoCache() = default;
  CodeInfoCache(const CodeInfoCache&) = delete;
  CodeInfoCache& operator=(const CodeInfoCache&) = delete;
  const CodeInfo& get(PyCodeObject* code);

 private:
  std::unordered_map<PyObject*, std::unique_ptr<CodeInfo>> infos_;
};

using Kwargs = std::vector<std::pair<std::string, VarRef>>;

// Where a trace of the compiled frame stops, for a graph break: before the `visit`-th execution
// (1 = the first) of normalized instruction `index` of the frame's own code. `reached` and the
// stack and locals found there are filled in when the trace gets there.
struct StopAt {
  int index = -1;
  int visit = 1;
  bool reached = false;
  std::vector<VarRef> stack;   // bottom first, Null Vars included
  std::vector<VarRef> locals;  // localsplus
};

class Interpreter {
 public:
  struct Globals {
    PyObject* dict = nullptr;   // borrowed: the code's globals
    SourceRef base;             // a source for `dict` itself when it is not the frame's globals
  };

  Interpreter(Trace& trace, CodeInfoCache& codes, const CodeInfo& info, Globals globals,
              std::vector<VarRef> locals, std::vector<VarRef> closure, int depth);

  // Runs the code to its return; returns the returned Var.
  VarRef run();

  // Entry for the compiled frame: binds the frame's arguments and closure from the Trace's frame.
  // With `stop`, returns nullptr once the trace reaches it (see StopAt).
  static VarRef run_frame(Trace& trace, CodeInfoCache& codes, StopAt* stop = nullptr);

 private:
  // Stack.
  void push(VarRef v) { stack_.push_back(std::move(v)); }
  VarRef pop();
  VarRef& peek(int depth = 1);  // 1 = top of stack
  std::vector<VarRef> pop_n(int n);

  // Runs one instruction. One switch over every opcode, with no default, so that an opcode
  // added to bytecode/ops.def is a compile error until it is handled. The stack, locals, cells,
  // globals and jumps, and the cases that only pop operands for a helper below, stay in the
  // switch; longer cases forward to a `step_*` member (one per opcode or per family of
  // variants) in the file of their topic, declared below with it.
  void step(const bytecode::Instruction& ins);
  static bool carries_sym_ints(bytecode::Opcode op);
  static bool carries_size_ints(bytecode::Opcode op);
  [[noreturn]] void unsupported(const std::string& reason) const;

  // Names and constants of the code.
  PyObject* name_at(int index) const;   // borrowed
  PyObject* const_at(int index) const;  // borrowed
  VarRef load_global(const std::string& name);
  // The absolute name IMPORT_NAME imports: `name` itself, or, for a relative import (`level` > 0),
  // resolved against the package of this code's globals.
  std::string imported_name(const std::string& name, long level) const;
  // sys.modules[m].__dict__[name] for the module whose namespace `globals` is, or null.
  static SourceRef module_global_source(PyObject* globals, const std::string& name);
  VarRef load_deref(int slot);

  // Calls (interp_calls.cpp).
  VarRef call(const VarRef& fn, std::vector<VarRef> args, Kwargs kwargs);
  void call_from_stack(int argc, PyObject* kwnames);
  void step_call_function_ex(const bytecode::Instruction& ins);
  VarRef call_object(const VarRef& fn, PyObject* obj, std::vector<VarRef>& args, Kwargs& kwargs);
  VarRef call_builtin(PyObject* fn, std::vector<VarRef>& args, Kwargs& kwargs);
  // Whether call_builtin takes the builtin `kind` with size SymInts as they are (len, isinstance,
  // type, getattr/hasattr, and the operator functions the bytecode's own operators use), so a
  // call need not guard sizes' values first.
  static bool keeps_sizes(const CallableKind& kind);
  std::vector<VarRef> sorted_items(std::vector<VarRef> items, const VarRef& key, const VarRef& reverse);
  VarRef call_container_method(const VarRef& self, const std::string& name, std::vector<VarRef>& args,
                               Kwargs& kwargs);
  VarRef inline_function(PyObject* code, Globals globals, const std::vector<VarRef>& defaults,
                         const DictVar* kwdefaults, std::vector<VarRef> closure, std::vector<VarRef> args,
                         Kwargs kwargs, const std::string& what);
  VarRef inline_real_function(PyObject* func, const SourceRef& func_source, std::vector<VarRef> args,
                              Kwargs kwargs);
  VarRef call_module(const VarRef& module, std::vector<VarRef> args, Kwargs kwargs);
  // partial(*args, **kwargs) of a functools.partial object (exactly that type): its func called
  // with the partial's arguments first.
  VarRef call_partial(const VarRef& partial, std::vector<VarRef> args, Kwargs kwargs);
  // torch.autograd.Function.apply(cls, *args) where it records no backward (grad mode off, or no
  // tensor argument requires grad): cls.forward inlined with grad mode off.
  VarRef autograd_function_apply(std::vector<VarRef>& args, Kwargs& kwargs);
  // wrapper(*args, **kwargs) of a functools.lru_cache over Python code (interp_lru_cache.cpp): an
  // unbounded cache called with arguments the guards can pin is called at trace time and its value
  // folded; any other call inlines __wrapped__, bypassing the cache (as torch.compile does). Each
  // is a trace note.
  VarRef call_lru_cache(const VarRef& fn, PyObject* wrapper, std::vector<VarRef>& args, Kwargs& kwargs);
  VarRef module_method(const std::string& name, std::vector<VarRef>& args, Kwargs& kwargs);
  VarRef constant_call(PyObject* fn, const std::vector<VarRef>& args, const Kwargs& kwargs);
  // fn(*args, **kwargs) run now on the arguments' real values, its value a trace constant; nullptr
  // where an argument has no real value (a tensor, a SymInt). The caller has pinned the arguments.
  VarRef call_on_values(PyObject* fn, const std::vector<VarRef>& args, const Kwargs& kwargs);
  VarRef signature_of(PyObject* signature, std::vector<VarRef>& args, Kwargs& kwargs);
  // torch._assert / torch._check* (interp_checks.cpp): None when the condition holds.
  VarRef call_check(const CallableKind& kind, PyObject* fn, std::vector<VarRef>& args, Kwargs& kwargs);
  // torch.autocast(...) and torch.is_autocast_enabled / get_autocast_dtype, answered from the
  // trace's autocast state (interp_autocast.cpp).
  VarRef autocast_context(PyObject* cls, const std::vector<VarRef>& args, const Kwargs& kwargs);
  VarRef autocast_query(const std::string& name, const std::vector<VarRef>& args, const Kwargs& kwargs);
  // Instances the trace constructs (interp_instances.cpp; ObjectVar::made_attrs).
  VarRef construct(PyObject* cls, std::vector<VarRef> args, Kwargs kwargs);
  // `cls(...)` of a torch.nn layer class from constant arguments: built now, a trace constant, where
  // it has no parameters, buffers or child modules (CrossEntropyLoss(), GELU()); else Unsupported.
  VarRef construct_stateless_module(PyObject* cls, std::vector<VarRef>& args, Kwargs& kwargs);
  // An instance of `cls` with no attributes yet, its __init__ not run (ObjectVar::made_attrs).
  std::shared_ptr<ObjectVar> new_instance(PyObject* cls);
  VarRef instance_attr(const VarRef& obj, const std::string& name);
  void store_instance_attr(const VarRef& obj, const std::string& name, const VarRef& value);
  // `del obj.name`: of an instance the trace constructed (its attribute is dropped; a missing one
  // raises AttributeError in the trace); of anything else Unsupported.
  void delete_attr(const VarRef& obj, const std::string& name);
  // BEFORE_WITH over an object whose class has Python __enter__ and __exit__: pushes the bound
  // exit and the result of the inlined __enter__. False when `ctx` is not such an object.
  bool enter_python_context(const VarRef& ctx);
  // Whether the guards fix `v`'s value (a trace constant, or read from the frame and guarded by
  // value or identity, containers of such): only such values may be folded by running Python.
  bool pinned(const Var& v) const;

  // Containers the bytecode builds and unpacks (interp_containers.cpp).
  void step_build_set(const bytecode::Instruction& ins);
  void step_build_map(const bytecode::Instruction& ins);
  void step_build_const_key_map(const bytecode::Instruction& ins);
  void step_list_add(const bytecode::Instruction& ins);  // LIST_APPEND, LIST_EXTEND
  void step_map_add(const bytecode::Instruction& ins);
  void step_dict_update(const bytecode::Instruction& ins);  // DICT_UPDATE, DICT_MERGE
  void step_unpack_sequence(const bytecode::Instruction& ins);
  void step_unpack_ex(const bytecode::Instruction& ins);
  // Unsupported when `container` (the target of LIST_APPEND, MAP_ADD, ...) was read from the frame.
  void refuse_frame_container(const Var& container, const std::string& what) const;

  // Functions the trace makes (interp_functions.cpp; FunctionVar).
  void step_make_function(const bytecode::Instruction& ins);
  void step_set_function_attribute(const bytecode::Instruction& ins);
  // Sets the part of `fn` that MAKE_FUNCTION's `flag` bit names (closure, annotations,
  // kwdefaults, defaults).
  void set_function_part(FunctionVar& fn, int flag, const VarRef& part);

  // Attributes (interp_attrs.cpp), items, iteration, operators, formatting (interp_objects.cpp).
  VarRef get_attr(const VarRef& obj, const std::string& name);
  // Pushes what LOAD_METHOD pushes: [method, self] or the NULL form.
  void load_method(const VarRef& obj, const std::string& name);
  void step_load_super_attr(const bytecode::Instruction& ins);
  VarRef module_attr(const VarRef& module, const std::string& name);
  // A Python property's value: its getter inlined on `self`.
  VarRef property_value(PyObject* property, const VarRef& self, const std::string& name);
  VarRef object_attr(const VarRef& obj, PyObject* o, const std::string& name);
  // Python's generic lookup (object.__getattribute__) on a user object; nullptr when missing
  // and `missing_ok`.
  VarRef generic_attr(const VarRef& obj, PyObject* o, const std::string& name, bool missing_ok);
  VarRef tensor_attr(const VarRef& t, const std::string& name);
  // Mappings read key by key, each read guarded on its own: an instance's __dict__ read lazily
  // (ObjectVar::dict_owner) and os.environ. A lookup returns the value (guarded through its item
  // source, or by an environ_entry guard), or nullptr when the key is absent (then the key set,
  // or the variable's absence, is guarded).
  bool is_keyed_view(const Var& v) const;
  VarRef instance_dict(const VarRef& obj, PyObject* o);
  VarRef dict_view_lookup(const VarRef& view, PyObject* key);
  VarRef dict_view_attr(const VarRef& view, const std::string& name);
  VarRef dict_view_method(const VarRef& view, const std::string& name, std::vector<VarRef>& args, Kwargs& kwargs);
  VarRef super_attr(const SuperVar& sup, const std::string& name);
  VarRef class_attr_value(PyObject* owner, PyObject* attr, const VarRef& self, const SourceRef& source);
  void store_attr(const VarRef& obj, const std::string& name, const VarRef& value);
  // type(obj).name(obj, arg) when that is Python code of a user object's class (a Mapping's
  // __getitem__, __contains__); nullptr when the type has no such Python method.
  VarRef call_python_dunder(const VarRef& obj, const char* name, const VarRef& arg);
  VarRef call_python_dunder(const VarRef& obj, const char* name);  // one without an argument
  VarRef subscript(const VarRef& obj, const VarRef& index);
  // transformers ModelOutputs (interp_records.cpp).
  static bool is_model_output_class(PyObject* cls);
  VarRef make_record(PyObject* cls, std::vector<VarRef>& args, Kwargs& kwargs);
  // `rec` as a record whose fields the trace knows; Unsupported for one built after the graph.
  const RecordVar& known_record(const Var& rec);
  std::vector<VarRef> record_present(const RecordVar& r);  // the values that are not None, in field order
  VarRef record_attr(const VarRef& rec, const std::string& name);
  VarRef record_method(const VarRef& rec, const std::string& name, std::vector<VarRef>& args, Kwargs& kwargs);
  VarRef record_subscript(const VarRef& rec, const VarRef& index);
  // `rec[key] = value` / `rec.key = value`: a present field replaced by a value other than None
  // (its key keeps its place); anything that would add, reorder or blank a key is Unsupported.
  void record_store(const VarRef& rec, const std::string& key, const VarRef& value);
  // dataclasses.fields(x) (`fields_fn`) of a class or an instance the trace knows the class of (a
  // record, a constructed instance, an object read from the frame: its type is guarded): a constant.
  VarRef dataclass_fields(PyObject* fields_fn, std::vector<VarRef>& args, Kwargs& kwargs);
  // What a compiled frame returns for a record: a tuple the runtime rebuilds the ModelOutput from.
  VarRef record_for_return(const VarRef& rec);
  void store_subscript(const VarRef& obj, const VarRef& index, const VarRef& value);
  void delete_subscript(const VarRef& obj, const VarRef& index);
  // The members of an nn.Module kept in one of its dicts (`_modules`, `_parameters`,
  // `_buffers`), in order: key, the object, and its Var read through a module-member source
  // (None entries become a None constant). The dict's keys are guarded.
  struct ModuleMember {
    PyRef key;
    PyRef obj;
    VarRef var;
  };
  std::vector<ModuleMember> module_children(const VarRef& module, const char* dict_name);
  std::vector<VarRef> iterate(const VarRef& v);
  // Iteration of a user object through Python code of its class (interp_iteration.cpp): an
  // __iter__ (a generator, iter() of a container, or an iterator with a Python __next__), or the
  // old sequence protocol (__getitem__ from 0 until IndexError). nullopt when its class has
  // neither.
  std::optional<std::vector<VarRef>> iterate_python(const VarRef& v);
  // next(it) of an object whose class has a Python __next__; nullptr on StopIteration.
  VarRef next_python(const VarRef& it);
  bool has_python_method(const Var& v, const char* name) const;
  VarRef binary_op(int nb, const VarRef& lhs, const VarRef& rhs);
  VarRef compare(int op, const VarRef& lhs, const VarRef& rhs);
  // A tuple the trace built whose Python type is torch.Size (x.shape with symbolic sizes), and one
  // made so when `torch_size`.
  bool is_torch_size(const VarRef& v) const;
  VarRef sized_tuple(std::vector<VarRef> items, bool torch_size) const;
  VarRef unary(const char* torch_name, int py_op, const VarRef& v);
  bool truthy(const VarRef& v);
  bool contains(const VarRef& container, const VarRef& item);
  bool identical(const VarRef& a, const VarRef& b);
  VarRef length(const VarRef& v);
  VarRef isinstance(const VarRef& obj, const VarRef& cls);
  // The Python type of what `v` stands for (a torch.Size tuple's, a record's class, a SymInt's int);
  // nullptr for kinds whose type the trace does not model.
  PyObject* python_type(const VarRef& v) const;
  VarRef build_slice(const VarRef& start, const VarRef& stop, const VarRef& step);
  VarRef format_value(const VarRef& v, const VarRef& spec);
  void step_convert_value(const bytecode::Instruction& ins);  // str(), repr(), ascii() in an f-string
  void step_build_string(const bytecode::Instruction& ins);   // an f-string's parts joined

  // Exceptions (interp_exceptions.cpp; TracedException, trace.h).
  // Where an exception entered the compiled frame's own code: an instruction and its visit.
  struct Origin {
    int index = -1;
    int visit = 0;
  };
  [[noreturn]] void raise(PyObject* type, const std::string& message);  // a new `type(message)`
  [[noreturn]] void raise_key_error(PyObject* key);
  // The pending Python error of an operation on guarded values, cleared: its exception instance.
  // Taken before anything else runs (building a message may call Python).
  static PyRef take_exception();
  // Raises a taken exception in the trace; errors that are not the program's own (MemoryError,
  // KeyboardInterrupt, ...) are Unsupported naming `what`.
  [[noreturn]] void raise_taken(PyRef exc, const std::string& what);
  // Raises `exc` in the trace from the current instruction; a re-raise (RERAISE, a bare `raise`)
  // keeps the place it was raised before, as CPython's traceback does.
  [[noreturn]] void raise_var(const VarRef& exc, bool reraise = false);
  static bool is_exception(const Var& v, PyObject* type);  // an exception instance matching `type`
  static bool is_exception_class_var(const Var& v);
  bool made_by_trace(PyObject* exc) const;
  VarRef make_exception(PyObject* cls, const std::vector<VarRef>& args, const Kwargs& kwargs);
  VarRef raisable(const VarRef& v);  // what `raise v` raises: an instance (a class is instantiated)
  // Jumps to this code's handler for the running instruction; false when it has none.
  bool handle(const TracedException& e);
  Origin origin_of(const Var& exc) const;  // the compiled frame's own interpreter only
  Unsupported uncaught(const TracedException& e) const;
  void exception_op(const bytecode::Instruction& ins);
  void step_call_intrinsic_1(const bytecode::Instruction& ins);

  Trace& trace_;
  CodeInfoCache& codes_;
  const CodeInfo& info_;
  Globals globals_;
  std::vector<VarRef> locals_;
  std::vector<VarRef> closure_;
  std::vector<VarRef> stack_;
  PyRef kwnames_;  // pending KW_NAMES
  int depth_;
  size_t ip_ = 0;
  const bytecode::Instruction* current_ = nullptr;
  VarRef result_;
  bool returned_ = false;
  StopAt* stop_ = nullptr;      // the compiled frame's own interpreter only
  std::vector<int> visits_;     // per instruction, executions so far (the compiled frame's own only)
  std::vector<VarRef>* yields_ = nullptr;  // set while running a generator's code: its yielded values
  // The compiled frame's own interpreter only: where each exception it has seen entered its code,
  // and, per handler of its code now running, the origin of the exception it handles.
  // (The Vars are kept alive so that an address is never another exception's.)
  std::vector<std::pair<VarRef, Origin>> exc_origins_;
  std::vector<Origin> handler_origins_;
};

}  // namespace ember::frontend
