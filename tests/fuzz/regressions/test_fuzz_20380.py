"""Fuzz regression (python -m ember.fuzz --seed 20380 --count 1): internal-error under ember, ember-no-grad.

call 0: InternalError: ember: internal error in decompose compiling program (<ember.fuzz>:5): after step decompose, the graph IR does not verify:
"""
import torch
from ember.testing import randbool, randint, randn


def program(x0):
    t1 = x0.clone()
    t2 = t1[1:]
    t1.add_(1)
    t6 = t2[:, 1]
    t11 = t6.unsqueeze(0).expand(3, *t6.shape)
    return t2


def inputs(g):
    return (randn(g, 1, 2),)


def test_fuzz_20380():
    from ember.fuzz.runner import check_or_skip
    assert check_or_skip(program, inputs, ['ember', 'ember-no-grad']) == []
