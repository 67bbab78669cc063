"""The derivative-rule cases of test_rules.py: one or more per line of src/autograd/vjp.def that is
a Rule, ZeroGradient or Decomposed, and per torch-call rule (rules_data.cpp `torch_call_rule`).

A case is a small function using the op, the inputs it is called with (made by a seeded factory so
eager and Ember see the same values), and the table entries it covers: an op of ir/ops.def by its
enum name or a torch callable by its qualified name: the captured graph must contain it, or (for
the ops only decompositions emit, such as convert and slice) the forward part of its joint graph.
Cases that cover nothing test a path into a rule (a torch call decomposed first). Shapes have size-1 dims, broadcast, and transposed inputs where the
op takes them.
"""
import dataclasses
from typing import Callable

import torch
import torch.nn.functional as F

from ember.testing import DEVICE

F64 = torch.float64

# Attention's training form on each device (src/autograd/training_forms.cpp). A case reaches the test device's;
# test_attention.py::test_cuda_training_form checks CUDA's on its graph text, without a GPU.
FUSED_ATTENTION = {"cpu": "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
                   "cuda": "ember.autograd.cuda_attention"}


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    covers: tuple        # vjp.def enum names, or torch callables ("torch.nn.functional.softmax")
    fn: Callable
    inputs: Callable     # (dtype) -> tuple of arguments; floating tensors require grad
    gradcheck: bool = True  # False where finite differences do not apply (a dtype round trip)
    exact_random: bool = False  # compiled with fallback_random: dropout draws eager's numbers

    def __post_init__(self):
        # Ember compiles the frames of user code, not torch's: a torch callable is called from one.
        if getattr(self.fn, "__module__", None) != __name__:
            fn = self.fn
            object.__setattr__(self, "fn", lambda *args: fn(*args))


# --- Input factories: each draws from the global generator, which the test seeds. ---------------

def R(*shape, dtype=F64):
    """Normal values, requires grad."""
    return torch.randn(*shape, dtype=dtype).requires_grad_()


def T(*shape, dtype=F64):
    """Like R, but a transposed (non-contiguous) leaf of `shape`."""
    return torch.randn(*shape[:-2], shape[-1], shape[-2], dtype=dtype).transpose(-1, -2).detach().requires_grad_()


def P(*shape, lo=0.5, hi=2.0, dtype=F64):
    """Uniform in [lo, hi) (away from the poles of log, sqrt, 1/x), requires grad."""
    return (torch.rand(*shape, dtype=dtype) * (hi - lo) + lo).requires_grad_()


def Ties(*shape, dtype=F64):
    """Small integers as floats: many equal values (the tie rules of max/min and amax/amin)."""
    return torch.randint(0, 3, shape).to(dtype).requires_grad_()


def Index(high, *shape):
    return torch.randint(0, high, shape)


def Mask(*shape):
    return torch.rand(*shape) > 0.5


# --- The cases, by family. -----------------------------------------------------------------------

def _unary(enum, fn, make=lambda dt: (R(3, 1, 4, dtype=dt),)):
    return Case(enum.lower(), (enum,), fn, make)


