"""Fuzz regression (python -m ember.fuzz --seed 52381 --count 1): wrong-result under ember, ember-no-grad.

call1.out[0]: Tensor-likes are not close!; error vs float64 8.76e-06 > bound 1e-06 (eager's error 0)

The oracle's: the program makes a float32 mean (`t1.float().mean()`), which the float64 reference computes in
float32 as eager does, op for op, so eager's error is 0 and so is the rule's bound; Ember sums in another order
(one float32 unit off). Float64 outputs of a program that makes float32 values are now compared at float32's
tolerances (runner._low_precision_slack).
"""
import torch
from ember.testing import randbool, randint, randn


def program(x0, x1, log):
    t1 = x0 * 1
    for _ in range(x0.shape[-1] % 3 + 1):
        t1 = (t1 ** 2) + 0.5
    t2 = x1 * t1.float().mean().item()
    t3 = t2.to(x0.dtype)
    return (t2, t3)


def inputs(g):
    return (randn(g, 5, 2), randn(g, 2, dtype=torch.float64), [])


def test_fuzz_52381():
    from ember.fuzz.runner import check_or_skip
    assert check_or_skip(program, inputs, ['ember', 'ember-no-grad']) == []
