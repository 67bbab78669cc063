"""Tracing under torch.autocast: the policy table against eager autocast, models under autocast,
guards on the autocast state, blocks in traced code, and backward through autocast's casts.

The sweep runs every op of Ember's autocast table (python/ember/autocast.py), and the core ops
Ember traces, eagerly under torch.autocast and through Ember (fullgraph=True) under the same state:
the dtypes must be equal and the values close. Device types: cpu always, cuda where available (the
GPU run checks the CUDA list)."""
import copy
import re
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ember
from ember import autocast as policy_table

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
LOWER_DTYPES = [torch.bfloat16, torch.float16]


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()
    assert not torch.is_autocast_enabled("cpu") and not torch.is_autocast_enabled("cuda")
    assert _nesting() == 0


def _nesting():
    """torch's autocast nesting level (there is no getter: step it up and back down)."""
    level = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    return level


def r(*shape, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed + 7 * len(shape))
    return torch.randn(*shape, generator=g).to(device)


def pos(*shape, device="cpu", seed=0):
    return r(*shape, device=device, seed=seed).abs() + 0.5


def unit(*shape, device="cpu", seed=0):
    return torch.tanh(r(*shape, device=device, seed=seed)) * 0.9


def labels(n, classes, device="cpu"):
    return (torch.arange(n) * 7 % classes).to(device)


