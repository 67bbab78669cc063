"""Int symbols in training graphs (issue 14): an int that the policy leaves dynamic (a counter attribute, an int
argument) stays a symbol in a graph that needs gradients. The forward reads it as inference graphs do; the
backward gets it from a tensor dimension it reads or from the forward's size carrier (docs/autograd.md). Gradients
equal eager's over five values; dynamic=True compiles one pair, dynamic=None at most two."""
import copy

import pytest
import torch

import ember


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


class Counter(torch.nn.Module):
    """`self.calls += 1` used in math: the counter scales the output and so the gradient."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 6))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return (x @ self.w * self.calls).tanh().sum()


class IntArgs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 6))

    def forward(self, x, n):
        # n scales (a sym(...) scalar in the backward) and bounds a slice (a dimension the backward reads)
        return ((x @ self.w) * n)[:, :n].sigmoid().sum() + (x * n).tanh().mean()


class Heads(torch.nn.Module):
    """`x.view(B, T, n_head, -1)` with T a symbol, and an int argument in the math. (A varying head count itself
    is specialized: view's shape rule needs it static to split C, "s == 2: torch.Tensor.view's shape rule needs
    these sizes static" in EMBER_LOGS=guards.)"""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(12, 12)
        self.n_head = 3

    def forward(self, x, scale):
        B, T, C = x.shape
        q = self.proj(x).view(B, T, self.n_head, -1).transpose(1, 2)
        return ((q @ q.transpose(-1, -2)) / scale).softmax(-1).amax(-1).sum() * T


def check(model, calls, **compile_kwargs):
    """Runs `calls` (argument tuples) through eager and through Ember on a deep copy: outputs, the inputs'
    gradients and the parameters' gradients must match. Returns ember.stats()."""
    twin = copy.deepcopy(model)
    compiled = ember.compile(twin, **compile_kwargs)
    for args in calls:
        results = []
        for m, f in ((model, model), (twin, compiled)):
            m.zero_grad(set_to_none=True)
            xs = [a.clone().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args]
            out = f(*xs)
            out.backward()
            results.append((out, [x.grad for x in xs if isinstance(x, torch.Tensor)], [p.grad for p in m.parameters()]))
        (want, want_x, want_p), (got, got_x, got_p) = results
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        for g, w in zip(got_x + got_p, want_x + want_p):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    return ember.stats()


def counter_calls():
    torch.manual_seed(0)
    return [(torch.randn(3, 4),) for _ in range(5)]


def int_arg_calls():
    torch.manual_seed(1)
    x = torch.randn(5, 8)
    return [(x, n) for n in (2, 3, 4, 5, 6)]


def heads_calls():
    torch.manual_seed(2)
    return [(torch.randn(2, t, 12), k) for t, k in ((4, 2), (5, 3), (6, 4), (7, 6), (9, 2))]


CASES = [pytest.param(Counter, counter_calls, id="counter"), pytest.param(IntArgs, int_arg_calls, id="int_arg"),
         pytest.param(Heads, heads_calls, id="view_heads")]


# (A counter attribute follows dynamic=None under dynamic=True too, docs/dynamic-shapes.md: the test below.)
@pytest.mark.parametrize("make, calls", CASES[1:])
def test_dynamic_true_compiles_one_pair(make, calls):
    torch.manual_seed(3)
    s = check(make(), calls(), dynamic=True)
    assert s["frames_compiled"] == 1 and s["backward_graphs_compiled"] == 1, s
    assert s["eager_frames"] == 0 and s["backend_errors"] == 0, s


@pytest.mark.parametrize("make, calls", CASES)
def test_default_policy_compiles_at_most_twice(make, calls):
    torch.manual_seed(3)
    s = check(make(), calls(), dynamic=None)
    assert s["frames_compiled"] <= 2 and s["backward_graphs_compiled"] <= 2, s
    assert s["eager_frames"] == 0 and s["backend_errors"] == 0, s


def test_int_symbol_reaches_the_backward_graph():
    """The training graph keeps its int symbol: no shape fallback, no specialization guard."""
    torch.manual_seed(3)
    out = ember.explain(ember.compile(IntArgs(), dynamic=True))(torch.randn(5, 8, requires_grad=True), 3)
    assert out.training == [True] and out.shape_fallbacks == [""], (out.training, out.shape_fallbacks)
    assert not any("== 3" in g for g in out.guards), out.guards
