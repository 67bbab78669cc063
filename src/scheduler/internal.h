// The scheduler's internal vocabulary, shared by its files (not part of Ember's interface).
//
// The scheduler works on a list of WorkSteps, the program's steps in execution order, each a
// kernel (its own copy, edited freely) or an extern call (an index into Program::externs). A
// kernel keeps a label made of the names lowering gave the kernels merged into it ("k0+k2"), so
// decisions name what the reader of the lowered program saw. schedule.cpp turns the list back
// into a Program at the end (dense names, ids and buffers).
//
// Buffer identity: a load or store through a View buffer touches its base's storage, so
// dependencies are computed on *roots* (the buffer at the end of the View chain). Only accesses
// of the root buffer itself carry an index that fusion can compare.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "loop_ir/loop_ir.h"
#include "scheduler/scheduler.h"

namespace ember::scheduler::detail {

using loop_ir::BufferId;
using loop_ir::Kernel;
using loop_ir::Node;
using loop_ir::NodeId;
using loop_ir::Program;

struct WorkStep {
  loop_ir::Step::Kind kind = loop_ir::Step::Kind::Kernel;
  Kernel kernel;           // Kernel steps
  int extern_index = -1;   // Extern steps: into Program::externs
  std::string label;       // "k3", "k1+k3"; extern steps: the callable
};

// schedule.cpp ------------------------------------------------------------------------------

// A scheduler bug is a logic_error naming `who` and every problem, never a silently wrong program.
void check_verifies(const Program& program, const char* who);

// dependencies.cpp --------------------------------------------------------------------------


// Root buffers a step reads and writes (sorted, unique). An extern reads every buffer argument
// and writes its results, and its first buffer argument when it mutates it.
struct Accesses {
  std::vector<BufferId> reads;
  std::vector<BufferId> writes;
  bool reads_root(BufferId root) const { return std::binary_search(reads.begin(), reads.end(), root); }
  bool writes_root(BufferId root) const { return std::binary_search(writes.begin(), writes.end(), root); }
  bool touches_root(BufferId root) const { return reads_root(root) || writes_root(root); }
};
Accesses accesses_of(const Program& program, const WorkStep& step);

// True if `later` must stay after `earlier`: it reads what `earlier` writes, or writes what
// `earlier` reads or writes. `what` receives the first root buffer involved.
bool depends_on(const Accesses& earlier, const Accesses& later, BufferId* what = nullptr);

// kernel_edit.cpp ---------------------------------------------------------------------------

// Simultaneous replacement of symbols by expressions (t3 -> t7 and t7 -> t9 at once), with
// sym::substitute: in a node's index expressions and bound.
using SymbolMap = sym::Replacements;
void rename_in_node(Node& node, const SymbolMap& map);
// The `t<n>` symbols an expression mentions.
void collect_node_refs(const sym::Expr& e, std::set<NodeId>& out);
std::string node_symbol(NodeId id);          // "t5"
sym::Expr var(const char* prefix, int k);    // i0, r2

int count_ops(const Kernel& kernel);         // arithmetic nodes (not loads, constants, indices, stores)
// Whether an index check in a loop with ranges of `kernel` reads a value that varies along the loop's
// last range variable: a gather the C++ code generator runs one scalar at a time, in a reduction.
bool scalar_gather_in_reduction(const Kernel& kernel);
bool has_index_check(const Kernel& kernel);  // a check_index node: a gather
bool is_reduce(const Node& node);
// What a load reads back from a store that converts the float `value` into a float buffer of dtype
// `storage`, computed in registers instead: a cast to `storage` (the rounding), then one to
// `load`'s dtype when it differs (a load may convert too). Appends the casts
// to `out`, in `load`'s loop, with ids from `next`; returns the id of the last.
NodeId append_rounding(NodeId value, ir::DType storage, const Node& load, NodeId& next, std::vector<Node>& out);

// Removes the roundings in registers (a cast to bf16/f16 and back, append_rounding) of values that
// are already that dtype's: a bf16 load, its negation or absolute value, a relu's maximum with 0,
// a where between such values. The kernel computes the same bits with fewer casts.
void drop_exact_roundings(const Program& program, Kernel& kernel);

// Renumbers nodes densely in list order (ids, operands, t-symbols); `nodes` must already be in
// execution order. Returns nothing: the kernel is edited in place.
void renumber_nodes(Kernel& kernel);
// Adds `offset` to every node id (operands and t-symbols follow).
void shift_ids(Kernel& kernel, NodeId offset);
// Rewrites a node's references (operands, t-symbols) through `ids`; ids not in the map stay.
void remap_ids(Node& node, const std::map<NodeId, NodeId>& ids);
// Removes nodes no store depends on (through operands or t-symbols), then loops left empty.
void remove_dead_nodes(Kernel& kernel);
// Merges identical pure nodes within a loop (a load only if the kernel never stores into that
// buffer's root).
void merge_duplicates(const Program& program, Kernel& kernel);
// Splits a pointwise kernel over ranges [R..., Q...] (|R| = outer) into outer ranges R and one
// loop over Q: variables i(outer+j) become r(j). The computation is the same, point by point.
Kernel split_pointwise(const Kernel& kernel, size_t outer);
// Removes outer ranges of extent 1 (their variable is 0), so that a reduction kept as [4, 1]
// and its consumer over [4, 8] share the outer range [4].
void drop_unit_ranges(Kernel& kernel);

std::string ranges_str(const std::vector<sym::Expr>& ranges);     // "[4, 8]"
std::string index_str(const std::vector<sym::Expr>& index);       // "[i0, r0]"
loop_ir::VarRanges var_ranges(const Kernel& kernel, int loop);
std::optional<int64_t> buffer_bytes(const loop_ir::Buffer& buffer);  // storage span, constant sizes

// inline.cpp --------------------------------------------------------------------------------

void inline_producers(Program& program, std::vector<WorkStep>& steps, const ScheduleOptions& options,
                      std::vector<FusionDecision>& decisions);

// alias_copies.cpp --------------------------------------------------------------------------

// Drops kernels that copy a buffer element for element into a temporary at the same addresses;
// the temporary becomes a view of the source (alias_copies.cpp has the conditions).
void alias_copies(Program& program, std::vector<WorkStep>& steps, std::vector<FusionDecision>& decisions);

// input_store.cpp ---------------------------------------------------------------------------

// Turns copies of computed values into graph inputs into the computing kernels' stores (scheduler.h).
void store_into_inputs(Program& program, std::vector<WorkStep>& steps, std::vector<FusionDecision>& decisions);

// fuse.cpp ----------------------------------------------------------------------------------

// Merges kernel `b` into kernel `a` (a runs first in program order; step order legality is the
// caller's). Either `merged` is set, or `refusal` says why not.
struct MergeResult {
  std::optional<Kernel> merged;
  std::string refusal;
  std::string detail;  // what made the fusion legal, for the decision's reason
};
MergeResult merge_kernels(const Program& program, const WorkStep& a, const WorkStep& b,
                          const ScheduleOptions& options);

void fuse_kernels(Program& program, std::vector<WorkStep>& steps, const ScheduleOptions& options,
                  std::vector<FusionDecision>& decisions);

}  // namespace ember::scheduler::detail
