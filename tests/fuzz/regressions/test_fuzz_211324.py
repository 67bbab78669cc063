"""Fuzz regression (python -m ember.fuzz --seed 211324 --count 1): wrong-result under ember, ember-no-grad.

call0.inputs_after[1][0]: Scalars are not close!; error vs float64 0.000183 > bound 6.11e-05 (eager's error 0)

The oracle's: Ember rounds the bfloat16 products as eager does, but its float32 mean is one ulp from eager's
(another order), which moves a product's rounding by one bfloat16 unit, and the sum of the products cancels.
The rule now allows one unit of the largest bfloat16 value (runner._low_precision_slack).
"""
import torch
from ember.testing import randbool, randint, randn


def program(x0, log):
    t5 = x0.mean()
    t7 = (x0.to(torch.bfloat16) * t5)
    log.append(t7.sum())
    return x0


def inputs(g):
    return (randn(g, 6, 2), [])


def test_fuzz_211324():
    from ember.fuzz.runner import check_or_skip
    assert check_or_skip(program, inputs, ['ember', 'ember-no-grad']) == []