# Per aten op name of the table (and core ops Ember traces): a function of tensors and a maker of
# its float32 inputs on a device.
SAMPLES = {
    # lower precision
    "mm": (lambda a, b: torch.mm(a, b), lambda d: (r(4, 8, device=d), r(8, 5, device=d, seed=1))),
    "bmm": (lambda a, b: torch.bmm(a, b), lambda d: (r(2, 4, 8, device=d), r(2, 8, 5, device=d, seed=1))),
    "matmul": (lambda a, b: a @ b, lambda d: (r(3, 4, 8, device=d), r(8, 5, device=d, seed=1))),
    "linear": (lambda x, w, b: F.linear(x, w, b), lambda d: (r(4, 8, device=d), r(6, 8, device=d, seed=1), r(6, device=d, seed=2))),
    "addmm": (lambda c, a, b: torch.addmm(c, a, b), lambda d: (r(4, 5, device=d), r(4, 8, device=d, seed=1), r(8, 5, device=d, seed=2))),
    "baddbmm": (lambda c, a, b: torch.baddbmm(c, a, b),
                lambda d: (r(2, 4, 5, device=d), r(2, 4, 8, device=d, seed=1), r(2, 8, 5, device=d, seed=2))),
    "addbmm": (lambda c, a, b: torch.addbmm(c, a, b),
               lambda d: (r(4, 5, device=d), r(2, 4, 8, device=d, seed=1), r(2, 8, 5, device=d, seed=2))),
    "addmv": (lambda c, a, v: torch.addmv(c, a, v), lambda d: (r(4, device=d), r(4, 8, device=d, seed=1), r(8, device=d, seed=2))),
    "addr": (lambda c, a, b: torch.addr(c, a, b), lambda d: (r(4, 5, device=d), r(4, device=d, seed=1), r(5, device=d, seed=2))),
    "mv": (lambda a, v: torch.mv(a, v), lambda d: (r(4, 8, device=d), r(8, device=d, seed=1))),
    "conv1d": (lambda x, w: F.conv1d(x, w, padding=1), lambda d: (r(2, 3, 10, device=d), r(4, 3, 3, device=d, seed=1))),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b), lambda d: (r(2, 3, 6, 6, device=d), r(4, 3, 3, 3, device=d, seed=1), r(4, device=d, seed=2))),
    "conv3d": (lambda x, w: F.conv3d(x, w), lambda d: (r(1, 2, 4, 4, 4, device=d), r(3, 2, 2, 2, 2, device=d, seed=1))),
    "conv_transpose1d": (lambda x, w: F.conv_transpose1d(x, w), lambda d: (r(2, 3, 6, device=d), r(3, 4, 3, device=d, seed=1))),
    "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w), lambda d: (r(1, 3, 4, 4, device=d), r(3, 2, 3, 3, device=d, seed=1))),
    "prelu": (lambda x, w: F.prelu(x, w), lambda d: (r(4, 3, 5, device=d), pos(3, device=d, seed=1) * 0.1)),
    "scaled_dot_product_attention": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                     lambda d: (r(2, 2, 6, 8, device=d), r(2, 2, 6, 8, device=d, seed=1), r(2, 2, 6, 8, device=d, seed=2))),
    # promote
    "cat": (lambda a, b: torch.cat([a, b], dim=0), lambda d: (r(2, 4, device=d), r(3, 4, device=d, seed=1))),
    "stack": (lambda a, b: torch.stack([a, b]), lambda d: (r(2, 4, device=d), r(2, 4, device=d, seed=1))),
    "index_copy": (lambda a, i, b: a.index_copy(0, i, b),
                   lambda d: (r(5, 3, device=d), torch.tensor([0, 4, 2], device=d), r(3, 3, device=d, seed=1))),
    "addcmul": (lambda a, b, c: torch.addcmul(a, b, c), lambda d: (r(4, device=d), r(4, device=d, seed=1), r(4, device=d, seed=2))),
    "addcdiv": (lambda a, b, c: torch.addcdiv(a, b, c), lambda d: (r(4, device=d), r(4, device=d, seed=1), pos(4, device=d, seed=2))),
    "atan2": (lambda a, b: torch.atan2(a, b), lambda d: (r(4, device=d), r(4, device=d, seed=1))),
    "dot": (lambda a, b: torch.dot(a, b), lambda d: (r(6, device=d), r(6, device=d, seed=1))),
    "vdot": (lambda a, b: torch.vdot(a, b), lambda d: (r(6, device=d), r(6, device=d, seed=1))),
    # float32
    "mse_loss": (lambda a, b: F.mse_loss(a, b), lambda d: (r(4, 5, device=d), r(4, 5, device=d, seed=1))),
    "l1_loss": (lambda a, b: F.l1_loss(a, b), lambda d: (r(4, 5, device=d), r(4, 5, device=d, seed=1))),
    "smooth_l1_loss": (lambda a, b: F.smooth_l1_loss(a, b), lambda d: (r(4, 5, device=d), r(4, 5, device=d, seed=1))),
    "huber_loss": (lambda a, b: F.huber_loss(a, b), lambda d: (r(4, 5, device=d), r(4, 5, device=d, seed=1))),
    "nll_loss": (lambda a, t: F.nll_loss(a, t), lambda d: (r(6, 5, device=d), labels(6, 5, d))),
    "cross_entropy_loss": (lambda a, t: F.cross_entropy(a, t), lambda d: (r(6, 5, device=d), labels(6, 5, d))),
    "kl_div": (lambda a, b: F.kl_div(a, b, reduction="batchmean"), lambda d: (r(4, 5, device=d), pos(4, 5, device=d, seed=1))),
    "binary_cross_entropy_with_logits": (lambda a, b: F.binary_cross_entropy_with_logits(a, b),
                                         lambda d: (r(4, 5, device=d), pos(4, 5, device=d, seed=1) / 3)),
    "margin_ranking_loss": (lambda a, b, y: F.margin_ranking_loss(a, b, y),
                            lambda d: (r(6, device=d), r(6, device=d, seed=1), torch.sign(r(6, device=d, seed=2)))),
    "soft_margin_loss": (lambda a, y: F.soft_margin_loss(a, y), lambda d: (r(6, device=d), torch.sign(r(6, device=d, seed=1)))),
    "prod": (lambda a: torch.prod(a, dim=1), lambda d: (pos(3, 4, device=d),)),
    "cdist": (lambda a, b: torch.cdist(a, b), lambda d: (r(4, 3, device=d), r(5, 3, device=d, seed=1))),
    "dist": (lambda a, b: torch.dist(a, b), lambda d: (r(4, 3, device=d), r(4, 3, device=d, seed=1))),
    "trace": (lambda a: torch.trace(a), lambda d: (r(4, 4, device=d),)),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 2), lambda d: (r(1, 2, 4, 4, 4, device=d),)),
    "max_pool3d": (lambda x: F.max_pool3d(x, 2), lambda d: (r(1, 2, 4, 4, 4, device=d),)),
    "adaptive_avg_pool3d": (lambda x: F.adaptive_avg_pool3d(x, 2), lambda d: (r(1, 2, 4, 4, 4, device=d),)),
    "exp": (lambda a: torch.exp(a), lambda d: (r(4, 5, device=d),)),
    "expm1": (lambda a: torch.expm1(a), lambda d: (r(4, 5, device=d),)),
    "log": (lambda a: torch.log(a), lambda d: (pos(4, 5, device=d),)),
    "log10": (lambda a: torch.log10(a), lambda d: (pos(4, 5, device=d),)),
    "log2": (lambda a: torch.log2(a), lambda d: (pos(4, 5, device=d),)),
    "log1p": (lambda a: torch.log1p(a), lambda d: (pos(4, 5, device=d),)),
    "reciprocal": (lambda a: torch.reciprocal(a), lambda d: (pos(4, 5, device=d),)),
    "rsqrt": (lambda a: torch.rsqrt(a), lambda d: (pos(4, 5, device=d),)),
    "pow": (lambda a: a ** 2, lambda d: (r(4, 5, device=d),)),
    "acos": (lambda a: torch.acos(a), lambda d: (unit(4, 5, device=d),)),
    "asin": (lambda a: torch.asin(a), lambda d: (unit(4, 5, device=d),)),
    "cosh": (lambda a: torch.cosh(a), lambda d: (r(4, 5, device=d),)),
    "sinh": (lambda a: torch.sinh(a), lambda d: (r(4, 5, device=d),)),
    "tan": (lambda a: torch.tan(a), lambda d: (unit(4, 5, device=d),)),
    "erfinv": (lambda a: torch.erfinv(a), lambda d: (unit(4, 5, device=d),)),
    "softplus": (lambda a: F.softplus(a), lambda d: (r(4, 5, device=d),)),
    "logsumexp": (lambda a: torch.logsumexp(a, dim=-1), lambda d: (r(4, 5, device=d),)),
    "cosine_similarity": (lambda a, b: F.cosine_similarity(a, b), lambda d: (r(4, 5, device=d), r(4, 5, device=d, seed=1))),
    # float32 unless a dtype is given
    "softmax": (lambda a: torch.softmax(a, dim=-1), lambda d: (r(4, 5, device=d),)),
    "log_softmax": (lambda a: F.log_softmax(a, dim=-1), lambda d: (r(4, 5, device=d),)),
    "sum": (lambda a: a.sum(-1), lambda d: (r(4, 5, device=d),)),
    "cumsum": (lambda a: torch.cumsum(a, dim=1), lambda d: (r(4, 5, device=d),)),
    "cumprod": (lambda a: torch.cumprod(a, dim=1), lambda d: (pos(4, 5, device=d),)),
    # left alone (composite ops checked not to reach an op autocast changes)
    "to": (lambda a: a.to(torch.float32) + 1, lambda d: (r(4, 5, device=d),)),
    "type_as": (lambda a, b: a.type_as(b), lambda d: (r(4, 5, device=d), r(2, device=d, seed=1))),
    "view_as": (lambda a, b: a.view_as(b), lambda d: (r(4, 5, device=d), r(20, device=d, seed=1))),
    "expand_as": (lambda a, b: a.expand_as(b), lambda d: (r(1, 5, device=d), r(4, 5, device=d, seed=1))),
    "reshape": (lambda a: a.reshape(5, 4), lambda d: (r(4, 5, device=d),)),
    "flatten": (lambda a: a.flatten(), lambda d: (r(4, 5, device=d),)),
    "unflatten": (lambda a: a.unflatten(1, (5, 1)), lambda d: (r(4, 5, device=d),)),
    "contiguous": (lambda a: a.t().contiguous(), lambda d: (r(4, 5, device=d),)),
    "chunk": (lambda a: a.chunk(2, dim=0), lambda d: (r(4, 5, device=d),)),
    "split": (lambda a: a.split(2, dim=0), lambda d: (r(4, 5, device=d),)),
    "narrow": (lambda a: a.narrow(1, 1, 3), lambda d: (r(4, 5, device=d),)),
    "dropout": (lambda a: F.dropout(a, 0.5, training=False), lambda d: (r(4, 5, device=d),)),
    "where": (lambda c, a, b: torch.where(c > 0, a, b), lambda d: (r(4, 5, device=d), r(4, 5, device=d, seed=1), r(4, 5, device=d, seed=2))),
    "layer_norm": (lambda a, w, b: F.layer_norm(a, (5,), w, b), lambda d: (r(4, 5, device=d), r(5, device=d, seed=1), r(5, device=d, seed=2))),
    "group_norm": (lambda a: F.group_norm(a, 2), lambda d: (r(2, 4, 3, device=d),)),
    "batch_norm": (lambda a, m, v: F.batch_norm(a, m, v, training=False), lambda d: (r(4, 3, device=d), r(3, device=d, seed=1), pos(3, device=d, seed=2))),
    "var": (lambda a: a.var(dim=-1), lambda d: (r(4, 5, device=d),)),
    "var_mean": (lambda a: torch.var_mean(a, dim=-1), lambda d: (r(4, 5, device=d),)),
    "std": (lambda a: a.std(dim=-1), lambda d: (r(4, 5, device=d),)),
    "square": (lambda a: torch.square(a), lambda d: (r(4, 5, device=d),)),
    "tile": (lambda a: a.tile(2, 1), lambda d: (r(4, 5, device=d),)),
    "transpose": (lambda a: a.transpose(0, 1), lambda d: (r(4, 5, device=d),)),
    "t": (lambda a: a.t(), lambda d: (r(4, 5, device=d),)),
    "permute": (lambda a: a.permute(1, 0), lambda d: (r(4, 5, device=d),)),
    "view": (lambda a: a.view(5, 4), lambda d: (r(4, 5, device=d),)),
    "unsqueeze": (lambda a: a.unsqueeze(1), lambda d: (r(4, 5, device=d),)),
    "squeeze": (lambda a: a.squeeze(1), lambda d: (r(4, 1, device=d),)),
    "expand": (lambda a: a.expand(3, 5), lambda d: (r(1, 5, device=d),)),
    "select": (lambda a: a.select(0, 2), lambda d: (r(4, 5, device=d),)),
    "slice": (lambda a: a[1:3], lambda d: (r(4, 5, device=d),)),
    "movedim": (lambda a: a.movedim(0, 1), lambda d: (r(4, 5, device=d),)),
    "swapaxes": (lambda a: a.swapaxes(0, 1), lambda d: (r(4, 5, device=d),)),
    "unbind": (lambda a: a.unbind(0), lambda d: (r(4, 5, device=d),)),
    "mean": (lambda a: a.mean(-1), lambda d: (r(4, 5, device=d),)),
    "max": (lambda a: a.max(dim=1), lambda d: (r(4, 5, device=d),)),
    "min": (lambda a: torch.min(a, 0), lambda d: (r(4, 5, device=d),)),
    "all": (lambda a: (a > 0).all(-1), lambda d: (r(4, 5, device=d),)),
    "any": (lambda a: (a > 0).any(-1), lambda d: (r(4, 5, device=d),)),
    "sort": (lambda a: a.sort(dim=-1), lambda d: (r(4, 5, device=d),)),
    "gather": (lambda a, i: torch.gather(a, 1, i), lambda d: (r(4, 5, device=d), torch.zeros(4, 2, dtype=torch.long, device=d))),
    "index_select": (lambda a, i: a.index_select(0, i), lambda d: (r(4, 5, device=d), torch.tensor([2, 0], device=d))),
    "scatter": (lambda a, i, b: a.scatter(1, i, b),
                lambda d: (r(4, 5, device=d), torch.zeros(4, 2, dtype=torch.long, device=d), r(4, 2, device=d, seed=1))),
    "repeat_interleave": (lambda a: a.repeat_interleave(2, dim=0), lambda d: (r(4, 5, device=d),)),
}

