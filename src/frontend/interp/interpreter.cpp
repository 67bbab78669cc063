// The opcode loop of the symbolic interpreter: the code info cache, binding the compiled frame,
// the run loop (instruction budget, stop points, exceptions), and `step`, the one switch over
// every opcode. Stack, locals, cells, globals, imports and jumps are handled here, as are cases
// that only pop operands for a helper; longer ones forward to `step_*` members: containers
// (interp_containers.cpp), function making (interp_functions.cpp), calls (interp_calls.cpp),
// attributes (interp_attrs.cpp), items, operators and f-strings (interp_objects.cpp),
// exceptions (interp_exceptions.cpp).
#include "frontend/interp/interpreter.h"
#include "frontend/interp/object_model.h"
#include "frontend/pyutil.h"

#include <algorithm>

namespace ember::frontend {

using bytecode::Instruction;
using bytecode::Opcode;

namespace {

std::vector<std::string> tuple_strings(PyObject* code, const char* attr) {
  PyRef t = PyRef::steal(PyObject_GetAttrString(code, attr));
  if (!t) throw PythonError();
  std::vector<std::string> out;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t.get()); ++i) out.push_back(str_of(PyTuple_GET_ITEM(t.get(), i)));
  return out;
}

}  // namespace

const CodeInfo& CodeInfoCache::get(PyCodeObject* code) {
  auto it = infos_.find(reinterpret_cast<PyObject*>(code));
  if (it != infos_.end()) return *it->second;
  auto info = std::make_unique<CodeInfo>();
  PyObject* co = reinterpret_cast<PyObject*>(code);
  info->code = PyRef::borrow(co);
  info->decoded = bytecode::decode(code);
  std::vector<std::string> varnames = tuple_strings(co, "co_varnames");
  std::vector<std::string> cellvars = tuple_strings(co, "co_cellvars");
  std::vector<std::string> freevars = tuple_strings(co, "co_freevars");
  info->localsplus_names = varnames;
  for (const auto& c : cellvars)
    if (std::find(varnames.begin(), varnames.end(), c) == varnames.end()) info->localsplus_names.push_back(c);
  for (const auto& f : freevars) info->localsplus_names.push_back(f);
  info->nfree = static_cast<int>(freevars.size());
  for (const auto& n : info->localsplus_names)
    info->cell.push_back(std::find(cellvars.begin(), cellvars.end(), n) != cellvars.end());
  info->argcount = code->co_argcount;
  info->posonlyargcount = code->co_posonlyargcount;
  info->kwonlyargcount = code->co_kwonlyargcount;
  info->varargs = code->co_flags & CO_VARARGS;
  info->varkeywords = code->co_flags & CO_VARKEYWORDS;
  info->filename = str_of(code->co_filename);
  info->name = str_of(code->co_qualname);
  return *(infos_[co] = std::move(info));
}

Interpreter::Interpreter(Trace& trace, CodeInfoCache& codes, const CodeInfo& info, Globals globals,
                         std::vector<VarRef> locals, std::vector<VarRef> closure, int depth)
    : trace_(trace),
      codes_(codes),
      info_(info),
      globals_(std::move(globals)),
      locals_(std::move(locals)),
      closure_(std::move(closure)),
      depth_(depth) {
  locals_.resize(info_.localsplus_names.size());
}

