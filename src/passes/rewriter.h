// Rewriter: builds the graph a rewriting pass produces, node by node, from the graph it reads.
//
// Needs: a source graph that verifies. Guarantees: the graph finish() returns verifies when every
// node it holds does, its inputs come first (ids 0..k-1, in the source's input order), then node
// results in emission order, so numbering is deterministic. A pass copies the nodes it keeps and
// emits new ones for the nodes it rewrites; uses of an old result are renamed through bind().
//
// Why not edit the graph in place: a decomposition turns one node into many, and values are
// numbered by position; building a fresh graph keeps every id dense without renumbering passes.
// Emission is also transactional: mark() and rollback() drop whatever a rule emitted before it
// found a form it does not handle (it throws Refuse), so a rule checks as it goes.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace ember::passes {

// Thrown by a rewrite rule when the node is not in a form it rewrites exactly: the node is then
// copied unchanged (it stays an extern call).
struct Refuse {};
[[noreturn]] inline void refuse() { throw Refuse{}; }

using Kwargs = std::vector<std::pair<std::string, ir::Arg>>;

class Rewriter {
 public:
  explicit Rewriter(const ir::Graph& source);

  const ir::Graph& source() const { return source_; }
  // The new graph's value for a source value; throws std::logic_error if it has none yet.
  ir::ValueId mapped(ir::ValueId source_value) const;
  // A source argument with its values mapped into the new graph.
  ir::Arg map(const ir::Arg& source_arg) const;
  // The type of a value of the new graph.
  const ir::TensorType& type(ir::ValueId v) const { return types_.at(v); }
  // Gives a value of the new graph another type (only for values emitted by the current rule).
  void set_type(ir::ValueId v, ir::TensorType t) { types_.at(v) = std::move(t); }

  // Copies a source node, its arguments mapped, its results fresh values of the same types.
  void copy(const ir::Node& node);
  // Renames a source result: its uses read `v` from now on.
  void bind(ir::ValueId source_value, ir::ValueId v);

  // Emits a node with one result and returns that result.
  ir::ValueId emit(ir::Op op, std::vector<ir::Arg> args, Kwargs kwargs, ir::TensorType type);
  ir::ValueId emit_torch(std::string target, std::vector<ir::Arg> args, Kwargs kwargs, ir::TensorType type);
  // Emits a node returning a tuple of results.
  std::vector<ir::ValueId> emit_tuple(ir::Op op, std::vector<ir::Arg> args, Kwargs kwargs,
                                      std::vector<ir::TensorType> types);
  std::vector<ir::ValueId> emit_torch_tuple(std::string target, std::vector<ir::Arg> args, Kwargs kwargs,
                                            std::vector<ir::TensorType> types);

  // Transactions around one rule.
  struct Mark {
    size_t nodes, values;
  };
  Mark mark() const { return {nodes_.size(), types_.size()}; }
  void rollback(Mark m);
  // True when `v` was created after `m`.
  bool created_since(ir::ValueId v, Mark m) const { return static_cast<size_t>(v) >= m.values; }

  // The rewritten graph (outputs mapped). The rewriter is spent afterwards.
  ir::Graph finish();

 private:
  struct Pending {
    ir::Op op;
    std::string target;
    std::vector<ir::Arg> args;
    Kwargs kwargs;
    ir::Node::ResultForm form;
    size_t first_result, result_count;
  };
  std::vector<ir::ValueId> push(ir::Op op, std::string target, std::vector<ir::Arg> args, Kwargs kwargs,
                                std::vector<ir::TensorType> types, ir::Node::ResultForm form);

  const ir::Graph& source_;
  std::vector<ir::ValueId> map_;  // source value -> new value, -1 until defined
  void take_rule_strides(ir::Op op, const std::vector<ir::Arg>& args, const Kwargs& kwargs,
                         std::vector<ir::TensorType>& types) const;
  std::deque<ir::TensorType> types_;  // a deque: references stay valid while rules emit
  std::vector<Pending> nodes_;
};

// --- Type helpers shared by the rewriting passes -------------------------------------------

// ir/types.h's dtype predicates and contiguous strides (promotion: ir::promote_types).
using ir::contiguous_strides;
using ir::is_complex;
using ir::is_float8;
using ir::is_floating_point;
using ir::is_integral;
bool is_contiguous(const ir::TensorType& t);
// Constant sizes, or Refuse.
std::vector<int64_t> const_sizes(const ir::TensorType& t);
int64_t numel(const std::vector<int64_t>& sizes);
std::vector<sym::Expr> to_exprs(const std::vector<int64_t>& xs);
// A fresh contiguous type.
ir::TensorType make_type(ir::DType dt, std::vector<sym::Expr> sizes, const ir::Device& device, bool requires_grad);
// ir::broadcast_shapes, or Refuse when it has no answer.
std::vector<sym::Expr> broadcast(const std::vector<sym::Expr>& a, const std::vector<sym::Expr>& b);

}  // namespace ember::passes
