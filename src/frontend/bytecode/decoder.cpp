// Decodes one code object into Ember's normalized instructions (instruction.h, ops.def).
//
// Needs: the GIL, and the running interpreter's opcode table (opcode_table.h). Guarantees: every
// real CPython instruction becomes one Instruction (two for 3.13 fused fast-local ops and for a
// 3.11/3.12 FORMAT_VALUE with a conversion), in code order; CACHE units are skipped and
// EXTENDED_ARG folded; jump targets and the exception table are instruction indices; each
// instruction carries the source line of its opcode unit. The bytes come from PyCode_GetCode, the
// de-optimised copy: the in-memory one holds specialised and instrumented opcodes.
//
// Python is touched only to fetch co_code, co_linetable, co_exceptiontable and co_firstlineno; the
// tables are parsed in C++ (code_tables.cpp) so decoding costs no Python call per instruction.
#include "frontend/bytecode/code_tables.h"
#include "frontend/bytecode/instruction.h"
#include "frontend/bytecode/opcode_table.h"

#include <stdexcept>
#include <string>

namespace ember::bytecode {
namespace {

using detail::OpcodeEntry;
using detail::OpcodeTable;
using detail::Rule;

[[noreturn]] void malformed(PyCodeObject* code, const std::string& what) { detail::throw_malformed(code, what); }

// A bytes attribute of the code object, kept alive for the duration of decode().
struct BytesAttr {
  PyObject* obj = nullptr;
  const uint8_t* data = nullptr;
  size_t size = 0;
  BytesAttr(PyObject* owned, const char* what) : obj(owned) {
    if (obj == nullptr) detail::throw_python_error(std::string("decode: cannot read ") + what);
    if (!PyBytes_Check(obj)) {
      Py_DECREF(obj);
      throw std::runtime_error(std::string("decode: ") + what + " is not bytes");
    }
    data = reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(obj));
    size = static_cast<size_t>(PyBytes_GET_SIZE(obj));
  }
  BytesAttr(const BytesAttr&) = delete;
  BytesAttr& operator=(const BytesAttr&) = delete;
  ~BytesAttr() { Py_XDECREF(obj); }
};

class Decoder {
 public:
  Decoder(PyCodeObject* code, const OpcodeTable& table, const BytesAttr& bytes)
      : code_(code), t_(table), units_(bytes.data), n_(bytes.size / 2) {
    if (bytes.size % 2 != 0) malformed(code_, "co_code has an odd length");
  }

  DecodedCode run(const std::vector<int32_t>& lines) {
    DecodedCode out;
    out.instructions.reserve(n_);
    out.unit_index.assign(n_, -1);
    size_t i = 0;
    while (i < n_) {
      size_t start = i;
      uint32_t ext = 0;
      int prefixes = 0;
      while (entry(i).rule == Rule::ExtendedArg) {
        if (++prefixes > 3) malformed(code_, "more than three EXTENDED_ARG prefixes at offset " + std::to_string(2 * start));
        ext = (ext | arg_byte(i)) << 8;
        if (++i >= n_) malformed(code_, "EXTENDED_ARG at the end of the code");
      }
      const OpcodeEntry& e = entry(i);
      if (e.rule == Rule::Cache) malformed(code_, "stray CACHE unit at offset " + std::to_string(2 * i));
      uint32_t arg = e.has_arg ? (ext | arg_byte(i)) : 0;
      size_t next = i + 1 + e.caches;
      if (next > n_) malformed(code_, std::string(e.name) + " at offset " + std::to_string(2 * i) + ": inline caches run past the end");
      int32_t first = static_cast<int32_t>(out.instructions.size());
      Instruction ins;
      ins.offset = static_cast<uint32_t>(2 * start);
      ins.line = lines[i];
      ins.opname = e.name;
      emit(out.instructions, e, ins, arg, i, next);
      for (size_t u = start; u <= i; ++u) out.unit_index[u] = first;
      for (size_t u = i + 1; u < next; ++u) out.unit_index[u] = static_cast<int32_t>(out.instructions.size());
      i = next;
    }
    resolve_jumps(out);
    return out;
  }