# Core ops Ember traces that the table does not list: autocast leaves them alone on CPU, and the
# dispatcher rule must say so (or refuse them) on every device.
CORE_SAMPLES = {
    "neg": lambda a: -a, "abs": torch.abs, "sqrt": lambda a: torch.sqrt(a.abs()), "sin": torch.sin, "cos": torch.cos,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "erf": torch.erf, "relu": torch.relu, "gelu": F.gelu, "silu": F.silu,
    "floor": torch.floor, "round": torch.round, "sign": torch.sign,
    "add": lambda a: a + a * 2, "sub": lambda a: a - 1, "mul": lambda a: a * a, "div": lambda a: a / 3,
    "maximum": lambda a: torch.maximum(a, -a), "clamp": lambda a: a.clamp(-0.5, 0.5),
    "masked_fill": lambda a: a.masked_fill(a > 0, 0.0), "mean": lambda a: a.mean(-1), "amax": lambda a: a.amax(-1),
    "permute": lambda a: a.permute(1, 0) * 1, "transpose": lambda a: a.transpose(0, 1) * 1,
    "tril": torch.tril, "gather": lambda a: torch.gather(a, 1, torch.zeros(4, 2, dtype=torch.long, device=a.device)),
    "index_select": lambda a: a.index_select(0, torch.tensor([1, 0], device=a.device)),
    "getitem": lambda a: a[1:, ::2] * 1,
}


