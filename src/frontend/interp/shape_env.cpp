#include "frontend/interp/shape_env.h"

#include <set>

#include "sym/range.h"

namespace ember::frontend {

sym::Expr ShapeEnv::symbol_for(int64_t value, const SourceRef& tensor, int dim, bool dims_apart) {
  // Duck sizing: the symbol made for this dim of another tensor with this size, else any symbol
  // of this size; with `dims_apart`, never one made for another dim of the same tensor.
  std::optional<size_t> duck;
  for (size_t k = 0; k < symbols_.size(); ++k) {
    if (symbols_[k].hint != value || symbols_[k].from_int) continue;
    bool same_tensor = bindings_[k].source->str() == tensor->str();
    if (bindings_[k].dim == dim && !same_tensor) {
      duck = k;
      break;
    }
    if (!duck && !(dims_apart && same_tensor)) duck = k;
  }
  if (duck) return resolve(sym::Expr::symbol(symbols_[*duck].name));
  return fresh(value, Binding{tensor, dim});
}

sym::Expr ShapeEnv::int_symbol(int64_t value, const SourceRef& source) { return fresh(value, Binding{source, -1}); }

sym::Expr ShapeEnv::fresh(int64_t value, Binding binding) {
  sym::SymbolInfo info;
  info.name = "s" + std::to_string(symbols_.size());
  info.hint = value;
  info.from_int = binding.dim < 0;
  if (info.from_int) info.min = 1;  // Trace::dynamic_int: an int symbol is never 0 (sizes 0 would be empty)
  hints_[info.name] = value;
  symbols_.push_back(info);
  bindings_.push_back(std::move(binding));
  return sym::Expr::symbol(info.name);
}

sym::Expr ShapeEnv::resolve(const sym::Expr& e) const {
  if (replacements_.empty() || e.is_constant()) return e;
  return sym::substitute(e, replacements_);
}

int64_t ShapeEnv::hint(const sym::Expr& e) const {
  if (e.is_constant()) return e.constant();
  return sym::evaluate(e, hints_);
}

bool ShapeEnv::evaluate(const sym::Rel& rel_in, const std::string& why) {
  sym::Rel rel{resolve(rel_in.lhs), rel_in.op, resolve(rel_in.rhs)};
  if (std::optional<bool> known = sym::statically_known(rel, symbols_)) return *known;
  bool holds = sym::evaluate(rel, [&](const std::string& name) -> std::optional<int64_t> {
    auto it = hints_.find(name);
    if (it == hints_.end()) return std::nullopt;
    return it->second;
  });
  sym::Rel guard = rel;
  if (!holds) {
    // The negation, in the four forms a Rel has: !(a == b) is a != b, !(a < b) is b <= a.
    switch (rel.op) {
      case sym::RelOp::Eq: guard.op = sym::RelOp::Ne; break;
      case sym::RelOp::Ne: guard.op = sym::RelOp::Eq; break;
      case sym::RelOp::Lt: guard = sym::Rel{rel.rhs, sym::RelOp::Le, rel.lhs}; break;
      case sym::RelOp::Le: guard = sym::Rel{rel.rhs, sym::RelOp::Lt, rel.lhs}; break;
    }
  }
  // `s == k` pins s: later code sees the constant (as torch's ShapeEnv does with its replacements).
  if (guard.op == sym::RelOp::Eq && (guard.lhs.kind() == sym::ExprKind::Symbol || guard.rhs.kind() == sym::ExprKind::Symbol)) {
    specialize(guard.lhs.kind() == sym::ExprKind::Symbol ? guard.lhs : guard.rhs, why);
    return holds;
  }
  guards_.push_back(Guard{guard, why});
  // A relation over one symbol narrows its range where it is monotone in it (a conv's `3 <= (s1 + -10) // 5 + 1`:
  // s1 >= 20), so later questions about the symbol see the fact the guard holds.
  std::set<std::string> names;
  sym::free_symbols(guard.lhs, names);
  sym::free_symbols(guard.rhs, names);
  if (names.size() == 1)
    for (sym::SymbolInfo& s : symbols_)
      if (s.name == *names.begin()) sym::narrow_range(guard, s);
  return holds;
}

int64_t ShapeEnv::specialize(const sym::Expr& e_in, const std::string& why) {
  sym::Expr e = resolve(e_in);
  std::set<std::string> names;
  sym::free_symbols(e, names);
  for (const std::string& name : names) {
    int64_t value = hints_.at(name);
    guards_.push_back(Guard{sym::Rel{sym::Expr::symbol(name), sym::RelOp::Eq, sym::Expr(value)}, why});
    replacements_.emplace_back(name, sym::Expr(value));
  }
  return hint(e);
}

bool ShapeEnv::specialized(const std::string& symbol) const {
  for (const auto& [name, value] : replacements_)
    if (name == symbol) return true;
  return false;
}

sym::Symbols ShapeEnv::live_symbols() const {
  sym::Symbols out;
  for (const sym::SymbolInfo& s : symbols_)
    if (!specialized(s.name)) out.push_back(s);
  return out;
}

}  // namespace ember::frontend