POINTWISE = [
    _unary("Neg", torch.neg),
    _unary("Abs", torch.abs),
    _unary("Exp", torch.exp),
    _unary("Log", torch.log, lambda dt: (P(3, 1, 4, dtype=dt),)),
    _unary("Sqrt", torch.sqrt, lambda dt: (P(3, 1, 4, dtype=dt),)),
    _unary("Rsqrt", torch.rsqrt, lambda dt: (P(3, 1, 4, dtype=dt),)),
    _unary("Sin", torch.sin),
    _unary("Cos", torch.cos),
    _unary("Tanh", torch.tanh),
    _unary("Sigmoid", torch.sigmoid),
    _unary("Erf", torch.erf),
    _unary("Reciprocal", torch.reciprocal, lambda dt: (P(3, 1, 4, dtype=dt),)),
    _unary("Relu", torch.relu),
    Case("gelu", ("Gelu",), F.gelu, lambda dt: (R(3, 1, 4, dtype=dt),)),
    Case("gelu_tanh", ("Gelu",), lambda x: F.gelu(x, approximate="tanh"), lambda dt: (R(3, 1, 4, dtype=dt),)),
    _unary("Silu", F.silu),
    _unary("Log1p", torch.log1p, lambda dt: (P(3, 1, 4, dtype=dt),)),
    _unary("Expm1", torch.expm1),
    _unary("Floor", torch.floor),
    _unary("Ceil", torch.ceil),
    _unary("Trunc", torch.trunc),
    _unary("Round", torch.round),
    _unary("Sign", torch.sign),
    Case("exp_transposed", ("Exp",), lambda x: torch.exp(x) * 2, lambda dt: (T(3, 4, dtype=dt),)),
    # A round trip through float32: the gradient converts back (finite differences would see float32 steps).
    Case("convert", ("Convert",), lambda x: x.float().sin().double(), lambda dt: (R(3, 1, 4, dtype=dt),),
         gradcheck=False),
    Case("add_broadcast", ("Add",), torch.add, lambda dt: (R(3, 1, 4, dtype=dt), R(4, dtype=dt))),
    Case("add_alpha", ("Add",), lambda a, b: torch.add(a, b, alpha=2.5), lambda dt: (R(3, 4, dtype=dt), T(3, 4, dtype=dt))),
    Case("add_scalar", ("Add",), lambda a: a + 3.0, lambda dt: (R(2, 3, dtype=dt),)),
    Case("sub_alpha", ("Sub",), lambda a, b: torch.sub(a, b, alpha=0.5), lambda dt: (R(3, 1, dtype=dt), R(1, 4, dtype=dt))),
    Case("rsub_scalar", (), lambda a: 1.0 - a, lambda dt: (R(2, 3, dtype=dt),)),
    Case("mul_broadcast", ("Mul",), torch.mul, lambda dt: (T(3, 4, dtype=dt), R(3, 1, dtype=dt))),
    Case("mul_same", ("Mul",), lambda a: a * a, lambda dt: (R(2, 3, dtype=dt),)),
    Case("mul_no_grad_operand", ("Mul",), torch.mul, lambda dt: (R(2, 3, dtype=dt), torch.randn(2, 3, dtype=dt))),
    Case("div_broadcast", ("Div",), torch.div, lambda dt: (R(3, 1, 4, dtype=dt), P(4, dtype=dt))),
    Case("div_scalar", ("Div",), lambda a: a / 4.0, lambda dt: (R(2, 3, dtype=dt),)),
    Case("rdiv_scalar", ("operator.truediv",), lambda a: 2.0 / a, lambda dt: (P(2, 3, dtype=dt),)),
    Case("div_floor", ("Div",), lambda a, b: torch.div(a, b, rounding_mode="floor") + a,
         lambda dt: (P(2, 3, dtype=dt), P(2, 3, dtype=dt))),
    # a / b stays within (2, 3): finite differences do not cross floor's steps.
    Case("remainder", ("Remainder",), torch.remainder,
         lambda dt: (P(2, 3, lo=2.2, hi=2.8, dtype=dt), P(2, 3, lo=1.0, hi=1.05, dtype=dt))),
    Case("pow_scalar", ("Pow",), lambda x: x ** 3, lambda dt: (R(3, 1, 4, dtype=dt),)),
    Case("pow_fractional", ("Pow",), lambda x: torch.pow(x, 2.5), lambda dt: (P(3, 4, dtype=dt),)),
    Case("pow_zero", ("Pow",), lambda x: torch.pow(x, 0.0) + x, lambda dt: (R(3, 4, dtype=dt),)),
    Case("pow_tensor", ("Pow",), torch.pow, lambda dt: (P(3, 1, dtype=dt), R(4, dtype=dt))),
    # Contiguous: torch's `2.0 ** x.t()` is dense where its meta kernel says transposed (reported).
    Case("rpow_scalar", ("operator.pow",), lambda x: 2.0 ** x, lambda dt: (R(3, 4, dtype=dt),)),
    Case("pow_scalar_base", ("torch.pow",), lambda x: torch.pow(1.5, x), lambda dt: (R(3, 1, dtype=dt),)),
    Case("maximum", ("Maximum",), torch.maximum, lambda dt: (R(3, 1, dtype=dt), T(3, 4, dtype=dt))),
    Case("minimum", ("Minimum",), torch.minimum, lambda dt: (R(3, 4, dtype=dt), R(4, dtype=dt))),
    Case("maximum_ties", ("Maximum",), torch.maximum, lambda dt: (Ties(3, 4, dtype=dt), Ties(3, 4, dtype=dt)),
         gradcheck=False),
    Case("minimum_ties", ("Minimum",), torch.minimum, lambda dt: (Ties(3, 4, dtype=dt), Ties(4, dtype=dt)),
         gradcheck=False),
    Case("where", ("Where",), torch.where, lambda dt: (Mask(3, 4), R(3, 1, dtype=dt), T(3, 4, dtype=dt))),
    Case("where_scalar", ("Where",), lambda m, a: torch.where(m, a, 0.5), lambda dt: (Mask(3, 1), R(3, 4, dtype=dt))),
    Case("masked_fill", ("MaskedFill",), lambda x, m: x.masked_fill(m, 2.0), lambda dt: (R(3, 4, dtype=dt), Mask(4))),
    Case("clamp", ("Clamp",), lambda x: torch.clamp(x, -0.5, 0.7), lambda dt: (R(3, 1, 4, dtype=dt),)),
    Case("clamp_min", ("Clamp",), lambda x: x.clamp(min=0.1), lambda dt: (T(3, 4, dtype=dt),)),
]