  // Instruction index of a code unit that must start an instruction (a jump or handler target).
  static int32_t index_of_start(const DecodedCode& d, size_t unit) {
    if (unit >= d.unit_index.size()) return -1;
    int32_t index = d.unit_index[unit];
    if (index < 0 || static_cast<size_t>(index) >= d.instructions.size()) return -1;
    return d.instructions[index].offset == 2 * unit ? index : -1;
  }

 private:
  const OpcodeEntry& entry(size_t unit) const { return t_.entries[units_[2 * unit]]; }
  uint32_t arg_byte(size_t unit) const { return units_[2 * unit + 1]; }

  void emit(std::vector<Instruction>& out, const OpcodeEntry& e, Instruction ins, uint32_t raw, size_t unit, size_t next) {
    int32_t arg = static_cast<int32_t>(raw);
    ins.op = e.op;
    ins.arg = arg;
    switch (e.rule) {
      case Rule::Plain:
      case Rule::Unknown:
        break;
      case Rule::ExtendedArg:
      case Rule::Cache:
        malformed(code_, "internal: prefix rule reached emit");
      case Rule::NullBit:
        ins.arg = arg >> 1;
        ins.arg2 = arg & 1;
        break;
      case Rule::MethodBit:
        ins.op = (arg & 1) ? Opcode::LoadMethod : Opcode::LoadAttr;
        ins.arg = arg >> 1;
        break;
      case Rule::SuperAttr:
        ins.arg = arg >> 2;
        ins.arg2 = arg & 3;
        break;
      case Rule::Compare:
        ins.arg = arg >> t_.compare_shift;
        ins.arg2 = t_.compare_bool_bit >= 0 ? (arg >> t_.compare_bool_bit) & 1 : 0;
        if (ins.arg > 5) malformed(code_, "COMPARE_OP with operator " + std::to_string(ins.arg));
        break;
      case Rule::Intrinsic1:
        if (arg == t_.intrinsic_unary_positive) {
          ins.op = Opcode::UnaryPositive;
          ins.arg = 0;
        } else if (arg == t_.intrinsic_list_to_tuple) {
          ins.op = Opcode::ListToTuple;
          ins.arg = 0;
        }
        break;
      case Rule::FormatValue: {
        int conversion = arg & 3;
        bool with_spec = (arg & 4) != 0;
        if (conversion != 0) {
          Instruction convert = ins;
          convert.op = Opcode::ConvertValue;
          convert.arg = conversion;
          convert.arg2 = with_spec ? 1 : 0;
          out.push_back(convert);
        }
        ins.op = with_spec ? Opcode::FormatWithSpec : Opcode::FormatSimple;
        ins.arg = 0;
        break;
      }
      case Rule::FusedFast: {
        Instruction first = ins;
        first.arg = arg >> 4;
        out.push_back(first);
        ins.op = e.op2;
        ins.arg = arg & 15;
        break;
      }
      case Rule::Jump:
      case Rule::ForIter: {
        // Relative to the unit after the instruction's caches, counted in code units.
        long target = static_cast<long>(next) + (e.backward ? -static_cast<long>(raw) : static_cast<long>(raw));
        if (target < 0 || static_cast<size_t>(target) >= n_) {
          malformed(code_, std::string(e.name) + " at offset " + std::to_string(2 * unit) + " jumps out of the code");
        }
        if (e.rule == Rule::ForIter) target = for_iter_exit(static_cast<size_t>(target), unit);
        pending_.push_back({out.size(), static_cast<size_t>(target), unit});
        ins.arg = 0;
        break;
      }
      case Rule::EndFor:
        ins.arg = t_.end_for_pops;
        break;
      case Rule::FlagBit0:
        ins.arg = arg & 1;
        break;
    }
    out.push_back(ins);
  }

