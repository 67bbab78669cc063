// RelProgram (sym/rel_program.h): compile relations to postfix code, run it on a fixed stack.
#include "sym/arith.h"
#include "sym/rel_program.h"

namespace ember::sym {

// Postfix: operands first, then the operator. An n-ary sum or product becomes n-1 binary steps,
// so the stack never holds more than one value per level of the tree plus one.
void RelProgram::emit(const Expr& e, const std::vector<std::string>& order, size_t depth) {
  if (depth + 2 > kMaxStack)
    throw std::invalid_argument("RelProgram: an expression nested deeper than " + std::to_string(kMaxStack - 2) + " levels");
  const auto& ops = e.operands();
  auto binary = [&](Code code) {
    emit(ops[0], order, depth);
    for (size_t i = 1; i < ops.size(); ++i) {
      emit(ops[i], order, depth + 1);
      code_.push_back({code, 0});
    }
  };
  switch (e.kind()) {
    case ExprKind::Constant: code_.push_back({Code::Constant, e.constant()}); return;
    case ExprKind::Symbol: {
      for (size_t k = 0; k < order.size(); ++k)
        if (order[k] == e.symbol_name()) {
          code_.push_back({Code::Symbol, static_cast<int64_t>(k)});
          return;
        }
      throw std::invalid_argument("RelProgram: the symbol " + e.symbol_name() + " is not among the program's symbols");
    }
    case ExprKind::Add: binary(Code::Add); return;
    case ExprKind::Mul: binary(Code::Mul); return;
    case ExprKind::FloorDiv: binary(Code::FloorDiv); return;
    case ExprKind::Mod: binary(Code::Mod); return;
    case ExprKind::Max: binary(Code::Max); return;
    case ExprKind::Min: binary(Code::Min); return;
  }
  throw std::logic_error("RelProgram: corrupt ExprKind");
}

RelProgram::RelProgram(const std::vector<Rel>& rels, const std::vector<std::string>& order) : relations_(rels.size()) {
  for (const Rel& r : rels) {
    emit(r.lhs, order, 0);
    emit(r.rhs, order, 1);
    switch (r.op) {
      case RelOp::Eq: code_.push_back({Code::Eq, 0}); break;
      case RelOp::Ne: code_.push_back({Code::Ne, 0}); break;
      case RelOp::Lt: code_.push_back({Code::Lt, 0}); break;
      case RelOp::Le: code_.push_back({Code::Le, 0}); break;
    }
  }
}

std::optional<size_t> RelProgram::first_failure(const int64_t* values) const {
  int64_t stack[kMaxStack];
  size_t top = 0;     // values on the stack
  size_t current = 0; // the relation being evaluated
  for (const Instruction& in : code_) {
    int64_t b = 0, a = 0;
    if (in.code != Code::Constant && in.code != Code::Symbol) {
      b = stack[--top];
      a = stack[--top];
    }
    int64_t r = 0;
    switch (in.code) {
      case Code::Constant: r = in.operand; break;
      case Code::Symbol: r = values[in.operand]; break;
      case Code::Add:
        if (__builtin_add_overflow(a, b, &r)) return current;
        break;
      case Code::Mul:
        if (__builtin_mul_overflow(a, b, &r)) return current;
        break;
      case Code::FloorDiv:
        if (b == 0 || !arith::floordiv_ok(a, b, &r)) return current;
        break;
      case Code::Mod:
        if (b == 0) return current;
        r = arith::py_mod(a, b);
        break;
      case Code::Max: r = a > b ? a : b; break;
      case Code::Min: r = a < b ? a : b; break;
      case Code::Eq:
      case Code::Ne:
      case Code::Lt:
      case Code::Le: {
        bool ok = in.code == Code::Eq ? a == b : in.code == Code::Ne ? a != b : in.code == Code::Lt ? a < b : a <= b;
        if (!ok) return current;
        ++current;
        continue;  // a relation leaves nothing on the stack
      }
    }
    stack[top++] = r;
  }
  return std::nullopt;
}

}  // namespace ember::sym
