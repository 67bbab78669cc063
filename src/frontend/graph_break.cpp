// Graph breaks: break ranges, liveness, and the glue and resume code (see graph_break.h).
#include "frontend/graph_break.h"

#include <algorithm>

#include "frontend/bytecode/assembler.h"
#include "frontend/code_cache.h"
#include "frontend/interp/trace.h"
#include "frontend/pyutil.h"

namespace ember::frontend {

using bytecode::Instruction;
using bytecode::Opcode;
using bytecode::RawCode;
using bytecode::RawInstruction;

namespace {

// What a breakable instruction does to the stack: it pops `pops` values and pushes `pushed[e]`
// along successor e (0: falls through, 1: jumps).
struct Shape {
  int pops = 0;
  int pushed[2] = {0, 0};
  bool falls = true;
  bool jumps = false;
};

std::optional<Shape> shape_of(const Instruction& ins) {
  auto simple = [](int pops, int pushes) {
    Shape s;
    s.pops = pops;
    s.pushed[0] = pushes;
    return s;
  };
  switch (ins.op) {
    case Opcode::Call:
      return simple(ins.arg + 2, 1);
    case Opcode::CallKw:
      return simple(ins.arg + 3, 1);
    case Opcode::CallFunctionEx:
      return simple(3 + (ins.arg & 1), 1);
    case Opcode::PopJumpIfTrue:
    case Opcode::PopJumpIfFalse:
    case Opcode::PopJumpIfNone:
    case Opcode::PopJumpIfNotNone: {
      Shape s = simple(1, 0);
      s.jumps = true;
      return s;
    }
    case Opcode::ToBool:
    case Opcode::UnaryNot:
    case Opcode::UnaryNegative:
    case Opcode::UnaryInvert:
    case Opcode::UnaryPositive:
    case Opcode::GetIter:
    case Opcode::LoadAttr:
    case Opcode::FormatSimple:
      return simple(1, 1);
    case Opcode::GetLen:
      return simple(1, 2);
    case Opcode::BinaryOp:
    case Opcode::CompareOp:
    case Opcode::ContainsOp:
    case Opcode::IsOp:
    case Opcode::BinarySubscr:
    case Opcode::FormatWithSpec:
    case Opcode::ImportName:
      return simple(2, 1);
    case Opcode::BinarySlice:
      return simple(3, 1);
    case Opcode::StoreAttr:
    case Opcode::DeleteSubscr:
    case Opcode::MapAdd:
      return simple(2, 0);
    case Opcode::ListAppend:
    case Opcode::ListExtend:
    case Opcode::SetAdd:
    case Opcode::SetUpdate:
    case Opcode::DictUpdate:
    case Opcode::DictMerge:
      return simple(1, 0);
    case Opcode::StoreSubscr:
      return simple(3, 0);
    case Opcode::StoreSlice:
      return simple(4, 0);
    case Opcode::UnpackSequence:
      return simple(1, ins.arg);
    case Opcode::UnpackEx:
      return simple(1, (ins.arg & 0xff) + (ins.arg >> 8) + 1);
    case Opcode::BeforeWith:
      return simple(1, 2);
    case Opcode::RaiseVarargs: {
      Shape s = simple(ins.arg, 0);
      s.falls = false;
      return s;
    }
    default:
      return std::nullopt;
  }
}

bool is_call_prefix(const Instruction& ins) {
  return ins.op == Opcode::KwNames || (ins.op == Opcode::Nop && std::string(ins.opname) == "PRECALL");
}

// Successor instruction indices of normalized instruction i (not counting exception edges).
std::vector<int> successors(const std::vector<Instruction>& code, size_t i) {
  const Instruction& ins = code[i];
  std::vector<int> out;
  switch (ins.op) {
    case Opcode::ReturnValue:
    case Opcode::ReturnConst:
    case Opcode::Reraise:
    case Opcode::RaiseVarargs:
      break;
    case Opcode::Jump:
      out.push_back(ins.target);
      break;
    default:
      if (i + 1 < code.size()) out.push_back(static_cast<int>(i + 1));
      if (ins.target >= 0) out.push_back(ins.target);
      break;
  }
  return out;
}

int opcode(const char* name) {
  int n = bytecode::opcode_number(name);
  if (n < 0) throw std::runtime_error(std::string("graph break: this CPython has no opcode ") + name);
  return n;
}

RawInstruction make(const char* name, int arg = 0, int target = -1) {
  RawInstruction r;
  r.opcode = opcode(name);
  r.arg = arg;
  r.target = target;
  return r;
}

PyRef py_str(const std::string& s) { return PyRef::steal(PyUnicode_FromStringAndSize(s.data(), s.size())); }

// A tuple of `names` followed by the items of `rest`.
PyRef prepend_names(const std::vector<std::string>& names, PyObject* rest) {
  Py_ssize_t n = static_cast<Py_ssize_t>(names.size());
  PyRef t = PyRef::steal(PyTuple_New(n + PyTuple_GET_SIZE(rest)));
  for (Py_ssize_t i = 0; i < n; ++i) PyTuple_SET_ITEM(t.get(), i, py_str(names[i]).release());
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(rest); ++i) {
    PyObject* item = PyTuple_GET_ITEM(rest, i);
    Py_INCREF(item);
    PyTuple_SET_ITEM(t.get(), n + i, item);
  }
  return t;
}

PyRef code_attr(PyObject* code, const char* name) {
  PyRef v = PyRef::steal(PyObject_GetAttrString(code, name));
  if (!v) throw PythonError();
  return v;
}

// Builds one glue or resume code object from the original code.
class CodeBuilder {
 public:
  CodeBuilder(const CodeInfo& info, const BreakCode& bc) : info_(info), bc_(bc) {
    code_ = reinterpret_cast<PyCodeObject*>(info.code.get());
  }