VarRef Interpreter::run_frame(Trace& trace, CodeInfoCache& codes, StopAt* stop) {
  const FrameView& frame = trace.frame;
  const CodeInfo& info = codes.get(frame.code);
  std::vector<VarRef> locals(info.localsplus_names.size());
  int nargs = frame.argument_count();
  for (int i = 0; i < nargs; ++i) {
    if (!frame.localsplus[i]) continue;
    locals[i] = trace.wrap(frame.localsplus[i], Source::local(i, info.localsplus_names[i]));
  }
  if (info.varkeywords) {
    // CPython builds a new **kwargs dict for every call and nothing else refers to it: the trace
    // owns it, so `kwargs.pop(...)` and `kwargs[k] = v` are trace-level mutations (its items keep
    // their sources and guards; a dict that escapes is rebuilt).
    int slot = info.argcount + info.kwonlyargcount + (info.varargs ? 1 : 0);
    if (VarRef& d = locals.at(slot); d && d->kind == VarKind::Dict) {
      auto owned = std::make_shared<DictVar>(d->as<DictVar>());
      owned->source = nullptr;
      d = owned;
    }
  }
  std::vector<VarRef> closure;
  PyObject* cells = frame.closure();
  size_t first_free = info.localsplus_names.size() - info.nfree;
  for (int i = 0; i < info.nfree; ++i) {
    auto cell = std::make_shared<CellVar>();
    cell->real = PyRef::borrow(PyTuple_GET_ITEM(cells, i));
    cell->source = Source::closure(i, info.localsplus_names[first_free + i]);
    trace.register_frame_cell(cell->real.get(), cell);
    closure.push_back(cell);
  }
  Interpreter interp(trace, codes, info, Globals{frame.globals, nullptr}, std::move(locals), std::move(closure), 0);
  interp.stop_ = stop;
  interp.visits_.assign(info.decoded.instructions.size(), 0);
  return interp.run();
}

bool Interpreter::carries_size_ints(bytecode::Opcode op) {
  // Size SymInts (docs/dynamic-shapes.md) also travel through calls (torch ops take them as
  // sym(...) arguments; Python functions are traced with them; other callables specialize them:
  // Interpreter::call), tuples, lists and dicts (the **kwargs of a call through a decorator:
  // transformers' deprecate_kwarg; a compiled module's `mod(*args, **kwargs)`), subscripts, item
  // stores into dicts and lists, comparisons (a relation guard), `in` (which reads a dict's keys,
  // never its values) and signs (`x[:, -T:]`). The steps of `in` and of item stores specialize
  // what they read otherwise.
  if (carries_sym_ints(op)) return true;
  switch (op) {
    case Opcode::Call:
    case Opcode::CallKw:
    case Opcode::CallFunctionEx:
    case Opcode::KwNames:
    case Opcode::LoadMethod:
    case Opcode::BuildTuple:
    case Opcode::BuildList:
    case Opcode::ListAppend:
    case Opcode::ListExtend:
    case Opcode::ListToTuple:
    case Opcode::BuildMap:
    case Opcode::BuildConstKeyMap:
    case Opcode::MapAdd:
    case Opcode::DictUpdate:
    case Opcode::DictMerge:
    case Opcode::BuildSlice:
    case Opcode::BinarySlice:  // 3.12+: `x.shape[:-1]`
    case Opcode::UnaryNegative:
    case Opcode::UnaryPositive:
    case Opcode::UnpackSequence:
    case Opcode::BinarySubscr:
    case Opcode::CompareOp:
    case Opcode::ContainsOp:
    case Opcode::StoreSubscr:
      return true;
    default:
      return false;
  }
}

bool Interpreter::carries_sym_ints(bytecode::Opcode op) {
  // Instructions that move a SymInt or do arithmetic on it; before any other, the stack's
  // SymInts are specialized (guarded by value), so no other code ever sees one.
  switch (op) {
    case Opcode::Nop:
    case Opcode::LoadFast:
    case Opcode::LoadFastAndClear:  // 3.12+: around an inlined comprehension
    case Opcode::StoreFast:
    case Opcode::LoadConst:
    case Opcode::LoadAttr:
    case Opcode::LoadGlobal:
    case Opcode::LoadDeref:
    case Opcode::BinaryOp:
    case Opcode::StoreAttr:
    case Opcode::StoreGlobal:
    case Opcode::ReturnValue:
    case Opcode::PopTop:
    case Opcode::PopN:
    case Opcode::ReturnConst:
    case Opcode::Copy:
    case Opcode::Swap:
    case Opcode::PushNull:
      return true;
    default:
      return false;
  }
}

