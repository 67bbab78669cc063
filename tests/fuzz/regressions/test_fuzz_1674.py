"""Fuzz regression (python -m ember.fuzz --seed 1674 --count 1): internal-error under ember, ember-no-grad.

call 0: InternalError: ember: internal error in decompose compiling program (<ember.fuzz>:5): after step decompose, the graph IR does not verify:
  node 9 (mul): recorded f32[2, 2]{2, 1} cpu, its shape rule gives f32[2, 2]{1, 2} cpu (in the reduced program)
"""
import torch
from ember.testing import randbool, randint, randn


def program(x1):
    t1 = x1.clone()
    t2 = t1.transpose(0, -1)[1:]
    t1.mul_(2)
    t5 = torch.softmax(t2, dim=1)
    return t5


def inputs(g):
    return (randn(g, 2, 3),)


def test_fuzz_1674():
    from ember.fuzz.runner import check_or_skip
    assert check_or_skip(program, inputs, ['ember', 'ember-no-grad']) == []
