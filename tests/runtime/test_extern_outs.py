"""Matmul results that are temporaries are written with out= into the arena (docs/memory.md, "Extern results
in the arena"; memory::arena_extern_results): the calls run right, call after call with new values, in every
dtype and form the pass takes, and a result the program returns stays the caller's own tensor."""
import logging

import pytest
import torch

import ember


def mlp(x, w1, w2):
    h = torch.relu(torch.mm(x, w1))  # both matmul results are temporaries read by a kernel
    return torch.mm(h, w2) * 2.0


def batched(a, b, c):
    return torch.tanh(torch.bmm(a, b)) + torch.matmul(a, c).sum(-1, keepdim=True)


def returns_product(x, w):
    return torch.mm(x, w), torch.mm(x, w).sum()  # the first is returned: not written into the arena


def out_steps(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "ember.passes" and r.getMessage().split(" ", 2)[1] == "extern_outs"]


def test_matmul_temporaries_are_written_into_the_arena(monkeypatch, caplog):
    monkeypatch.setenv("EMBER_LOGS", "passes")
    caplog.set_level(logging.INFO, logger="ember")
    torch.manual_seed(0)
    f = ember.compile(mlp)
    w1, w2 = torch.randn(32, 48), torch.randn(48, 16)
    with torch.no_grad():
        for k in range(3):  # the same arena, new values each call
            x = torch.randn(64, 32) * (k + 1)
            torch.testing.assert_close(f(x, w1, w2), mlp(x, w1, w2))
    steps = out_steps(caplog)
    assert len(steps) == 1 and steps[0].count("out=%b") == 2, steps


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_batched_matmuls_in_each_dtype(dtype):
    torch.manual_seed(1)
    f = ember.compile(batched)
    for k in range(2):
        a, b, c = (torch.randn(3, 8, 16, dtype=dtype) * (k + 1), torch.randn(3, 16, 8, dtype=dtype),
                   torch.randn(3, 16, 4, dtype=dtype))
        with torch.no_grad():
            tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
            torch.testing.assert_close(f(a, b, c), batched(a, b, c), rtol=tol, atol=tol)


def test_a_returned_product_stays_the_callers(monkeypatch, caplog):
    monkeypatch.setenv("EMBER_LOGS", "passes")
    caplog.set_level(logging.INFO, logger="ember")
    f = ember.compile(returns_product)
    w = torch.randn(16, 16)
    with torch.no_grad():
        x1 = torch.randn(8, 16)
        first, _ = f(x1, w)
        kept = first.clone()
        second, total = f(torch.randn(8, 16), w)  # a second call must not write into the first result
    torch.testing.assert_close(first, kept)
    torch.testing.assert_close(first, x1 @ w)
    assert first.data_ptr() != second.data_ptr()
    for step in out_steps(caplog):
        assert step.count("out=%b") <= 1  # only the summed product, never the returned one


def test_training_gradients_through_arena_matmuls():
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 64), torch.nn.GELU(),
                                torch.nn.Linear(64, 8))
    reference = torch.nn.Sequential(*[m for m in model])  # the same parameters, run eagerly
    f = ember.compile(model)
    for k in range(2):
        x = torch.randn(3, 10, 32) * (k + 1)
        for p in model.parameters():
            p.grad = None
        f(x).square().mean().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        for p in model.parameters():
            p.grad = None
        reference(x).square().mean().backward()
        for got, want in zip(grads, [p.grad for p in model.parameters()]):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_a_returned_batched_product_keeps_no_arena():
    # x @ w of a [B, M, K] x: one torch.mm on the folded [B*M, K] view, returned through aten._unsafe_view of
    # its matrix (docs/lowering.md). The matrix must stay torch's: in the arena the output would alias it,
    # and every call would hand its arena to the caller and fault in a new one.
    def fn(x, w):
        h = x @ w
        return h, torch.relu(torch.mm(h.flatten(0, 1), w.t()))

    torch.manual_seed(3)
    ember.reset()
    f = ember.compile(fn)
    w = torch.randn(32, 32)
    with torch.no_grad():
        for k in range(3):
            x = torch.randn(4, 16, 32) * (k + 1)
            got, want = f(x, w), fn(x, w)
            for g, e in zip(got, want):
                torch.testing.assert_close(g, e)
            assert got[0]._base is None
    assert ember.stats()["arenas_kept_by_outputs"] == 0, ember.stats()