VarRef Interpreter::pop() {
  if (stack_.empty()) unsupported("bytecode popped an empty stack (malformed bytecode?)");
  VarRef v = std::move(stack_.back());
  stack_.pop_back();
  return v;
}

VarRef& Interpreter::peek(int depth) {
  if (depth < 1 || static_cast<size_t>(depth) > stack_.size()) unsupported("stack underflow");
  return stack_[stack_.size() - depth];
}

std::vector<VarRef> Interpreter::pop_n(int n) {
  if (n < 0 || static_cast<size_t>(n) > stack_.size()) unsupported("stack underflow");
  std::vector<VarRef> out(stack_.end() - n, stack_.end());
  stack_.resize(stack_.size() - n);
  return out;
}

void Interpreter::unsupported(const std::string& reason) const {
  Unsupported u(reason);
  u.filename = info_.filename;
  u.line = current_ ? current_->line : -1;
  throw u;
}

PyObject* Interpreter::name_at(int index) const {
  return PyTuple_GET_ITEM(reinterpret_cast<PyCodeObject*>(info_.code.get())->co_names, index);
}

PyObject* Interpreter::const_at(int index) const {
  return PyTuple_GET_ITEM(reinterpret_cast<PyCodeObject*>(info_.code.get())->co_consts, index);
}

VarRef Interpreter::run() {
  const auto& code = info_.decoded.instructions;
  // Handlers of this code that an exception leaves are no longer handling anything.
  const size_t handling_base = trace_.handling.size();
  while (!returned_) {
    if (ip_ >= code.size()) unsupported("ran past the end of the bytecode");
    if (++trace_.instructions > trace_.options.instruction_limit)
      unsupported("trace exceeded the instruction limit (an unbounded loop?)");
    bool root = depth_ == 0;
    if (root) {
      if (stop_ && static_cast<int>(ip_) == stop_->index && visits_[ip_] + 1 == stop_->visit) {
        stop_->reached = true;
        stop_->stack = stack_;
        stop_->locals = locals_;
        return nullptr;
      }
      ++visits_[ip_];
    }
    current_ = &code[ip_++];
    if (root) trace_.root_line = current_->line;
    trace_.line = current_->line;
    trace_.file = &info_.filename;
    if (trace_.has_size_ints() && !carries_size_ints(current_->op)) {
      for (VarRef& v : stack_) trace_.specialize_sizes(*v);
    }
    if (!carries_sym_ints(current_->op)) {
      bool sizes_travel = carries_size_ints(current_->op);
      for (VarRef& v : stack_)
        if (!(sizes_travel && (is_size_int(v) || v->kind == VarKind::Slice))) v = trace_.specialize(v);
    }
    try {
      step(*current_);
    } catch (Unsupported& u) {
      // Keep the innermost location: an inlined callee's line is the most precise one.
      if (u.line < 0 && current_) {
        u.filename = info_.filename;
        u.line = current_->line;
      }
      if (root && u.root_index < 0) {
        // Inside a traced handler, the frame is split where the handled exception came from.
        Origin at = handler_origins_.empty() ? Origin{static_cast<int>(ip_ - 1), visits_[ip_ - 1]} : handler_origins_.front();
        u.root_index = at.index;
        u.root_visit = at.visit;
      }
      throw;
    } catch (TracedException& e) {
      Origin at;
      if (root) {
        at = origin_of(*e.value);
        exc_origins_.emplace_back(e.value, at);
      }
      if (handle(e)) continue;
      trace_.handling.resize(std::min(trace_.handling.size(), handling_base));
      if (!root) throw;
      Unsupported u = uncaught(e);
      u.root_index = at.index;
      u.root_visit = at.visit;
      throw u;
    }
  }
  return result_;
}

