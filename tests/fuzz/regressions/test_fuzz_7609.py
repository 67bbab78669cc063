"""Fuzz regression (python -m ember.fuzz --seed 7609 --count 1): aliasing under ember, ember-no-grad.

call 0: outputs relate to inputs or each other differently than in eager: [('[0]', '[1]', None, ['[1]']), ('[1]', None, None, ['[1]'])] vs [('[0]', '[1]', None, ['[1]']), ('[1]', None, None, [])]

Fixed with seed 7216: the locals a graph break passes on that name one tensor are one input of the resumed
frame's graph, so a view of it taken after its in-place write is a view of the caller's tensor.
"""
import torch
from ember.testing import randbool, randint, randn


def program(x1, x2):
    t1 = x1
    t4 = x2[x2 > 0]
    t6 = x1.reshape(-1)
    x1.mul_(2)
    return (t1, t6)


def inputs(g):
    return (randn(g, 1), randn(g, 1))


def test_fuzz_7609():
    from ember.fuzz.runner import check_or_skip
    assert check_or_skip(program, inputs, ['ember', 'ember-no-grad']) == []
