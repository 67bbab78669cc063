// Functions the trace makes: MAKE_FUNCTION (lambdas, nested functions, comprehensions before
// 3.12) and SET_FUNCTION_ATTRIBUTE (3.13, which moved the optional parts out of MAKE_FUNCTION).
// The result is a FunctionVar: calling it inlines its code (interp_calls.cpp); one that is
// returned, stored or live across a graph break is rebuilt as a real function (closures.cpp).
#include "frontend/interp/interpreter.h"

namespace ember::frontend {

using bytecode::Instruction;

void Interpreter::set_function_part(FunctionVar& fn, int flag, const VarRef& part) {
  if (flag == 0x08) fn.closure = iterate(part);
  if (flag == 0x04) fn.annotations = part;
  if (flag == 0x02) {
    if (part->kind != VarKind::Dict) unsupported("keyword defaults that are not a dict");
    fn.kwdefaults = std::static_pointer_cast<DictVar>(part);
  }
  if (flag == 0x01) fn.defaults = iterate(part);
}

void Interpreter::step_make_function(const Instruction& ins) {
  VarRef code = pop();
  PyObject* co = Trace::as_constant(*code);
  if (!co || !PyCode_Check(co)) unsupported("MAKE_FUNCTION without a code constant");
  auto fn = std::make_shared<FunctionVar>();
  fn->code = PyRef::borrow(co);
  fn->globals = PyRef::borrow(globals_.dict);
  fn->globals_source = globals_.base;
  fn->name = PyRef::borrow(reinterpret_cast<PyCodeObject*>(co)->co_name);
  fn->qualname = PyRef::borrow(reinterpret_cast<PyCodeObject*>(co)->co_qualname);
  // Before 3.13 the flagged parts sit under the code, the highest flag on top.
  for (int flag : {0x08, 0x04, 0x02, 0x01}) {
    if (ins.arg & flag) set_function_part(*fn, flag, pop());
  }
  push(fn);
}

void Interpreter::step_set_function_attribute(const Instruction& ins) {
  VarRef fnv = pop();
  VarRef part = pop();
  if (fnv->kind != VarKind::Function) unsupported("SET_FUNCTION_ATTRIBUTE on a non-function");
  set_function_part(fnv->as<FunctionVar>(), ins.arg, part);
  push(fnv);
}

}  // namespace ember::frontend
