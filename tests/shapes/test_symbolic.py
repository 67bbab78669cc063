"""Rules over symbolic sizes (src/shapes/shape_rules_symbolic.cpp).

The outermost dim of each tensor operand (whose size its default strides do not involve) is made
the symbol s0; a rule that answers must give, with s0 replaced by the concrete size, exactly
torch's meta result for the concrete tensors. Layouts other than default strides must decline here;
views, matmuls and the rest of the workload are in test_symbolic_views.py.
"""
import itertools

import pytest
import torch

from ember._C import shapes

from .harness import T, _describe, _Mode

UNARY = {"neg": torch.neg, "exp": torch.exp, "relu": torch.relu, "sigmoid": torch.sigmoid, "abs": torch.abs}
BINARY = {"add": torch.add, "mul": torch.mul, "div": torch.div, "maximum": torch.maximum, "eq": torch.eq,
          "bitwise_and": torch.bitwise_and}
REDUCTIONS = [
    ("sum", torch.sum, lambda x: [[1]], {"keepdim": True}),
    ("sum", torch.sum, lambda x: [[0]], {}),
    ("mean", torch.mean, lambda x: [[-1]], {}),
    ("amax", torch.amax, lambda x: [[1]], {"keepdim": True}),
    ("var_mean", torch.var_mean, lambda x: [[1]], {"correction": 0}),
    ("softmax", torch.softmax, lambda x: [1], {}),
    ("log_softmax", torch.log_softmax, lambda x: [-1], {}),
]


def evaluate(result, n):
    """A rule's result with s0 = n (sizes and strides are ints or expression strings)."""
    ev = lambda v: v if isinstance(v, int) else eval(v, {"s0": n})  # noqa: E731
    return [(dt, tuple(ev(s) for s in sizes), tuple(ev(s) for s in strides), rg, dev)
            for dt, sizes, strides, rg, dev in result]


def compare(op, fn, args, kwargs, n):
    """Asks the rule with dim 0 of every tensor operand symbolic; checks an answer against torch."""
    symbolic = [(i, 0) for i, a in enumerate(args) if isinstance(a, T) and a.sizes]
    metas = [a.meta() if isinstance(a, T) else a for a in args]
    with _Mode(True, torch.float32):
        try:
            ref = _describe(fn(*metas, **kwargs))
        except Exception:
            ref = None
    got = shapes.infer_result_types(op, tuple(metas), kwargs, True, "float32", symbolic)
    if got is None:
        return False
    assert ref is not None, f"{op}{args}: rule answered {got}, torch refuses"
    assert evaluate(got, n) == [(dt, sz, st, rg, "meta") for dt, sz, st, rg, _ in ref], (op, args, got, ref)
    return True


@pytest.mark.parametrize("n", [2, 5])
def test_pointwise_and_reductions_answer_symbolic_sizes(n):
    answered = 0
    dtypes = [torch.float32, torch.float16, torch.int64, torch.bool]
    for dt in dtypes:
        x = T((n, 3), dtype=dt, requires_grad=True)
        for op, fn in UNARY.items():
            answered += compare(op, fn, [x], {}, n)
        for (op, fn), other in itertools.product(BINARY.items(), [T((n, 3)), T((3,), dtype=torch.int32), 2, 1.5]):
            answered += compare(op, fn, [x, other], {}, n)
        for op, fn, extra, kwargs in REDUCTIONS:
            answered += compare(op, fn, [x, *extra(x)], kwargs, n)
    assert answered > 80, answered


def test_declined_forms():
    x = torch.empty(4, 3, device="meta")
    # A dense layout other than default strides is served in its own order (torch's pointwise result
    # keeps a transposed operand's layout).
    assert shapes.infer_result_types("neg", (x.t(),), {}, True, "float32", [(0, 1)]) == [
        ("float32", (3, "s0"), (1, 3), False, "meta")]
    # A view whose element count differs as monomials (12 against 3*s0).
    assert shapes.infer_result_types("view", (x, 12), {}, True, "float32", [(0, 0)]) is None
    # A symbolic size against a constant other than 1: the symbol might equal it or not.
    assert shapes.infer_result_types("add", (x, torch.empty(5, 3, device="meta")), {}, True, "float32",
                                     [(0, 0)]) is None
    # Matmuls answer by stand-ins (their result sizes are operand sizes): test_symbolic_views.py.
    assert shapes.infer_result_types("mm", (x, torch.empty(3, 2, device="meta")), {}, True, "float32",
                                     [(0, 0)])[0][1] == ("s0", 2)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.int8, torch.bool])
def test_torch_calls_answer_symbolic_sizes(dt):
    # Torch calls that are not core ops (torch.square is pow(x, 2): a bool squares to int64) have
    # rules over symbolic sizes too, so dynamic graphs do not specialize on them.
    for name, fn in (("torch.square", torch.square), ("torch.Tensor.square", torch.Tensor.square)):
        for n in (2, 5):
            assert compare(name, fn, [T((n, 3), dtype=dt)], {}, n), (name, dt)
    # torch.max / torch.min of two tensors are maximum / minimum (their reduction forms are not ruled here).
    for name, fn in (("torch.max", torch.max), ("torch.Tensor.min", torch.Tensor.min)):
        for n in (2, 5):
            assert compare(name, fn, [T((n, 3), dtype=dt), T((n, 3), dtype=torch.float32)], {}, n), (name, dt)
            assert not compare(name, fn, [T((n, 3), dtype=dt), 1], {}, n)
