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
