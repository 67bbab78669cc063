"""Fuzz regression (python -m ember.fuzz --seed 8233 --count 1): aliasing under ember, ember-no-grad.

call 0: outputs relate to inputs or each other differently than in eager: [('[0]', None, None, ['[0]'])] vs [('[0]', None, None, [])]

Fixed with seed 7216: the locals a graph break passes on that name one tensor are one input of the resumed
frame's graph, so a view of it taken after its in-place write is a view of the caller's tensor.
"""
import torch
from ember.testing import randbool, randint, randn


def program(x0):
    t1 = x0 * x0.float().mean().item()
    x0.sub_(0.25)
    t8 = x0.narrow(1, 1, 1)
    return t8


def inputs(g):
    return (randn(g, 2, 2),)


def test_fuzz_8233():
    from ember.fuzz.runner import check_or_skip
    assert check_or_skip(program, inputs, ['ember', 'ember-no-grad']) == []