  // Glue: runs raw instructions [first, last] of the original, then returns per successor.
  PyRef glue(int first_norm, int last_norm) {
    std::vector<SlotKind> stack = bc_.lower;
    stack.insert(stack.end(), bc_.operands.begin(), bc_.operands.end());
    int max_pushed = std::max(bc_.pushed[0], bc_.pushed[1]);
    std::vector<std::string> temps;
    for (int k = 0; k < max_pushed; ++k) temps.push_back("__ember_result" + std::to_string(k));
    temps.push_back("__ember_discard");
    begin(stack, bc_.glue_locals, temps);
    int first = raw_index(first_norm), last = raw_index(last_norm);
    const Instruction& breaking = info_.decoded.instructions[last_norm];
    bool jumps = src_.instructions[last].target >= 0;
    bool falls = breaking.op != Opcode::RaiseVarargs;
    std::vector<RawInstruction> epilogues[2];
    for (int e = 0; e < 2; ++e) {
      if ((e == 0 && !falls) || (e == 1 && !jumps)) continue;
      epilogues[e] = epilogue(e);
    }
    // Layout: prefix, prologue (jump to `first`), body with the breaking instruction's exits sent
    // to the epilogues, epilogues.
    emit_prefix_and_prologue(stack, bc_.glue_locals, first);
    int epilogue_at[2] = {-1, -1};
    std::vector<std::pair<size_t, int>> to_epilogue;  // (index in out_, epilogue)
    for (size_t i = resume_index_ + 1; i < src_.instructions.size(); ++i) {
      emit_original(i);
      if (static_cast<int>(i) == last) {
        if (jumps) to_epilogue.emplace_back(out_.instructions.size() - 1, 1);
        if (falls) {
          out_.instructions.push_back(make("JUMP_FORWARD"));
          to_epilogue.emplace_back(out_.instructions.size() - 1, 0);
        }
      }
    }
    body_end_ = static_cast<int>(out_.instructions.size());
    for (int e = 0; e < 2; ++e) {
      if (epilogues[e].empty()) continue;
      epilogue_at[e] = static_cast<int>(out_.instructions.size());
      out_.instructions.insert(out_.instructions.end(), epilogues[e].begin(), epilogues[e].end());
    }
    resolve_targets();
    for (auto& [at, e] : to_epilogue) out_.instructions[at].target = epilogue_at[e];
    return finish("<break at line " + std::to_string(breaking.line) + ">", /*glue=*/true);
  }

