"""An output that is the input object in eager must be the input object through Ember (a caller may
rely on `out is x`). torch.flatten over one dimension returns its input itself (fuzzer seed 407)."""
import pytest
import torch

import ember


def flatten_1d(x):
    y = x.flatten()
    return y, x + y


def flatten_one_dim(x):
    return x.flatten(1, 1), x.flatten(0, -1)


@pytest.mark.parametrize("fn, shape", [(flatten_1d, (5,)), (flatten_one_dim, (2, 3))])
def test_flatten_over_one_dim_returns_the_input(fn, shape):
    x = torch.randn(shape)
    ember.reset()
    got, want = ember.compile(fn)(x), fn(x)
    assert (got[0] is x) == (want[0] is x)
    assert got[1] is not x and torch.equal(got[1], want[1])
