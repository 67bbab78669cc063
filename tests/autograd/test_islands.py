"""What training does where the derivative table has no rule (src/autograd/joint.cpp): an op without
one becomes an autograd island (its backward through torch autograd, counted in stats()); a random
op without one sends the graph to the eager executor, with the reason in ember.explain; double
backward raises a clear error (python/ember/autograd.py)."""
import pytest
import torch
import torch.nn.functional as F

import ember


def grads_of(fn, args):
    out = fn(*args)
    leaves = [a for a in args if a.requires_grad]
    return out.detach(), torch.autograd.grad(out.sum(), leaves)


def leaves(*shapes):
    torch.manual_seed(0)
    return [torch.randn(*s, dtype=torch.float64, requires_grad=True) for s in shapes]


def cumsum_tanh(x, y):
    return torch.tanh(torch.cumsum(x, 0) * y)


def atan_mul(x, y):
    return torch.atan(x) * y


def conv_same_padding(x, w):
    return F.conv1d(x, w, padding="same")  # string padding: the conv rule refuses it


@pytest.mark.parametrize("fn, shapes", [(cumsum_tanh, [(4, 3), (3,)]), (atan_mul, [(4, 3), (3,)]),
                                        (conv_same_padding, [(2, 3, 6), (4, 3, 3)])],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_op_without_rule_is_an_island_and_trains(fn, shapes):
    args = leaves(*shapes)
    out, grads = grads_of(ember.compile(fn), args)
    s = ember.stats()
    assert s["backward_graphs_compiled"] == 1 and s["autograd_islands"] == 1, s
    want_out, want_grads = grads_of(fn, args)
    torch.testing.assert_close(out, want_out)
    torch.testing.assert_close(grads, want_grads)
    assert torch.autograd.gradcheck(ember.compile(fn), args)


def rrelu_train(x, w):
    return F.rrelu(x @ w, training=True) * 2  # random slopes, no rule


def test_random_op_without_rule_runs_eagerly_and_is_right():
    x, w = leaves((4, 3), (3, 5))
    explained = ember.explain(rrelu_train)(x, w)
    assert explained.graph_count == 1
    assert "draws random numbers" in explained.backend_fallbacks[0], explained.backend_fallbacks
    ember.reset()
    torch.manual_seed(7)
    out, grads = grads_of(ember.compile(rrelu_train), [x, w])
    assert ember.stats()["backward_graphs_compiled"] == 0
    torch.manual_seed(7)
    want_out, want_grads = grads_of(rrelu_train, [x, w])
    torch.testing.assert_close(out, want_out)
    torch.testing.assert_close(grads, want_grads)


def test_double_backward_raises_a_clear_error():
    (x,) = leaves((3, 4))
    y = ember.compile(lambda t: torch.tanh(t).sum())(x)
    (g,) = torch.autograd.grad(y, x, create_graph=False)
    torch.testing.assert_close(g, 1 - torch.tanh(x.detach()) ** 2)
    y = ember.compile(lambda t: torch.tanh(t).sum())(x)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(y, x, create_graph=True)
