// Internal to autograd: the derivative table and what a rule sees (joint.cpp, rules_*.cpp).
//
// The table (vjp.def) has one entry per core op of ir/ops.def, in its order, checked at compile
// time: an op added to ops.def without a derivative entry fails to build. Kinds:
//   Rule               a function that emits the vector-Jacobian product in primitives;
//   NonDifferentiable  no gradient flows (comparisons, bitwise, factories, integer results);
//   ZeroGradient       torch's derivative is zero (floor, ceil, round, sign, ...): the input gets
//                      zeros, as torch gives it, not None;
//   Decomposed         differentiated through its decomposition (passes/decompose), whose
//                      primitives all have rules: views and spellings that decompose exactly.
// Generic torch calls (ir::Op::TorchCall) have rules by callable name where torch offers a
// backward to call (convolution); otherwise they are decomposed when decompose has a rule, else
// they become islands.
//
// A rule reads the forward node through its bound arguments (passes/signatures.h), reads the
// gradients of the node's results, and gives each differentiable argument its gradient with
// give(): broadcasting is undone (summed to the argument's size) and the dtype converted there, so
// rules compute in the result's shape and dtype. A rule that meets a form it does not handle
// exactly throws passes::Refuse; whatever it emitted is rolled back and the node becomes an island.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "passes/builders.h"
#include "passes/signatures.h"

namespace ember::autograd {

using ir::Arg;
using ir::DType;
using ir::Op;
using ir::ValueId;
using passes::Rewriter;
using namespace passes::build;

class VjpCtx {
 public:
  VjpCtx(Rewriter& rw, const ir::Node& node, std::vector<std::optional<ValueId>> grads_out);

  Rewriter& rw;
  const ir::Node& node;                            // the forward node: source (forward graph) ids
  std::optional<passes::Bound> bound;              // when the callable has a signature and binds

  // The bound argument of a parameter (Refuse when the call did not bind).
  const Arg& arg(std::string_view name) const;
  // Positional argument i of the node (Refuse when absent): the op table's operands come first.
  const Arg& pos(size_t i) const;
  int64_t int_arg(std::string_view name) const;
  double number_arg(std::string_view name) const;
  bool bool_arg(std::string_view name) const;
  bool none(std::string_view name) const { return passes::is_none(arg(name)); }
  // The joint value of a tensor argument (Refuse when it is not a tensor).
  ValueId in(const Arg& a) const;
  ValueId in(std::string_view name) const { return in(arg(name)); }
  // The joint value of result i, and the gradient flowing into it (nullopt: none does).
  ValueId out(size_t i = 0) const;
  const std::optional<ValueId>& grad(size_t i = 0) const { return grads_out_.at(i); }
  // The gradient of result i, zeros when none flows (for rules of several results).
  ValueId grad_or_zeros(size_t i);
  // Whether an argument is a tensor that requires grad (a gradient must be given to it).
  bool needs(const Arg& a) const;
  bool needs(std::string_view name) const { return needs(arg(name)); }
  // Gives a tensor argument (a contribution to) its gradient; nothing when it does not need one.
  // `g` may have the argument's broadcast shape and another dtype.
  void give(const Arg& a, ValueId g);
  void give(std::string_view name, ValueId g) { give(arg(name), g); }
  // Gives the gradient of the slice [start, start + size) along `dim` of a tensor argument (zeros
  // elsewhere). Pieces of one tensor are joined by a cat where they meet (the backward of split or
  // chunk is one cat, not a scatter and an add per piece).
  void give_slice(const Arg& a, ValueId g, int64_t dim, int64_t start);

  // One contribution to the gradient of a forward value: the whole gradient, or (dim >= 0) that
  // of the slice starting at `start` along `dim`.
  struct Contribution {
    ValueId value, grad;
    int64_t dim = -1, start = 0;
  };
  // The contributions given, committed by joint.cpp once the rule succeeded.
  const std::vector<Contribution>& given() const { return given_; }

