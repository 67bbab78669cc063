// Internal to decompose: the rule table's types and the node builders the rule families share
// (decompose.cpp, decompose_pointwise.cpp, decompose_reduce.cpp, decompose_views.cpp).
//
// A rule rewrites one source node into primitives (docs/decompositions.md): it reads the node
// through its bound arguments, emits new nodes through the builders, and binds every result of
// the node with finish(). When the node is not in a form the rule rewrites exactly, or nothing
// needs to change, the rule throws Refuse and the node is copied as it was.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "passes/builders.h"
#include "passes/signatures.h"
#include "sym/relation.h"

namespace ember::passes::decomp {

using ir::Arg;
using ir::DType;
using ir::Op;
using ir::ValueId;
using namespace build;  // the node builders (builders.h)

struct Ctx {
  Rewriter& rw;
  const ir::Node& node;
  std::optional<Bound> bound;  // when the callable has a signature and the call binds
  Rewriter::Mark mark;

  // The bound argument of a parameter (Refuse if the call did not bind).
  const Arg& arg(std::string_view name) const;
  // The new-graph value of a tensor argument (Refuse if it is not a tensor).
  ValueId tensor(const Arg& a) const;
  ValueId tensor(std::string_view name) const { return tensor(arg(name)); }
  bool none(std::string_view name) const { return is_none(arg(name)); }
  int64_t int_arg(std::string_view name) const;
  double number_arg(std::string_view name) const;
  bool bool_arg(std::string_view name) const;
  const ir::TensorType& result_type(size_t i = 0) const;
  // Binds result i of the node to `v`; a value emitted by this rule takes the recorded type.
  void finish(ValueId v, size_t i = 0);
  // Whether `a op b` holds for every value the graph's symbols can take (sym::provable).
  bool provable(const sym::Expr& a, sym::RelOp op, const sym::Expr& b) const {
    return sym::provable(sym::Rel{a, op, b}, rw.source().symbols);
  }
};

inline int64_t rank_of(Rewriter& rw, ValueId x) { return static_cast<int64_t>(rw.type(x).sizes.size()); }

using Rule = std::function<void(Ctx&)>;
using RuleMap = std::map<std::string, Rule, std::less<>>;

void add_pointwise_rules(RuleMap& rules);
void add_reduction_rules(RuleMap& rules);  // reductions, softmax family, norms, losses
void add_view_rules(RuleMap& rules);       // views, data movement, conversions, factories, linear
void add_subscript_rules(RuleMap& rules);  // getitem, slice, select, narrow, split, chunk, unbind

}  // namespace ember::passes::decomp