def _cases():
    for device in DEVICES:
        table = policy_table.POLICY[device]
        for name in sorted(table):
            yield pytest.param(device, name, id=f"{device}-{name}")


def _outputs(x):
    return [t for t in (x if isinstance(x, (tuple, list)) else [x])]


_NODE = re.compile(r'^\s*%\d+ = (?:torch "(?:[\w.]*\.)?(\w+)"|(\w+))\(.* : (\w+)\[')
_GRAPH_DTYPES = {torch.bfloat16: "bf16", torch.float16: "f16"}


def _assert_lower_ops_run_lower(text, device, dtype, only=None):
    """Every op autocast runs in lower precision (matmul, linear, conv, attention, ...; or those of
    `only`) computes in `dtype` in the graph: its inputs were cast before it. A matmul run in
    float32 and cast afterwards gives the dtype eager gives and values within a loose tolerance;
    this catches it."""
    lower = {name for name, kind in policy_table.POLICY[device].items() if kind == policy_table.LOWER}
    if only is not None:
        lower &= set(only)
    seen = 0
    for line in text.splitlines():
        m = _NODE.match(line)
        if not m:
            continue
        op = m.group(1) or m.group(2)
        op = {"imatmul": "matmul", "__matmul__": "matmul"}.get(op, op)
        if op in lower:
            seen += 1
            assert m.group(3) == _GRAPH_DTYPES[dtype], f"{op} does not run in {dtype}:\n{line}\n{text}"
    return seen


