"""index_add, scatter_add and slice_scatter compile into Ember's kernels (lower_accumulate in lowering/data.cpp: a copy of x,
then an accumulating store `+=` at checked indices), and so do the gradients that are sums into zeros: an
embedding's weight gradient, index_select's, gather's and topk's. Results equal eager's, repeated indices add
up, bad indices raise eager's error, and no torch call is left. On the test device (EMBER_TEST_DEVICE=cuda:
Triton's atomic adds)."""
import logging

import pytest
import torch
import torch.nn.functional as F

import ember
from ember.testing import DEVICE


def run_logged(fn, args, monkeypatch, caplog):
    """fn compiled and run on args: its result, ember.stats(), and the extern calls lowering kept."""
    ember.reset()
    monkeypatch.setenv("EMBER_LOGS", "schedule")
    caplog.set_level(logging.INFO, logger="ember")
    out = ember.compile(fn)(*args)
    externs = [line for r in caplog.records for line in r.getMessage().splitlines() if line.startswith("extern: ")]
    return out, ember.stats(), externs


def ints(high, *shape, seed=0):
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed)).to(DEVICE)


def rand(*shape, dtype=torch.float32, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(DEVICE, dtype)


CASES = {  # repeated indices throughout: several source elements add into one element
    "index_add_rows": (lambda x, i, s: torch.index_add(x, 0, i, s) * 2, lambda: (rand(10, 16), ints(10, 40), rand(40, 16))),
    "index_add_as_many_rows": (  # the copy, the sum and its reader share one iteration space and still never fuse
        lambda x, i, s: torch.index_add(x, 0, i, s).exp(), lambda: (rand(10, 16), ints(10, 10), rand(10, 16))),
    "index_add_last_dim": (lambda x, i, s: x.index_add(-1, i, s), lambda: (rand(3, 5, 7), ints(7, 9), rand(3, 5, 9))),
    "index_add_method_float64": (lambda x, i, s: x.index_add(1, i, s) + 1,
                                 lambda: (rand(4, 6, dtype=torch.float64), ints(6, 11), rand(4, 11, dtype=torch.float64))),
    "index_add_int64": (lambda x, i, s: torch.index_add(x, 0, i, s), lambda: (ints(100, 5, 3), ints(5, 12), ints(100, 12, 3))),
    "index_add_int32_index": (lambda x, i, s: torch.index_add(x, 0, i.int(), s), lambda: (rand(6, 4), ints(6, 20), rand(20, 4))),
    "scatter_add_dim1": (lambda x, i, s: torch.scatter_add(x, 1, i, s) - 1, lambda: (rand(4, 8), ints(8, 4, 20), rand(4, 20))),
    "scatter_add_smaller_index": (lambda x, i, s: x.scatter_add(0, i, s), lambda: (rand(5, 6), ints(5, 7, 4), rand(9, 6))),
    # slice_scatter: one kernel choosing src (a masked load) inside the slice, x outside.
    "slice_scatter_strided": (lambda x, s: torch.slice_scatter(x, s, 1, 2, None, 3) * 2, lambda: (rand(3, 10), rand(3, 3))),
    "slice_scatter_negative_bounds": (lambda x, s: torch.slice_scatter(x, s, -1, -5, -1), lambda: (rand(2, 3, 8), rand(2, 3, 4))),
    "slice_scatter_dim0_bf16": (lambda x, s: x.slice_scatter(s, 0, 1, 6, 2) + 1,
                                lambda: (rand(7, 4, dtype=torch.bfloat16), rand(3, 4, dtype=torch.bfloat16))),
}


@pytest.mark.parametrize("name", CASES)
def test_matches_eager_in_kernels(name, monkeypatch, caplog):
    fn, make = CASES[name]
    args = make()
    out, stats, externs = run_logged(fn, args, monkeypatch, caplog)
    expected = fn(*args)
    torch.testing.assert_close(out, expected)
    assert stats["graph_breaks"] == 0 and stats["backend_errors"] == 0 and stats["kernels_compiled"] > 0, stats
    assert externs == [], externs


def test_bfloat16_sums_in_float32(monkeypatch, caplog):
    # 64 bf16 ones into one element: eager's bf16 sum stalls at 256 with a large start, the f32 sum does not.
    x = torch.full((2, 3), 250.0, dtype=torch.bfloat16, device=DEVICE)
    index = torch.zeros(64, dtype=torch.int64, device=DEVICE)
    source = torch.ones(64, 3, dtype=torch.bfloat16, device=DEVICE)
    fn = lambda x, i, s: torch.index_add(x, 0, i, s)  # noqa: E731
    out, stats, externs = run_logged(fn, (x, index, source), monkeypatch, caplog)
    assert out.dtype == torch.bfloat16 and externs == []
    expected = torch.index_add(x.float(), 0, index, source.float()).bfloat16()
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def test_alpha_stays_with_torch(monkeypatch, caplog):
    fn = lambda x, i, s: torch.index_add(x, 0, i, s, alpha=2.0) * 3  # noqa: E731
    args = (rand(4, 3), ints(4, 6), rand(6, 3))
    out, stats, externs = run_logged(fn, args, monkeypatch, caplog)
    torch.testing.assert_close(out, fn(*args))
    assert any("index_add" in line for line in externs), externs


@pytest.mark.skipif(DEVICE.type != "cpu", reason="a GPU kernel's failed index check is a device assert, as eager's")
@pytest.mark.parametrize("fn", [lambda x, i, s: torch.index_add(x, 0, i, s), lambda x, i, s: torch.scatter_add(x, 0, i[:, None].expand(-1, 3), s)],
                         ids=["index_add", "scatter_add"])
def test_out_of_range_index_raises_like_eager(fn):
    x, source = rand(4, 3), rand(5, 3)
    bad, good = torch.tensor([0, 1, 4, 2, 0]), torch.tensor([0, 1, 3, 2, 0])
    with pytest.raises((IndexError, RuntimeError)) as eager:
        fn(x, bad, source)
    ember.reset()
    compiled = ember.compile(fn)
    torch.testing.assert_close(compiled(x, good, source), fn(x, good, source))
    with pytest.raises(type(eager.value)):
        compiled(x, bad, source)


def _grads(fn, params, *args):
    loss = fn(*args)
    return torch.autograd.grad(loss, params)


GRAD_CASES = {  # (module-free fn of params, make params, make other args)
    "embedding": (lambda w, i: (F.embedding(i, w) * torch.arange(5.0, device=w.device)).sum(), lambda: [rand(20, 5)], lambda: (ints(20, 3, 33),)),
    "embedding_padding_idx": (lambda w, i: F.embedding(i, w, padding_idx=2).pow(2).sum(), lambda: [rand(20, 5)],
                              lambda: (torch.cat([ints(20, 40), torch.full((6,), 2, device=DEVICE)]),)),
    "index_select": (lambda w, i: w.index_select(1, i).sin().sum(), lambda: [rand(4, 9)], lambda: (ints(9, 30),)),
    "gather": (lambda w, i: torch.gather(w, 1, i).exp().sum(), lambda: [rand(4, 9)], lambda: (ints(9, 4, 17),)),
    "topk": (lambda w: torch.topk(w, 3, dim=-1).values.pow(3).sum(), lambda: [rand(6, 10)], lambda: ()),
    "index_add_both": (lambda x, s, i: torch.index_add(x, 0, i, s).tanh().sum(), lambda: [rand(5, 4), rand(12, 4)],
                       lambda: (ints(5, 12),)),
    "scatter_add_both": (lambda x, s, i: torch.scatter_add(x, 1, i, s).tanh().sum(), lambda: [rand(3, 5), rand(3, 8)],
                         lambda: (ints(5, 3, 8),)),
    # A relative-position table read by an index tensor (negative entries wrap): an index_add of the rows.
    "getitem_table": (lambda t, i: (t[i] * 2).pow(2).sum(), lambda: [rand(7, 3)], lambda: (ints(14, 5, 4) - 7,)),
    "getitem_columns": (lambda t, i: t[:, i].sin().sum(), lambda: [rand(4, 9)], lambda: (ints(9, 12),)),
    "getitem_two_tensors": (lambda t, i, j: t[i, j].pow(2).sum(), lambda: [rand(5, 6, 2)],
                            lambda: (ints(10, 7, 1) - 5, ints(6, 3))),
}


@pytest.mark.parametrize("name", GRAD_CASES)
def test_gradients_are_sums_in_kernels(name):
    fn, make_params, make_args = GRAD_CASES[name]
    params = [p.requires_grad_() for p in make_params()]
    args = make_args()
    expected = _grads(fn, params, *params, *args)
    ember.reset()
    compiled = ember.compile(fn)
    got = _grads(compiled, params, *params, *args)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
    stats = ember.stats()
    assert stats["backward_graphs_compiled"] == 1 and stats["autograd_islands"] == 0, stats


def test_embedding_gradient_is_one_accumulating_kernel(monkeypatch, caplog):
    # The weight's gradient: a zero fill and one kernel adding each row where its index sends it (the
    # padding row's gradient rows zeroed in that kernel): no aten embedding_dense_backward call.
    ember.reset()
    monkeypatch.setenv("EMBER_LOGS", "schedule")
    caplog.set_level(logging.INFO, logger="ember")
    emb = torch.nn.Embedding(30, 8, padding_idx=0, device=DEVICE)
    compiled = ember.compile(lambda i: emb(i).square().sum())
    i = ints(30, 4, 16)
    compiled(i).backward()
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "embedding_dense_backward" not in text
    assert text.count("+= ") == 1, text
    got = emb.weight.grad.clone()
    emb.weight.grad = None
    emb(i).square().sum().backward()
    torch.testing.assert_close(got, emb.weight.grad)


def test_scale_grad_by_freq_stays_with_aten():
    emb = torch.nn.Embedding(12, 4, scale_grad_by_freq=True, device=DEVICE)
    i = ints(12, 25)
    ember.reset()
    ember.compile(lambda i: emb(i).sum())(i).backward()
    got = emb.weight.grad.clone()
    emb.weight.grad = None
    emb(i).sum().backward()
    torch.testing.assert_close(got, emb.weight.grad)


def test_selected_pieces_join_in_one_cat(monkeypatch, caplog):
    # select with a literal index: its gradient a piece joined with the slice's by one cat (lowered), no
    # select_scatter into zeros through torch.
    x = rand(2, 5, 3).requires_grad_()
    fn = lambda t: (t[:, 0] * 3 + t[:, 2:].sum(1)).square().sum()  # noqa: E731
    ember.reset()
    monkeypatch.setenv("EMBER_LOGS", "schedule")
    caplog.set_level(logging.INFO, logger="ember")
    (got,) = torch.autograd.grad(ember.compile(fn)(x), x)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "select_scatter" not in text and "slice_scatter" not in text, text
    torch.testing.assert_close(got, torch.autograd.grad(fn(x), x)[0])


def test_index_add_with_symbolic_sizes_compiles_once():
    fn = lambda x, i, s: torch.index_add(x, 0, i, s) * 2  # noqa: E731
    ember.reset()
    compiled = ember.compile(fn, dynamic=True)
    for n in (5, 9, 13):
        args = (rand(n, 3), ints(n, 2 * n), rand(2 * n, 3))
        torch.testing.assert_close(compiled(*args), fn(*args))
    stats = ember.stats()
    assert stats["frames_compiled"] == 1 and stats["recompiles"] == 0 and stats["kernels_compiled"] > 0, stats


@pytest.fixture
def deterministic_off():
    """Leaves torch.use_deterministic_algorithms off, as it found it."""
    assert not torch.are_deterministic_algorithms_enabled()
    yield
    torch.use_deterministic_algorithms(False)


def test_deterministic_algorithms(monkeypatch, caplog, deterministic_off):
    """torch.use_deterministic_algorithms: on CUDA an adding kernel's atomic adds land in any order, so a graph
    compiled with them is guarded on the flag being off; once it is on, the frame recompiles and index_add stays
    torch's call (which takes its deterministic algorithm), with the reason. Turning it off again finds the first
    graph. On the CPU adding kernels run serially: the flag neither changes the kernels nor guards them."""
    fn = lambda x, i, s: torch.index_add(x, 0, i, s) * 2
    args = (rand(10, 16), ints(10, 40), rand(40, 16))
    expected = fn(*args)
    ember.reset()
    monkeypatch.setenv("EMBER_LOGS", "schedule")
    caplog.set_level(logging.INFO, logger="ember")
    compiled = ember.compile(fn)
    torch.testing.assert_close(compiled(*args), expected)
    torch.use_deterministic_algorithms(True)
    first = compiled(*args)
    torch.testing.assert_close(first, expected)
    assert torch.equal(compiled(*args), first)  # the same bits on every call
    torch.use_deterministic_algorithms(False)
    torch.testing.assert_close(compiled(*args), expected)
    stats = ember.stats()
    externs = [line for r in caplog.records for line in r.getMessage().splitlines() if line.startswith("extern: ")]
    if DEVICE.type == "cuda":
        assert stats["recompiles"] == 1 and stats["cache_hits"] == 2, stats
        assert len(externs) == 1 and "torch.index_add: deterministic algorithms are on" in externs[0], externs
    else:
        assert stats["recompiles"] == 0 and stats["cache_hits"] == 3 and externs == [], (stats, externs)


def test_getitem_gradient_is_an_accumulating_kernel(monkeypatch, caplog):
    """x[index] with one index tensor: its gradient adds the rows into zeros in Ember's kernels (negative indices
    wrapped first), not aten's index_put (index tensors on dims apart keep index_put)."""
    table, index = rand(7, 3).requires_grad_(), ints(14, 5, 4) - 7
    ember.reset()
    monkeypatch.setenv("EMBER_LOGS", "schedule")
    caplog.set_level(logging.INFO, logger="ember")
    got, = torch.autograd.grad(ember.compile(lambda t, i: (t[i] * 2).pow(2).sum())(table, index), [table])
    want, = torch.autograd.grad((table[index] * 2).pow(2).sum(), [table])
    torch.testing.assert_close(got, want)
    log = "\n".join(r.getMessage() for r in caplog.records)
    assert "index_put" not in log and "+=" in log, log
