"""What compiled graphs keep between calls, and what keeps their arena alive (docs/memory.md, "Between calls").

- An arena up to CompiledGraph::kSmallArenaBytes (1 MiB) is kept by its graph; a larger one only until another
  graph runs, so the bytes kept between calls are bounded by one large arena plus 1 MiB per graph, and a training
  forward's arena is gone before its backward runs.
- An extern result that is a view of a temporary is copied out of the arena (the planner ends the temporary's life
  at that call), so no output keeps an arena alive.
Figures come from ember.stats()'s arena_* entries, not from timing; CPU only, each call a few milliseconds.
"""
import gc

import torch

import ember

ROWS, COLS = 1024, 512  # a [ROWS, COLS] float32 temporary: 2 MiB, a "large" arena


def exp_mm(x, w):
    return torch.mm(torch.exp(x), w) + 1.0  # exp(x) is a temporary: the extern matmul reads it


def sin_mm(x, w):
    return torch.mm(torch.sin(x), w) * 2.0


def close(a, b):
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)  # exp/sin of Ember's kernels against torch's


def kept():
    return ember.stats()["arena_bytes_kept"]


def test_a_large_arena_is_kept_only_until_another_graph_runs():
    ember.reset()
    gc.collect()
    base = kept()
    x, w = torch.randn(ROWS, COLS), torch.randn(COLS, 8)
    f, g = ember.compile(exp_mm), ember.compile(sin_mm)
    with torch.no_grad():
        close(f(x, w), exp_mm(x, w))
        arena = ember.stats()["arena_bytes_max"]
        assert arena >= ROWS * COLS * 4
        assert kept() - base == arena  # the one graph that runs keeps its arena for its next call
        f(x, w)
        assert kept() - base == arena
        close(g(x, w), sin_mm(x, w))
        assert kept() - base == arena  # g's arena; f's was dropped when g ran
        close(f(x, w), exp_mm(x, w))  # f allocates again, and runs right
        assert kept() - base == arena
    del f, g
    ember.reset()
    gc.collect()
    assert kept() == base


def test_small_arenas_stay_with_their_graphs():
    ember.reset()
    gc.collect()
    base = kept()
    x, w = torch.randn(16, 32), torch.randn(32, 8)
    f, g = ember.compile(exp_mm), ember.compile(sin_mm)
    with torch.no_grad():
        f(x, w)
        one = kept() - base
        g(x, w)
        f(x, w)
    assert 0 < one <= 1 << 20
    assert kept() - base == 2 * one


def unfold_twice(x):
    return (x * 2.0).unfold(0, 2, 1) * 3.0  # unfold: a torch call returning a view of the temporary x * 2


def test_a_view_of_a_temporary_is_copied_out_of_the_arena():
    ember.reset()
    x = torch.randn(64, 16)
    f = ember.compile(unfold_twice)
    with torch.no_grad():
        for _ in range(2):
            before = ember.stats()["arena_results_copied"]
            torch.testing.assert_close(f(x), unfold_twice(x))
            assert ember.stats()["arena_results_copied"] == before + 1
