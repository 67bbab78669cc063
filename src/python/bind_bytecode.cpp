// ember._C.bytecode: the normalized bytecode decoder and the assembler, exposed as plain tuples for
// tests and tools.
//
// A RawCode crosses as (instructions, exception_table, firstlineno): instructions are
// (opcode, arg, target, (line, end_line, col, end_col), offset) tuples, exception entries
// (start, end, target, depth, lasti) in instruction indices.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <stdexcept>

#include "frontend/bytecode/assembler.h"
#include "frontend/bytecode/instruction.h"

namespace nb = nanobind;

namespace ember::python {
namespace {

PyCodeObject* as_code(nb::handle code) {
  if (!PyCode_Check(code.ptr())) {
    throw nb::type_error(("expected a code object, got " + std::string(nb::type_name(code.type()).c_str())).c_str());
  }
  return reinterpret_cast<PyCodeObject*>(code.ptr());
}

nb::tuple to_python(const bytecode::RawCode& raw) {
  nb::list instructions, table;
  for (const bytecode::RawInstruction& i : raw.instructions) {
    const bytecode::Position& p = i.position;
    instructions.append(nb::make_tuple(i.opcode, i.arg, i.target, nb::make_tuple(p.line, p.end_line, p.col, p.end_col), i.offset));
  }
  for (const bytecode::ExceptionTableEntry& e : raw.exception_table) {
    table.append(nb::make_tuple(e.start, e.end, e.target, e.depth, e.lasti));
  }
  return nb::make_tuple(instructions, table, raw.firstlineno);
}

bytecode::RawCode from_python(nb::handle instructions, nb::handle table, int firstlineno) {
  bytecode::RawCode raw;
  raw.firstlineno = firstlineno;
  for (nb::handle item : instructions) {
    nb::tuple t = nb::cast<nb::tuple>(item);
    if (t.size() != 5) throw std::invalid_argument("instruction tuples are (opcode, arg, target, position, offset)");
    bytecode::RawInstruction i;
    i.opcode = nb::cast<int>(t[0]);
    i.arg = nb::cast<int>(t[1]);
    i.target = nb::cast<int>(t[2]);
    if (!t[3].is_none()) {
      nb::tuple p = nb::cast<nb::tuple>(t[3]);
      if (p.size() != 4) throw std::invalid_argument("positions are (line, end_line, col, end_col)");
      i.position = {nb::cast<int>(p[0]), nb::cast<int>(p[1]), nb::cast<int>(p[2]), nb::cast<int>(p[3])};
    }
    i.offset = nb::cast<int32_t>(t[4]);
    raw.instructions.push_back(i);
  }
  for (nb::handle item : table) {
    nb::tuple t = nb::cast<nb::tuple>(item);
    if (t.size() != 5) throw std::invalid_argument("exception entries are (start, end, target, depth, lasti)");
    raw.exception_table.push_back({nb::cast<int32_t>(t[0]), nb::cast<int32_t>(t[1]), nb::cast<int32_t>(t[2]), nb::cast<int32_t>(t[3]), nb::cast<bool>(t[4])});
  }
  return raw;
}

bytecode::CodeChanges changes_from(nb::kwargs kwargs) {
  bytecode::CodeChanges c;
  for (auto [key, value] : kwargs) {
    std::string k = nb::cast<std::string>(key);
    if (k == "argcount") c.argcount = nb::cast<int>(value);
    else if (k == "posonlyargcount") c.posonlyargcount = nb::cast<int>(value);
    else if (k == "kwonlyargcount") c.kwonlyargcount = nb::cast<int>(value);
    else if (k == "flags") c.flags = nb::cast<int>(value);
    else if (k == "varnames") c.varnames = PyRef::borrow(value.ptr());
    else if (k == "cellvars") c.cellvars = PyRef::borrow(value.ptr());
    else if (k == "freevars") c.freevars = PyRef::borrow(value.ptr());
    else if (k == "consts") c.consts = PyRef::borrow(value.ptr());
    else if (k == "names") c.names = PyRef::borrow(value.ptr());
    else if (k == "name") c.name = nb::cast<std::string>(value);
    else if (k == "qualname") c.qualname = nb::cast<std::string>(value);
    else throw nb::type_error(("make_code: unknown field " + k).c_str());
  }
  return c;
}

}  // namespace

void bind_bytecode(nb::module_& m) {
  using namespace ember::bytecode;
  m.def(
      "decode",
      [](nb::handle code) {
        DecodedCode decoded = decode(as_code(code));
        nb::list out;
        for (const Instruction& i : decoded.instructions) {
          out.append(nb::make_tuple(opcode_name(i.op), i.arg, i.arg2, i.target, i.offset, i.line, i.opname));
        }
        return out;
      },
      nb::arg("code"),
      "Normalized instructions of a code object: (kind, arg, arg2, target, offset, line, opname) tuples.");
  m.def(
      "exception_table",
      [](nb::handle code) {
        DecodedCode decoded = decode(as_code(code));
        nb::list out;
        for (const ExceptionTableEntry& e : decoded.exception_table) {
          out.append(nb::make_tuple(e.start, e.end, e.target, e.depth, e.lasti));
        }
        return out;
      },
      nb::arg("code"), "Exception table in instruction indices: (start, end, target, depth, lasti) tuples.");
  m.def(
      "index_at_offset",
      [](nb::handle code, uint32_t offset) { return decode(as_code(code)).index_at_offset(offset); },
      nb::arg("code"), nb::arg("offset"), "Instruction index at a byte offset (see instruction.h).");
  m.def("version_traits", [] {
    const VersionTraits& t = version_traits();
    nb::dict d;
    d["minor"] = t.minor;
    d["null_after_callable"] = t.null_after_callable;
    return d;
  });
  m.def(
      "opcode_table",
      [] {
        nb::list out;
        for (const OpcodeInfo& row : opcode_table()) {
          out.append(nb::make_tuple(row.number, row.name, opcode_name(row.op), row.rule, row.caches));
        }
        return out;
      },
      "The running interpreter's opcodes: (number, name, kind, rule, caches) tuples.");

  m.def(
      "disassemble", [](nb::handle code) { return to_python(disassemble(as_code(code))); }, nb::arg("code"),
      "Raw instructions: (instructions, exception_table, firstlineno); see the module header for the tuples.");
  m.def(
      "assemble",
      [](nb::handle instructions, nb::handle table, int firstlineno) {
        Assembled a = assemble(from_python(instructions, table, firstlineno));
        return nb::make_tuple(nb::bytes(a.code.data(), a.code.size()), nb::bytes(a.linetable.data(), a.linetable.size()),
                              nb::bytes(a.exceptiontable.data(), a.exceptiontable.size()), a.stacksize);
      },
      nb::arg("instructions"), nb::arg("exception_table"), nb::arg("firstlineno"),
      "(co_code, co_linetable, co_exceptiontable, co_stacksize) of raw instructions. Invalid input raises ValueError.");
  m.def(
      "make_code",
      [](nb::handle base, nb::handle instructions, nb::handle table, int firstlineno, nb::kwargs kwargs) {
        PyRef code = make_code(as_code(base), from_python(instructions, table, firstlineno), changes_from(kwargs));
        if (!code) throw nb::python_error();
        return nb::steal(code.release());
      },
      nb::arg("base"), nb::arg("instructions"), nb::arg("exception_table"), nb::arg("firstlineno"), nb::arg("changes"),
      "A code object: base with the instructions assembled in; keyword changes argcount, posonlyargcount, "
      "kwonlyargcount, flags, varnames, cellvars, freevars, consts, names, name, qualname.");
  m.def(
      "shift_local_slots",
      [](nb::handle instructions, nb::handle table, int firstlineno, int delta) {
        RawCode raw = from_python(instructions, table, firstlineno);
        shift_local_slots(raw, delta);
        return to_python(raw);
      },
      nb::arg("instructions"), nb::arg("exception_table"), nb::arg("firstlineno"), nb::arg("delta"),
      "Raw code with every local-slot argument shifted by delta (3.13 fused pairs split when needed).");
  m.def(
      "opcode_number", [](const std::string& name) { return opcode_number(name.c_str()); }, nb::arg("name"),
      "The running interpreter's number for an opcode name, -1 if it has none.");
}

}  // namespace ember::python
