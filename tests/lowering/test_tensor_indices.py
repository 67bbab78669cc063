"""Advanced indexing with index tensors, F.embedding, torch.diff, constant F.pad and Tensor.new_* compile into
Ember's kernels (decompose_subscripts.cpp: index_select of the merged indexed dims, cat and slices, full) instead of
running through torch: results equal eager's, bad indices raise IndexError, gradients flow where they should."""
import logging

import pytest
import torch
import torch.nn.functional as F

import ember


def run_logged(fn, args, monkeypatch, caplog):
    """fn compiled and run on args; its results, ember.stats() and the extern calls lowering kept (EMBER_LOGS=schedule)."""
    ember.reset()
    monkeypatch.setenv("EMBER_LOGS", "schedule")
    caplog.set_level(logging.INFO, logger="ember")
    compiled = ember.compile(fn)
    with torch.no_grad():
        out = compiled(*args)
    externs = [line for r in caplog.records for line in r.getMessage().splitlines() if line.startswith("extern: ")]
    return out, ember.stats(), externs


CASES = {  # index tensors known to lie in their dims: aranges of literals, shifted, through views
    "one_index": (lambda x: x[torch.arange(1, 6, 2)] * 2, lambda: (torch.randn(6, 5),)),
    "after_full_slice": (lambda x: x[:, torch.arange(4)[None, :] + 2] + 1, lambda: (torch.randn(4, 6),)),
    "two_broadcast_adjacent": (lambda y: y[torch.arange(2)[:, None], torch.arange(3)[None, :]].exp(),
                               lambda: (torch.randn(2, 3, 4),)),
    "split_by_slice": (lambda y: y[torch.arange(2)[:, None], :, torch.arange(0, 4, 3)[None, :]] - 1,
                       lambda: (torch.randn(2, 3, 4),)),
    "ellipsis_then_index": (lambda y: y[..., torch.arange(3) + 1].sum(-1), lambda: (torch.randn(2, 3, 4),)),
    "position_mask": (  # transformers' mask functions: position_ids[batch_idx, q_idx] <= position_ids[batch_idx, kv_idx]
        lambda p: p[torch.arange(2)[:, None, None, None], torch.arange(8)[None, None, :, None]]
        <= p[torch.arange(2)[:, None, None, None], torch.arange(8)[None, None, None, :]],
        lambda: (torch.arange(8).expand(2, 8),)),
    "embedding_padding_idx": (lambda ids, w: F.embedding(ids, w, padding_idx=0) * 3,
                              lambda: (torch.tensor([[0, 3, 2], [1, 1, 0]]), torch.randn(4, 5))),
    "diff": (lambda x, p: torch.diff(x, n=2, dim=1, prepend=p, append=p * 2),
             lambda: (torch.randn(3, 6), torch.randn(3, 1))),
    "diff_ints": (lambda i: torch.diff(i, prepend=i[:1] - 1) != 1, lambda: (torch.tensor([0, 1, 2, 5, 6, 0]),)),
    "pad_constant": (lambda x: F.pad(x, (1, 2, 0, 1), value=-1.5) + 1, lambda: (torch.randn(3, 4),)),
    "pad_labels": (lambda labels: F.pad(labels, (0, 1), value=-100)[..., 1:], lambda: (torch.randint(0, 9, (2, 5)),)),
    "new_factories": (lambda x: x.new_ones((2, 3)) + x.new_zeros(2, 3) * x.sum() + x.new_full((2, 3), 0.5),
                      lambda: (torch.randn(2, 3),)),
}


@pytest.mark.parametrize("name", CASES)
def test_matches_eager_in_one_graph_of_kernels(name, monkeypatch, caplog):
    fn, make = CASES[name]
    torch.manual_seed(0)
    args = make()
    out, stats, externs = run_logged(fn, args, monkeypatch, caplog)
    torch.testing.assert_close(out, fn(*args))
    assert stats["graph_breaks"] == 0 and stats["backend_errors"] == 0, stats
    assert externs == [], externs  # every op became kernels: no torch call left


def test_index_tensors_not_known_in_range_stay_with_torch(monkeypatch, caplog):
    # A graph input's values (negative ones wrapped, out of range ones raising torch's own error), and an
    # arange with a negative value: torch runs those getitems, with eager's semantics and messages.
    def fn(x, i):
        return x[i] + x[torch.arange(2) - 1].sum()  # [-1, 0]: torch wraps -1

    x = torch.randn(4, 3)
    out, _, externs = run_logged(fn, (x, torch.tensor([3, -4])), monkeypatch, caplog)
    torch.testing.assert_close(out, fn(x, torch.tensor([3, -4])))
    assert len(externs) == 2 and all("operator.getitem" in e for e in externs), externs
    f = ember.compile(fn)
    for bad in (torch.tensor([0, 4]), torch.tensor([-5])):
        with pytest.raises(IndexError) as eager:
            fn(x, bad)
        with pytest.raises(IndexError) as compiled:
            f(x, bad)
        assert str(compiled.value) == str(eager.value)


def test_gradients_through_index_tensors_and_embedding():
    torch.manual_seed(1)
    w = torch.randn(6, 4, requires_grad=True)
    x = torch.randn(5, 4, requires_grad=True)
    ids, rows = torch.tensor([[0, 5, 5], [2, 0, 1]]), torch.tensor([4, -1, 4])

    def fn(x, w, ids, rows):
        return (F.embedding(ids, w, padding_idx=5).sum(1) * x[rows][:2]).square().sum()

    want = torch.autograd.grad(fn(x, w, ids, rows), (x, w))
    got = torch.autograd.grad(ember.compile(fn)(x, w, ids, rows), (x, w))
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)
    assert want[1][5].abs().sum() == 0  # padding_idx's row gets no gradient, in both
