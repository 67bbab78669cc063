"""The cases docs/shape-rules.md lists as falling back to torch's meta kernel: each returns None
from the rule, although torch accepts the call (so the decline is the rule's, not an error)."""
import pytest
import torch
import torch.nn.functional as F

from ember._C import shapes

from .harness import T, _map, check, rule

x23 = T((2, 3))
xt = T((3, 2), (1, 3))  # transposed: dense, not default
x_odd1 = T((3, 1, 4), (4, 100, 1))  # contiguous, with an odd stride on its size-1 dim

DECLINED = [
    # Pointwise layouts other than "all default strides", "one shared dense layout" or "ordered
    # dims of a result without size-1 dims over operands of its dtype".
    ("add", torch.add, [xt, T((2,), dtype=torch.float64)], {}),  # mixed layouts and a conversion
    ("add", torch.add, [T((3, 1, 2), (1, 6, 3)), T((2,))], {}),  # a size-1 result dim
    ("floor_divide", torch.floor_divide, [xt, T((3, 2))], {}),  # a composition in torch's meta kernel
    ("mul", torch.mul, [xt, T((), dtype=torch.float64)], {}),  # a 0-d operand of another dtype than the result's
    ("neg", torch.neg, [x_odd1], {}),
    ("exp", torch.exp, [T((3, 2), (0, 1), dtype=torch.int64)], {}),  # stride 0 and a conversion
    # Scalars outside the computation dtype's range, and dtypes torch refuses on CPU.
    ("add", torch.add, [T((3,), dtype=torch.uint8), 1000], {}),
    ("masked_fill", torch.masked_fill, [T((3,), dtype=torch.float16), T((3,), dtype=torch.bool), 1e10], {}),
    ("sub", torch.sub, [T((3,), dtype=torch.bool), 1], {}),
    ("bitwise_and", torch.bitwise_and, [T((3,)), T((3,))], {}),
    ("relu", torch.relu, [T((3,), dtype=torch.bool)], {}),
    ("silu", F.silu, [T((3,), dtype=torch.complex64)], {}),
    ("add", torch.add, [T((3,), dtype=torch.float16), 1j], {}),  # complex32: not an Ember dtype
    # Argument forms.
    ("add", torch.add, [x23, 2, x23], {}),  # deprecated overload: x + 2 * y
    ("silu", F.silu, [x23], {"inplace": True}),
    ("clamp", torch.clamp, [T((3,), dtype=torch.bool), True], {}),
    ("view", torch.Tensor.view, [x23, torch.int32], {}),
    ("contiguous", torch.Tensor.contiguous, [xt], {"memory_format": torch.contiguous_format}),
    ("getitem", lambda t, i: t[i], [x23, [0, 1]], {}),
    ("getitem", lambda t, i: t[i], [x23, True], {}),
    ("getitem", lambda t, i: t[i], [x23, (Ellipsis, Ellipsis)], {}),
    ("getitem", lambda t, i: t[i], [x23, T((2,), dtype=torch.int64, index=True)], {}),
    # Reductions of empty inputs; narrowing dtypes.
    ("sum", torch.sum, [T((0, 3)), 1], {}),
    ("sum", torch.sum, [x23], {"dtype": torch.int32}),
    ("softmax", torch.softmax, [T((2, 3), dtype=torch.complex64), 1], {"dtype": torch.float32}),
    ("softmax", torch.softmax, [x_odd1, 1], {}),
    ("layer_norm", F.layer_norm, [T((2, 3), dtype=torch.bfloat16), (3,), T((3,)), T((3,))], {}),
    # Matmuls: a matrix times a batch; a batch broadcast with one result row; integers.
    ("matmul", torch.matmul, [T((2, 3)), T((4, 3, 5))], {}),
    ("matmul", torch.matmul, [T((1, 1, 3)), T((2, 3, 4))], {}),
    ("mm", torch.mm, [T((2, 3), dtype=torch.int64), T((3, 4), dtype=torch.int64)], {}),
    ("linear", F.linear, [T((2, 3)), T((3,))], {}),
    # Data movement.
    ("cat", torch.cat, [[T((0,)), T((2, 3))]], {}),  # a legacy empty tensor
    ("cat", torch.cat, [[T((1, 2, 3, 4, 2), (48, 1, 16, 4, 2))] * 2, 1], {}),  # channels_last_3d inputs
    ("gather", torch.gather, [T((5,)), 0, T((), dtype=torch.int64, index=True)], {}),  # ranks differ
    ("embedding", F.embedding, [T((3,), dtype=torch.int64, index=True), T((4, 2))], {"max_norm": 1.0}),
    ("dropout", F.dropout, [x23], {"p": 0.5, "training": True, "inplace": True}),
    ("dropout", F.dropout, [T((3, 1, 2), (2, 7, 1))], {"p": 0.5}),
    ("tril", torch.tril, [x_odd1], {}),
]


@pytest.mark.parametrize("case", range(len(DECLINED)))
def test_declined(case):
    op, fn, args, kwargs = DECLINED[case]
    assert rule(op, *args, **kwargs) is None, f"rule answered {op}{args} {kwargs}"
    # torch itself accepts the call (on meta tensors): the decline is the rule's choice.
    fn(*_map(list(args), T.meta), **{k: _map(v, T.meta) for k, v in kwargs.items()})


# Formerly declined layouts that the ordered-dims case answers, exactly as torch does.
ORDERED = [
    ("add", torch.add, [xt, T((2,))], {}),
    ("add", torch.add, [xt, T((3, 2))], {}),
    ("exp", torch.exp, [T((3, 2), (0, 1))], {}),
    ("add", torch.add, [T((6, 4), (16, 1)), T((6, 1), (16, 1))], {}),  # x[:, 1:5] + x[:, :1]
]


@pytest.mark.parametrize("case", range(len(ORDERED)))
def test_ordered_layouts_answered(case):
    op, fn, args, kwargs = ORDERED[case]
    check(op, fn, args, kwargs, covered=True, seed=None)


def test_symbolic_sizes_are_declined():
    # Symbolic sizes: test_symbolic.py and test_symbolic_views.py; rules they do not cover decline.
    x = torch.empty(2, 3, device="meta")
    assert shapes.infer_result_types("neg", (x,), {}, True, "float32") is not None
    # A dense layout other than the default one keeps its order (test_symbolic.py).
    assert shapes.infer_result_types("neg", (x.t(),), {}, True, "float32", [(0, 1)]) == [
        ("float32", (3, "s0"), (1, 3), False, "meta")]
    assert shapes.infer_result_types("view", (x, 6), {}, True, "float32", [(0, 0)]) is None
    assert shapes.infer_result_types("split", (x, 1), {}, True, "float32", [(0, 0)]) is None


def test_factories_and_unknown_default_dtype_are_declined():
    assert shapes.infer_result_types("zeros", ((2, 3),), {}, True, "float32") is None
    assert shapes.infer_result_types("ones_like", (torch.empty(2, device="meta"),), {}, True, "float32") is None
    x = torch.empty(2, dtype=torch.int64, device="meta")
    assert shapes.infer_result_types("exp", (x,), {}, True, "float16") is None
    assert shapes.infer_result_types("exp", (x,), {}, True, "float64")[0][0] == "float64"


def test_binding_reports_bad_names():
    with pytest.raises(ValueError, match="no core op or torch callable with a shape rule named 'nope'"):
        shapes.infer_result_types("nope", (), {}, True, "float32")
    with pytest.raises(ValueError, match="no dtype named 'float99'"):
        shapes.infer_result_types("neg", (), {}, True, "float99")
