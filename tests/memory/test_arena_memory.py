"""What compiled graphs keep between calls, and what keeps their arena alive (docs/memory.md, "Between calls").

- An arena up to CompiledGraph::kSmallArenaBytes (1 MiB) is kept by its graph; a larger one only until another
  graph runs, which takes that block over when it needs a large arena (a training forward and its backward take
  turns with one block), so the bytes kept between calls are bounded by one large arena plus 1 MiB per graph.
- An extern result that is a view of a temporary stays a view of it (the planner keeps the temporary alive as long
  as the view); an output that is one keeps the call's arena, and the graph's next call takes a new one.
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


def handed_over():
    return ember.stats()["arenas_handed_over"]


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
        assert handed_over() == 0
        f(x, w)
        assert kept() - base == arena
        close(g(x, w), sin_mm(x, w))
        assert kept() - base == arena  # one block: g took f's over (same plan size)
        assert handed_over() == 1
        close(f(x, w), exp_mm(x, w))  # and f takes it back: every temporary written again, runs right
        assert kept() - base == arena
        assert handed_over() == 2
    del f, g
    ember.reset()
    gc.collect()
    assert kept() == base


def test_a_graph_needing_more_than_the_kept_block_frees_it_and_allocates_its_own():
    ember.reset()
    gc.collect()
    base = kept()
    x, w = torch.randn(ROWS, COLS), torch.randn(COLS, 8)
    big = torch.randn(2 * ROWS, COLS)
    f, g = ember.compile(exp_mm), ember.compile(sin_mm)
    with torch.no_grad():
        f(x, w)
        small = kept() - base
        close(g(big, w), sin_mm(big, w))  # twice f's temporaries: f's block is too small, and goes
        assert handed_over() == 0
        large = kept() - base
        assert large >= 2 * small - 64
        close(f(x, w), exp_mm(x, w))  # f fits in g's larger block: it takes all of it
        assert handed_over() == 1
        assert kept() - base == large
        for k in range(2):  # the block goes back and forth; each graph finds its own tensors over it again
            close(g(big * k, w), sin_mm(big * k, w))
            close(f(x + k, w), exp_mm(x + k, w))
        assert handed_over() == 5
        assert kept() - base == large


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
    assert handed_over() == 0  # small arenas stay with their graphs


def unfold_twice(x):
    return (x * 2.0).unfold(0, 2, 1) * 3.0  # unfold: a torch call returning a view of the temporary x * 2


def test_a_view_of_a_temporary_read_later_runs_right():
    # The temporary lives as long as the view torch returned (the planner extends its life to the view's last
    # reader), so the kernel after the call reads the temporary's values, not another temporary's.
    x = torch.randn(64, 16)
    f = ember.compile(unfold_twice)
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(f(x), unfold_twice(x))


def view_then_write(x):
    y = x * 1.0
    z = y.unfold(0, 2, 1)  # a view of the temporary y, returned
    w = y * 2.0
    y.mul_(0.5)  # written after the view was taken: z sees it, as in eager
    return w, z


def test_a_returned_view_of_a_temporary_stays_an_alias_and_keeps_its_arena():
    ember.reset()
    x = torch.randn(64, 16)
    f = ember.compile(view_then_write)
    with torch.no_grad():
        first = f(x)
        kept_by_outputs = ember.stats()["arenas_kept_by_outputs"]
        assert kept_by_outputs == 1
        second = f(x + 1.0)  # a new arena: the first call's outputs still hold the old one
        for got, want in zip(first, view_then_write(x)):
            torch.testing.assert_close(got, want)
        for got, want in zip(second, view_then_write(x + 1.0)):
            torch.testing.assert_close(got, want)
        assert ember.stats()["arenas_kept_by_outputs"] == 2


def two_aliases(x):
    y = x * 1.0
    z = y.view(-1)
    z.add_(1.0)
    y.mul_(2.0)
    return y, z


def test_outputs_that_alias_one_temporary_alias_each_other():
    x = torch.randn(3, 4)
    y, z = ember.compile(two_aliases)(x)
    want_y, want_z = two_aliases(x)
    torch.testing.assert_close(y, want_y)
    torch.testing.assert_close(z, want_z)
    y.zero_()  # as in eager, z is a view of y
    assert z.abs().sum().item() == 0.0
