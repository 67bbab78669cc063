// The graph IR verifier: structural checks that every pass must preserve (docs/ir.md lists them).
//
// It never throws and never trusts an id: parsed text can hold any malformed graph, and the
// point is to say what is wrong, one message per problem, each naming the node or value. Passes
// may assume a graph that verifies cleanly.
#include <algorithm>
#include <set>

#include "ir/graph.h"

namespace ember::ir {

namespace {

std::string pct(ValueId id) { return "%" + std::to_string(id); }

class Verifier {
 public:
  explicit Verifier(const Graph& g) : g_(g), defined_(g.values().size(), false) {}

  std::vector<std::string> run() {
    check_symbols();
    for (size_t i = 0; i < g_.values().size(); ++i) {
      ValueId id = g_.values()[i].id;
      if (id == -1)
        report(pct(static_cast<ValueId>(i)) + " is never defined, but a later id is: value ids must be dense (0..n-1)");
      else if (id != static_cast<ValueId>(i))
        report("the value at position " + std::to_string(i) + " has id " + pct(id) + ": a value's id must be its position");
    }
    for (size_t i = 0; i < g_.nodes().size(); ++i)
      if (g_.nodes()[i].id != static_cast<NodeId>(i))
        report("the node at position " + std::to_string(i) + " has id " + std::to_string(g_.nodes()[i].id) +
               ": a node's id must be its position");

    for (const GraphInput& in : g_.inputs()) {
      std::string who = "graph input " + pct(in.value);
      if (!define(in.value, who)) continue;
      if (g_.value(in.value).producer != -1)
        report(who + " records producer node " + std::to_string(g_.value(in.value).producer) + "; inputs have none (-1)");
      check_type(g_.value(in.value).type, who);
    }
    for (const Node& n : g_.nodes()) node_results_.insert(n.results.begin(), n.results.end());
    for (const Node& n : g_.nodes()) check_node(n);

    for (size_t i = 0; i < g_.values().size(); ++i)
      if (g_.values()[i].id == static_cast<ValueId>(i) && !defined_[i])
        report(pct(static_cast<ValueId>(i)) + " is neither a graph input nor a node's result");
    for (ValueId out : g_.outputs())
      if (!is_defined(out)) report("the graph returns " + pct(out) + ", which is never defined");
    return std::move(messages_);
  }

 private:
  void report(std::string message) { messages_.push_back(std::move(message)); }

  // The value entry for `id`, if the graph holds one at its position.
  bool has_entry(ValueId id) const {
    return id >= 0 && static_cast<size_t>(id) < g_.values().size() && g_.values()[id].id == id;
  }
  bool is_defined(ValueId id) const { return has_entry(id) && defined_[id]; }

  bool define(ValueId id, const std::string& who) {
    if (!has_entry(id)) {
      report(who + " defines " + pct(id) + ", which has no value entry (and so no type)");
      return false;
    }
    if (defined_[id]) {
      report(who + " defines " + pct(id) + " again: each value has exactly one definition");
      return false;
    }
    defined_[id] = true;
    return true;
  }

  void check_type(const TensorType& t, const std::string& who) {
    if (t.sizes.size() != t.strides.size())
      report(who + " has type " + t.str() + " with " + std::to_string(t.sizes.size()) + " sizes but " +
             std::to_string(t.strides.size()) + " strides");
    for (size_t d = 0; d < t.sizes.size(); ++d)
      if (t.sizes[d].is_constant() && t.sizes[d].constant() < 0)
        report(who + " has the negative size " + t.sizes[d].str() + " in dimension " + std::to_string(d));
    std::set<std::string> names;
    for (const auto* exprs : {&t.sizes, &t.strides})
      for (const sym::Expr& e : *exprs) sym::free_symbols(e, names);
    check_declared(names, who + " has type " + t.str() + ", which");
  }

  // Every symbol mentioned is one of the graph's symbols.
  void check_declared(const std::set<std::string>& names, const std::string& who) {
    for (const std::string& name : names)
      if (!declared_.count(name)) report(who + " mentions the undeclared symbol " + name);
  }

  // Symbols are declared once, and each size symbol is bare as some dimension of a graph input:
  // the runtime reads its value there (an int symbol from the int passed after the inputs).
  void check_symbols() {
    for (const sym::SymbolInfo& s : g_.symbols)
      if (!declared_.insert(s.name).second) report("symbol " + s.name + " is declared twice");
    std::set<std::string> bound;
    for (const GraphInput& in : g_.inputs())
      if (has_entry(in.value))
        for (const sym::Expr& e : g_.value(in.value).type.sizes)
          if (e.kind() == sym::ExprKind::Symbol) bound.insert(e.symbol_name());
    for (const sym::SymbolInfo& s : g_.symbols)
      if (!s.from_int && !bound.count(s.name))
        report("symbol " + s.name + " is not a dimension of any graph input (the runtime reads its value from one)");
  }