  // Resume: continues at raw instruction `target` of the original with `stack` rebuilt.
  PyRef resume(const std::vector<SlotKind>& stack, const std::vector<int>& locals, int target_norm,
               BreakCodeCache::Origin* origin) {
    begin(stack, locals, {});
    int target = raw_index(target_norm);
    emit_prefix_and_prologue(stack, locals, target);
    for (size_t i = resume_index_ + 1; i < src_.instructions.size(); ++i) emit_original(i);
    body_end_ = static_cast<int>(out_.instructions.size());
    resolve_targets();
    int line = info_.decoded.instructions[target_norm].line;
    PyRef code = finish("<resume at line " + std::to_string(line) + ">", /*glue=*/false);
    map_origin(code, origin);
    return code;
  }

 private:
  void begin(const std::vector<SlotKind>& stack, const std::vector<int>& locals, const std::vector<std::string>& temps) {
    // The code's first argument keeps slot 0 and stays the first argument: zero-argument super()
    // reads `self` from there. The new names go after it.
    keep_first_ = code_->co_argcount > 0;
    args_.clear();
    if (keep_first_) args_.push_back(info_.localsplus_names[0]);
    for (size_t i = 0; i < stack.size(); ++i)
      if (stack[i] != SlotKind::Null) args_.push_back("__ember_stack" + std::to_string(i));
    // Argument names must differ from the code's own names: the passed locals get a prefix.
    for (int s : locals) args_.push_back("__ember_local_" + info_.localsplus_names[s]);
    names_ = args_;
    names_.insert(names_.end(), temps.begin(), temps.end());
    int first = keep_first_ ? 1 : 0;
    shift_ = static_cast<int>(names_.size()) - first;
    src_ = bytecode::disassemble(code_);
    bytecode::shift_local_slots(src_, shift_, first);
    resume_index_ = -1;
    raw_at_offset_.clear();
    for (size_t i = 0; i < src_.instructions.size(); ++i) {
      raw_at_offset_.emplace(src_.instructions[i].offset, static_cast<int>(i));
      if (resume_index_ < 0 && src_.instructions[i].opcode == opcode("RESUME")) resume_index_ = static_cast<int>(i);
    }
    if (resume_index_ < 0) throw std::runtime_error("graph break: code without RESUME");
    out_ = RawCode();
    out_.firstlineno = src_.firstlineno;
    newpos_.assign(src_.instructions.size(), -1);
    temp_base_ = static_cast<int>(args_.size());
  }

  // Index of the raw instruction at a normalized instruction's offset.
  int raw_index(int norm) const {
    uint32_t off = info_.decoded.instructions.at(norm).offset;
    auto it = raw_at_offset_.find(static_cast<int32_t>(off));
    if (it == raw_at_offset_.end())
      throw std::runtime_error("graph break: no raw instruction at offset " + std::to_string(off));
    return it->second;
  }

  void emit_original(size_t i) {
    newpos_[i] = static_cast<int>(out_.instructions.size());
    out_.instructions.push_back(src_.instructions[i]);
  }

  void emit_prefix_and_prologue(const std::vector<SlotKind>& stack, const std::vector<int>& locals, int jump_to) {
    for (int i = 0; i <= resume_index_; ++i) emit_original(i);
    int arg = keep_first_ ? 1 : 0;
    for (SlotKind k : stack) {
      switch (k) {
        case SlotKind::Null:
          out_.instructions.push_back(make("PUSH_NULL"));
          break;
        case SlotKind::Value:
          out_.instructions.push_back(make("LOAD_FAST", arg++));
          break;
        case SlotKind::Iterator:
          out_.instructions.push_back(make("LOAD_FAST", arg++));
          out_.instructions.push_back(make("GET_ITER"));
          break;
      }
    }
    if (bc_.first_deleted) out_.instructions.push_back(make("DELETE_FAST", 0));
    for (int s : locals) {
      // A cell variable's cell object replaces the fresh cell MAKE_CELL put in its slot.
      out_.instructions.push_back(make("LOAD_FAST", arg++));
      out_.instructions.push_back(make("STORE_FAST", keep_first_ && s == 0 ? 0 : s + shift_));
    }
    prologue_jump_ = static_cast<int>(out_.instructions.size());
    out_.instructions.push_back(make("JUMP_FORWARD"));
    jump_to_ = jump_to;
  }

