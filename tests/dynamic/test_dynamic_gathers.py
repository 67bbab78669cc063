"""Slices, F.embedding, torch.diff, slice_scatter, advanced indexing by aranges and by lists of ints, narrow,
repeat, repeat_interleave, full_like and group_norm over symbolic sizes compile into Ember's kernels
(decompose_views.cpp, decompose_subscripts.cpp, lowering/views.cpp, issue 14): one graph serves every length,
results equal eager's, and no torch call is left where the static graph has none. Bounds and indices that the
symbols' facts cannot place stay with torch (it clamps, wraps or raises), with eager's results."""
import contextlib
import logging

import pytest
import torch
import torch.nn.functional as F

import ember
from ember.testing import DEVICE


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


@pytest.fixture
def on_device():
    """Tensors made on the test device (EMBER_TEST_DEVICE=cuda on the GPU machine: the Triton backend)."""
    with DEVICE if DEVICE.type != "cpu" else contextlib.nullcontext():
        yield


def externs_of(caplog):
    return [line for r in caplog.records for line in r.getMessage().splitlines() if line.startswith("extern: ")]


def run_over_lengths(fn, make, lengths, monkeypatch, caplog):
    """fn compiled with dynamic=True and called at each length; the extern calls lowering kept."""
    monkeypatch.setenv("EMBER_LOGS", "schedule")
    caplog.set_level(logging.INFO, logger="ember")
    compiled = ember.compile(fn, dynamic=True)
    with torch.no_grad():
        for t in lengths:
            args = make(t)
            torch.testing.assert_close(compiled(*args), fn(*args))
    stats = ember.stats()
    assert stats["frames_compiled"] == 1 and stats["graph_breaks"] == 0 and stats["backend_errors"] == 0, stats
    return externs_of(caplog)


def positions(t):
    return (torch.arange(t).expand(2, t),)


CASES = {
    "slices": (lambda x: (x[:, :1] - x[:, -1:] * x[:, 1:2], x[:2] * 2, x[:, 1:] + x[:, :-1]),
               lambda t: (torch.randn(t, t + 1),)),
    "embedding": (lambda ids, w: F.embedding(ids, w) + F.embedding(torch.arange(ids.shape[1]), w)[None],
                  lambda t: (torch.randint(0, 16, (2, t)), torch.randn(16, 8))),
    # an expanded input: its broadcast dim keeps stride 0, its size a symbol
    "diff": (lambda p: torch.diff(p, prepend=p[:, :1] - 1, dim=-1) != 1, positions),
    "diff_twice_appended": (lambda x, a: torch.diff(x, n=2, dim=0, append=a), lambda t: (torch.randn(t, 3), torch.randn(2, 3))),
    # transformers' mask functions: position_ids[batch_idx, q_idx] <= position_ids[batch_idx, kv_idx]
    "position_mask": (lambda p: p[torch.arange(2)[:, None, None, None], torch.arange(p.shape[1])[None, None, :, None]]
                      <= p[torch.arange(2)[:, None, None, None], torch.arange(p.shape[1])[None, None, None, :]],
                      positions),
    "index_after_full_slice": (lambda x: x[:, torch.arange(x.shape[1] - 1) + 1].exp(), lambda t: (torch.randn(2, t),)),
    # BLOOM's alibi.repeat(batch_size, 1, 1); Whisper's, T5's full_like, Falcon's qkv[..., [-2], :]
    "repeat_by_size": (lambda x: x.repeat(x.shape[0], 1, 2) + 1, lambda t: (torch.randn(t, 3),)),
    "repeat_interleave": (lambda x: x.repeat_interleave(2, dim=1) * 2, lambda t: (torch.randn(3, t),)),
    "full_like": (lambda x: torch.full_like(x, -1.5) + x, lambda t: (torch.randn(2, t),)),
    "list_index": (lambda x: x[..., [-2], :] * x[:, [0, 2], :].sum(1, keepdim=True), lambda t: (torch.randn(2, t, 4, 3),)),
    "narrow_by_size": (lambda x: x.narrow(1, 1, x.shape[1] - 2) * 2 + torch.narrow(x, 1, -2, 1),
                       lambda t: (torch.randn(3, t),)),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), lambda t: (torch.randn(2, 4, t), torch.randn(4), torch.randn(4))),
}


@pytest.mark.parametrize("name", CASES)
def test_one_graph_of_kernels_over_lengths(name, monkeypatch, caplog, on_device):
    fn, make = CASES[name]
    torch.manual_seed(0)
    externs = run_over_lengths(fn, make, (5, 9, 16), monkeypatch, caplog)
    assert externs == [], externs


def test_indices_the_facts_cannot_place_stay_with_torch(monkeypatch, caplog):
    # arange(T) into a dim of 8: inside for T <= 8 only, so torch indexes (and raises past it), as eager.
    # CPU only: on CUDA an index out of range is a device-side assert, fatal to the process.
    def fn(x, y):
        return x[:, torch.arange(y.shape[0])] + y

    def make(t):
        return torch.randn(3, 8), torch.randn(t)
    externs = run_over_lengths(fn, make, (4, 6, 8), monkeypatch, caplog)
    assert len(externs) == 1 and "operator.getitem" in externs[0], externs
    compiled = ember.compile(fn, dynamic=True)
    with pytest.raises(IndexError) as eager:
        fn(*make(9))
    with pytest.raises(IndexError) as ours:
        compiled(*make(9))
    assert str(ours.value) == str(eager.value)


def test_gradients_of_symbolic_slices_are_kernels(monkeypatch, caplog, on_device):
    # slice's gradient over a symbolic extent: a slice_scatter into zeros, no island (autograd's fallback).
    def fn(x):
        return (x[:, 1:] * 2).exp() + x[:, :-1]

    monkeypatch.setenv("EMBER_LOGS", "schedule")
    caplog.set_level(logging.INFO, logger="ember")
    compiled = ember.compile(fn, dynamic=True)
    for t in (5, 9, 16):
        x = torch.randn(3, t, requires_grad=True)
        compiled(x).sum().backward()
        ours, x.grad = x.grad, None
        fn(x).sum().backward()
        torch.testing.assert_close(ours, x.grad)
    stats = ember.stats()
    assert stats["frames_compiled"] == 1 and stats["autograd_islands"] == 0, stats
    assert externs_of(caplog) == [], externs_of(caplog)


@pytest.mark.parametrize("name", ["gpt2", "bloom"])
def test_transformers_dynamic_graphs_call_no_torch_op_their_static_graphs_do_not(name):
    # The probe of `python -m ember.bench dynamic --probe`: GPT-2's masks (getitems by aranges, diff,
    # embedding of positions, slices) and BLOOM's alibi.repeat(batch_size, 1, 1) were extern calls only in the
    # dynamic graph, a host dispatch each per call.
    from ember.bench import dynamic_probe
    row = dynamic_probe.probe_model(name)
    assert row["ok"] and row["graphs"] == 1 and row["extra_externs"] == {}, row