VarRef Interpreter::load_deref(int slot) {
  VarRef cell = locals_.at(slot);
  if (!cell || cell->kind != VarKind::Cell) unsupported("LOAD_DEREF of a slot that holds no cell");
  auto& c = cell->as<CellVar>();
  if (!c.contents && c.real) {
    PyObject* value = PyCell_GET(c.real.get());
    if (!value) unsupported("free variable referenced before assignment");
    c.contents = c.source ? trace_.wrap(value, c.source) : trace_.constant(PyRef::borrow(value));
  }
  if (!c.contents) unsupported("variable referenced before assignment");
  return c.contents;
}

void Interpreter::step(const Instruction& ins) {
  switch (ins.op) {
    case Opcode::Nop:
      return;
    case Opcode::LoadFast: {
      VarRef v = locals_.at(ins.arg);
      if (!v) unsupported("local variable '" + info_.localsplus_names[ins.arg] + "' referenced before assignment");
      push(v);
      return;
    }
    case Opcode::LoadFastAndClear: {
      VarRef v = locals_.at(ins.arg);
      push(v ? v : make_null());
      locals_[ins.arg] = nullptr;
      return;
    }
    case Opcode::StoreFast: {
      VarRef v = pop();
      locals_.at(ins.arg) = v->kind == VarKind::Null ? nullptr : v;
      return;
    }
    case Opcode::DeleteFast:
      locals_.at(ins.arg) = nullptr;
      return;
    case Opcode::LoadConst:
      push(trace_.constant(PyRef::borrow(const_at(ins.arg))));
      return;
    case Opcode::LoadGlobal: {
      VarRef v = load_global(str_of(name_at(ins.arg)));
      bool null_after = bytecode::version_traits().null_after_callable;
      if (ins.arg2 && !null_after) push(make_null());
      push(v);
      if (ins.arg2 && null_after) push(make_null());
      return;
    }
    case Opcode::StoreGlobal:
      trace_.effects.set_global(globals_.dict, str_of(name_at(ins.arg)), pop());
      return;
    case Opcode::LoadAttr: {
      VarRef obj = pop();
      push(get_attr(obj, str_of(name_at(ins.arg))));
      return;
    }
    case Opcode::LoadMethod: {
      VarRef obj = pop();
      load_method(obj, str_of(name_at(ins.arg)));
      return;
    }
    case Opcode::LoadSuperAttr:
      return step_load_super_attr(ins);
    case Opcode::StoreAttr: {
      VarRef obj = pop();
      VarRef value = pop();
      store_attr(obj, str_of(name_at(ins.arg)), value);
      return;
    }
    case Opcode::DeleteAttr:
      delete_attr(pop(), str_of(name_at(ins.arg)));
      return;
    case Opcode::LoadDeref:
      push(load_deref(ins.arg));
      return;
    case Opcode::StoreDeref: {
      VarRef cell = locals_.at(ins.arg);
      if (!cell || cell->kind != VarKind::Cell) unsupported("STORE_DEREF of a slot that holds no cell");
      auto& c = cell->as<CellVar>();
      VarRef value = pop();
      if (c.real) {
        // A real cell: written after the graph, like a global. The compiled function's own
        // closure by index; a cell object the frame reaches (an argument, a function's
        // __closure__) through its `cell_contents` attribute.
        if (c.source && c.source->kind == Source::Kind::Closure) {
          trace_.effects.set_cell(static_cast<int>(c.source->index), value);
        } else if (c.source && c.source->kind == Source::Kind::Attr && c.source->name == "cell_contents") {
          trace_.record_cell_write(cell, value);
        } else {
          unsupported("assignment to a nonlocal variable of a function inlined from outside the compiled frame");
        }
      }
      c.contents = value;
      return;
    }
    case Opcode::LoadClosure: {
      VarRef cell = locals_.at(ins.arg);
      if (!cell || cell->kind != VarKind::Cell) unsupported("LOAD_CLOSURE of a slot that holds no cell");
      push(cell);
      return;
    }
    case Opcode::MakeCell: {
      auto cell = std::make_shared<CellVar>();
      cell->contents = locals_.at(ins.arg);
      locals_[ins.arg] = cell;
      return;
    }
    case Opcode::CopyFreeVars: {
      size_t first = locals_.size() - ins.arg;
      if (closure_.size() != static_cast<size_t>(ins.arg)) unsupported("closure does not match the code's free variables");
      for (int i = 0; i < ins.arg; ++i) locals_[first + i] = closure_[i];
      return;
    }
    case Opcode::ReturnValue:
      result_ = pop();
      if (depth_ == 0 && result_->kind == VarKind::Record) result_ = record_for_return(result_);
      returned_ = true;
      return;
    case Opcode::ReturnConst:
      result_ = trace_.constant(PyRef::borrow(const_at(ins.arg)));
      returned_ = true;
      return;
    case Opcode::PopTop:
      pop();
      return;
    case Opcode::PopN:
      pop_n(ins.arg);
      return;
    case Opcode::Copy:
      push(peek(ins.arg));
      return;
    case Opcode::Swap:
      std::swap(peek(1), peek(ins.arg));
      return;
    case Opcode::PushNull:
      push(make_null());
      return;
    case Opcode::KwNames:
      kwnames_ = PyRef::borrow(const_at(ins.arg));
      return;
    case Opcode::Call: {
      PyRef names = std::move(kwnames_);
      kwnames_ = PyRef();
      call_from_stack(ins.arg, names.get());
      return;
    }
    case Opcode::CallKw: {
      VarRef names = pop();
      PyObject* n = Trace::as_constant(*names);
      if (!n || !PyTuple_Check(n)) unsupported("CALL_KW without a constant names tuple");
      PyRef keep = PyRef::borrow(n);
      call_from_stack(ins.arg, keep.get());
      return;
    }
    case Opcode::CallFunctionEx:
      return step_call_function_ex(ins);
    case Opcode::CallIntrinsic1:
      return step_call_intrinsic_1(ins);
    case Opcode::MakeFunction:
      return step_make_function(ins);
    case Opcode::SetFunctionAttribute:
      return step_set_function_attribute(ins);
    case Opcode::BinaryOp: {
      VarRef rhs = pop();
      VarRef lhs = pop();
      push(binary_op(ins.arg, lhs, rhs));
      return;
    }
    case Opcode::BinarySubscr: {
      VarRef index = pop();
      VarRef obj = pop();
      push(subscript(obj, index));
      return;
    }
    case Opcode::StoreSubscr: {
      // Sizes travel (carries_size_ints) only as the value stored into a dict or a list.
      auto fix = [this](VarRef& v) {
        v = trace_.specialize(v);
        if (trace_.has_size_ints()) trace_.specialize_sizes(*v);
      };
      VarRef index = pop();
      VarRef obj = pop();
      VarRef value = pop();
      fix(index);
      if (obj->kind != VarKind::Dict && obj->kind != VarKind::List) fix(value);
      store_subscript(obj, index, value);
      return;
    }
    case Opcode::DeleteSubscr: {
      VarRef index = pop();
      VarRef obj = pop();
      delete_subscript(obj, index);
      return;
    }
    case Opcode::BinarySlice: {
      VarRef stop = pop();
      VarRef start = pop();
      VarRef obj = pop();
      push(subscript(obj, build_slice(start, stop, trace_.none())));
      return;
    }
    case Opcode::StoreSlice: {
      VarRef stop = pop();
      VarRef start = pop();
      VarRef obj = pop();
      VarRef value = pop();
      store_subscript(obj, build_slice(start, stop, trace_.none()), value);
      return;
    }
    case Opcode::BuildSlice: {
      VarRef step = ins.arg == 3 ? pop() : trace_.none();
      VarRef stop = pop();
      VarRef start = pop();
      push(build_slice(start, stop, step));
      return;
    }
    case Opcode::BuildTuple:
      push(make_tuple(pop_n(ins.arg)));
      return;
    case Opcode::BuildList:
      push(make_list(pop_n(ins.arg)));
      return;
    case Opcode::BuildSet:
      return step_build_set(ins);
    case Opcode::BuildMap:
      return step_build_map(ins);
    case Opcode::BuildConstKeyMap:
      return step_build_const_key_map(ins);
    case Opcode::BuildString:
      return step_build_string(ins);
    case Opcode::ListAppend:
    case Opcode::ListExtend:
      return step_list_add(ins);
    case Opcode::SetAdd:
    case Opcode::SetUpdate:
      unsupported("set comprehension or set update");
    case Opcode::MapAdd:
      return step_map_add(ins);
    case Opcode::DictUpdate:
    case Opcode::DictMerge:
      return step_dict_update(ins);
    case Opcode::ListToTuple: {
      VarRef list = pop();
      push(make_tuple(iterate(list)));
      return;
    }
    case Opcode::UnpackSequence:
      return step_unpack_sequence(ins);
    case Opcode::UnpackEx:
      return step_unpack_ex(ins);
    case Opcode::CompareOp: {
      VarRef rhs = pop();
      VarRef lhs = pop();
      push(compare(ins.arg, lhs, rhs));
      return;
    }
    case Opcode::IsOp: {
      VarRef rhs = pop();
      VarRef lhs = pop();
      bool same = identical(lhs, rhs);
      push(trace_.constant(PyRef::borrow((same != (ins.arg == 1)) ? Py_True : Py_False)));
      return;
    }
    case Opcode::ContainsOp: {
      // Sizes travel into `in` (carries_size_ints) only as a dict's values, which it never reads.
      VarRef container = pop();
      VarRef item = trace_.specialize(pop());
      if (container->kind != VarKind::Dict) trace_.specialize_sizes(*container);
      bool in = contains(container, item);
      push(trace_.constant(PyRef::borrow((in != (ins.arg == 1)) ? Py_True : Py_False)));
      return;
    }
    case Opcode::UnaryNegative:
      push(unary("neg", 0, pop()));
      return;
    case Opcode::UnaryPositive:
      push(unary("positive", 1, pop()));
      return;
    case Opcode::UnaryInvert:
      push(unary("bitwise_not", 2, pop()));
      return;
    case Opcode::UnaryNot: {
      bool t = truthy(pop());
      push(trace_.constant(PyRef::borrow(t ? Py_False : Py_True)));
      return;
    }
    case Opcode::ToBool: {
      bool t = truthy(pop());
      push(trace_.constant(PyRef::borrow(t ? Py_True : Py_False)));
      return;
    }
    case Opcode::PopJumpIfTrue:
    case Opcode::PopJumpIfFalse: {
      bool t = truthy(pop());
      if (t == (ins.op == Opcode::PopJumpIfTrue)) ip_ = ins.target;
      return;
    }
    case Opcode::PopJumpIfNone:
    case Opcode::PopJumpIfNotNone: {
      VarRef v = pop();
      PyObject* c = Trace::as_constant(*v);
      bool is_none = c == Py_None;
      if (is_none == (ins.op == Opcode::PopJumpIfNone)) ip_ = ins.target;
      return;
    }
    case Opcode::JumpIfTrueOrPop:
    case Opcode::JumpIfFalseOrPop: {
      bool t = truthy(peek());
      if (t == (ins.op == Opcode::JumpIfTrueOrPop)) {
        ip_ = ins.target;
      } else {
        pop();
      }
      return;
    }
    case Opcode::Jump:
      ip_ = ins.target;
      return;
    case Opcode::GetIter: {
      VarRef v = pop();
      if (v->kind == VarKind::Iterator) {
        push(v);
      } else {
        push(std::make_shared<IteratorVar>(iterate(v)));
      }
      return;
    }
    case Opcode::ForIter: {
      VarRef it = peek();
      if (it->kind != VarKind::Iterator) unsupported("FOR_ITER over a non-iterator");
      auto& iv = it->as<IteratorVar>();
      if (iv.position >= iv.items.size()) {
        pop();
        ip_ = ins.target;
      } else {
        push(iv.items[iv.position++]);
      }
      return;
    }
    case Opcode::BeforeWith: {
      VarRef ctx = pop();
      if (enter_python_context(ctx)) return;
      if (ctx->kind != VarKind::GradMode) unsupported("with-block over " + describe(*ctx) + " (only grad-mode contexts, nullcontext and classes with Python __enter__/__exit__ are supported)");
      const auto& mode = ctx->as<GradModeVar>();
      if (mode.autocast) {
        push(std::make_shared<GradModeExitVar>(trace_.autocast_enter(*mode.autocast)));
        push(ctx);  // torch.autocast's __enter__ returns the context
        return;
      }
      if (mode.null) {
        push(std::make_shared<GradModeExitVar>(false, /*restores=*/false));
        push(mode.enter_result ? mode.enter_result : trace_.none());
        return;
      }
      bool previous = mode.restores >= 0 ? mode.restores == 1 : trace_.grad_enabled;
      trace_.set_grad_enabled(mode.enabled);
      push(std::make_shared<GradModeExitVar>(previous));
      push(trace_.none());
      return;
    }
    case Opcode::WithExceptStart:
    case Opcode::PushExcInfo:
    case Opcode::PopExcept:
    case Opcode::Reraise:
    case Opcode::CheckExcMatch:
    case Opcode::RaiseVarargs:
      return exception_op(ins);
    case Opcode::LoadAssertionError:
      push(trace_.constant(PyRef::borrow(PyExc_AssertionError)));
      return;
    case Opcode::FormatSimple:
      push(format_value(pop(), nullptr));
      return;
    case Opcode::FormatWithSpec: {
      VarRef spec = pop();
      VarRef v = pop();
      push(format_value(v, spec));
      return;
    }
    case Opcode::ConvertValue:
      return step_convert_value(ins);
    case Opcode::ImportName: {
      VarRef fromlist = pop();
      VarRef level = pop();
      PyObject* fl = Trace::as_constant(*fromlist);
      PyObject* lv = Trace::as_constant(*level);
      if (!fl || !lv || !PyLong_Check(lv)) unsupported("import with a fromlist or level not known at trace time");
      std::string full = imported_name(str_of(name_at(ins.arg)), PyLong_AsLong(lv));
      PyObject* modules = PyImport_GetModuleDict();
      PyObject* mod = PyDict_GetItemString(modules, full.c_str());
      if (!mod) unsupported("import of a module that is not loaded yet (" + full + ")");
      if (fl == Py_None) {
        // `import a.b` binds the top package `a`.
        std::string top = full.substr(0, full.find('.'));
        PyObject* topmod = PyDict_GetItemString(modules, top.c_str());
        if (!topmod) unsupported("import of a module that is not loaded yet (" + top + ")");
        push(trace_.constant(PyRef::borrow(topmod)));
        return;
      }
      // `from m import n` imports a submodule n that m does not have yet: not done in the trace.
      if (!PyTuple_Check(fl)) unsupported("import with a fromlist that is not a tuple");
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fl); ++i) {
        PyObject* n = PyTuple_GET_ITEM(fl, i);
        if (!PyUnicode_Check(n) || str_of(n) == "*" || !PyObject_HasAttr(mod, n))
          unsupported("import of a module that is not loaded yet (" + full + "." + object_str(n) + ")");
      }
      push(trace_.constant(PyRef::borrow(mod)));
      return;
    }
    case Opcode::ImportFrom: {
      VarRef mod = peek();
      push(get_attr(mod, str_of(name_at(ins.arg))));
      return;
    }
    case Opcode::ReturnGenerator:
      if (!yields_) unsupported("generator code outside an inlined generator");
      push(trace_.none());  // the value the first resumption sends
      return;
    case Opcode::YieldValue:
      if (!yields_) unsupported("yield outside an inlined generator");
      yields_->push_back(pop());
      push(trace_.none());  // the value sent back: next() sends None
      return;
    case Opcode::GetLen:
      push(length(peek()));
      return;
    case Opcode::LoadName:
      unsupported("module-level code (LOAD_NAME)");
    case Opcode::Unsupported:
      unsupported(std::string("unsupported bytecode ") + ins.opname);
  }
  unsupported(std::string("unhandled instruction ") + bytecode::opcode_name(ins.op));
}

