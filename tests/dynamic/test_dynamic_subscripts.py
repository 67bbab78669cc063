"""Basic tensor subscripts over symbolic sizes (issue 14, item 1; src/frontend/interp/trace_subscript.cpp): ints,
constant slices (negative bounds, steps, bounds past the end), None and Ellipsis keep the symbols; Python's
clamping is decided from the symbols' facts or by one relation guard, never a constant."""
import pytest
import torch

import ember


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


CASES = {
    "newaxis": lambda x: x[..., None] * 2,
    "first_column": lambda x: x[:, :1] + x[:, -1:],
    # (ops over a slice that is neither dense nor ordered by the sizes' symbols specialize: .contiguous()
    # copies it; docs/dynamic-shapes.md)
    "middle": lambda x: x[:, 1:3].contiguous() + x[:, 1:-1:2][:, :2].contiguous(),
    "last_row": lambda x: x[-1] * 3,
    "past_the_end": lambda x: x[:, :100].sum(-1) + x[:, -100:].sum(-1),
    "whole": lambda x: x[:] + x[:, 0:],
    "mixed": lambda x: x[None, ..., -2:].contiguous() * 2 + x[0, None, :2].contiguous(),
}


@pytest.mark.parametrize("backend", ["eager", "ember"])
@pytest.mark.parametrize("name", list(CASES))
def test_one_graph_over_lengths(name, backend):
    fn = CASES[name]
    c = ember.compile(fn, dynamic=True, backend=backend)
    for t in (8, 16, 17, 5):
        x = torch.randn(3, t)
        torch.testing.assert_close(c(x), fn(x))
    assert ember.stats()["frames_compiled"] == 1, ember.stats()
    r = ember.explain(fn, dynamic=True)(torch.randn(3, 9))
    pinned = [line for g in r.guards for line in g.splitlines() if "shape guard: s" in line and " == " in line]
    assert pinned == [], pinned


def test_a_bound_inside_some_sizes_is_one_relation_guard():
    fn = lambda x: x[:, :4].contiguous()  # noqa: E731  min(4, T): 4 when 4 <= T
    r = ember.explain(fn, dynamic=True)(torch.randn(3, 9))
    rels = [line for g in r.guards for line in g.splitlines() if "shape guard: 4 <= s1" in line]
    assert len(rels) == 1, r.guards
    ember.reset()
    c = ember.compile(fn, dynamic=True)
    for t in (9, 12, 3):  # 3 < 4: the guard fails, a new graph for it
        x = torch.randn(3, t)
        torch.testing.assert_close(c(x), fn(x))
    assert ember.stats()["frames_compiled"] == 2, ember.stats()
