// random_ops_for_training (rules.h): the forward's random ops in a form whose backward can reuse the
// random numbers the forward drew.
//
// An island cannot differentiate a random op (its recomputation would draw other numbers), so a
// random op that needs a gradient gets a form whose numbers the backward can have again:
//   - dropout in training becomes x * (u >= p) / (1 - p) over u = philox_rand(seed, offset, sizes):
//     pointwise ops that fuse with x's producer and consumer, and that the backward recomputes from
//     the seed (8 saved bytes) instead of saving a mask. The seed is drawn once per call by
//     ember.rng.philox_seed (torch's default generator of the device, so torch.manual_seed makes
//     runs reproducible); each dropout of the graph gets its own counter range, offset k << 32 for
//     the k-th (a tensor of up to 2^32 elements each). The numbers differ from eager's, as
//     torch.compile's do;
//   - under `exact_random` (the option fallback_random) dropout becomes aten's native_dropout
//     instead, which returns (output, mask) and draws the same numbers as F.dropout (torch's CPU
//     and CUDA dropout run it); the backward multiplies by the saved mask;
//   - scaled_dot_product_attention with dropout becomes its math form — softmax of the scaled scores
//     (masked), dropout as above, a matmul with v (attention with a mask that requires grad, or shapes
//     the fused kernels refuse, takes it too, without dropout: eager's math backend, in float32 for
//     float16/bfloat16). With native_dropout that is what torch's CPU
//     kernels run, drawing the same numbers: on the CPU only, as on CUDA torch's fused kernels draw
//     their own (Philox inside the kernel) and such a graph stays eager under exact_random.
// Two deterministic ops get a training form too: scaled_dot_product_attention without dropout, on the
// CPU and CUDA, becomes a fused kernel that returns the logsumexp its backward reads (torch 2.13's
// _scaled_dot_product_flash_attention_for_cpu on the CPU; on CUDA ember.autograd.cuda_attention, which
// runs flash or memory-efficient attention as torch would; elsewhere attention stays an island), and
// F.max_pool2d becomes aten's max_pool2d_with_indices, which returns the indices its backward reads.
#include <cmath>
#include <limits>
#include <map>

#include "autograd/rules.h"
#include "passes/passes.h"

namespace ember::autograd {

namespace {

// How the graph's dropouts draw: Philox streams of one seed per device, or eager's native_dropout.
class Dropouts {
 public:
  explicit Dropouts(bool exact) : exact_(exact) {}

  // Dropout of `x` with the literal probability `p`, in training.
  ValueId apply(Rewriter& rw, ValueId x, const Arg& p) {
    if (exact_) return native_dropout(rw, x, p);
    const double prob = passes::number_literal(p).value();
    const ir::TensorType& t = rw.type(x);
    ValueId u = uniform(rw, t.device, t.sizes);
    ValueId keep = pointwise(rw, Op::Ge, {V(u), scalar(prob, DType::Float32)}, DType::Bool);
    ValueId kept = mul(rw, x, convert(rw, keep, t.dtype));
    return binary_s(rw, Op::Mul, kept, prob >= 1.0 ? 0.0 : 1.0 / (1.0 - prob));
  }

  bool exact() const { return exact_; }

 private:
  // Output of native_dropout on `x` (its mask is the node's second result).
  static ValueId native_dropout(Rewriter& rw, ValueId x, const Arg& p) {
    const ir::TensorType& t = rw.type(x);
    ir::TensorType mask = passes::make_type(ir::DType::Bool, t.sizes, t.device, false);
    return rw.emit_torch_tuple("torch.ops.aten.native_dropout", {V(x), p, Arg::of_literal(true)}, {}, {t, mask})[0];
  }

