"""Rules over symbolic sizes for the target workload of dynamic shapes (a GPT block with a varying
sequence length T and batch B): views with symbolic size lists, matmuls, embedding, cat, tril,
norms, softmax, attention.

Each case names its tensors' symbolic dims (T is s0, B is s1); the rule's answer, with the symbols
replaced by their values, must be exactly torch's meta result for the concrete tensors, for several
values. A symbolic int argument is written "$expr" (the binding's spelling) and given to torch as
its value.
"""
import pytest
import torch

from ember._C import shapes

from .harness import T, _describe, _Mode

C, NH, HD = 8, 2, 4


def _materialize(a, env):
    """Specs as meta tensors; "$expr" kept for the rule (env None) or evaluated for torch."""
    if isinstance(a, T):
        return a.meta()
    if isinstance(a, str) and a.startswith("$") and env is not None:
        return eval(a[1:], dict(env))
    if isinstance(a, (list, tuple)):
        return type(a)(_materialize(x, env) for x in a)
    return a


def _evaluate(result, env):
    ev = lambda v: v if isinstance(v, int) else eval(v, dict(env))  # noqa: E731
    return [(dt, tuple(ev(s) for s in sz), tuple(ev(s) for s in st), rg, dev) for dt, sz, st, rg, dev in result]


def cases(t, b):
    """(op, torch callable, args, kwargs, symbolic dims) with T = t, B = b."""
    x = T((b, t, C), requires_grad=True)
    xs = [(0, 0, "s1"), (0, 1, "s0")]  # x's dims: B, T
    q = T((b, NH, t, HD), strides=(t * C, HD, C, 1))  # x.view(B, T, NH, HD).transpose(1, 2)
    qs = [(0, 0, "s1"), (0, 2, "s0")]
    att = T((b, NH, t, t))
    return [
        ("view", torch.Tensor.view, [x, ["$s1", "$s0", NH, HD]], {}, xs),
        ("view", torch.Tensor.view, [x, [-1, C]], {}, xs),
        ("reshape", torch.reshape, [x, ["$s1*s0", C]], {}, xs),
        ("view", torch.Tensor.view, [T((b, t, NH, HD)), ["$s1", "$s0", C]], {}, xs),
        ("flatten", torch.flatten, [x, 0, 1], {}, xs),
        ("transpose", torch.transpose, [T((b, t, NH, HD)), 1, 2], {}, xs),
        ("permute", torch.permute, [x, [2, 0, 1]], {}, xs),
        ("unsqueeze", torch.unsqueeze, [x, 1], {}, xs),
        ("unsqueeze", torch.unsqueeze, [x, 3], {}, xs),
        ("squeeze", torch.squeeze, [T((b, 1, t))], {}, [(0, 0, "s1"), (0, 2, "s0")]),
        ("expand", torch.Tensor.expand, [T((1, 1, t, t)), ["$s1", NH, -1, -1]], {}, [(0, 2, "s0"), (0, 3, "s0")]),
        ("contiguous", torch.Tensor.contiguous, [q], {}, qs),
        ("contiguous", torch.Tensor.contiguous, [x], {}, xs),
        ("cat", torch.cat, [[x, T((b, t + 1, C))], 1], {},
         [(0, 0, "s1", 0), (0, 0, "s0", 1), (0, 1, "s1", 0)]),
        ("matmul", torch.matmul, [q, T((b, NH, HD, t), strides=(t * C, HD, 1, C))], {},
         qs + [(1, 0, "s1"), (1, 3, "s0")]),
        ("matmul", torch.matmul, [att, T((b, NH, t, HD))], {}, [(0, 0, "s1"), (0, 2, "s0"), (0, 3, "s0"),
                                                                 (1, 0, "s1"), (1, 2, "s0")]),
        ("linear", torch.nn.functional.linear, [x, T((3 * C, C)), T((3 * C,))], {}, xs),
        ("embedding", torch.nn.functional.embedding, [T((b, t), dtype=torch.int64, index=True), T((16, C))], {},
         [(0, 0, "s1"), (0, 1, "s0")]),
        ("tril", torch.tril, [T((t, t))], {}, [(0, 0, "s0"), (0, 1, "s0")]),
        ("layer_norm", torch.nn.functional.layer_norm, [x, [C], T((C,)), T((C,))], {}, xs),
        ("softmax", torch.softmax, [att, -1], {}, [(0, 0, "s1"), (0, 2, "s0"), (0, 3, "s0")]),
        ("masked_fill", torch.Tensor.masked_fill, [att, T((t, t), dtype=torch.bool), float("-inf")], {},
         [(0, 0, "s1"), (0, 2, "s0"), (0, 3, "s0"), (1, 0, "s0"), (1, 1, "s0")]),
        ("mean", torch.mean, [x, [1]], {}, xs),
        ("torch.nn.functional.scaled_dot_product_attention", torch.nn.functional.scaled_dot_product_attention,
         [q, q, q], {"is_causal": True}, qs + [(1, 0, "s1"), (1, 2, "s0"), (2, 0, "s1"), (2, 2, "s0")]),
        ("torch.nn.functional.rms_norm", torch.nn.functional.rms_norm, [x, [C]], {}, xs),
    ]


@pytest.mark.parametrize("t,b", [(2, 3), (5, 2), (17, 4)])
def test_workload_rules_answer_symbolic_sizes(t, b):
    env = {"s0": t, "s1": b}
    for op, fn, args, kwargs, symbolic in cases(t, b):
        with _Mode(True, torch.float32):
            ref = _describe(fn(*_materialize(args, env), **kwargs))
        got = shapes.infer_result_types(op, tuple(_materialize(args, None)), kwargs, True, "float32", symbolic)
        assert got is not None, (op, args)
        assert any(not isinstance(s, int) for r in got for s in r[1]), (op, got)  # the answer is symbolic
        assert _evaluate(got, env) == [(dt, sz, st, rg, "meta") for dt, sz, st, rg, _ in ref], (op, args, got, ref)


def test_declined_forms():
    t = 5
    x = T((2, t, C)).meta()
    xs = [(0, 1, "s0")]
    # A view of a layout that is not the default one: whether torch copies depends on strides.
    q = T((2, NH, t, HD), strides=(t * C, HD, C, 1)).meta()
    assert shapes.infer_result_types("reshape", (q, [2, -1]), {}, True, "float32", [(0, 2, "s0")]) is None
    # Element counts that do not match as monomials.
    assert shapes.infer_result_types("view", (x, [-1, 3]), {}, True, "float32", xs) is None
    # A constant slice end into a symbolic size would need the size's range (a guard).
    assert shapes.infer_result_types("getitem", (x, (slice(None), slice(None, 3))), {}, True, "float32", xs) is None
    # conv: output sizes are arithmetic on the input's.
    img = T((1, 3, 9, 9)).meta()
    assert shapes.infer_result_types("torch.conv2d", (img, T((4, 3, 3, 3)).meta()), {}, True, "float32",
                                     [(0, 2, "s0")]) is None