  // Stores the pushed values in temps, drops the rest of the stack, returns the tuple.
  std::vector<RawInstruction> epilogue(int e) {
    std::vector<RawInstruction> out;
    int pushed = bc_.pushed[e];
    for (int k = pushed - 1; k >= 0; --k) out.push_back(make("STORE_FAST", temp_base_ + k));
    int discard = temp_base_ + static_cast<int>(names_.size() - args_.size()) - 1;
    for (auto it = bc_.lower.rbegin(); it != bc_.lower.rend(); ++it) {
      // A NULL cannot be popped (POP_TOP decrefs it); storing it in a local is safe.
      out.push_back(*it == SlotKind::Null ? make("STORE_FAST", discard) : make("POP_TOP"));
    }
    out.push_back(make("LOAD_CONST", const_index(0)));
    out.push_back(make("LOAD_CONST", const_index(1 + e)));
    for (int k = 0; k < pushed; ++k) out.push_back(make("LOAD_FAST", temp_base_ + k));
    out.push_back(make("BUILD_TUPLE", 2 + pushed));
    out.push_back(make("RETURN_VALUE"));
    return out;
  }

  // Index in the new co_consts of the glue's extra constants: 0 the marker, 1 and 2 the ints 0 and 1.
  int const_index(int k) const {
    return static_cast<int>(PyTuple_GET_SIZE(reinterpret_cast<PyObject*>(code_->co_consts))) + k;
  }

  void resolve_targets() {
    for (size_t i = 0; i < out_.instructions.size(); ++i) {
      RawInstruction& r = out_.instructions[i];
      if (r.target >= 0 && r.offset >= 0) r.target = newpos_.at(r.target);
    }
    out_.instructions[prologue_jump_].target = newpos_.at(jump_to_);
    for (const auto& e : src_.exception_table) {
      bytecode::ExceptionTableEntry n = e;
      n.start = newpos_.at(e.start);
      n.end = e.end < static_cast<int>(newpos_.size()) ? newpos_.at(e.end) : body_end_;
      n.target = newpos_.at(e.target);
      out_.exception_table.push_back(n);
    }
  }

  PyRef finish(const std::string& suffix, bool glue) {
    bytecode::CodeChanges ch;
    ch.argcount = static_cast<int>(args_.size());
    ch.posonlyargcount = 0;
    ch.kwonlyargcount = 0;
    ch.flags = code_->co_flags & ~(CO_VARARGS | CO_VARKEYWORDS);
    PyRef varnames = code_attr(info_.code.get(), "co_varnames");
    if (keep_first_) {
      varnames = PyRef::steal(PyTuple_GetSlice(varnames.get(), 1, PyTuple_GET_SIZE(varnames.get())));
      if (!varnames) throw PythonError();
    }
    ch.varnames = prepend_names(names_, varnames.get());
    ch.qualname = info_.name + "." + suffix;
    if (glue) {
      PyObject* consts = code_->co_consts;
      Py_ssize_t n = PyTuple_GET_SIZE(consts);
      ch.consts = PyRef::steal(PyTuple_New(n + 3));
      for (Py_ssize_t i = 0; i < n; ++i) {
        Py_INCREF(PyTuple_GET_ITEM(consts, i));
        PyTuple_SET_ITEM(ch.consts.get(), i, PyTuple_GET_ITEM(consts, i));
      }
      PyObject* m = BreakCodeCache::marker();
      Py_INCREF(m);
      PyTuple_SET_ITEM(ch.consts.get(), n, m);
      PyTuple_SET_ITEM(ch.consts.get(), n + 1, PyLong_FromLong(0));
      PyTuple_SET_ITEM(ch.consts.get(), n + 2, PyLong_FromLong(1));
    }
    PyRef code = bytecode::make_code(code_, out_, ch);
    if (!code) throw PythonError();
    if (glue && !mark_generated_code(reinterpret_cast<PyCodeObject*>(code.get()))) throw PythonError();
    return code;
  }