  // float32 uniforms of `sizes` from the next counter range of the device's seed.
  ValueId uniform(Rewriter& rw, const ir::Device& device, const Sizes& sizes) {
    auto [it, fresh] = seeds_.emplace(device.str(), -1);
    if (fresh)
      it->second = rw.emit_torch("ember.rng.philox_seed", {Arg::of_literal(device.str())}, {},
                                 passes::make_type(DType::Int64, {}, device, false));
    std::vector<Arg> dims;
    for (const sym::Expr& s : sizes) dims.push_back(Arg::of_size(s));
    const int64_t offset = next_stream_++ << 32;
    return rw.emit(Op::PhiloxRand, {V(it->second), Arg::of_literal(offset), Arg::list(std::move(dims))}, {},
                   passes::make_type(DType::Float32, sizes, device, false));
  }

  bool exact_;
  std::map<std::string, ValueId> seeds_;  // by device
  int64_t next_stream_ = 0;
};

bool dropout_in_training(const ir::Graph& g, const ir::Node& node, std::optional<passes::Bound>* bound) {
  if (node.op != Op::Dropout || !g.value(node.results.at(0)).type.requires_grad) return false;
  *bound = passes::bind(node);
  if (!*bound) return false;
  const passes::Bound& b = **bound;
  return passes::bool_literal(b["training"]) == true && passes::bool_literal(b["inplace"]) == false &&
         passes::number_literal(b["p"]).has_value();
}

// Grouped-query attention's k and v (`enable_gqa=True`): each of their heads repeated to q's head
// count, n times in a row ([B, Hkv, S, D] -> [B, Hkv * n, S, D], aten's repeat_interleave on dim -3,
// what the flag means), so the kernels below see one k and v head per q head and the backward sums
// each group's gradients through the expand. False (nothing changed) unless `gqa` is a literal and
// the head counts are constants that divide (eager raises otherwise; the island keeps its error).
bool grouped_kv(Rewriter& rw, const Arg* gqa, ValueId q, ValueId* k, ValueId* v) {
  if (!gqa || passes::bool_literal(*gqa) == false) return true;
  if (passes::bool_literal(*gqa) != true || rank_of(rw, q) != 4 || rank_of(rw, *k) != 4 || rank_of(rw, *v) != 4)
    return false;
  const sym::Expr heads = sizes_of(rw, q)[1], kv_heads = sizes_of(rw, *k)[1];
  if (!heads.is_constant() || !kv_heads.is_constant() || sizes_of(rw, *v)[1] != kv_heads || kv_heads.constant() == 0 ||
      heads.constant() % kv_heads.constant() != 0)
    return false;
  const int64_t n = heads.constant() / kv_heads.constant();
  if (n == 1) return true;
  for (ValueId* x : {k, v}) {
    const Sizes s = sizes_of(rw, *x);
    ValueId one = reshape_symbolic(rw, *x, {s[0], s[1], sym::Expr(int64_t{1}), s[2], s[3]});
    ValueId wide = expand_symbolic(rw, one, {s[0], s[1], sym::Expr(n), s[2], s[3]});
    *x = reshape_symbolic(rw, wide, {s[0], heads, s[2], s[3]});
  }
  return true;
}

// Whether eager's fused attention kernels refuse the call's shapes, so that torch runs its math backend:
// q, k, v not 4-d (timm's NesT: 5-d), or k and v broadcast over q's batch or heads without enable_gqa
// (multi-query attention spelled as a broadcast: transformers' Falcon, one k and v head for all q heads),
// or, on the CPU, a mask neither 2-d nor 4-d, which its flash kernel refuses (sdp_utils'
// check_attn_mask_shape; timm's TinyViT: a [heads, N, N] bias). A mask that broadcasts has its other
// dims 1 or the scores' already.
bool fused_kernel_refuses_shapes(const ir::Graph& g, const ir::Node& node) {
  const Arg *q = argument(node, 0, "query"), *k = argument(node, 1, "key"), *v = argument(node, 2, "value");
  if (!q || !k || !v || q->kind != Arg::Kind::Value || k->kind != Arg::Kind::Value || v->kind != Arg::Kind::Value)
    return false;
  const Sizes &qs = g.value(q->value).type.sizes, &ks = g.value(k->value).type.sizes, &vs = g.value(v->value).type.sizes;
  if (qs.size() != 4) return true;
  const Arg* gqa = argument(node, 7, "enable_gqa");
  if (gqa && passes::bool_literal(*gqa) != false) return false;
  if (ks.size() == 4 && vs.size() == 4 && (ks[0] != qs[0] || ks[1] != qs[1] || vs[0] != qs[0] || vs[1] != qs[1]))
    return true;
  const Arg* mask = argument(node, 3, "attn_mask");
  if (g.value(q->value).type.device.type != "cpu" || !mask || mask->kind != Arg::Kind::Value) return false;
  const size_t mask_rank = g.value(mask->value).type.sizes.size();
  return mask_rank != 2 && mask_rank != 4;
}

// softmax(q @ k^T * scale, masked) -> dropout -> @ v, for an attention call with dropout, with a mask
// that requires grad, or with shapes the fused kernels refuse: what eager runs then too, as its fused
// kernels give no mask gradient, so torch takes its math backend (timm's MaxViT/CoAtNet and transformers'
// Swin pass a learned relative-position bias as the mask); the mask's gradient is the scores', and k and v
// broadcast over heads get theirs summed back by give(). False (nothing emitted) for a form it does not model.
bool attention_as_math(Rewriter& rw, const ir::Graph& g, const ir::Node& node, Dropouts& dropouts) {
  if (node.op != Op::TorchCall || node.target != "torch.nn.functional.scaled_dot_product_attention" ||
      node.results.size() != 1)
    return false;
  const Arg* mask = argument(node, 3, "attn_mask");
  const bool with_dropout = passes::has_effect(node);
  const bool mask_needs_grad = mask && mask->kind == Arg::Kind::Value && g.value(mask->value).type.requires_grad;
  if (!with_dropout && !mask_needs_grad && !fused_kernel_refuses_shapes(g, node)) return false;
  const ir::TensorType& out = g.value(node.results[0]).type;
  // float16/bfloat16 compute in float32 and round once, as torch's math backend does (unless
  // allow_fp16_bf16_reduction_math_sdp). With dropout off the CPU eager runs a fused kernel that draws
  // its own numbers and saves no [L, S] probabilities (the float32 ones would): not this form.
  const bool on_cpu = out.device.type == "cpu";
  const bool half = out.dtype == DType::Float16 || out.dtype == DType::BFloat16;
  if ((with_dropout && !on_cpu && (dropouts.exact() || half)) ||
      (out.dtype != DType::Float32 && out.dtype != DType::Float64 && !half))
    return false;
  const Arg *q = argument(node, 0, "query"), *k = argument(node, 1, "key"), *v = argument(node, 2, "value");
  const Arg* p = argument(node, 4, "dropout_p");
  const Arg* causal = argument(node, 5, "is_causal");
  const Arg* scale = argument(node, 6, "scale");
  const Arg* gqa = argument(node, 7, "enable_gqa");
  if (!q || !k || !v || q->kind != Arg::Kind::Value || k->kind != Arg::Kind::Value || v->kind != Arg::Kind::Value)
    return false;
  bool is_causal = causal ? passes::bool_literal(*causal).value_or(true) : false;
  if (causal && !passes::bool_literal(*causal)) return false;
  if (is_causal && mask && !passes::is_none(*mask)) return false;  // torch refuses both
  std::optional<double> dropout = p ? passes::number_literal(*p) : 0.0;
  if (!dropout) return false;
  ValueId qv = rw.mapped(q->value), kv = rw.mapped(k->value), vv = rw.mapped(v->value);
  for (ValueId t : {qv, kv, vv})
    if (rw.type(t).dtype != out.dtype || rank_of(rw, t) < 2) return false;
  if (!grouped_kv(rw, gqa, qv, &kv, &vv)) return false;
  const DType dt = half ? DType::Float32 : out.dtype;
  if (half) {
    qv = convert(rw, qv, dt);
    kv = convert(rw, kv, dt);
    vv = convert(rw, vv, dt);
  }
  Sizes qs = sizes_of(rw, qv), ks = sizes_of(rw, kv);
  sym::Expr l = qs[qs.size() - 2], s = ks[ks.size() - 2];
  if (!qs.back().is_constant()) return false;  // the default scale is a literal of the head size
  double sc = 1.0 / std::sqrt(static_cast<double>(qs.back().constant()));
  if (scale && !passes::is_none(*scale)) {
    auto given = passes::number_literal(*scale);
    if (!given) return false;
    sc = *given;
  }
  ValueId scores = binary_s(rw, Op::Mul, product(rw, Op::Matmul, qv, transpose_last(rw, kv)), sc);
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (is_causal) {
    ValueId ones = filled(rw, {l, s}, 1.0, DType::Bool, out.device);
    ValueId keep = rw.emit(Op::Tril, {V(ones), Arg::of_literal(int64_t{0})}, {}, rw.type(ones));
    scores = pointwise(rw, Op::Where, {V(keep), V(scores), scalar(neg_inf, dt)}, dt);
  } else if (mask && !passes::is_none(*mask)) {
    if (mask->kind != Arg::Kind::Value) return false;
    ValueId m = rw.mapped(mask->value);
    if (rw.type(m).dtype == DType::Bool) {
      scores = pointwise(rw, Op::Where, {V(m), V(scores), scalar(neg_inf, dt)}, dt);
    } else if (rw.type(m).dtype == out.dtype) {
      scores = binary(rw, Op::Add, scores, V(half ? convert(rw, m, dt) : m));
    } else {
      return false;
    }
  }
  // torch's math backend takes a safe softmax: a row masked whole (all -inf) gives zeros, not NaN.
  ValueId probs = rw.emit(Op::Softmax, {V(scores), Arg::of_literal(int64_t{-1})}, {}, rw.type(scores));
  ValueId row_max = reduce(rw, Op::Amax, scores, {rank_of(rw, scores) - 1}, true);
  ValueId masked_row = pointwise(rw, Op::Eq, {V(row_max), scalar(neg_inf, dt)}, DType::Bool);
  probs = pointwise(rw, Op::Where, {V(masked_row), scalar(0.0, dt), V(probs)}, dt);
  if (*dropout > 0.0) probs = dropouts.apply(rw, probs, *p);
  ValueId result = product(rw, Op::Matmul, probs, vv);
  rw.bind(node.results[0], half ? convert(rw, result, out.dtype) : result);
  return true;
}

// A fused attention kernel for an attention call without dropout, on the CPU or CUDA
// (fused_attention_callable): it returns the logsumexp of the scaled scores beside the output,
// which its backward (fused_attention_vjp) reads, so the backward saves q, k, v, the output and the
// logsumexp instead of recomputing attention as an island. Grouped-query attention gets its k and v
// heads repeated (grouped_kv); a boolean mask becomes the additive one aten makes of it (0 where
// true, -inf where false) before its fused kernels. False (nothing emitted) where no kernel applies:
// another device, a float8 dtype, differing head sizes, head counts that differ without
// enable_gqa, a mask that requires grad.
bool attention_as_fused(Rewriter& rw, const ir::Graph& g, const ir::Node& node) {
  if (node.op != Op::TorchCall || node.target != "torch.nn.functional.scaled_dot_product_attention" ||
      passes::has_effect(node) || node.results.size() != 1)
    return false;
  const ir::TensorType& out = g.value(node.results[0]).type;
  const char* callable = fused_attention_callable(out.device);
  if (!out.requires_grad || !callable || !ir::is_floating(out.dtype) || ir::dtype_itemsize(out.dtype) < 2)
    return false;
  const Arg *q = argument(node, 0, "query"), *k = argument(node, 1, "key"), *v = argument(node, 2, "value");
  const Arg* mask = argument(node, 3, "attn_mask");
  const Arg* p = argument(node, 4, "dropout_p");
  const Arg* causal = argument(node, 5, "is_causal");
  const Arg* scale = argument(node, 6, "scale");
  const Arg* gqa = argument(node, 7, "enable_gqa");
  if (!q || !k || !v || q->kind != Arg::Kind::Value || k->kind != Arg::Kind::Value || v->kind != Arg::Kind::Value)
    return false;
  if (p && passes::number_literal(*p) != 0.0) return false;
  bool is_causal = false;
  if (causal) {
    std::optional<bool> c = passes::bool_literal(*causal);
    if (!c) return false;
    is_causal = *c;
  }
  ValueId qv = rw.mapped(q->value), kv = rw.mapped(k->value), vv = rw.mapped(v->value);
  if (!grouped_kv(rw, gqa, qv, &kv, &vv)) return false;
  Sizes qs = sizes_of(rw, qv);
  for (ValueId t : {qv, kv, vv}) {
    Sizes ts = sizes_of(rw, t);
    if (rw.type(t).dtype != out.dtype || ts.size() != 4 || ts[1] != qs[1] || ts[3] != qs[3]) return false;
  }
  Arg additive = Arg::of_literal(ir::NoneLiteral{});
  if (mask && !passes::is_none(*mask)) {
    if (is_causal) return false;  // torch refuses both
    if (mask->kind != Arg::Kind::Value) return false;
    ValueId m = rw.mapped(mask->value);
    if (rw.type(m).requires_grad) return false;
    if (rw.type(m).dtype == DType::Bool)  // where of two Python floats is float32 (exact here), then converted
      m = convert(rw,
                  pointwise(rw, Op::Where,
                            {V(m), Arg::of_literal(0.0), Arg::of_literal(-std::numeric_limits<double>::infinity())},
                            DType::Float32),
                  out.dtype);
    if (rw.type(m).dtype != out.dtype) return false;
    additive = V(m);
  }
  Arg given_scale = Arg::of_literal(ir::NoneLiteral{});
  if (scale && !passes::is_none(*scale)) {
    if (!passes::number_literal(*scale)) return false;
    given_scale = *scale;
  }
  // The logsumexp is float32 for float16/bfloat16 inputs (the kernels' accumulation type).
  const ir::TensorType lse = fused_attention_result_type(AttentionResult::LogSumExp, opmath(out.dtype),
                                                         {qs[0], qs[1], qs[2]}, rw.type(qv));
  // The kernel's result in the layout it gives (fused_attention_result_type); the nodes after the call
  // were typed against the traced one (contiguous: what torch's meta kernel says), which a copy makes
  // where they differ. The backward reads the kernel's own layout: cuDNN's and memory-efficient
  // attention's backwards are wrong given another (cuda_attention_backward). A traced layout other than
  // contiguous is kept on the CPU (the runtime copies the kernel's result into it); on CUDA the form
  // is refused.
  ir::TensorType result = fused_attention_result_type(AttentionResult::Output, out.dtype, out.sizes, rw.type(qv));
  result.requires_grad = out.requires_grad;
  if (result.strides != out.strides && out.strides != ir::contiguous_strides(out.sizes)) {
    if (out.device.type != "cpu") passes::refuse();
    result = out;
  }
  std::vector<ValueId> r;
  if (out.device.type == "cpu") {  // aten's positional (q, k, v, dropout_p, is_causal), the rest by keyword
    passes::Kwargs kwargs;
    if (!passes::is_none(additive)) kwargs.emplace_back("attn_mask", additive);
    if (!passes::is_none(given_scale)) kwargs.emplace_back("scale", given_scale);
    r = rw.emit_torch_tuple(callable, {V(qv), V(kv), V(vv), Arg::of_literal(0.0), Arg::of_literal(is_causal)},
                            std::move(kwargs), {result, lse});
  } else {  // cuda_attention(q, k, v, attn_mask, is_causal, scale)
    r = rw.emit_torch_tuple(callable, {V(qv), V(kv), V(vv), additive, Arg::of_literal(is_causal), given_scale}, {},
                            {result, lse});
  }
  ValueId traced = r[0];
  if (result.strides != out.strides) traced = rw.emit(Op::Contiguous, {V(r[0])}, {}, out);
  rw.bind(node.results[0], traced);
  return true;
}

// aten's max_pool2d_with_indices for F.max_pool2d in a training graph: it returns the indices of the
// maxima, which its backward (max_pool2d_with_indices_vjp) reads as eager's does, instead of an island
// that pools again under torch autograd. False for a form it does not model (indices asked for, an
// argument that is a tensor).
bool max_pool_with_indices(Rewriter& rw, const ir::Graph& g, const ir::Node& node) {
  if (node.op != Op::TorchCall || node.target != "torch.nn.functional.max_pool2d" || node.results.size() != 1)
    return false;
  const ir::TensorType& out = g.value(node.results[0]).type;
  const Arg* x = argument(node, 0, "input");
  if (!out.requires_grad || !x || x->kind != Arg::Kind::Value) return false;
  if (const Arg* indices = argument(node, 6, "return_indices"); indices && passes::bool_literal(*indices) != false)
    return false;
  std::optional<std::vector<Arg>> args = pool_arguments(
      node, {{"kernel_size", std::nullopt}, {"stride", Arg::list({})}, {"padding", Arg::of_literal(int64_t{0})},
             {"dilation", Arg::of_literal(int64_t{1})}, {"ceil_mode", Arg::of_literal(false)}});
  if (!args) return false;
  args->insert(args->begin(), V(rw.mapped(x->value)));
  ir::TensorType indices = passes::make_type(DType::Int64, out.sizes, out.device, false);
  rw.bind(node.results[0], rw.emit_torch_tuple("torch.ops.aten.max_pool2d_with_indices", std::move(*args), {},
                                               {out, indices})[0]);
  return true;
}

}  // namespace

bool attention_math_for_inference(ir::Graph& g) {
  Rewriter rw(g);
  Dropouts no_dropout(false);
  bool changed = false;
  for (const ir::Node& node : g.nodes()) {
    const bool math = node.op == Op::TorchCall && node.target == "torch.nn.functional.scaled_dot_product_attention" &&
                      node.results.size() == 1 && !passes::has_effect(node) &&
                      g.value(node.results[0]).type.device.type == "cpu" &&
                      !g.value(node.results[0]).type.requires_grad && fused_kernel_refuses_shapes(g, node);
    Rewriter::Mark mark = rw.mark();
    try {
      if (math && attention_as_math(rw, g, node, no_dropout)) {
        changed = true;
        continue;
      }
    } catch (passes::Refuse&) {
    }
    rw.rollback(mark);
    rw.copy(node);
  }
  if (changed) g = rw.finish();
  return changed;
}

void random_ops_for_training(ir::Graph& g, bool exact_random) {
  Rewriter rw(g);
  Dropouts dropouts(exact_random);
  bool changed = false;
  for (const ir::Node& node : g.nodes()) {
    std::optional<passes::Bound> b;
    if (dropout_in_training(g, node, &b)) {
      rw.bind(node.results[0], dropouts.apply(rw, rw.map((*b)["input"]).value, (*b)["p"]));
      changed = true;
      continue;
    }
    Rewriter::Mark mark = rw.mark();
    Dropouts before = dropouts;  // a rollback also takes back a seed drawn for the attempt
    try {
      if (attention_as_math(rw, g, node, dropouts) || attention_as_fused(rw, g, node) ||
          max_pool_with_indices(rw, g, node)) {
        changed = true;
        continue;
      }
    } catch (passes::Refuse&) {
    }
    rw.rollback(mark);
    dropouts = before;
    rw.copy(node);
  }
  if (changed) g = rw.finish();
}

}  // namespace ember::autograd
