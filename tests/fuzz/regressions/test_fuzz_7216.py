"""Fuzz regression (python -m ember.fuzz --seed 7216 --count 1): wrong-result under ember, ember-no-grad.

call0.inputs_after[1][3]: Tensor-likes are not close!; error vs float64 6.22 > bound 1e-06 (eager's error 0)

Fixed: the locals the break passes on name one tensor, which the resumed frame's trace now takes as one
graph input (guarded `is`), not three distinct values (tests/frontend/test_aliased_inputs.py has the reduced cases).
"""
import torch
from ember.testing import randbool, randint, randn


def program(x0, xs):
    t2 = x0
    t11 = x0
    t12 = t11[t11 > 0]
    x0.mul_(2)
    xs.append(t2 * 2)
    return t11


def inputs(g):
    return (randn(g, 1), [randn(g, 1)])


def test_fuzz_7216():
    from ember.fuzz.runner import check_or_skip
    assert check_or_skip(program, inputs, ['ember', 'ember-no-grad']) == []
