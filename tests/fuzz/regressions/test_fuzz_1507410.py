"""Fuzz regression (python -m ember.fuzz --seed 1507410 --count 1): wrong-result under ember, ember-no-grad.

call0.out[0]: Tensor-likes are not close!; error vs float64 0.00147 > bound 9.76e-05 (eager's error 4.83e-05)

The oracle's: torch's CPU `rsqrt` of a bfloat16 rounds the square root to bfloat16 first (1 / bf16(sqrt(2.75))
= 0.60546875), Ember rounds the float32 rsqrt once (0.6015625, the correctly rounded value): one bfloat16 unit,
divided by 2.75 into a float32 output. The low-precision slack (one unit of the largest float16/bfloat16 value)
is now recorded in eager's run too, where values computed from low-precision inputs are
(runner._low_precision_slack).
"""
import torch
from ember.testing import randbool, randint, randn


def program(x0, x1):
    t4 = x1.clone()
    t5 = t4[..., 0]
    t4.add_(1)
    t6 = (torch.where(t5 > 0, torch.where(t5 > 0, t5, x0), torch.rsqrt(x1.abs() + 1)) / (x1.abs() + 1))
    t7 = t6.narrow(0, 1, 1)
    return (t7,)


def inputs(g):
    return (randn(g, 5), randn(g, 1, dtype=torch.bfloat16))


def test_fuzz_1507410():
    from ember.fuzz.runner import check_or_skip
    assert check_or_skip(program, inputs, ['ember', 'ember-no-grad']) == []