def _check_like_eager(fn, args, device, dtype):
    with torch.autocast(device, dtype=dtype):
        expected = fn(*args)
    compiled = ember.compile(fn, fullgraph=True)
    with torch.autocast(device, dtype=dtype):
        got = compiled(*args)
        graphs = ember.explain(fn, fullgraph=True)(*args).graphs
    lower_ops = sum(_assert_lower_ops_run_lower(text, device, dtype) for text in graphs)
    for e, g in zip(_outputs(expected), _outputs(got), strict=True):
        assert g.dtype == e.dtype, f"Ember gives {g.dtype}, eager autocast {e.dtype}"
        # Ember runs the same casts and ops as eager. Measured over the sweep: float32 outputs
        # within 2.4e-7 (layer_norm), about 4x that allowed; a lower-precision output within one
        # unit in the last place (log_softmax, var_mean of a bf16/f16 input: the fused kernel
        # rounds once), two allowed.
        if e.dtype in LOWER_DTYPES:
            torch.testing.assert_close(g.float(), e.float(), rtol=2 * torch.finfo(e.dtype).eps, atol=1e-5)
        else:
            torch.testing.assert_close(g.float(), e.float(), rtol=1e-6, atol=1e-6)
    return lower_ops


def test_every_table_entry_has_a_sample():
    for device, table in policy_table.POLICY.items():
        missing = sorted(set(table) - set(SAMPLES))
        assert not missing, f"{device} autocast policies without a sweep sample: {missing}"