REDUCTIONS = [
    Case("sum_dim", ("Sum",), lambda x: x.sum(1), lambda dt: (R(3, 1, 4, dtype=dt),)),
    Case("sum_keepdim", ("Sum",), lambda x: torch.sum(x, (0, 2), keepdim=True), lambda dt: (T(2, 3, 4, dtype=dt),)),
    Case("sum_all", ("Sum",), lambda x: x.sum(), lambda dt: (R(3, 4, dtype=dt),)),
    Case("mean", ("Mean",), lambda x: x.mean(-1), lambda dt: (R(3, 1, 4, dtype=dt),)),
    Case("mean_all", ("Mean",), torch.mean, lambda dt: (T(3, 4, dtype=dt),)),
    Case("amax", ("Amax",), lambda x: torch.amax(x, -1), lambda dt: (R(3, 1, 4, dtype=dt),)),
    Case("amin", ("Amin",), lambda x: torch.amin(x, (0, 1), keepdim=True), lambda dt: (R(3, 4, 2, dtype=dt),)),
    Case("amax_ties", ("Amax",), lambda x: torch.amax(x, 1), lambda dt: (Ties(3, 5, dtype=dt),), gradcheck=False),
    Case("amin_ties", ("Amin",), lambda x: torch.amin(x, 0), lambda dt: (Ties(5, 3, dtype=dt),), gradcheck=False),
    Case("var", ("Var",), lambda x: x.var(-1), lambda dt: (R(3, 1, 5, dtype=dt),)),
    Case("var_unbiased_false", ("Var",), lambda x: torch.var(x, 0, unbiased=False), lambda dt: (T(4, 3, dtype=dt),)),
    Case("var_mean", ("VarMean",), lambda x: torch.var_mean(x, -1), lambda dt: (R(3, 1, 5, dtype=dt),)),
    Case("var_mean_keepdim", ("VarMean",), lambda x: torch.var_mean(x, (0, 2), correction=0, keepdim=True),
         lambda dt: (R(2, 3, 4, dtype=dt),)),
    Case("var_mean_var_only", ("VarMean",), lambda x: torch.var_mean(x, 1)[0], lambda dt: (R(3, 4, dtype=dt),)),
    Case("softmax", ("Softmax",), lambda x: torch.softmax(x, -1), lambda dt: (R(2, 1, 5, dtype=dt),)),
    Case("softmax_dim0_transposed", ("Softmax",), lambda x: x.softmax(0), lambda dt: (T(4, 3, dtype=dt),)),
    Case("log_softmax", ("LogSoftmax",), lambda x: torch.log_softmax(x, 1), lambda dt: (R(2, 5, 1, dtype=dt),)),
    Case("f_softmax", ("torch.nn.functional.softmax",), lambda x: F.softmax(x, dim=-1), lambda dt: (R(3, 5, dtype=dt),)),
    Case("f_log_softmax", ("torch.nn.functional.log_softmax",), lambda x: F.log_softmax(x, dim=-1),
         lambda dt: (R(3, 5, dtype=dt),)),
    Case("mse_loss", ("torch.nn.functional.mse_loss",), F.mse_loss, lambda dt: (R(3, 1, 4, dtype=dt), R(3, 2, 4, dtype=dt))),
    Case("mse_loss_sum_no_grad_target", ("torch.nn.functional.mse_loss",),
         lambda x, y: F.mse_loss(x, y, reduction="sum"), lambda dt: (T(3, 4, dtype=dt), torch.randn(3, 4, dtype=dt))),
    Case("mse_loss_none", ("torch.nn.functional.mse_loss",), lambda x, y: F.mse_loss(x, y, reduction="none"),
         lambda dt: (R(3, 4, dtype=dt), R(3, 4, dtype=dt))),
    Case("layer_norm", ("LayerNorm",), lambda x, w, b: F.layer_norm(x, (6,), w, b),
         lambda dt: (R(2, 3, 6, dtype=dt), R(6, dtype=dt), R(6, dtype=dt))),
    Case("layer_norm_plain", ("LayerNorm",), lambda x: F.layer_norm(x, (3, 4)), lambda dt: (R(2, 3, 4, dtype=dt),)),
    Case("layer_norm_weight_only", ("LayerNorm",), lambda x, w: F.layer_norm(x, (4,), w, eps=1e-3),
         lambda dt: (T(1, 5, 4, dtype=dt), R(4, dtype=dt))),
]

