"""Graphs whose temporaries are all empty (fuzz seeds 92144 and 100391): the memory plan places nothing, so a
call takes no arena, and an extern call that reads one of those temporaries, or an in-place one that changes
it, gets a tensor without elements laid out as planned (runtime/compiled_graph.cpp, arena_tensor). Before,
the runtime read the missing arena: a segmentation fault."""
import torch

import ember


def diagonal_of_empty(x):
    t = x.transpose(0, -1)[1:]  # [0, 1, 6]: a view of nothing
    return (-t).clone().diagonal()  # the negation is an empty temporary; clone and diagonal run through torch


def in_place_on_empty(x):
    t = x.clone().transpose(0, -1)[1:]
    u = (-t).clone()
    u.zero_()
    return t, u.diagonal()


def test_extern_calls_on_empty_temporaries_match_eager():
    for fn in (diagonal_of_empty, in_place_on_empty):
        ember.reset()
        compiled = ember.compile(fn)
        for _ in range(2):
            x = torch.randn(6, 1, 1)
            want, got = fn(x), compiled(x)
            want, got = (want,) if isinstance(want, torch.Tensor) else want, (got,) if isinstance(got, torch.Tensor) else got
            for w, g in zip(want, got):
                assert g.shape == w.shape and g.dtype == w.dtype and g.numel() == 0
        assert ember.stats()["graphs"] >= 1