@pytest.mark.parametrize("device,name", list(_cases()))
@pytest.mark.parametrize("dtype", LOWER_DTYPES, ids=["bf16", "f16"])
def test_policy_matches_eager_autocast(device, name, dtype):
    fn, make = SAMPLES[name]
    args = make(device)
    lower_ops = _check_like_eager(fn, args, device, dtype)
    assert lower_ops or policy_table.POLICY[device][name] != policy_table.LOWER, "the op is not in the graph"
    # The first floating input already in the autocast dtype: float32 and promote policies cast
    # it up, lower-precision ones leave it.
    mixed = list(args)
    for i, a in enumerate(mixed):
        if a.is_floating_point():
            mixed[i] = a.to(dtype)
            break
    ember.reset()
    try:
        with torch.autocast(device, dtype=dtype):
            fn(*mixed)
    except RuntimeError:
        return  # torch refuses the mixed dtypes itself
    _check_like_eager(fn, tuple(mixed), device, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CORE_SAMPLES))
def test_core_ops_outside_the_table_match_eager_or_are_refused(device, name):
    fn = CORE_SAMPLES[name]
    args = (r(4, 5, device=device),)
    kind, why = policy_table.policy(_core_callable(name), device)
    if kind == policy_table.UNKNOWN:
        with torch.autocast(device, dtype=torch.bfloat16), pytest.raises(ember.Unsupported, match="autocast"):
            ember.compile(fn, fullgraph=True)(*args)
        return
    assert kind == policy_table.NONE, (name, kind)
    _check_like_eager(fn, args, device, torch.bfloat16)


def _core_callable(name):
    from ember import ops
    return ops.op_callables[name]


def test_op_whose_policy_is_unknown_is_not_traced():
    def f(a, b):
        return torch.einsum("ij,jk->ik", a, b) + 1

    a, b = r(4, 8), r(8, 5, seed=1)
    assert policy_table.policy(torch.einsum, "cpu")[0] == policy_table.UNKNOWN
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with pytest.raises(ember.Unsupported, match="einsum.*autocast"):
            ember.compile(f, fullgraph=True)(a, b)
        expected = f(a, b)
        got = ember.compile(f)(a, b)
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected)


def augmented_assignments(x, w):
    y = x * 1
    y @= w
    y += 1
    return y


def test_augmented_assignment_operators_follow_the_policy():
    x, w = r(4, 8), r(8, 8, seed=1)
    _check_like_eager(augmented_assignments, (x, w), "cpu", torch.bfloat16)


# ---------------------------------------------------------------------------------------------
# Models

class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    """A pre-norm transformer encoder layer: attention and an MLP, each with a residual."""

    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


def _models():
    torch.manual_seed(0)
    return {
        "linear": (nn.Linear(16, 8), (r(4, 16),)),
        "layer_norm": (nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16)), (r(4, 16),)),
        "attention": (Attention(16, 2), (r(2, 5, 16),)),
        "mlp": (nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4)), (r(4, 16),)),
        "block": (Block(), (r(2, 5, 16),)),
    }