std::string Interpreter::imported_name(const std::string& name, long level) const {
  if (level == 0) return name;
  // A relative import resolves against the importing module's package, as importlib's
  // _resolve_name does: `level` dots drop level - 1 trailing parts of __package__.
  PyObject* package = PyDict_GetItemString(globals_.dict, "__package__");
  if (!package || !PyUnicode_Check(package) || PyUnicode_GetLength(package) == 0)
    unsupported("relative import in a module without __package__");
  std::string base = str_of(package);
  for (long i = 1; i < level; ++i) {
    size_t dot = base.rfind('.');
    if (dot == std::string::npos) unsupported("relative import beyond the top-level package");
    base.resize(dot);
  }
  return name.empty() ? base : base + "." + name;
}

SourceRef Interpreter::module_global_source(PyObject* globals, const std::string& name) {
  PyObject* module_name = PyDict_GetItemString(globals, "__name__");
  if (!module_name || !PyUnicode_Check(module_name)) return nullptr;
  PyRef module = PyRef::steal(PyImport_GetModule(module_name));
  if (!module) {
    PyErr_Clear();
    return nullptr;
  }
  if (!PyModule_Check(module.get()) || PyModule_GetDict(module.get()) != globals) return nullptr;
  return Source::dict_item(Source::attr(Source::module(str_of(module_name)), "__dict__"), name);
}

