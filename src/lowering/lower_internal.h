// Lowering's shared machinery (internal to src/lowering): how a graph value is seen while the
// graph is lowered, and the builder that appends one kernel's nodes.
//
// A graph value is always backed by a buffer with storage. A view (reshape, permute, expand,
// slice, select) is that buffer seen through an index remap, never a kernel of its own; every
// other value lowering computes is realized by its own kernel into a Temp or Output buffer,
// which is the unfused shape lowering.h promises the scheduler. Each op family lives in its own
// file and exposes one `lower_<family>` function that either emits the node's lowering and
// returns "" or, before emitting anything, returns the reason it refuses (the node then becomes
// an extern call, which is always correct).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "loop_ir/loop_ir.h"
#include "lowering/lowering.h"

namespace ember::lowering::detail {

using loop_ir::BufferId;
using loop_ir::DType;
using loop_ir::ScalarOp;
using sym::Expr;
using Index = std::vector<Expr>;

// --- dtypes ---------------------------------------------------------------------------------
// Dtypes kernel bodies can hold: bool, integers and real floats (no complex, no float8).
bool is_lowerable(DType dt);
// What a kernel computes a value of dtype `dt` in: f16/bf16 compute in f32.
DType compute_dtype(DType dt);

// Where a view's elements sit in its base's storage, as torch computes it (strides and offset in
// elements). Absent when the view cannot alias its base (a reshape torch must copy).
struct Layout {
  std::vector<Expr> strides;
  Expr offset = 0;
};

// How lowering sees one graph value.
struct Lazy {
  BufferId buffer = -1;  // a buffer with storage (never a View buffer)
  // Maps the value's logical index to `buffer`'s logical index; empty: identity.
  std::function<Index(const Index&)> remap;
  std::optional<Layout> layout;  // the value's place in `buffer`'s storage, when it aliases it

  Index to_buffer_index(const Index& index) const { return remap ? remap(index) : index; }
};

// Appends one kernel. Nodes go into the loop most recently opened with add_loop(); the kernel
// and its step are appended to the program by finish().
class KernelBuilder {
 public:
  KernelBuilder(loop_ir::Program& program, std::vector<Expr> ranges);

  // The outer variables i0, i1, ... and the current loop's variables r0, r1, ...
  Index outer_vars() const;
  Index loop_vars() const;
  void add_loop(std::vector<Expr> ranges);

  DType dtype(loop_ir::NodeId n) const;
  loop_ir::NodeId load(BufferId buffer, Index index);
  loop_ir::NodeId masked_load(BufferId buffer, Index index, loop_ir::NodeId mask, loop_ir::Scalar other);
  loop_ir::NodeId constant(loop_ir::Scalar value, DType dt);
  loop_ir::NodeId index_value(Expr e);
  loop_ir::NodeId cast(loop_ir::NodeId x, DType dt);  // no node when x already has dtype dt
  loop_ir::NodeId unary(ScalarOp op, loop_ir::NodeId x);  // result dtype: x's (Compare: bool)
  // Binary and compare ops: both operands are cast to `dt` first; the result has dtype `dt`
  // (compares and logical ops: bool).
  loop_ir::NodeId binary(ScalarOp op, loop_ir::NodeId a, loop_ir::NodeId b, DType dt);
  loop_ir::NodeId where(loop_ir::NodeId cond, loop_ir::NodeId a, loop_ir::NodeId b, DType dt);
  loop_ir::NodeId reduce(ScalarOp op, loop_ir::NodeId x);
  loop_ir::NodeId check_index(loop_ir::NodeId x, Expr bound);
  // philox_rand(seed, counter): i64 operands, an f32 value (loop_ir/ops.def).
  loop_ir::NodeId philox_rand(loop_ir::NodeId seed, loop_ir::NodeId counter);
  // Casts `value` to what the buffer's dtype computes in, then stores it.
  void store(BufferId buffer, Index index, loop_ir::NodeId value);
  // Casts `value` to the buffer's dtype, then adds it into the element (an accumulating store).
  void accumulate(BufferId buffer, Index index, loop_ir::NodeId value);
  void finish();

