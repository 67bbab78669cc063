"""Symbolic slice steps (issue 14): `x[::k]` with k a dynamic int or a size keeps its symbol. The slice's size is
`(stop - start + k - 1) // k` and its stride the dim's times k; pointwise ops over that layout (not dense, but in a
fixed dim order) keep the symbols (shape_rules_symbolic.cpp, strict_order). Lowering leaves a symbolic step to
torch (an extern call). Results equal eager's."""
import pytest
import torch

import ember


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


def strided(x, k):
    return x[::k].relu() * k + (x[1::k] * 3).sum()


@pytest.mark.parametrize("backend", ["eager", "ember"])
def test_int_step_compiles_once(backend):
    compiled = ember.compile(strided, dynamic=True, backend=backend)
    for n, k in ((10, 2), (11, 3), (7, 1), (9, 4), (16, 5), (3, 7)):
        x = torch.randn(n, 4)
        torch.testing.assert_close(compiled(x, k), strided(x, k))
    s = ember.stats()
    assert s["frames_compiled"] == 1 and s["eager_frames"] == 0, s


def test_step_graph_keeps_the_symbol():
    r = ember.explain(strided, dynamic=True)(torch.randn(10, 4), 3)
    assert "slice(%0, 0, 0, sym(s0), sym(s2))" in r.graphs[0], r.graphs[0]
    assert "== 3" not in "\n".join(r.guards), r.guards


def every_other_row(x):
    # (Stepping dim 1 by x.shape[0] would give strides {s1, s0}, whose order depends on the values: specialized.)
    return x[:: x.shape[1]].exp()


def test_size_as_step():
    compiled = ember.compile(every_other_row, dynamic=True, backend="eager")
    for b, t in ((9, 2), (10, 3), (17, 4)):
        x = torch.randn(b, t)
        torch.testing.assert_close(compiled(x), every_other_row(x))
    assert ember.stats()["frames_compiled"] == 1, ember.stats()
