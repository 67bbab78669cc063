// disassemble() and assemble() (assembler.h): raw CPython instructions to and from co_code,
// co_linetable, co_exceptiontable and co_stacksize.
//
// Needs: the GIL (disassemble reads the code object; assemble asks CPython for stack effects) and
// the running interpreter's opcode table (opcode_table.h), the single source of opcode numbers,
// cache counts, jump directions and block ends. Guarantees: assemble(disassemble(c)) is
// byte-identical to c's tables for code CPython compiled (tests/bytecode/test_assembler.py checks
// the standard library), and every edited list either assembles into code CPython accepts or is
// refused with std::invalid_argument naming the instruction.
//
// Why the layout iterates: an argument over 255 needs EXTENDED_ARG prefixes, which move every later
// instruction, which can lengthen other jumps. Sizes only ever grow (a jump's distance is a sum of
// sizes), so iterating from "no prefixes" reaches the smallest fixpoint, the one CPython reaches.
#include "frontend/bytecode/assembler.h"

#include <algorithm>
#include <climits>
#include <stdexcept>

#include "frontend/bytecode/code_tables.h"
#include "frontend/bytecode/opcode_table.h"

namespace ember::bytecode {
namespace {

using detail::OpcodeEntry;
using detail::OpcodeTable;

// A bytes attribute of a code object (new reference held for the view's lifetime).
struct BytesView {
  PyRef obj;
  const uint8_t* data = nullptr;
  size_t size = 0;
};

BytesView read_bytes(PyCodeObject* code, PyObject* owned, const char* what) {
  BytesView v;
  v.obj = PyRef::steal(owned);
  if (!v.obj) detail::throw_python_error(std::string("disassemble: cannot read ") + what);
  if (!PyBytes_Check(v.obj.get())) detail::throw_malformed(code, std::string(what) + " is not bytes");
  v.data = reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(v.obj.get()));
  v.size = static_cast<size_t>(PyBytes_GET_SIZE(v.obj.get()));
  return v;
}

int read_int_attr(PyCodeObject* code, const char* name) {
  PyRef value = PyRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), name));
  if (!value) detail::throw_python_error(std::string("disassemble: cannot read ") + name);
  long v = PyLong_AsLong(value.get());
  if (v == -1 && PyErr_Occurred()) detail::throw_python_error(std::string("disassemble: ") + name);
  return static_cast<int>(v);
}

// Number of EXTENDED_ARG prefixes an argument needs.
int prefixes_for(uint32_t arg) {
  if (arg > 0xFFFFFFu) return 3;
  if (arg > 0xFFFFu) return 2;
  if (arg > 0xFFu) return 1;
  return 0;
}

std::string describe(const OpcodeTable& t, const std::vector<RawInstruction>& ins, size_t i) {
  std::string name = "?";
  int op = ins[i].opcode;
  if (op >= 0 && op < 256) name = t.names[op];
  return "instruction " + std::to_string(i) + " (" + name + ")";
}

[[noreturn]] void refuse(const OpcodeTable& t, const std::vector<RawInstruction>& ins, size_t i, const std::string& what) {
  throw std::invalid_argument("assemble: " + describe(t, ins, i) + " " + what);
}

// 3.12+: FOR_ITER lands on END_FOR (3.13: END_FOR, POP_TOP), which its specialised forms skip.
bool for_iter_target_ok(const OpcodeTable& t, const std::vector<RawInstruction>& ins, size_t target) {
  if (t.for_iter_skip >= 1 && ins[target].opcode != t.end_for_opcode) return false;
  if (t.for_iter_skip >= 2 && (target + 1 >= ins.size() || ins[target + 1].opcode != t.pop_top_opcode)) return false;
  return true;
}

