// The bytecode that builds and unpacks containers: BUILD_SET/MAP/CONST_KEY_MAP, the
// comprehension appends (LIST_APPEND, LIST_EXTEND, MAP_ADD), DICT_UPDATE/DICT_MERGE and
// UNPACK_SEQUENCE/UNPACK_EX. (BUILD_TUPLE, BUILD_LIST and LIST_TO_TUPLE are one line each and
// stay in Interpreter::step.)
//
// A list or dict built here is a Var the trace owns: its items are Vars, so tensors stay graph
// values; dict keys must be constants. A set can hold only constants and becomes one.
#include "frontend/interp/interpreter.h"
#include "frontend/pyutil.h"

namespace ember::frontend {

using bytecode::Instruction;
using bytecode::Opcode;


void Interpreter::refuse_frame_container(const Var& container, const std::string& what) const {
  // A list or dict under construction arrives as an argument of a resume function when a graph
  // break split its comprehension: the object is real, so it is mutated for real (in CPython).
  if (container.source) unsupported(what + " to " + container.source->str() + ", a container read from the frame");
}

void Interpreter::step_build_set(const Instruction& ins) {
  std::vector<VarRef> items = pop_n(ins.arg);
  PyRef set = PyRef::steal(PySet_New(nullptr));
  for (auto& it : items) {
    PyObject* c = Trace::as_constant(*it);
    if (!c) unsupported("a set of values that are not constants");
    if (PySet_Add(set.get(), c) < 0) throw PythonError();
  }
  push(trace_.constant(std::move(set)));
}

void Interpreter::step_build_map(const Instruction& ins) {
  std::vector<VarRef> kv = pop_n(2 * ins.arg);
  auto d = std::make_shared<DictVar>();
  for (int i = 0; i < ins.arg; ++i) {
    PyObject* k = Trace::as_constant(*trace_.specialize(kv[2 * i]));  // a size as a key: its value
    if (!k) unsupported("a dict key that is not a constant");
    d->put(k, kv[2 * i + 1]);
  }
  push(d);
}

void Interpreter::step_build_const_key_map(const Instruction& ins) {
  VarRef keys = pop();
  std::vector<VarRef> values = pop_n(ins.arg);
  PyObject* k = Trace::as_constant(*keys);
  if (!k || !PyTuple_Check(k)) unsupported("BUILD_CONST_KEY_MAP without constant keys");
  auto d = std::make_shared<DictVar>();
  for (int i = 0; i < ins.arg; ++i) {
    d->keys.push_back(PyRef::borrow(PyTuple_GET_ITEM(k, i)));
    d->values.push_back(values[i]);
  }
  push(d);
}

void Interpreter::step_list_add(const Instruction& ins) {
  VarRef v = pop();
  VarRef list = peek(ins.arg);
  if (list->kind != VarKind::List) unsupported(std::string(ins.opname) + " to a non-list");
  refuse_frame_container(*list, ins.opname);
  auto& items = list->as<SequenceVar>().items;
  if (ins.op == Opcode::ListAppend) {
    items.push_back(v);
  } else {
    for (auto& x : iterate(v)) items.push_back(x);
  }
}

void Interpreter::step_map_add(const Instruction& ins) {
  VarRef value = pop();
  VarRef key = trace_.specialize(pop());  // a size as a key: its value
  VarRef d = peek(ins.arg);
  PyObject* k = Trace::as_constant(*key);
  if (d->kind != VarKind::Dict || !k) unsupported("dict comprehension with a non-constant key");
  refuse_frame_container(*d, "MAP_ADD");
  d->as<DictVar>().put(k, value);
}

void Interpreter::step_dict_update(const Instruction& ins) {
  VarRef update = pop();
  VarRef d = peek(ins.arg);
  if (d->kind != VarKind::Dict || update->kind != VarKind::Dict) unsupported("dict update from a non-dict");
  refuse_frame_container(*d, ins.opname);
  auto& dst = d->as<DictVar>();
  auto& src = update->as<DictVar>();
  for (size_t i = 0; i < src.keys.size(); ++i) {
    // DICT_MERGE builds the keyword arguments of a call: a repeated name is an error there.
    if (ins.op == Opcode::DictMerge && dst.find(src.keys[i].get()) >= 0) unsupported("duplicate keyword argument");
    dst.put(src.keys[i].get(), src.values[i]);
  }
}

void Interpreter::step_unpack_sequence(const Instruction& ins) {
  std::vector<VarRef> items = iterate(pop());
  if (items.size() != static_cast<size_t>(ins.arg)) unsupported("unpacking a sequence of the wrong length");
  for (auto it = items.rbegin(); it != items.rend(); ++it) push(*it);
}

void Interpreter::step_unpack_ex(const Instruction& ins) {
  // `a, *rest, b = xs`: arg holds the counts before (low byte) and after (high byte) the star.
  std::vector<VarRef> items = iterate(pop());
  size_t before = ins.arg & 0xff, after = ins.arg >> 8;
  if (items.size() < before + after) unsupported("unpacking a sequence that is too short");
  for (size_t i = 0; i < after; ++i) push(items[items.size() - 1 - i]);
  push(make_list(std::vector<VarRef>(items.begin() + before, items.end() - after)));
  for (size_t i = 0; i < before; ++i) push(items[before - 1 - i]);
}

}  // namespace ember::frontend
