// ember._C.bytecode: the normalized bytecode decoder, exposed as plain tuples for tests and tools.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

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
}

}  // namespace ember::python