// The opcode each instruction is written with: the given one, or its other-direction variant when
// the target lies the other way (3.11's forward/backward pairs, JUMP_FORWARD/JUMP_BACKWARD).
std::vector<int> choose_opcodes(const OpcodeTable& t, const RawCode& raw) {
  const auto& ins = raw.instructions;
  std::vector<int> ops(ins.size());
  for (size_t i = 0; i < ins.size(); ++i) {
    int op = ins[i].opcode;
    if (op < 0 || op > 255 || !t.entries[op].defined) refuse(t, ins, i, "has an opcode the running interpreter does not define: " + std::to_string(op));
    const OpcodeEntry& e = t.entries[op];
    if (op == t.cache_opcode || op == t.extended_arg_opcode) refuse(t, ins, i, "is written by the assembler itself; it cannot be listed");
    if (ins[i].arg < 0) refuse(t, ins, i, "has a negative argument " + std::to_string(ins[i].arg) + " (arguments are 32-bit unsigned)");
    if (!e.relative_jump) {
      if (ins[i].target != -1) refuse(t, ins, i, "has a target but does not jump");
      ops[i] = op;
      continue;
    }
    int target = ins[i].target;
    if (target < 0 || static_cast<size_t>(target) >= ins.size()) {
      refuse(t, ins, i, target < 0 ? "jumps but has no target" : "jumps to instruction " + std::to_string(target) + ", past the end (" + std::to_string(ins.size()) + " instructions)");
    }
    bool backward = static_cast<size_t>(target) <= i;
    if (backward == e.backward) {
      ops[i] = op;
    } else if (e.flipped >= 0) {
      ops[i] = e.flipped;
    } else {
      refuse(t, ins, i, std::string("jumps ") + (backward ? "backward" : "forward") + " to instruction " + std::to_string(target) +
                            " but only jumps " + (e.backward ? "backward" : "forward") + " and has no other-direction variant");
    }
    if (e.rule == detail::Rule::ForIter && !for_iter_target_ok(t, ins, static_cast<size_t>(target))) {
      refuse(t, ins, i, "must jump to END_FOR" + std::string(t.for_iter_skip >= 2 ? " followed by POP_TOP" : "") +
                            " (specialised FOR_ITERs skip it), not to instruction " + std::to_string(target));
    }
  }
  return ops;
}

struct Layout {
  std::vector<uint32_t> args;   // as written (jump arguments resolved)
  std::vector<int> prefixes;    // EXTENDED_ARG count per instruction
  std::vector<size_t> start;    // code unit of each instruction's first prefix; start[n] = code size
};

Layout lay_out(const OpcodeTable& t, const RawCode& raw, const std::vector<int>& ops) {
  const auto& ins = raw.instructions;
  size_t n = ins.size();
  Layout l;
  l.args.resize(n);
  l.prefixes.assign(n, 0);
  l.start.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    if (!t.entries[ops[i]].relative_jump) {
      l.args[i] = static_cast<uint32_t>(ins[i].arg);
      l.prefixes[i] = prefixes_for(l.args[i]);
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; ++i) l.start[i + 1] = l.start[i] + l.prefixes[i] + 1 + t.entries[ops[i]].caches;
    for (size_t i = 0; i < n; ++i) {
      const OpcodeEntry& e = t.entries[ops[i]];
      if (!e.relative_jump) continue;
      size_t next = l.start[i + 1];  // counted from the unit after the caches
      size_t target = l.start[static_cast<size_t>(ins[i].target)];
      l.args[i] = static_cast<uint32_t>(e.backward ? next - target : target - next);
      int need = prefixes_for(l.args[i]);
      if (need > l.prefixes[i]) {
        l.prefixes[i] = need;
        changed = true;
      }
    }
  }
  return l;
}

std::string write_code(const OpcodeTable& t, const std::vector<int>& ops, const Layout& l) {
  std::string out;
  out.reserve(2 * l.start.back());
  auto unit = [&](int op, uint32_t arg) {
    out.push_back(static_cast<char>(op));
    out.push_back(static_cast<char>(arg & 0xFF));
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    uint32_t arg = l.args[i];
    for (int p = l.prefixes[i]; p > 0; --p) unit(t.extended_arg_opcode, arg >> (8 * p));
    unit(ops[i], arg);
    for (int c = 0; c < t.entries[ops[i]].caches; ++c) unit(t.cache_opcode, 0);
  }
  return out;
}