@pytest.mark.parametrize("name", ["linear", "layer_norm", "attention", "mlp", "block"])
def test_model_under_autocast_matches_eager(name):
    model, args = _models()[name]
    model.eval()
    compiled = ember.compile(model, fullgraph=True)
    with torch.no_grad():
        for dtype in LOWER_DTYPES:
            with torch.autocast("cpu", dtype=dtype):
                expected = model(*args)
                got = compiled(*args)
                graphs = ember.explain(model, fullgraph=True)(*args).graphs
            assert sum(_assert_lower_ops_run_lower(text, "cpu", dtype) for text in graphs) > 0
            # The block's residual stream stays float32 (x + bf16 promotes); the others end in a
            # lower-precision op.
            assert got.dtype == expected.dtype == (torch.float32 if name == "block" else dtype)
            # Measured: identical to eager (the same casts, the same lower-precision ops).
            torch.testing.assert_close(got.float(), expected.float(), rtol=1e-6, atol=1e-6)
        plain = compiled(*args)
        assert plain.dtype == torch.float32
        torch.testing.assert_close(plain, model(*args))
    assert ember.stats()["graphs"] >= 3 and ember.stats()["graph_breaks"] == 0


@pytest.mark.parametrize("name", ["nanogpt", "gpt2", "llama"])
def test_real_model_under_autocast_is_one_graph_matching_eager(name):
    if name != "nanogpt":
        pytest.importorskip("transformers")
    from ember.bench import models_workloads

    w = models_workloads.build(name)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = models_workloads.tensors_of(w.model(*w.args, **w.kwargs))
        out = ember.explain(w.model)(*w.args, **w.kwargs)
        got = models_workloads.tensors_of(ember.compile(w.model)(*w.args, **w.kwargs))
    assert (out.graph_count, out.graph_break_count) == (1, 0), out.break_reasons
    # The projections (linear) must run in bfloat16. Not every matmul: some transformers versions
    # compute LLaMA's rotary frequencies inside `torch.autocast(..., enabled=False)`, a float32
    # matmul in eager too (seen with transformers 5.17 on the GPU host).
    assert _assert_lower_ops_run_lower(out.graphs[0], "cpu", torch.bfloat16, only={"linear"}) > 0
    for e, g in zip(expected, got, strict=True):
        assert g.dtype == e.dtype
        # Fused float32 arithmetic between the bfloat16 matmuls: at most 2.9e-3 measured (gpt2).
        torch.testing.assert_close(g.float(), e.float(), rtol=0, atol=1.2e-2)