  // Resume normalized index -> original normalized index, through the raw instructions' offsets.
  void map_origin(const PyRef& code, BreakCodeCache::Origin* origin) {
    RawCode made = bytecode::disassemble(reinterpret_cast<PyCodeObject*>(code.get()));
    if (made.instructions.size() != out_.instructions.size())
      throw std::runtime_error("graph break: the assembled resume code has a different instruction count");
    std::unordered_map<int32_t, int32_t> to_original;
    for (size_t i = 0; i < made.instructions.size(); ++i)
      to_original.emplace(made.instructions[i].offset, out_.instructions[i].offset);
    bytecode::DecodedCode decoded = bytecode::decode(reinterpret_cast<PyCodeObject*>(code.get()));
    origin->original = code_;
    origin->slot_shift = shift_;
    origin->first_in_place = keep_first_;
    int32_t prev_offset = -1;
    int same = 0;
    for (size_t r = 0; r < decoded.instructions.size(); ++r) {
      int32_t off = static_cast<int32_t>(decoded.instructions[r].offset);
      same = off == prev_offset ? same + 1 : 0;
      prev_offset = off;
      auto it = to_original.find(off);
      if (it == to_original.end() || it->second < 0) continue;
      origin->index[static_cast<int>(r)] = info_.decoded.index_at_offset(static_cast<uint32_t>(it->second)) + same;
    }
  }

  const CodeInfo& info_;
  const BreakCode& bc_;
  PyCodeObject* code_ = nullptr;
  std::vector<std::string> args_, names_;
  int shift_ = 0, temp_base_ = 0;
  bool keep_first_ = false;
  RawCode src_, out_;
  std::unordered_map<int32_t, int> raw_at_offset_;  // src_ byte offset -> index, set by begin()
  int resume_index_ = -1;
  std::vector<int> newpos_;
  int prologue_jump_ = -1, jump_to_ = -1, body_end_ = 0;
};

std::string layout_key(const std::vector<SlotKind>& stack) {
  std::string k;
  for (SlotKind s : stack) k += s == SlotKind::Null ? 'n' : s == SlotKind::Value ? 'v' : 'i';
  return k;
}

}  // namespace

std::optional<BreakRange> break_range(const CodeInfo& info, int failed) {
  const auto& code = info.decoded.instructions;
  if (failed < 0 || failed >= static_cast<int>(code.size()) || !shape_of(code[failed])) return std::nullopt;
  BreakRange r{failed, failed};
  if (code[failed].op == Opcode::Call) {
    while (r.first > 0 && is_call_prefix(code[r.first - 1])) --r.first;
  }
  return r;
}

std::string unbreakable_reason(const CodeInfo& info, int failed) {
  const auto& code = info.decoded.instructions;
  if (failed < 0 || failed >= static_cast<int>(code.size())) return "the frame cannot be split outside an instruction";
  return std::string("the frame cannot be split at ") + code[failed].opname;
}

std::vector<std::vector<bool>> live_locals(const CodeInfo& info) {
  const auto& code = info.decoded.instructions;
  size_t n = code.size(), nslots = info.localsplus_names.size();
  std::vector<std::vector<bool>> live(n + 1, std::vector<bool>(nslots, false));
  // Handlers reachable from each instruction.
  std::vector<std::vector<int>> handlers(n);
  for (const auto& e : info.decoded.exception_table)
    for (int i = e.start; i < e.end && i < static_cast<int>(n); ++i) handlers[i].push_back(e.target);
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t k = n; k-- > 0;) {
      std::vector<bool> out(nslots, false);
      for (int s : successors(code, k))
        for (size_t j = 0; j < nslots; ++j) out[j] = out[j] || live[s][j];
      for (int h : handlers[k])
        for (size_t j = 0; j < nslots; ++j) out[j] = out[j] || live[h][j];
      const Instruction& ins = code[k];
      switch (ins.op) {
        case Opcode::StoreFast:
        case Opcode::DeleteFast:
          out[ins.arg] = false;
          break;
        case Opcode::LoadFast:
        case Opcode::LoadFastAndClear:
          out[ins.arg] = true;
          break;
        default:
          break;
      }
      if (out != live[k]) {
        live[k] = std::move(out);
        changed = true;
      }
    }
  }
  // Cells (a closure may read them at any time).
  for (size_t j = 0; j < nslots; ++j)
    if (info.cell[j])
      for (auto& row : live) row[j] = true;
  return live;
}

PyObject* BreakCodeCache::marker() {
  static PyObject* m = PyObject_CallNoArgs(reinterpret_cast<PyObject*>(&PyBaseObject_Type));
  return m;
}