// 3.12+ merges a run of instructions with one position into one span (then cut into 8-unit
// entries); 3.11 writes each instruction's units on their own.
std::string write_locations(const OpcodeTable& t, const RawCode& raw, const Layout& l) {
  detail::LocationWriter w(raw.firstlineno);
  const auto& ins = raw.instructions;
  bool merge_runs = t.minor >= 12;
  size_t i = 0;
  while (i < ins.size()) {
    size_t j = i + 1;
    while (merge_runs && j < ins.size() && ins[j].position == ins[i].position) ++j;
    w.add(ins[i].position, static_cast<int>(l.start[j] - l.start[i]));
    i = j;
  }
  return w.take();
}

std::vector<ExceptionTableEntry> checked_exception_entries(const RawCode& raw) {
  const auto& ins = raw.instructions;
  int n = static_cast<int>(ins.size());
  std::vector<ExceptionTableEntry> entries;
  for (const ExceptionTableEntry& e : raw.exception_table) {
    std::string which = "assemble: exception entry [" + std::to_string(e.start) + ", " + std::to_string(e.end) + ") -> " + std::to_string(e.target);
    if (e.start < 0 || e.end > n || e.start > e.end) throw std::invalid_argument(which + " lies outside the " + std::to_string(n) + " instructions");
    if (e.target < 0 || e.target >= n) throw std::invalid_argument(which + ": the handler is not an instruction");
    if (e.depth < 0) throw std::invalid_argument(which + " has a negative depth");
    if (e.start < e.end) entries.push_back(e);
  }
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  std::vector<ExceptionTableEntry> merged;
  for (const ExceptionTableEntry& e : entries) {
    if (!merged.empty()) {
      ExceptionTableEntry& last = merged.back();
      if (e.start < last.end) {
        throw std::invalid_argument("assemble: exception entries [" + std::to_string(last.start) + ", " + std::to_string(last.end) + ") and [" +
                                    std::to_string(e.start) + ", " + std::to_string(e.end) + ") overlap");
      }
      if (e.start == last.end && e.target == last.target && e.depth == last.depth && e.lasti == last.lasti) {
        last.end = e.end;
        continue;
      }
    }
    merged.push_back(e);
  }
  return merged;
}

std::string write_exception_table(const std::vector<ExceptionTableEntry>& entries, const Layout& l) {
  std::string out;
  for (const ExceptionTableEntry& e : entries) {
    detail::RawHandler h;
    h.start = l.start[e.start];
    h.end = l.start[e.end];
    h.target = l.start[e.target];
    h.depth = static_cast<size_t>(e.depth);
    h.lasti = e.lasti;
    detail::write_exception_entry(out, h);
  }
  return out;
}

int stack_effect(const OpcodeTable& t, const std::vector<RawInstruction>& ins, size_t i, int op, uint32_t arg, bool jump) {
  // 3.11/3.12 report 0 for RETURN_GENERATOR (their compiler adds it after computing the depth),
  // but the resumed frame holds the value sent in, which the POP_TOP after it drops; 3.13 says 1.
  if (op == t.return_generator_opcode) return 1;
  int effect = PyCompile_OpcodeStackEffectWithJump(op, static_cast<int>(arg), jump ? 1 : 0);
  if (effect == INT_MAX) refuse(t, ins, i, "has no stack effect known to CPython for argument " + std::to_string(arg));
  return effect;
}

