"""Fuzz regression (python -m ember.fuzz --seed 407 --count 1): aliasing under ember and ember-no-grad.
flatten of a 1-d tensor returns the tensor itself in torch; the fix (src/passes/decompose_views.cpp)
and the reduced cases: test_output_identity.py.

call 0: outputs relate to inputs or each other differently than in eager: [("['t1']", '[0]', None, ['[0]']), ("['t2']", None, None, []), ("['t3']", '[1][0]', None, ['[1][0]'])] vs [("['t1']", None, None, ['[0]']), ("['t2']", None, None, []), ("['t3']", '[1][0]', None, ['[1][0]'])]
"""
import torch
from ember.testing import randbool, randint, randn


def program(x0):
    t1 = x0.flatten()
    t2 = (x0 + t1)
    return {'t1': t1, 't2': t2}


def inputs(g):
    return (randn(g, 1),)


def test_fuzz_407():
    from ember.fuzz.runner import check_or_skip
    assert check_or_skip(program, inputs, ['ember', 'ember-no-grad']) == []