def test_backward_under_autocast_gives_eagers_gradients():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    twin = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    twin.load_state_dict(model.state_dict())
    x, y = r(8, 16), r(8, 4, seed=1)

    def step(m, x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = m(x)
            loss = F.mse_loss(out, y)
        return out, loss

    reference = copy.deepcopy(twin).double()
    F.mse_loss(reference(x.double()), y.double()).backward()
    out_e, loss_e = step(twin, x, y)
    loss_e.backward()
    out_c, loss_c = ember.compile(step, fullgraph=True)(model, x, y)
    loss_c.backward()
    assert out_c.dtype == out_e.dtype == torch.bfloat16 and loss_c.dtype == loss_e.dtype == torch.float32
    # The training graph runs compiled (forward and backward kernels, bfloat16 rounding where autocast
    # puts it): each gradient's error against a float64 reference is at most twice eager's (DESIGN.md).
    torch.testing.assert_close(loss_c, loss_e, rtol=1e-2, atol=1e-3)
    for (name, p), q, ref in zip(model.named_parameters(), twin.parameters(), reference.parameters()):
        assert p.grad is not None and p.grad.dtype == q.grad.dtype == torch.float32, name
        err_c = (p.grad.double() - ref.grad).abs().max().item()
        err_e = (q.grad.double() - ref.grad).abs().max().item()
        assert err_c <= 2 * err_e + 1e-6, (name, err_c, err_e)


# ---------------------------------------------------------------------------------------------
# Guards and blocks

def matmul_dtype(x, w):
    y = x @ w
    return y, torch.is_autocast_enabled("cpu")


def test_calls_with_and_without_autocast_recompile_instead_of_reusing():
    f = ember.compile(matmul_dtype)
    x, w = r(4, 8), r(8, 8, seed=1)
    assert f(x, w)[0].dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, on = f(x, w)
        assert y.dtype == torch.bfloat16 and on is True
    with torch.autocast("cpu", dtype=torch.float16):
        assert f(x, w)[0].dtype == torch.float16
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        y, on = f(x, w)
        assert y.dtype == torch.float32 and on is False
    assert f(x, w)[0].dtype == torch.float32
    compiled = ember.stats()["frames_compiled"]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert f(x, w)[0].dtype == torch.bfloat16
    assert ember.stats()["frames_compiled"] == compiled  # a cache hit: that state was seen


def default_dtype_block(x, w):
    with torch.autocast("cpu"):
        return x @ w


def test_block_without_dtype_takes_the_default_and_is_guarded_on_it():
    f = ember.compile(default_dtype_block, fullgraph=True)
    x, w = r(4, 8), r(8, 8, seed=1)
    assert f(x, w).dtype == torch.get_autocast_dtype("cpu") == torch.bfloat16
    torch.set_autocast_dtype("cpu", torch.float16)
    try:
        assert f(x, w).dtype == torch.float16
    finally:
        torch.set_autocast_dtype("cpu", torch.bfloat16)
    assert f(x, w).dtype == torch.bfloat16
    out = ember.explain(default_dtype_block)(x, w)
    assert "autocast state: cpu off bfloat16, cuda off float16, cache on" in out.guards[0]


def nested_blocks(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a = x @ w
        with torch.autocast("cpu", enabled=False):
            b = x @ w
            inner = torch.is_autocast_enabled("cpu")
        with torch.autocast("cpu", dtype=torch.float16):
            c = x @ w
        d = x @ w
    e = x @ w
    return [t.dtype for t in (a, b, c, d, e)], inner, torch.is_autocast_enabled("cpu")


def old_spellings(x, w):
    with torch.cpu.amp.autocast():
        a = x @ w
    with torch.amp.autocast(device_type="cpu", dtype=torch.float16, cache_enabled=False):
        b = x @ w
        cache = torch.is_autocast_cache_enabled()
    return a, b, cache, torch.is_autocast_cache_enabled()


def test_nested_and_disabled_blocks_in_traced_code():
    x, w = r(4, 8), r(8, 8, seed=1)
    expected = nested_blocks(x, w)
    assert ember.compile(nested_blocks, fullgraph=True)(x, w) == expected
    assert expected[0] == [torch.bfloat16, torch.float32, torch.float16, torch.bfloat16, torch.float32]
    # The same frame entered with autocast already on: the state the blocks restore is that one.
    with torch.autocast("cpu", dtype=torch.float16):
        expected = nested_blocks(x, w)
        got = ember.compile(nested_blocks, fullgraph=True)(x, w)
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.float16
    assert got == expected and expected[0][4] == torch.float16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        a, b, cache, after = old_spellings(x, w)
        a2, b2, cache2, after2 = ember.compile(old_spellings, fullgraph=True)(x, w)
    assert (a2.dtype, b2.dtype) == (a.dtype, b.dtype) == (torch.bfloat16, torch.float16)
    assert (cache2, after2) == (cache, after) == (False, True)
    assert torch.is_autocast_cache_enabled()


def block_with_break(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        print("inside", torch.is_autocast_enabled("cpu"))
        z = y @ w
    return z, torch.is_autocast_enabled("cpu")


def test_break_inside_a_block_leaves_cpython_in_it_and_exits_once(capsys):
    x, w = r(4, 8), r(8, 8, seed=1)
    expected = block_with_break(x, w)
    f = ember.compile(block_with_break)
    for _ in range(2):
        capsys.readouterr()
        z, on = f(x, w)
        assert capsys.readouterr().out == "inside True\n"
        assert on is False and z.dtype == expected[0].dtype == torch.bfloat16
        torch.testing.assert_close(z.float(), expected[0].float(), rtol=1e-6, atol=1e-6)  # measured: equal
        assert not torch.is_autocast_enabled("cpu") and _nesting() == 0
    out = ember.explain(block_with_break)(x, w)
    assert out.graph_count == 2 and out.graph_break_count == 1
    with pytest.raises(ember.Unsupported, match="print"):
        ember.compile(block_with_break, fullgraph=True)(x, w)
