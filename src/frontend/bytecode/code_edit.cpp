// make_code and shift_local_slots (assembler.h): the edits the graph-break code
// applies to a disassembled RawCode, and the way back to a code object.
//
// Needs the GIL for make_code. A code object is built by `base.replace(**fields)`: the one
// constructor whose keywords are the same on 3.11-3.13 and which runs CPython's own validation
// (co_nlocals against co_varnames, tuple types, the localsplus kinds it derives from the names).
// Which opcodes take a local slot comes from the opcode table (dis.haslocal/hasfree plus names),
// never from numbers.
#include "frontend/bytecode/assembler.h"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "frontend/bytecode/opcode_table.h"

namespace ember::bytecode {
namespace {

using detail::OpcodeEntry;
using detail::OpcodeTable;

bool set_item(PyObject* kwargs, const char* key, PyObject* owned) {
  if (owned == nullptr) return false;
  int rc = PyDict_SetItemString(kwargs, key, owned);
  Py_DECREF(owned);
  return rc == 0;
}

bool set_bytes(PyObject* kwargs, const char* key, const std::string& value) {
  return set_item(kwargs, key, PyBytes_FromStringAndSize(value.data(), static_cast<Py_ssize_t>(value.size())));
}

bool set_int(PyObject* kwargs, const char* key, long value) { return set_item(kwargs, key, PyLong_FromLong(value)); }

bool set_ref(PyObject* kwargs, const char* key, const PyRef& value) {
  if (!value) return true;
  return PyDict_SetItemString(kwargs, key, value.get()) == 0;
}

}  // namespace

PyRef make_code(PyCodeObject* base, const RawCode& raw, const CodeChanges& changes) {
  if (base == nullptr) {
    PyErr_SetString(PyExc_ValueError, "make_code: null base code object");
    return PyRef();
  }
  Assembled a;
  try {
    a = assemble(raw);
  } catch (const std::exception& e) {
    // The header promises a Python error, so a caller handles refusal and CPython failure alike.
    PyErr_SetString(PyExc_ValueError, ("make_code(" + detail::qualname_of(base) + "): " + e.what()).c_str());
    return PyRef();
  }
  PyObject* base_obj = reinterpret_cast<PyObject*>(base);
  PyRef kwargs = PyRef::steal(PyDict_New());
  if (!kwargs) return PyRef();
  PyObject* kw = kwargs.get();

  PyRef varnames = changes.varnames;
  if (!varnames) varnames = PyRef::steal(PyObject_GetAttrString(base_obj, "co_varnames"));
  if (!varnames) return PyRef();
  Py_ssize_t nlocals = PyObject_Length(varnames.get());
  if (nlocals < 0) return PyRef();

  bool ok = set_bytes(kw, "co_code", a.code) && set_bytes(kw, "co_linetable", a.linetable) &&
            set_bytes(kw, "co_exceptiontable", a.exceptiontable) && set_int(kw, "co_stacksize", a.stacksize) &&
            set_int(kw, "co_firstlineno", raw.firstlineno) && set_int(kw, "co_nlocals", static_cast<long>(nlocals)) &&
            set_ref(kw, "co_varnames", changes.varnames) && set_ref(kw, "co_cellvars", changes.cellvars) &&
            set_ref(kw, "co_freevars", changes.freevars) && set_ref(kw, "co_consts", changes.consts) &&
            set_ref(kw, "co_names", changes.names);
  if (ok && changes.argcount >= 0) ok = set_int(kw, "co_argcount", changes.argcount);
  if (ok && changes.posonlyargcount >= 0) ok = set_int(kw, "co_posonlyargcount", changes.posonlyargcount);
  if (ok && changes.kwonlyargcount >= 0) ok = set_int(kw, "co_kwonlyargcount", changes.kwonlyargcount);
  if (ok && changes.flags >= 0) ok = set_int(kw, "co_flags", changes.flags);
  if (ok && !changes.name.empty()) ok = set_item(kw, "co_name", PyUnicode_FromStringAndSize(changes.name.data(), static_cast<Py_ssize_t>(changes.name.size())));
  if (ok && !changes.qualname.empty()) {
    ok = set_item(kw, "co_qualname", PyUnicode_FromStringAndSize(changes.qualname.data(), static_cast<Py_ssize_t>(changes.qualname.size())));
  }
  if (!ok) return PyRef();

  PyRef replace = PyRef::steal(PyObject_GetAttrString(base_obj, "replace"));
  if (!replace) return PyRef();
  PyRef empty = PyRef::steal(PyTuple_New(0));
  if (!empty) return PyRef();
  return PyRef::steal(PyObject_Call(replace.get(), empty.get(), kw));
}

void shift_local_slots(RawCode& raw, int delta, int from_slot) {
  const OpcodeTable& t = detail::running_opcode_table();
  int load_fast = t.number_of("LOAD_FAST");
  int store_fast = t.number_of("STORE_FAST");
  auto& ins = raw.instructions;
  auto check = [&](size_t i, long slot) {
    if (slot < 0 || slot > INT32_MAX) {
      throw std::invalid_argument("shift_local_slots: instruction " + std::to_string(i) + " (" + t.names[ins[i].opcode] +
                                  ") would use local slot " + std::to_string(slot));
    }
  };

  // new_index[i]: where old instruction i lands once fused pairs that no longer fit are split.
  std::vector<int32_t> new_index(ins.size() + 1);
  std::vector<RawInstruction> out;
  out.reserve(ins.size());
  for (size_t i = 0; i < ins.size(); ++i) {
    new_index[i] = static_cast<int32_t>(out.size());
    RawInstruction x = ins[i];
    if (x.opcode < 0 || x.opcode > 255) throw std::invalid_argument("shift_local_slots: instruction " + std::to_string(i) + " has opcode " + std::to_string(x.opcode));
    const OpcodeEntry& e = t.entries[x.opcode];
    if (e.local_slots == 1) {
      auto moved = [&](long s) { return s < from_slot ? s : s + delta; };
      long slot = moved(x.arg);
      check(i, slot);
      x.arg = static_cast<int>(slot);
    } else if (e.local_slots == 2) {
      auto moved = [&](long s) { return s < from_slot ? s : s + delta; };
      long first = moved(x.arg >> 4);
      long second = moved(x.arg & 15);
      check(i, first);
      check(i, second);
      if (first < 16 && second < 16) {
        x.arg = static_cast<int>(first << 4 | second);
      } else {
        // LOAD_FAST_LOAD_FAST = LOAD_FAST a; LOAD_FAST b, and so on: the name says both halves.
        const std::string& name = t.names[x.opcode];
        RawInstruction a = x, b = x;
        a.opcode = name.compare(0, 10, "LOAD_FAST_") == 0 ? load_fast : store_fast;
        b.opcode = name.compare(name.size() - 10, 10, "_LOAD_FAST") == 0 ? load_fast : store_fast;
        a.arg = static_cast<int>(first);
        b.arg = static_cast<int>(second);
        b.offset = -1;
        out.push_back(a);
        out.push_back(b);
        continue;
      }
    }
    out.push_back(x);
  }
  new_index[ins.size()] = static_cast<int32_t>(out.size());
  if (out.size() != ins.size()) {
    for (RawInstruction& x : out) {
      if (x.target >= 0 && static_cast<size_t>(x.target) < new_index.size()) x.target = new_index[x.target];
    }
    for (ExceptionTableEntry& e : raw.exception_table) {
      auto remap = [&](int32_t index) {
        return index >= 0 && static_cast<size_t>(index) < new_index.size() ? new_index[index] : index;
      };
      e.start = remap(e.start);
      e.end = remap(e.end);
      e.target = remap(e.target);
    }
  }
  ins = std::move(out);
}

}  // namespace ember::bytecode