 private:
  loop_ir::NodeId add(loop_ir::Node node);
  loop_ir::Program& program_;
  loop_ir::Kernel kernel_;
};

// A literal as a Constant value of dtype `dt`; nullopt if it cannot be one exactly (a fraction
// as an integer, a string, None).
std::optional<loop_ir::Scalar> scalar_of(const ir::Literal& lit, DType dt);
// The literal readers (ir/graph.h), by their short names.
using ir::bool_literal;
using ir::int_list;
using ir::int_literal;
using ir::size_literal;

// The state of one lowering: the program being built and how every graph value is seen.
class Lowerer {
 public:
  Lowerer(const ir::Graph& graph, const LowerOptions& options);
  loop_ir::Program run(std::vector<std::string>* refusals);

  const ir::Graph& graph() const { return graph_; }
  const LowerOptions& options() const { return options_; }
  loop_ir::Program& program() { return program_; }
  const ir::TensorType& type(ir::ValueId v) const { return graph_.value(v).type; }
  const Lazy& lazy(ir::ValueId v) const;
  void set_lazy(ir::ValueId v, Lazy lazy) { lazy_.at(v) = std::move(lazy); }

  // A fresh buffer for value v's result: an Output buffer when the caller reads v, else Temp.
  BufferId new_result_buffer(ir::ValueId v);
  // Records that v is realized in `buffer` (identity remap, the buffer's own layout).
  void bind_realized(ir::ValueId v, BufferId buffer);
  // Loads value v at its logical `index` (no broadcasting).
  loop_ir::NodeId load_value(KernelBuilder& kb, ir::ValueId v, const Index& index);
  // Loads value v broadcast to an output of `out_sizes` read at `out_index` (torch's rules:
  // trailing dims align, and a size-1 dim reads index 0).
  loop_ir::NodeId load_broadcast(KernelBuilder& kb, ir::ValueId v, const Index& out_index,
                                 const std::vector<Expr>& out_sizes);
  // Copies value v (through its remap) into `buffer`, one kernel.
  void emit_copy(ir::ValueId v, BufferId buffer);
  // A buffer holding v's elements that torch code may be handed: its own buffer, a View buffer
  // of its base when it aliases it, or else a copy. `for_output`: a View of a Temp would
  // escape the arena, so it is copied into an Output buffer instead.
  BufferId materialize(ir::ValueId v, bool for_output);
  // True if some node after `node` writes a buffer in place.
  bool mutation_after(ir::NodeId node) const;
  bool is_output(ir::ValueId v) const { return output_position_.at(v) >= 0; }
  // How many times the graph's node arguments and outputs name value v.
  int uses(ir::ValueId v) const { return uses_.at(v); }

 private:
  const ir::Graph& graph_;
  LowerOptions options_;
  loop_ir::Program program_;
  std::vector<std::optional<Lazy>> lazy_;
  std::vector<int> output_position_;  // first position of v in the graph's outputs, or -1
  std::vector<std::optional<BufferId>> materialized_output_;  // v's copy for the caller
  std::vector<std::optional<BufferId>> view_buffer_;          // v's View buffer, made once
  std::vector<int> uses_;                                     // per value: uses()
  ir::NodeId last_mutation_ = -1;
};

// One entry per op family (pointwise.cpp, reduction.cpp, views.cpp, data.cpp, externs.cpp). Each
// returns "" when it lowered the node, or why it refuses (having emitted nothing).
std::string lower_pointwise(Lowerer& L, const ir::Node& node);
std::string lower_reduction(Lowerer& L, const ir::Node& node);
std::string lower_view(Lowerer& L, const ir::Node& node);
std::string lower_data(Lowerer& L, const ir::Node& node);
void lower_extern(Lowerer& L, const ir::Node& node);
// `add(matmul(x, B), bias)` (linear.cpp): rewrites the matmul's extern call into
// torch.nn.functional.linear(x, B^T, bias) and binds the add's value to its result, returning true;
// false (nothing emitted) when the add is not such a bias add.
bool lower_linear_bias(Lowerer& L, const ir::Node& add);
// Matmul and linear externs of a [..., M, K] operand whose leading dims merge by strides, and a
// [K, N] one, as torch.mm / linear of [B*M, K] views with a [B*M, N] result the old buffer views.
void fold_matmul_batch_dims(loop_ir::Program& program);
// An in-place pointwise op on a graph input (in_place.cpp): its functional kernel and a copy_ into the
// input, or why not ("a torch call ...", having emitted nothing).
std::string lower_in_place(Lowerer& L, const ir::Node& node);

// Views (views.cpp): the layout of a realized buffer, and whether a layout matches a type.
Layout buffer_layout(const loop_ir::Buffer& buffer);
bool layout_matches(const Layout& layout, const ir::TensorType& type);

}  // namespace ember::lowering::detail