MATMUL = [
    Case("matmul", ("Matmul",), torch.matmul, lambda dt: (R(3, 4, dtype=dt), T(4, 5, dtype=dt))),
    Case("matmul_batched_broadcast", ("Matmul",), torch.matmul, lambda dt: (R(2, 1, 3, 4, dtype=dt), R(3, 4, 2, dtype=dt))),
    Case("matmul_vector_matrix", ("Matmul",), torch.matmul, lambda dt: (R(4, dtype=dt), R(2, 4, 3, dtype=dt))),
    Case("matmul_matrix_vector", ("Matmul",), torch.matmul, lambda dt: (T(3, 4, dtype=dt), R(4, dtype=dt))),
    Case("matmul_dot", ("Matmul",), torch.matmul, lambda dt: (R(4, dtype=dt), R(4, dtype=dt))),
    Case("mm", ("Mm",), torch.mm, lambda dt: (T(3, 4, dtype=dt), R(4, 1, dtype=dt))),
    Case("bmm", ("Bmm",), torch.bmm, lambda dt: (R(2, 3, 4, dtype=dt), R(2, 4, 5, dtype=dt))),
    Case("linear", ("Linear",), F.linear, lambda dt: (R(2, 3, 4, dtype=dt), R(5, 4, dtype=dt), R(5, dtype=dt))),
    Case("linear_no_bias", ("Linear",), F.linear, lambda dt: (T(3, 4, dtype=dt), R(1, 4, dtype=dt))),
    Case("conv1d", ("torch.conv1d",), lambda x, w, b: F.conv1d(x, w, b, padding=1),
         lambda dt: (R(2, 3, 7, dtype=dt), R(4, 3, 3, dtype=dt), R(4, dtype=dt))),
    Case("conv2d", ("torch.conv2d",), lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=(1, 0), dilation=(1, 2)),
         lambda dt: (R(2, 3, 6, 7, dtype=dt), R(4, 3, 3, 2, dtype=dt), R(4, dtype=dt))),
    Case("conv2d_groups_weight_only", ("torch.conv2d",), lambda x, w: F.conv2d(x, w, None, 1, 0, 1, 2),
         lambda dt: (torch.randn(1, 4, 5, 5, dtype=dt), R(2, 2, 3, 3, dtype=dt))),
    Case("conv2d_module", ("torch.conv2d",), torch.nn.Conv2d(3, 2, 3, padding=1).double(),
         lambda dt: (R(2, 3, 4, 4, dtype=dt),)),
    Case("adaptive_avg_pool2d", ("torch.nn.functional.adaptive_avg_pool2d",),
         lambda x: F.adaptive_avg_pool2d(x, (2, 3)) + F.adaptive_avg_pool2d(x, 1), lambda dt: (R(2, 3, 5, 6, dtype=dt),)),
    Case("avg_pool2d", ("torch.nn.functional.avg_pool2d",), lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
         lambda dt: (R(2, 3, 7, 6, dtype=dt),)),
    Case("max_pool2d", ("torch.ops.aten.max_pool2d_with_indices",), lambda x: F.max_pool2d(x, 3, 2, 1),
         lambda dt: (R(2, 3, 7, 6, dtype=dt),)),
    Case("pad_constant", ("torch.nn.functional.pad",), lambda x: F.pad(x, (1, 2, -1, 0), value=0.5),
         lambda dt: (T(2, 4, 5, dtype=dt),)),
    # Attention's training form on the test device (EMBER_TEST_DEVICE; in float64 on CUDA, cuda_attention's math form).
    Case("sdpa_fused", (FUSED_ATTENTION[DEVICE.type],),
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
         lambda dt: tuple(torch.randn(2, 2, 5, 4, dtype=dt).to(DEVICE).requires_grad_() for _ in range(3))),
    Case("addmm", ("Addmm",), torch.addmm, lambda dt: (R(4, dtype=dt), R(3, 2, dtype=dt), R(2, 4, dtype=dt))),
    # cross_entropy decomposes (log_softmax in float32, rounded to the input's dtype, then nll_loss as
    # where/gather/sums): no rule of its own, so it covers no entry; in bfloat16 too (FUSED below).
    Case("cross_entropy", (), lambda x, t: F.cross_entropy(x, t), lambda dt: (R(6, 5, dtype=dt), Index(5, 6))),
    Case("cross_entropy_smoothed", (), lambda x, t: F.cross_entropy(x, t, ignore_index=2, label_smoothing=0.1),
         lambda dt: (R(3, 5, 4, dtype=dt), Index(5, 3, 4))),
    Case("addmm_scaled", ("Addmm",), lambda b, m1, m2: torch.addmm(b, m1, m2, beta=0.5, alpha=-2.0),
         lambda dt: (R(3, 1, dtype=dt), R(3, 2, dtype=dt), T(4, 2, dtype=dt).t())),
]