  void check_uses(const Arg& a, const std::string& where, const std::string& who) {
    switch (a.kind) {
      case Arg::Kind::Value:
        if (is_defined(a.value)) return;
        if (node_results_.count(a.value))
          report(who + ": " + where + " uses " + pct(a.value) + " before its definition");
        else
          report(who + ": " + where + " uses " + pct(a.value) + ", which is never defined");
        return;
      case Arg::Kind::Literal:
        if (const sym::Expr* e = std::get_if<sym::Expr>(&a.literal)) {
          std::set<std::string> names;
          sym::free_symbols(*e, names);
          check_declared(names, who + ": " + where);
        }
        return;
      case Arg::Kind::List:
      case Arg::Kind::Tuple:
        for (const Arg& item : a.items) check_uses(item, where, who);
        return;
    }
  }

  void check_arity(const Node& n, const std::string& who) {
    const OpInfo& op = op_info(n.op);
    if (op.arity < 0) {
      bool ok = !n.args.empty() && (n.args[0].kind == Arg::Kind::List || n.args[0].kind == Arg::Kind::Tuple) &&
                !n.args[0].items.empty() &&
                std::all_of(n.args[0].items.begin(), n.args[0].items.end(),
                            [](const Arg& x) { return x.kind == Arg::Kind::Value; });
      if (!ok) report(who + ": " + op.name + " takes a non-empty list of tensors (%N) as its first argument");
      return;
    }
    if (op.arity == 0) return;
    // Operands may be tensors or scalars (they broadcast), passed positionally or by keyword;
    // the first one is always a tensor.
    size_t operands = n.args.size() + n.kwargs.size();
    if (operands < static_cast<size_t>(op.arity))
      report(who + ": " + op.name + " takes " + std::to_string(op.arity) + " operand" + (op.arity == 1 ? "" : "s") +
             ", found " + std::to_string(operands));
    else if (n.args.empty() || n.args[0].kind != Arg::Kind::Value)
      report(who + ": the first argument of " + op.name + " must be a tensor operand (%N)");
  }

  // The first argument an in-place op writes: a tensor, or tensors (the _foreach_*_ ops).
  static bool writes_tensors(const Node& n) {
    if (n.args.empty()) return false;
    const Arg& first = n.args[0];
    if (first.kind == Arg::Kind::Value) return true;
    return (first.kind == Arg::Kind::List || first.kind == Arg::Kind::Tuple) && !first.items.empty() &&
           std::all_of(first.items.begin(), first.items.end(), [](const Arg& x) { return x.kind == Arg::Kind::Value; });
  }

  void check_node(const Node& n) {
    std::string who = "node " + std::to_string(n.id) + " (" +
                      (n.op == Op::TorchCall ? "torch \"" + n.target + "\"" : std::string(op_info(n.op).name)) + ")";

    if (n.op == Op::TorchCall && n.target.empty()) report(who + ": a torch node needs the callable's qualified name");
    if (n.op != Op::TorchCall && !n.target.empty()) report(who + ": a core op has no target, found \"" + n.target + "\"");
    for (size_t i = 0; i < n.args.size(); ++i) check_uses(n.args[i], "argument " + std::to_string(i), who);
    for (const auto& [name, a] : n.kwargs) check_uses(a, "keyword argument " + name, who);
    if (n.op != Op::TorchCall) check_arity(n, who);
    if (n.mutates_first_arg() && !writes_tensors(n))
      report(who + ": an in-place op writes its first argument, which must be a tensor (%N) or a list of them");

    switch (n.result_form) {
      case Node::ResultForm::Single:
        if (n.results.size() != 1)
          report(who + ": a single-result node has " + std::to_string(n.results.size()) + " results");
        break;
      case Node::ResultForm::None:
        if (!n.results.empty()) report(who + ": a node without results has " + std::to_string(n.results.size()));
        break;
      case Node::ResultForm::Tuple:
      case Node::ResultForm::List:
        break;
    }
    for (ValueId r : n.results) {
      if (r < last_result_ && !is_defined(r))  // a second definition is reported by define()
        report(who + ": result " + pct(r) + " has a lower id than " + pct(last_result_) +
               ", defined before it: results are numbered in the order nodes define them");
      last_result_ = std::max(last_result_, r);
      if (!define(r, who)) continue;
      const Value& v = g_.value(r);
      if (v.producer != n.id)
        report(who + ": its result " + pct(r) + " records producer node " + std::to_string(v.producer));
      check_type(v.type, who + " result " + pct(r));
    }
  }

  const Graph& g_;
  std::vector<bool> defined_;  // by value id
  ValueId last_result_ = -1;  // the highest result id of the nodes checked so far
  std::set<ValueId> node_results_;  // results of all nodes: a use of one not yet defined comes too early
  std::vector<std::string> messages_;
  std::set<std::string> declared_;  // the graph's symbols
};

}  // namespace

std::vector<std::string> verify(const Graph& graph) { return Verifier(graph).run(); }

}  // namespace ember::ir