 private:
  std::vector<std::optional<ValueId>> grads_out_;
  std::vector<Contribution> given_;
};

using VjpRule = std::function<void(VjpCtx&)>;

struct VjpEntry {
  enum class Kind : uint8_t { Rule, NonDifferentiable, ZeroGradient, Decomposed } kind;
  VjpRule rule;  // Kind::Rule only
};

// The entry of a core op (rules.cpp).
const VjpEntry& vjp_entry(Op op);
// The rule for a generic torch call by callable name, or nullptr (rules_extern.cpp).
const VjpRule* torch_call_rule(std::string_view callable);
// Whether joint.cpp differentiates this node as it stands (a Rule, NonDifferentiable or ZeroGradient
// entry, or a torch-call rule); otherwise it decomposes it first.
bool differentiates_whole(const ir::Node& node);

// The forward rewritten where training needs another form than inference (training_forms.cpp):
// random ops whose masks the backward must reuse draw them from a counter-based generator
// (philox_rand, recomputed by the backward) or, under `exact_random`, in a node that returns the
// mask (eager's own numbers).
void random_ops_for_training(ir::Graph& g, bool exact_random);

// Rules by family; each file defines the functions rules.cpp's table names.
namespace rules {
#define EMBER_VJP_RULE(op, function) void function(VjpCtx& c);
#define EMBER_VJP_KIND(op, kind)
#include "autograd/vjp.def"
#undef EMBER_VJP_RULE
#undef EMBER_VJP_KIND
// Rules of torch calls only (torch_call_rule).
void native_dropout_vjp(VjpCtx& c);  // dropout in training, as joint.cpp rewrites it
void attr_mT_vjp(VjpCtx& c);         // x.mT
void attr_T_vjp(VjpCtx& c);          // x.T
void clone_vjp(VjpCtx& c);           // torch.clone, x.clone()
void selected_values_vjp(VjpCtx& c); // torch.topk, torch.max/min (values and indices, or of every element)
void conv1d_vjp(VjpCtx& c);
void conv2d_vjp(VjpCtx& c);
void conv3d_vjp(VjpCtx& c);
void unfold_vjp(VjpCtx& c);  // F.unfold: F.fold of the gradient
void fused_attention_vjp(VjpCtx& c);  // attention's training form (training_forms.cpp)
void mse_loss_vjp(VjpCtx& c);
void adaptive_avg_pool2d_vjp(VjpCtx& c);
void adaptive_avg_pool1d_vjp(VjpCtx& c);
void pad_vjp(VjpCtx& c);
void max_pool2d_with_indices_vjp(VjpCtx& c);  // F.max_pool2d's training form (training_forms.cpp)
void avg_pool2d_vjp(VjpCtx& c);
void interpolate_vjp(VjpCtx& c);  // F.interpolate (rules_resample.cpp)
void vector_norm_vjp(VjpCtx& c);  // torch.linalg.vector_norm, Tensor.norm (rules_reduce.cpp)
void normalize_vjp(VjpCtx& c);    // F.normalize
// x[index] with integer tensor indices (advanced indexing), which decompose keeps whole (joint.cpp).
void getitem_index_vjp(VjpCtx& c);
}  // namespace rules

// Argument `position` or keyword `name` of a call, as the call gave it; nullptr when absent.
const Arg* argument(const ir::Node& node, size_t position, std::string_view name);

// A pooling call's constant arguments after its input (positions 1, 2, ...), as aten's pooling ops
// take them positionally: each given one, else its default (F's None spelled as the default given
// here: a stride of None is []); nullopt when one is a tensor, or a required one (default nullopt)
// is missing or None (rules_data.cpp).
std::optional<std::vector<Arg>> pool_arguments(const ir::Node& node,
                                               const std::vector<std::pair<const char*, std::optional<Arg>>>& params);

// Shapes and builders the rule families share. Sizes are expressions (sym::Expr): a static size
// is a constant, a dynamic one a symbolic expression (docs/dynamic-shapes.md), and the helpers treat
// both alike, so a rule that only moves sizes around serves both. Where a rule needs a number (a
// slice offset, an element count as a float literal) it asks for a constant and refuses otherwise.
using Sizes = std::vector<sym::Expr>;
Sizes sizes_of(Rewriter& rw, ValueId v);
int64_t rank_of(Rewriter& rw, ValueId v);
// The product of `sizes` over `dims` (every dim when `dims` is all of them): an element count.
sym::Expr count(const Sizes& sizes, const std::vector<int64_t>& dims);
// Sums `g` down to `sizes` (undoing a broadcast), keeping its dtype. A dim is summed where `sizes`
// has a constant 1 and `g` something else; sizes compare structurally (duck-sized symbols are one
// symbol, so a broadcast between dynamic dims is spelled equal).
ValueId sum_to_size(Rewriter& rw, ValueId g, const Sizes& sizes);
// `x` restored to the rank of a reduction's input: the reduced dims put back as size 1 when the
// reduction dropped them, then expanded to `sizes`.
ValueId unreduce(Rewriter& rw, ValueId x, const std::vector<int64_t>& dims, bool keepdim, const Sizes& sizes);
// A tensor of `sizes` filled with `value` (passes::build::full over expressions).
ValueId filled(Rewriter& rw, const Sizes& sizes, double value, DType dt, const ir::Device& device);
ValueId mul(Rewriter& rw, ValueId a, ValueId b);
ValueId zeros_like(Rewriter& rw, ValueId like);
// x with its last two dims swapped (a view).
ValueId transpose_last(Rewriter& rw, ValueId x);
// a @ b by a matmul-family op, the result's batch dims broadcast as torch's matmul does.
ValueId product(Rewriter& rw, Op op, ValueId a, ValueId b);

// The fused attention kernels' training form: its callable on `device` (aten's CPU kernel, or
// ember.autograd.cuda_attention), nullptr on another device, and the layout each kernel gives a result
// (`q`: the query's type; measured, torch 2.11 on the H200 and 2.13 on the CPU):
// - the output: dense in q's dimension order on both devices (CUDA's cuDNN and flash kernels by
//   torch's alloc_with_matching_layout, the CPU's by empty_like), so a q split from a projection gives
//   [B, L, H, D] order and a contiguous q a contiguous output;
// - the gradients of q, k and v: CUDA's in their input's order, the CPU's always [B, L, H, D] order;
// - the logsumexp ([B, H, L]): contiguous on CUDA, [B, L, H] order on the CPU.
// CUDA's memory-efficient kernel differs ([B, L, H, D] where q is contiguous): the runtime copies it.
enum class AttentionResult { Output, Gradient, LogSumExp };
const char* fused_attention_callable(const ir::Device& device);
ir::TensorType fused_attention_result_type(AttentionResult which, DType dt, const Sizes& sizes, const ir::TensorType& like);

}  // namespace ember::autograd