VarRef Interpreter::load_global(const std::string& name) {
  if (VarRef v = trace_.effects.global(globals_.dict, name)) return v;
  PyRef key = PyRef::steal(PyUnicode_FromStringAndSize(name.data(), name.size()));
  PyObject* value = PyDict_GetItemWithError(globals_.dict, key.get());
  if (value) {
    SourceRef src;
    if (globals_.dict == trace_.frame.globals) {
      src = Source::global(name);
    } else if (globals_.base) {
      src = Source::dict_item(globals_.base, name);
    } else if ((!object_model::is_builtin_instance(value) && !PyType_Check(value)) || PyDict_CheckExact(value) ||
               PyList_CheckExact(value)) {
      // An object of library code inlined without a source for its function (logger, registries,
      // context holders, plain dicts and lists that the library mutates): read through its
      // module, so what the trace reads is guarded and writes can be replayed. Functions, classes
      // and immutable constants stay unguarded (library code does not rebind them).
      src = module_global_source(globals_.dict, name);
    }
    return src ? trace_.wrap(value, src) : trace_.constant(PyRef::borrow(value));
  }
  if (PyErr_Occurred()) throw PythonError();
  PyObject* builtins = trace_.frame.builtins;
  if (PyModule_Check(builtins)) builtins = PyModule_GetDict(builtins);
  value = PyDict_GetItemWithError(builtins, key.get());
  if (!value) {
    if (PyErr_Occurred()) throw PythonError();
    unsupported("name '" + name + "' is not defined");
  }
  return trace_.constant(PyRef::borrow(value));
}

}  // namespace ember::frontend