  // FOR_ITER's jump target is END_FOR on 3.12+; the exhausted iterator is popped and END_FOR (and
  // on 3.13 the POP_TOP after it) skipped, as CPython does, which assumes exactly these opcodes.
  long for_iter_exit(size_t target, size_t unit) const {
    if (t_.for_iter_skip >= 1 && units_[2 * target] != t_.end_for_opcode) {
      malformed(code_, "FOR_ITER at offset " + std::to_string(2 * unit) + " does not jump to END_FOR");
    }
    if (t_.for_iter_skip >= 2 && (target + 1 >= n_ || units_[2 * (target + 1)] != t_.pop_top_opcode)) {
      malformed(code_, "FOR_ITER at offset " + std::to_string(2 * unit) + ": END_FOR is not followed by POP_TOP");
    }
    size_t exit = target + static_cast<size_t>(t_.for_iter_skip);
    if (exit >= n_) malformed(code_, "FOR_ITER at offset " + std::to_string(2 * unit) + " exits past the end");
    return static_cast<long>(exit);
  }

  void resolve_jumps(DecodedCode& out) const {
    for (const PendingJump& j : pending_) {
      int32_t index = index_of_start(out, j.target_unit);
      if (index < 0) {
        malformed(code_, std::string(out.instructions[j.instruction].opname) + " at offset " +
                             std::to_string(2 * j.unit) + " jumps into the middle of an instruction");
      }
      out.instructions[j.instruction].target = index;
    }
  }

  struct PendingJump {
    size_t instruction;
    size_t target_unit;
    size_t unit;
  };

  PyCodeObject* code_;
  const OpcodeTable& t_;
  const uint8_t* units_;
  size_t n_;
  std::vector<PendingJump> pending_;
};

int first_line_number(PyCodeObject* code) {
  PyObject* value = PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_firstlineno");
  if (value == nullptr) detail::throw_python_error("decode: cannot read co_firstlineno");
  long line = PyLong_AsLong(value);
  Py_DECREF(value);
  if (line == -1 && PyErr_Occurred()) detail::throw_python_error("decode: co_firstlineno");
  return static_cast<int>(line);
}

}  // namespace

int32_t DecodedCode::index_at_offset(uint32_t offset) const {
  size_t unit = offset / 2;
  if (unit >= unit_index.size()) return static_cast<int32_t>(instructions.size());
  return unit_index[unit];
}

DecodedCode decode(PyCodeObject* code) {
  if (code == nullptr) throw std::runtime_error("decode: null code object");
  const OpcodeTable& table = detail::running_opcode_table();
  PyObject* code_obj = reinterpret_cast<PyObject*>(code);
  BytesAttr bytes(PyCode_GetCode(code), "co_code");
  BytesAttr linetable(PyObject_GetAttrString(code_obj, "co_linetable"), "co_linetable");
  BytesAttr exceptiontable(PyObject_GetAttrString(code_obj, "co_exceptiontable"), "co_exceptiontable");

  Decoder decoder(code, table, bytes);
  std::vector<int32_t> lines;
  std::vector<detail::RawHandler> handlers;
  try {
    for (const Position& p : detail::read_locations(linetable.data, linetable.size, bytes.size / 2, first_line_number(code))) {
      lines.push_back(p.line);
    }
    handlers = detail::read_exception_table(exceptiontable.data, exceptiontable.size);
  } catch (const std::runtime_error& e) {
    malformed(code, e.what());
  }
  DecodedCode out = decoder.run(lines);

  for (const detail::RawHandler& h : handlers) {
    if (h.start > h.end || h.end > out.unit_index.size()) {
      malformed(code, "co_exceptiontable range [" + std::to_string(2 * h.start) + ", " +
                          std::to_string(2 * h.end) + ") lies outside the code");
    }
    ExceptionTableEntry entry;
    entry.start = out.index_at_offset(static_cast<uint32_t>(2 * h.start));
    entry.end = out.index_at_offset(static_cast<uint32_t>(2 * h.end));
    entry.target = Decoder::index_of_start(out, h.target);
    if (entry.target < 0) {
      malformed(code, "exception handler at offset " + std::to_string(2 * h.target) + " is not an instruction start");
    }
    entry.depth = static_cast<int32_t>(h.depth);
    entry.lasti = h.lasti;
    out.exception_table.push_back(entry);
  }
  return out;
}

}  // namespace ember::bytecode