VIEWS = [
    Case("view", ("View",), lambda x: x.view(4, 3) * 2, lambda dt: (R(2, 6, dtype=dt),)),
    Case("reshape", ("Reshape",), lambda x: x.reshape(-1) * 2, lambda dt: (T(3, 4, dtype=dt),)),
    Case("permute", ("Permute",), lambda x: x.permute(2, 0, 1) * 2, lambda dt: (R(2, 1, 3, dtype=dt),)),
    Case("transpose", ("Transpose",), lambda x: x.transpose(0, 1) * 2, lambda dt: (R(2, 3, dtype=dt),)),
    Case("expand", ("Expand",), lambda x: x.expand(2, 3, 4) * 2, lambda dt: (R(3, 1, dtype=dt),)),
    Case("unsqueeze", ("Unsqueeze",), lambda x: x.unsqueeze(1) * 2, lambda dt: (R(2, 3, dtype=dt),)),
    Case("squeeze", ("Squeeze",), lambda x: x.squeeze(1) * 2, lambda dt: (R(2, 1, 3, dtype=dt),)),
    Case("flatten", ("Flatten",), lambda x: torch.flatten(x, 1) * 2, lambda dt: (R(2, 3, 2, dtype=dt),)),
    # x.reshape_as(y), view_as, expand_as decompose to reshape/expand to y's sizes (LeViT, NF-ResNet, RoFormer: islands before).
    Case("reshape_as", (), lambda x, y: x.reshape_as(y) * y, lambda dt: (T(3, 4, dtype=dt), R(2, 6, dtype=dt))),
    Case("view_as", (), lambda x, y: x.view_as(y) * y, lambda dt: (R(3, 4, dtype=dt), R(2, 6, dtype=dt))),
    Case("expand_as", (), lambda x, y: x.expand_as(y) * y, lambda dt: (R(4, 1, dtype=dt), R(2, 4, 3, dtype=dt))),
    Case("getitem", ("Getitem",), lambda x: x[1:, ::2] * 2, lambda dt: (R(3, 5, dtype=dt),)),
    Case("getitem_int", ("Getitem",), lambda x: x[:, 1] * 2, lambda dt: (T(3, 4, dtype=dt),)),
    # Advanced indexing (a relative-position table read by an index tensor): index tensors on adjacent dims are
    # an index_add of the gradient's rows into those dims merged (negative indices wrapped, indices broadcast
    # together); tensors on dims apart are aten's index_put with accumulate; repeated indices add up.
    Case("getitem_tensor", ("Getitem",), lambda x, i: x[i] * 2,
         lambda dt: (R(4, 3, dtype=dt), torch.tensor([[0, 3, 3], [1, 0, 3]]))),
    Case("getitem_negative_tensor", ("Getitem",), lambda x, i: x[i] * 2,
         lambda dt: (R(4, 3, dtype=dt), torch.tensor([[-1, 3, -4], [1, -1, 0]]))),
    Case("getitem_slice_tensor", ("Getitem",), lambda x, i: x[:, i] * 2,
         lambda dt: (T(3, 5, dtype=dt), torch.tensor([4, 4, 0, 2]))),
    Case("getitem_two_tensors", ("Getitem",), lambda x, i, j: x[i, j] * 2,
         lambda dt: (R(3, 4, 2, dtype=dt), torch.tensor([0, 2, 2]), torch.tensor([3, 1, 3]))),
    Case("getitem_two_tensors_broadcast", ("Getitem",), lambda x, i, j: x[:, i, j] * 2,
         lambda dt: (R(2, 3, 4, 2, dtype=dt), torch.tensor([[0], [-1]]), torch.tensor([3, -3, 3]))),
    Case("getitem_tensors_apart", ("Getitem",), lambda x, i, j: x[i, :, j] * 2,
         lambda dt: (R(3, 2, 4, dtype=dt), torch.tensor([0, 2, 2]), torch.tensor([3, 1, 3]))),
    Case("slice", ("Slice",), lambda x: torch.narrow(x, 1, 1, 2) * 2, lambda dt: (R(3, 4, dtype=dt),)),
    Case("select", ("Select",), lambda x: torch.select(x, 0, 1) * 2, lambda dt: (R(3, 4, dtype=dt),)),
    # A literal index gives a piece of the gradient; pieces of one tensor join in one cat (a class token beside
    # the patches; unbind's selects).
    Case("select_negative_and_slice", ("Select", "Slice"), lambda x: x[:, -1] * 3 + x[:, :2].sum(1),
         lambda dt: (R(2, 5, 3, dtype=dt),)),
    Case("slice_strided", ("Slice",), lambda x: x[:, 1::2].sin() + x[:, ::3],
         lambda dt: (R(3, 7, dtype=dt),)),
    Case("slice_scatter", ("SliceScatter",), lambda x, s: torch.slice_scatter(x, s, 1, 1, None, 2),
         lambda dt: (R(3, 6, dtype=dt), R(3, 3, dtype=dt))),
    Case("unbind", ("Select",), lambda x: [t * (k + 1) for k, t in enumerate(torch.unbind(x, 1))],
         lambda dt: (R(3, 4, dtype=dt),)),
    Case("contiguous", ("Contiguous",), lambda x: x.t().contiguous() * 2, lambda dt: (R(3, 4, dtype=dt),)),
    Case("cat", ("Cat",), lambda a, b: torch.cat([a, b], 1), lambda dt: (R(2, 1, dtype=dt), T(2, 3, dtype=dt))),
    Case("cat_no_grad_part", ("Cat",), lambda a, b: torch.cat([a, b]), lambda dt: (R(2, 3, dtype=dt), torch.randn(1, 3, dtype=dt))),
    # Issue 13: transformers' DynamicCache concatenates onto a legacy empty 1-D tensor with a negative dim, which
    # torch's cat skips and canonicalize cannot normalize against (the rule wraps by the result's rank).
    Case("cat_legacy_empty", ("Cat",), lambda a, b: torch.cat([torch.tensor([], dtype=a.dtype), a, b], dim=-2),
         lambda dt: (R(2, 1, 3, dtype=dt), T(2, 2, 3, dtype=dt))),
    Case("stack", ("Stack",), lambda a, b: torch.stack([a, b], -1), lambda dt: (R(2, 3, dtype=dt), R(2, 3, dtype=dt))),
    Case("split", ("Split",), lambda x: torch.split(x, [1, 3], 1), lambda dt: (R(2, 4, dtype=dt),)),
    Case("split_one_used", ("Split",), lambda x: x.split(2)[1] * 2, lambda dt: (R(4, 3, dtype=dt),)),
    Case("chunk", ("Chunk",), lambda x: torch.chunk(x, 2, -1), lambda dt: (T(2, 4, dtype=dt),)),
    Case("gather", ("Gather",), lambda x, i: torch.gather(x, 1, i), lambda dt: (R(3, 4, dtype=dt), Index(4, 3, 6))),
    Case("index_select", ("IndexSelect",), lambda x, i: torch.index_select(x, 0, i),
         lambda dt: (R(4, 3, dtype=dt), torch.tensor([2, 0, 2, 3]))),
    Case("index_add", ("IndexAdd",), lambda x, i, s: torch.index_add(x, 0, i, s),
         lambda dt: (R(4, 3, dtype=dt), torch.tensor([2, 0, 2]), R(3, 3, dtype=dt))),
    Case("scatter_add", ("ScatterAdd",), lambda x, i, s: torch.scatter_add(x, 1, i, s),
         lambda dt: (R(3, 4, dtype=dt), Index(4, 3, 5), R(3, 5, dtype=dt))),
    Case("embedding", ("Embedding",), lambda i, w: F.embedding(i, w), lambda dt: (Index(5, 2, 3), R(5, 4, dtype=dt))),
    # padding_idx and scale_grad_by_freq define gradients that are not derivatives: no gradcheck.
    Case("embedding_padding", ("Embedding",), lambda i, w: F.embedding(i, w, padding_idx=1),
         lambda dt: (torch.tensor([[1, 0, 1], [4, 1, 2]]), R(5, 4, dtype=dt)), gradcheck=False),
    Case("embedding_padding_from_end", ("Embedding",), lambda i, w: F.embedding(i, w, padding_idx=-1),
         lambda dt: (torch.tensor([[0, 4, 1]]), R(5, 3, dtype=dt)), gradcheck=False),
    Case("embedding_scale_by_freq", ("Embedding",), lambda i, w: F.embedding(i, w, scale_grad_by_freq=True),
         lambda dt: (torch.tensor([[0, 0, 1], [2, 0, 1]]), R(3, 2, dtype=dt)), gradcheck=False),
    Case("tril", ("Tril",), lambda x: torch.tril(x, -1), lambda dt: (R(2, 4, 4, dtype=dt),)),
    Case("triu", ("Triu",), lambda x: x.triu(1), lambda dt: (T(4, 3, dtype=dt),)),
    Case("dropout_eval", ("Dropout",), lambda x: F.dropout(x, 0.5, training=False) * 2, lambda dt: (R(3, 4, dtype=dt),)),
    # Training dropout under fallback_random: joint.cpp rewrites it to native_dropout, whose mask the
    # backward reads. A new mask per call: no gradcheck (tests/training/test_dropout.py fixes the seed;
    # it also tests the default, Philox form, whose numbers are not eager's).
    Case("dropout_train", ("torch.ops.aten.native_dropout",), lambda x: F.dropout(x, 0.4) * 2,
         lambda dt: (R(3, 1, 4, dtype=dt),), gradcheck=False, exact_random=True),
    Case("attr_mT", ("operator.attrgetter('mT')",), lambda x: x.mT * 2, lambda dt: (R(2, 3, 4, dtype=dt),)),
    Case("attr_T", ("operator.attrgetter('T')",), lambda x: x.T * 2, lambda dt: (T(3, 4, dtype=dt),)),
    Case("dropout_p0", ("Dropout",), lambda x: F.dropout(x, 0.0) * 2, lambda dt: (R(3, 4, dtype=dt),)),
]