const BreakCodeCache::Origin* BreakCodeCache::origin(PyCodeObject* code) const {
  auto it = origins_.find(reinterpret_cast<PyObject*>(code));
  return it == origins_.end() ? nullptr : &it->second;
}

const BreakCode& BreakCodeCache::get(const CodeInfo& original, BreakRange range, const std::vector<SlotKind>& stack,
                                     const std::vector<bool>& bound) {
  const auto& code = original.decoded.instructions;
  const Instruction& breaking = code.at(range.last);
  std::optional<Shape> shape = shape_of(breaking);
  if (!shape) throw Unsupported(unbreakable_reason(original, range.last));
  if (static_cast<int>(stack.size()) < shape->pops) throw Unsupported("graph break: the stack is shallower than the instruction needs");
  if (!original.live) original.live = live_locals(original);
  const std::vector<std::vector<bool>>& live = *original.live;
  int first_free = static_cast<int>(original.localsplus_names.size()) - original.nfree;
  bool first_in_place = reinterpret_cast<PyCodeObject*>(original.code.get())->co_argcount > 0;
  bool first_plain = first_in_place && !original.cell[0] && bound[0];
  bool first_deleted = first_in_place && !original.cell[0] && !bound[0];
  // Slot 0 in place is not among the locals, except a cell's cell object (see graph_break.h).
  auto passed = [&](int at) {
    std::vector<int> slots;
    for (int s = 0; s < first_free; ++s)
      if (bound[s] && live[at][s] && !(first_in_place && s == 0 && !original.cell[0])) slots.push_back(s);
    return slots;
  };
  std::string code_id = std::to_string(reinterpret_cast<uintptr_t>(original.code.get()));
  std::string key = code_id + ":" + std::to_string(range.first) + ":" + std::to_string(range.last) + ":" +
                    layout_key(stack) + (first_deleted ? ":d:" : ":");
  for (int s : passed(range.first)) key += std::to_string(s) + ",";
  if (auto it = codes_.find(key); it != codes_.end()) return *it->second;

  auto bc = std::make_unique<BreakCode>();
  bc->qualname = original.name;
  bc->first_in_place = first_in_place;
  bc->first_plain = first_plain;
  bc->first_deleted = first_deleted;
  size_t nlower = stack.size() - shape->pops;
  bc->lower.assign(stack.begin(), stack.begin() + nlower);
  bc->operands.assign(stack.begin() + nlower, stack.end());
  for (SlotKind k : bc->operands)
    if (k == SlotKind::Iterator) throw Unsupported("graph break at an instruction that consumes a loop's iterator");
  bc->pushed[0] = shape->pushed[0];
  bc->pushed[1] = shape->pushed[1];
  bc->glue_locals = passed(range.first);
  int succ[2] = {shape->falls ? range.last + 1 : -1, shape->jumps ? breaking.target : -1};
  CodeBuilder builder(original, *bc);
  bc->glue = builder.glue(range.first, range.last);
  for (int e = 0; e < 2; ++e) {
    if (succ[e] < 0 || succ[e] >= static_cast<int>(code.size())) continue;
    bc->resume_locals[e] = passed(succ[e]);
    std::vector<SlotKind> layout = bc->lower;
    layout.insert(layout.end(), bc->pushed[e], SlotKind::Value);
    // Breaks that continue at one instruction with one stack layout and the same locals share
    // the resume code, and so its cache entries: a `while` loop's test at the top and its copy at
    // the bottom both continue at the body's start (and at the loop's exit).
    std::string resume_key = code_id + ":" + std::to_string(succ[e]) + ":" + layout_key(layout) + (first_deleted ? ":d:" : ":");
    for (int s : bc->resume_locals[e]) resume_key += std::to_string(s) + ",";
    if (auto it = resumes_.find(resume_key); it != resumes_.end()) {
      bc->resume[e] = it->second;
      continue;
    }
    Origin origin;
    bc->resume[e] = builder.resume(layout, bc->resume_locals[e], succ[e], &origin);
    origins_.emplace(bc->resume[e].get(), std::move(origin));
    resumes_.emplace(resume_key, bc->resume[e]);
  }
  return *(codes_[key] = std::move(bc));
}

}  // namespace ember::frontend
