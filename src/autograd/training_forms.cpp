// random_ops_for_training (rules.h): the forward's random ops in a form whose backward can reuse the
// random numbers the forward drew.
//
// An island cannot differentiate a random op (its recomputation would draw other numbers), so a
// random op that needs a gradient gets a form that returns its mask:
//   - dropout in training becomes aten's native_dropout, which returns (output, mask) and draws the
//     same numbers as F.dropout (torch's CPU and CUDA dropout run it); the backward multiplies by the mask;
//   - scaled_dot_product_attention with dropout, on the CPU, becomes its math form — softmax of the
//     scaled scores (masked), native_dropout, a matmul with v — which is what torch's CPU kernels run
//     with dropout, drawing the same numbers. On CUDA torch's fused kernels draw their own (Philox
//     inside the kernel); such a graph stays eager.
#include <cmath>
#include <limits>

#include "autograd/rules.h"
#include "passes/passes.h"

namespace ember::autograd {

namespace {


// (output, mask) of native_dropout on `x`.
std::vector<ValueId> native_dropout(Rewriter& rw, ValueId x, Arg p) {
  const ir::TensorType& t = rw.type(x);
  ir::TensorType mask = passes::make_type(ir::DType::Bool, t.sizes, t.device, false);
  return rw.emit_torch_tuple("torch.ops.aten.native_dropout", {V(x), std::move(p), Arg::of_literal(true)}, {},
                             {t, mask});
}

bool dropout_in_training(const ir::Graph& g, const ir::Node& node, std::optional<passes::Bound>* bound) {
  if (node.op != Op::Dropout || !g.value(node.results.at(0)).type.requires_grad) return false;
  *bound = passes::bind(node);
  if (!*bound) return false;
  const passes::Bound& b = **bound;
  return passes::bool_literal(b["training"]) == true && passes::bool_literal(b["inplace"]) == false &&
         passes::number_literal(b["p"]).has_value();
}

// softmax(q @ k^T * scale, masked) -> dropout -> @ v, for a CPU attention call with dropout; false
// (nothing emitted) for a form it does not model.
bool attention_as_math(Rewriter& rw, const ir::Graph& g, const ir::Node& node) {
  if (node.op != Op::TorchCall || node.target != "torch.nn.functional.scaled_dot_product_attention" ||
      !passes::has_effect(node) || node.results.size() != 1)
    return false;
  const ir::TensorType& out = g.value(node.results[0]).type;
  if (out.device.type != "cpu" || (out.dtype != DType::Float32 && out.dtype != DType::Float64)) return false;
  const Arg *q = argument(node, 0, "query"), *k = argument(node, 1, "key"), *v = argument(node, 2, "value");
  const Arg* mask = argument(node, 3, "attn_mask");
  const Arg* p = argument(node, 4, "dropout_p");
  const Arg* causal = argument(node, 5, "is_causal");
  const Arg* scale = argument(node, 6, "scale");
  const Arg* gqa = argument(node, 7, "enable_gqa");
  if (!q || !k || !v || !p || q->kind != Arg::Kind::Value || k->kind != Arg::Kind::Value || v->kind != Arg::Kind::Value)
    return false;
  if (gqa && passes::bool_literal(*gqa) != false) return false;
  bool is_causal = causal ? passes::bool_literal(*causal).value_or(true) : false;
  if (causal && !passes::bool_literal(*causal)) return false;
  if (is_causal && mask && !passes::is_none(*mask)) return false;  // torch refuses both
  std::optional<double> dropout = passes::number_literal(*p);
  if (!dropout) return false;
  ValueId qv = rw.mapped(q->value), kv = rw.mapped(k->value), vv = rw.mapped(v->value);
  for (ValueId t : {qv, kv, vv})
    if (rw.type(t).dtype != out.dtype || rank_of(rw, t) < 2) return false;
  std::vector<int64_t> qs = sizes_of(rw, qv), ks = sizes_of(rw, kv);
  int64_t l = qs[qs.size() - 2], s = ks[ks.size() - 2];
  double sc = 1.0 / std::sqrt(static_cast<double>(qs.back()));
  if (scale && !passes::is_none(*scale)) {
    auto given = passes::number_literal(*scale);
    if (!given) return false;
    sc = *given;
  }
  DType dt = out.dtype;
  ValueId scores = binary_s(rw, Op::Mul, product(rw, Op::Matmul, qv, transpose_last(rw, kv)), sc);
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (is_causal) {
    ValueId ones = full(rw, {l, s}, 1.0, DType::Bool, out.device);
    ValueId keep = rw.emit(Op::Tril, {V(ones), Arg::of_literal(int64_t{0})}, {}, rw.type(ones));
    scores = pointwise(rw, Op::Where, {V(keep), V(scores), scalar(neg_inf, dt)}, dt);
  } else if (mask && !passes::is_none(*mask)) {
    if (mask->kind != Arg::Kind::Value) return false;
    ValueId m = rw.mapped(mask->value);
    if (rw.type(m).dtype == DType::Bool) {
      scores = pointwise(rw, Op::Where, {V(m), V(scores), scalar(neg_inf, dt)}, dt);
    } else if (rw.type(m).dtype == dt) {
      scores = binary(rw, Op::Add, scores, V(m));
    } else {
      return false;
    }
  }
  ValueId probs = rw.emit(Op::Softmax, {V(scores), Arg::of_literal(int64_t{-1})}, {}, rw.type(scores));
  if (*dropout > 0.0) probs = native_dropout(rw, probs, *p)[0];
  ValueId result = product(rw, Op::Matmul, probs, vv);
  rw.bind(node.results[0], result);
  return true;
}

}  // namespace

void random_ops_for_training(ir::Graph& g) {
  Rewriter rw(g);
  bool changed = false;
  for (const ir::Node& node : g.nodes()) {
    std::optional<passes::Bound> b;
    if (dropout_in_training(g, node, &b)) {
      rw.bind(node.results[0], native_dropout(rw, rw.map((*b)["input"]).value, (*b)["p"])[0]);
      changed = true;
      continue;
    }
    Rewriter::Mark mark = rw.mark();
    try {
      if (attention_as_math(rw, g, node)) {
        changed = true;
        continue;
      }
    } catch (passes::Refuse&) {
    }
    rw.rollback(mark);
    rw.copy(node);
  }
  if (changed) g = rw.finish();
}

}  // namespace ember::autograd