// Depth before each instruction by flow over fallthrough, jump and exception edges; returns the
// maximum reached anywhere (co_stacksize), at least the version's minimum (3.13 writes 1 for code
// that never pushes). Unreachable instructions are not visited, as in CPython.
int stack_size(const OpcodeTable& t, const RawCode& raw, const std::vector<int>& ops, const Layout& l,
               const std::vector<ExceptionTableEntry>& handlers) {
  const auto& ins = raw.instructions;
  size_t n = ins.size();
  int max_depth = t.min_stacksize;
  if (n == 0) return max_depth;
  std::vector<int> depth(n, -1);
  std::vector<size_t> work;
  auto reach = [&](size_t from, size_t to, int d, const char* how) {
    if (to >= n) refuse(t, ins, from, "falls through past the last instruction");
    max_depth = std::max(max_depth, d);
    if (depth[to] == -1) {
      depth[to] = d;
      work.push_back(to);
    } else if (depth[to] != d) {
      throw std::invalid_argument("assemble: stack depth differs between two paths into " + describe(t, ins, to) + ": " +
                                  std::to_string(depth[to]) + " and " + std::to_string(d) + " (" + how + " from " + describe(t, ins, from) + ")");
    }
  };
  // handler_of[i]: the exception entry covering instruction i, or -1.
  std::vector<int> handler_of(n, -1);
  for (size_t k = 0; k < handlers.size(); ++k) {
    for (int32_t i = handlers[k].start; i < handlers[k].end; ++i) handler_of[i] = static_cast<int>(k);
  }
  depth[0] = 0;
  work.push_back(0);
  while (!work.empty()) {
    size_t i = work.back();
    work.pop_back();
    int d = depth[i];
    const OpcodeEntry& e = t.entries[ops[i]];
    if (handler_of[i] >= 0) {
      const ExceptionTableEntry& h = handlers[handler_of[i]];
      if (d < h.depth) {
        refuse(t, ins, i, "has stack depth " + std::to_string(d) + " inside an exception entry that unwinds to depth " + std::to_string(h.depth));
      }
      reach(i, static_cast<size_t>(h.target), h.depth + (h.lasti ? 1 : 0) + 1, "exception edge");
    }
    int after = d + stack_effect(t, ins, i, ops[i], l.args[i], false);
    if (after < 0) refuse(t, ins, i, "pops more values than the stack holds (depth " + std::to_string(d) + ")");
    max_depth = std::max(max_depth, after);
    if (e.relative_jump) {
      int taken = d + stack_effect(t, ins, i, ops[i], l.args[i], true);
      if (taken < 0) refuse(t, ins, i, "pops more values than the stack holds when it jumps (depth " + std::to_string(d) + ")");
      reach(i, static_cast<size_t>(ins[i].target), taken, "jump");
    }
    if (!e.ends_block) reach(i, i + 1, after, "fallthrough");
  }
  return max_depth;
}

}  // namespace

