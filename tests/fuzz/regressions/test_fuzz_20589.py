"""Fuzz regression (python -m ember.fuzz --seed 20589 --count 1): wrong-result under ember, ember-no-grad.

call0.out[2]: Tensor-likes are not close!; error vs float64 1.76e-05 > bound 1.1e-06 (eager's error 5.17e-08)
"""
import torch
from ember.testing import randbool, randint, randn


def program(x0, x1):
    t4 = torch.exp(x1.clamp(max=3))
    t8 = (t4.to(torch.bfloat16) * x0)
    return t8


def inputs(g):
    return (randn(g, 1), randn(g, 1, dtype=torch.bfloat16))


def test_fuzz_20589():
    from ember.fuzz.runner import check_or_skip
    assert check_or_skip(program, inputs, ['ember', 'ember-no-grad']) == []