def ZeroRow(*shape, dtype=F64):
    """Like R, with the first row (index 0 of dim 1) all zeros: the norm rules' masked case."""
    x = torch.randn(*shape, dtype=dtype)
    x[:, 0] = 0
    return x.requires_grad_()


# Ops that were autograd islands in the zoo (2026-12-03): F.interpolate and the norms have rules (aten's
# upsample backward; the masked norm backward); the others decompose into ops with rules.
RESAMPLE_AND_COMPOSITES = [
    Case("interpolate_nearest_scale", ("torch.nn.functional.interpolate",),
         lambda x: F.interpolate(x, scale_factor=2), lambda dt: (R(2, 3, 4, 1, dtype=dt),)),
    Case("interpolate_nearest_size", ("torch.nn.functional.interpolate",),
         lambda x: F.interpolate(x, size=(7, 3)), lambda dt: (T(2, 3, 4, 5, dtype=dt),)),
    Case("interpolate_nearest_exact", ("torch.nn.functional.interpolate",),
         lambda x: F.interpolate(x, scale_factor=1.7, mode="nearest-exact"), lambda dt: (R(1, 2, 4, 5, dtype=dt),)),
    Case("interpolate_bilinear_size", ("torch.nn.functional.interpolate",),
         lambda x: F.interpolate(x, size=(7, 9), mode="bilinear"), lambda dt: (R(2, 3, 4, 5, dtype=dt),)),
    Case("interpolate_bilinear_align_corners", ("torch.nn.functional.interpolate",),
         lambda x: F.interpolate(x, scale_factor=(1.5, 2), mode="bilinear", align_corners=True),
         lambda dt: (T(1, 3, 4, 5, dtype=dt),)),
    Case("interpolate_bilinear_recompute", ("torch.nn.functional.interpolate",),
         lambda x: F.interpolate(x, scale_factor=1.3, mode="bilinear", recompute_scale_factor=True),
         lambda dt: (R(2, 1, 5, 4, dtype=dt),)),
    Case("interpolate_bicubic", ("torch.nn.functional.interpolate",),
         lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"), lambda dt: (R(1, 2, 3, 4, dtype=dt),)),
    Case("interpolate_linear_1d", ("torch.nn.functional.interpolate",),
         lambda x: F.interpolate(x, scale_factor=2.5, mode="linear"), lambda dt: (R(2, 3, 5, dtype=dt),)),
    Case("interpolate_nearest_3d", ("torch.nn.functional.interpolate",),
         lambda x: F.interpolate(x, scale_factor=2), lambda dt: (R(1, 2, 3, 1, 2, dtype=dt),)),
    Case("interpolate_trilinear", ("torch.nn.functional.interpolate",),
         lambda x: F.interpolate(x, size=(4, 3, 5), mode="trilinear"), lambda dt: (R(1, 2, 3, 2, 4, dtype=dt),)),
    Case("normalize", ("torch.nn.functional.normalize",), lambda x: F.normalize(x, dim=1),
         lambda dt: (T(2, 3, 4, dtype=dt),)),
    Case("normalize_p1_last_dim", ("torch.nn.functional.normalize",), lambda x: F.normalize(x, p=1, dim=-1),
         lambda dt: (R(3, 1, 4, dtype=dt),)),
    # A zero row: below eps, normalize is x / eps (no NaN from the norm's gradient at 0).
    Case("normalize_zero_row", ("torch.nn.functional.normalize",), lambda x: F.normalize(x, dim=2, eps=0.5),
         lambda dt: (ZeroRow(2, 3, 4, dtype=dt),)),
    Case("tensor_norm", ("torch.Tensor.norm",), lambda x: x.norm(dim=-1, keepdim=True) * x,
         lambda dt: (T(3, 2, 4, dtype=dt),)),
    Case("tensor_norm_all", ("torch.Tensor.norm",), lambda x: x.norm(), lambda dt: (R(3, 1, 4, dtype=dt),)),
    # The norm is not differentiable at 0: no gradcheck; torch's gradient there is 0.
    Case("tensor_norm_zero_row", ("torch.Tensor.norm",), lambda x: x.norm(2, 2),
         lambda dt: (ZeroRow(2, 3, 4, dtype=dt),), gradcheck=False),
    Case("vector_norm_l1", ("torch._C._linalg.linalg_vector_norm",),
         lambda x: torch.linalg.vector_norm(x, 1, (0, 2)), lambda dt: (R(2, 3, 4, dtype=dt),)),
    Case("vector_norm", ("torch._C._linalg.linalg_vector_norm",), lambda x: torch.linalg.vector_norm(x, dim=-1),
         lambda dt: (T(3, 4, dtype=dt),)),
    Case("addcmul", (), lambda a, b, c: torch.addcmul(a, b, c, value=0.5),
         lambda dt: (R(3, 1, 4, dtype=dt), T(3, 4, dtype=dt), R(4, dtype=dt))),
    Case("addcmul_method", (), lambda a, b, c: a.addcmul(b, c), lambda dt: (R(2, 3, dtype=dt), R(2, 3, dtype=dt), R(1, 3, dtype=dt))),
    Case("addcdiv", (), lambda a, b, c: torch.addcdiv(a, b, c, value=-2),
         lambda dt: (R(3, 4, dtype=dt), R(1, 4, dtype=dt), P(3, 1, dtype=dt))),
    Case("roll", (), lambda x: torch.roll(x, (1, -3), (0, 2)) * 2, lambda dt: (T(3, 2, 4, dtype=dt),)),
    Case("roll_flat", (), lambda x: x.roll(5) * 2, lambda dt: (R(3, 4, dtype=dt),)),
    Case("repeat", (), lambda x: x.repeat(2, 1, 3) * 2, lambda dt: (T(3, 2, dtype=dt),)),
    Case("repeat_interleave", (), lambda x: x.repeat_interleave(3, dim=1) * 2, lambda dt: (R(2, 1, 3, dtype=dt),)),
    Case("repeat_interleave_flat", (), lambda x: torch.repeat_interleave(x, 2) * 2, lambda dt: (T(3, 2, dtype=dt),)),
    Case("baddbmm", (), lambda i, a, b: torch.baddbmm(i, a, b, beta=0.5, alpha=2.0),
         lambda dt: (R(1, 3, 5, dtype=dt), R(2, 3, 4, dtype=dt), T(2, 4, 5, dtype=dt))),
    Case("clone", ("torch.Tensor.clone",), lambda x: x.clone() * x, lambda dt: (T(3, 4, dtype=dt),)),
    Case("torch_clone", ("torch.clone",), lambda x: torch.clone(x) + 1, lambda dt: (R(3, 1, dtype=dt),)),
    Case("topk", ("torch.topk",), lambda x: torch.topk(x, 2)[0] * 2, lambda dt: (T(3, 5, dtype=dt),)),
    Case("topk_method_dim0_indices_unused", ("torch.Tensor.topk",), lambda x: x.topk(2, dim=0, largest=False).values,
         lambda dt: (R(4, 1, 3, dtype=dt),)),
    Case("max_dim", ("torch.Tensor.max",), lambda x: x.max(dim=1)[0] * 2, lambda dt: (R(3, 5, dtype=dt),)),
    Case("max_dim_keepdim", ("torch.max",), lambda x: torch.max(x, -1, keepdim=True).values * x,
         lambda dt: (T(2, 3, 4, dtype=dt),)),
    Case("min_all_ties", ("torch.Tensor.min",), lambda x: x.min() * 2, lambda dt: (Ties(3, 4, dtype=dt),),
         gradcheck=False),
    Case("max_all", ("torch.Tensor.max",), lambda x: x.max() * 2, lambda dt: (R(3, 4, dtype=dt),)),
    Case("min_binary", ("torch.min",), torch.min, lambda dt: (R(3, 1, dtype=dt), R(4, dtype=dt))),
    Case("einsum_batched", (), lambda a, b: torch.einsum("bij,bjk->bik", a, b),
         lambda dt: (R(2, 3, 4, dtype=dt), T(2, 4, 5, dtype=dt))),
    Case("einsum_contract_sum_permute", (), lambda a, b: torch.einsum("ijk, jl -> li", a, b),
         lambda dt: (R(3, 4, 2, dtype=dt), R(4, 1, dtype=dt))),
    Case("einsum_outer_implicit", (), lambda a, b: torch.einsum("j,i", a, b), lambda dt: (R(3, dtype=dt), R(4, dtype=dt))),
    Case("einsum_one_operand", (), lambda a: torch.einsum("ijk->kj", a), lambda dt: (T(2, 3, 4, dtype=dt),)),
    Case("conv3d", ("torch.conv3d",), lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=1),
         lambda dt: (R(1, 2, 3, 4, 3, dtype=dt), R(3, 2, 2, 3, 1, dtype=dt), R(3, dtype=dt))),
    Case("conv3d_input_only", ("torch.conv3d",), lambda x, w: F.conv3d(x, w),
         lambda dt: (R(2, 1, 3, 3, 2, dtype=dt), torch.randn(2, 1, 2, 2, 2, dtype=dt))),
    Case("unfold", ("torch.nn.functional.unfold",), lambda x: F.unfold(x, (2, 3), padding=1, stride=(2, 1)),
         lambda dt: (T(2, 3, 4, 5, dtype=dt),)),
    Case("unfold_overlapping_dilated", ("torch.nn.functional.unfold",), lambda x: F.unfold(x, 2, dilation=2),
         lambda dt: (R(1, 2, 5, 5, dtype=dt),)),
    Case("weight_norm_last_dim", (), lambda v, g: torch._weight_norm(v, g, 2),
         lambda dt: (R(4, 3, 2, dtype=dt), P(1, 1, 2, dtype=dt))),
    Case("weight_norm_dim0", (), lambda v, g: torch._weight_norm(v, g) * v,
         lambda dt: (T(3, 4, dtype=dt), P(3, 1, dtype=dt))),
    Case("weight_norm_whole", (), lambda v, g: torch._weight_norm(v, g, -1), lambda dt: (R(3, 4, dtype=dt), P(1, 1, dtype=dt))),
    Case("adaptive_avg_pool1d", ("torch.adaptive_avg_pool1d",),
         lambda x: F.adaptive_avg_pool1d(x, 3) * 2 + F.adaptive_avg_pool1d(x, 1), lambda dt: (T(2, 7, 4, dtype=dt),)),
    # One list of evenly spaced ints (Falcon's `qkv[..., [-2], :]`): a slice, differentiated as one.
    Case("getitem_int_list", (), lambda x: x[..., [-2], :] * 2 + x[:, [0, 2]].sum(), lambda dt: (T(2, 4, 3, dtype=dt),)),
    Case("multiply", ("Mul",), torch.multiply, lambda dt: (R(3, 1, dtype=dt), R(4, dtype=dt))),
]

ALL = POINTWISE + REDUCTIONS + MATMUL + VIEWS + RESAMPLE_AND_COMPOSITES

# The fused rules, also in float32 and bfloat16 (the DESIGN.md accuracy rule against float64); addmm's rule
# serves the call decompose keeps whole in bfloat16 (one rounding with its bias, as torch's).
FUSED = ["gelu", "gelu_tanh", "silu", "softmax", "log_softmax", "f_softmax", "f_log_softmax", "layer_norm",
         "var_mean", "addmm", "addmm_scaled", "cross_entropy", "cross_entropy_smoothed", "addcmul", "addcdiv",
         "normalize", "tensor_norm", "interpolate_bilinear_size", "weight_norm_dim0"]
