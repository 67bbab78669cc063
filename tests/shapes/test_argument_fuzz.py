"""Random argument forms for every rule: whatever the rule answers must be exactly torch's
answer, and torch refusing a call (TypeError, bad dims, bad values) means the rule declines."""
import pytest
import torch
import torch.nn.functional as F

from .harness import T, Stats, check, random_sizes, random_strides, rng

CALLABLES = {
    "neg": [torch.neg], "exp": [torch.exp], "gelu": [F.gelu], "silu": [F.silu], "relu": [torch.relu],
    "add": [torch.add, torch.Tensor.add], "sub": [torch.sub], "mul": [torch.mul], "div": [torch.div],
    "pow": [torch.pow], "maximum": [torch.maximum], "eq": [torch.eq], "bitwise_and": [torch.bitwise_and],
    "where": [torch.where], "masked_fill": [torch.masked_fill], "clamp": [torch.clamp, torch.Tensor.clamp],
    "sum": [torch.sum, torch.Tensor.sum], "mean": [torch.mean], "amax": [torch.amax], "var": [torch.var],
    "softmax": [torch.softmax], "log_softmax": [torch.Tensor.log_softmax], "layer_norm": [F.layer_norm],
    "matmul": [torch.matmul], "mm": [torch.mm], "bmm": [torch.bmm], "linear": [F.linear], "addmm": [torch.addmm],
    # Several ints after the tensor are the Tensor methods' form (x.reshape(2, 3)); the functions
    # refuse them, and the rules read them as the methods do (docs/shape-rules.md).
    "view": [torch.Tensor.view], "reshape": [torch.Tensor.reshape], "permute": [torch.Tensor.permute],
    "transpose": [torch.transpose], "expand": [torch.Tensor.expand], "unsqueeze": [torch.unsqueeze],
    "squeeze": [torch.squeeze], "flatten": [torch.flatten], "contiguous": [torch.Tensor.contiguous],
    "split": [torch.split, torch.Tensor.split], "chunk": [torch.chunk], "gather": [torch.gather],
    "index_select": [torch.index_select], "embedding": [F.embedding], "tril": [torch.tril], "triu": [torch.triu],
    "dropout": [F.dropout], "cat": [torch.cat], "stack": [torch.stack], "var_mean": [torch.var_mean],
    # Torch calls with rules, by qualified name (shape_rules_torch.cpp).
    "torch.nn.functional.relu": [F.relu], "torch.nn.functional.mish": [F.mish],
    "torch.nn.functional.softmax": [F.softmax], "torch.nn.functional.log_softmax": [F.log_softmax],
    "torch.std": [torch.std], "torch.std_mean": [torch.std_mean], "torch.Tensor.float": [torch.Tensor.float],
    "torch.Tensor.to": [torch.Tensor.to], "torch.Tensor.type_as": [torch.Tensor.type_as],
    "torch.conv1d": [F.conv1d], "torch.conv2d": [F.conv2d], "torch.nn.functional.batch_norm": [F.batch_norm],
    "torch.nn.functional.group_norm": [F.group_norm], "torch.nn.functional.rms_norm": [F.rms_norm],
    "torch.nn.functional.scaled_dot_product_attention": [F.scaled_dot_product_attention],
    "torch.nn.functional.cross_entropy": [F.cross_entropy], "torch.nn.functional.nll_loss": [F.nll_loss],
}
KEYWORDS = ["dim", "keepdim", "dtype", "alpha", "other", "input", "out", "size", "shape", "dims", "approximate",
            "inplace", "rounding_mode", "min", "max", "value", "eps", "weight", "bias", "p", "training", "diagonal",
            "padding_idx", "correction", "unbiased", "start_dim", "end_dim", "chunks", "index", "mat2", "beta",
            "memory_format", "sparse_grad", "exponent", "implicit", "split_size", "normalized_shape", "stride",
            "padding", "dilation", "groups", "running_mean", "running_var", "momentum", "num_groups", "attn_mask",
            "dropout_p", "is_causal", "scale", "enable_gqa", "reduction", "ignore_index", "label_smoothing",
            "non_blocking", "copy", "_stacklevel"]


def _value(r, depth=0):
    kind = r.randint(0, 12)
    if kind == 0:
        return None
    if kind == 1:
        return r.random() < 0.5
    if kind in (2, 3):
        return r.randint(-3, 4)
    if kind == 4:
        return r.choice([0.5, -1.0, 1e-5, float("inf")])
    if kind == 5:
        return r.choice(["tanh", "none", "floor", "x", "same", "valid", "mean", "sum"])
    if kind == 6:
        return r.choice([torch.float32, torch.int64, torch.float16])
    if kind == 7 and depth == 0:
        return tuple(_value(r, 1) for _ in range(r.randint(0, 3)))
    if kind == 8:
        return tuple(r.randint(-2, 4) for _ in range(r.randint(0, 3)))
    if kind == 9 and depth == 0:
        return [_tensor(r) for _ in range(r.randint(0, 2))]
    if kind == 10:
        return 1j
    return _tensor(r)


def _tensor(r):
    sizes = random_sizes(r, max_dim=3, sizes=(1, 2, 3))
    dt = r.choice([torch.float32, torch.float32, torch.int64, torch.bool])
    return T(sizes, random_strides(r, sizes), dt, r.random() < 0.3, index=dt == torch.int64)


@pytest.mark.parametrize("op", sorted(CALLABLES))
def test_random_argument_forms(op):
    r = rng("fuzz " + op)
    stats = Stats()
    for _ in range(150):
        first = [_tensor(r) for _ in range(r.randint(1, 3))] if op in ("cat", "stack") else _tensor(r)
        args = [first] + [_value(r) for _ in range(r.randint(0, 3))]
        kwargs = {r.choice(KEYWORDS): _value(r) for _ in range(r.choice([0, 0, 1, 2]))}
        kwargs.pop("out", None) if r.random() < 0.7 else None
        check(op, r.choice(CALLABLES[op]), args, kwargs, covered=False, seed=r.seed_value, stats=stats)