RawCode disassemble(PyCodeObject* code) {
  if (code == nullptr) throw std::runtime_error("disassemble: null code object");
  const OpcodeTable& t = detail::running_opcode_table();
  PyObject* obj = reinterpret_cast<PyObject*>(code);
  BytesView bytes = read_bytes(code, PyCode_GetCode(code), "co_code");
  BytesView linetable = read_bytes(code, PyObject_GetAttrString(obj, "co_linetable"), "co_linetable");
  BytesView exceptiontable = read_bytes(code, PyObject_GetAttrString(obj, "co_exceptiontable"), "co_exceptiontable");
  if (bytes.size % 2 != 0) detail::throw_malformed(code, "co_code has an odd length");
  size_t units = bytes.size / 2;

  RawCode raw;
  raw.firstlineno = read_int_attr(code, "co_firstlineno");
  std::vector<Position> positions;
  std::vector<detail::RawHandler> handlers;
  try {
    positions = detail::read_locations(linetable.data, linetable.size, units, raw.firstlineno);
    handlers = detail::read_exception_table(exceptiontable.data, exceptiontable.size);
  } catch (const std::runtime_error& e) {
    detail::throw_malformed(code, e.what());
  }

  // index_at[u]: the instruction whose first unit is u, else -1; index_at[units] = count.
  std::vector<int32_t> index_at(units + 1, -1);
  std::vector<size_t> target_unit;
  const uint8_t* u = bytes.data;
  size_t i = 0;
  while (i < units) {
    size_t start = i;
    uint32_t arg = 0;
    int prefixes = 0;
    while (u[2 * i] == t.extended_arg_opcode) {
      if (++prefixes > 3) detail::throw_malformed(code, "more than three EXTENDED_ARG prefixes at offset " + std::to_string(2 * start));
      arg = (arg | u[2 * i + 1]) << 8;
      if (++i >= units) detail::throw_malformed(code, "EXTENDED_ARG at the end of the code");
    }
    int op = u[2 * i];
    const OpcodeEntry& e = t.entries[op];
    if (op == t.cache_opcode) detail::throw_malformed(code, "stray CACHE unit at offset " + std::to_string(2 * i));
    if (!e.defined) detail::throw_malformed(code, "undefined opcode " + std::to_string(op) + " at offset " + std::to_string(2 * i));
    arg |= u[2 * i + 1];
    size_t next = i + 1 + e.caches;
    if (next > units) detail::throw_malformed(code, std::string(e.name) + " at offset " + std::to_string(2 * i) + ": inline caches run past the end");
    RawInstruction ins;
    ins.opcode = op;
    ins.arg = static_cast<int>(arg);
    ins.position = positions[i];
    ins.offset = static_cast<int32_t>(2 * start);
    if (e.relative_jump) {
      long target = static_cast<long>(next) + (e.backward ? -static_cast<long>(arg) : static_cast<long>(arg));
      if (target < 0 || static_cast<size_t>(target) >= units) {
        detail::throw_malformed(code, std::string(e.name) + " at offset " + std::to_string(2 * i) + " jumps out of the code");
      }
      target_unit.push_back(static_cast<size_t>(target));
    } else {
      target_unit.push_back(SIZE_MAX);
    }
    index_at[start] = static_cast<int32_t>(raw.instructions.size());
    raw.instructions.push_back(ins);
    i = next;
  }
  index_at[units] = static_cast<int32_t>(raw.instructions.size());

  for (size_t k = 0; k < raw.instructions.size(); ++k) {
    if (target_unit[k] == SIZE_MAX) continue;
    int32_t target = index_at[target_unit[k]];
    if (target < 0) {
      detail::throw_malformed(code, t.names[raw.instructions[k].opcode] + " at offset " + std::to_string(raw.instructions[k].offset) +
                                        " jumps into the middle of an instruction");
    }
    raw.instructions[k].target = target;
  }
  for (const detail::RawHandler& h : handlers) {
    auto at = [&](size_t unit, const char* what) {
      if (unit > units || index_at[unit] < 0) {
        detail::throw_malformed(code, std::string("exception table ") + what + " at offset " + std::to_string(2 * unit) + " is not an instruction start");
      }
      return index_at[unit];
    };
    ExceptionTableEntry entry;
    entry.start = at(h.start, "start");
    entry.end = at(h.end, "end");
    entry.target = at(h.target, "handler");
    if (entry.target >= static_cast<int32_t>(raw.instructions.size())) detail::throw_malformed(code, "exception handler past the end of the code");
    entry.depth = static_cast<int32_t>(h.depth);
    entry.lasti = h.lasti;
    raw.exception_table.push_back(entry);
  }
  return raw;
}

Assembled assemble(const RawCode& raw) {
  const OpcodeTable& t = detail::running_opcode_table();
  std::vector<int> ops = choose_opcodes(t, raw);
  std::vector<ExceptionTableEntry> handlers = checked_exception_entries(raw);
  Layout l = lay_out(t, raw, ops);
  Assembled out;
  out.code = write_code(t, ops, l);
  out.linetable = write_locations(t, raw, l);
  out.exceptiontable = write_exception_table(handlers, l);
  out.stacksize = stack_size(t, raw, ops, l, handlers);
  return out;
}

int opcode_number(const char* name) { return detail::running_opcode_table().number_of(name); }

}  // namespace ember::bytecode
