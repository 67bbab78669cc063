"""Fuzz regression (python -m ember.fuzz --seed 1135 --count 1): internal-error under ember, ember-no-grad.

call 0: InternalError: ember: internal error in decompose compiling program (<ember.fuzz>:5): after step decompose, the graph IR does not verify: node 12 (mul): recorded f32[2, 2, 2]{4, 2, 1} cpu, its shape rule gives f32[2, 2, 2]{2, 1, 4} cpu
"""
import torch
from ember.testing import randbool, randint, randn


def program(x0, x1):
    t2 = x1.permute(1, 2, 0)
    t3 = torch.rsqrt(torch.where(x0 > 0, x0, t2).abs() + 1)
    t4 = torch.softmax(t3, dim=1)
    return {'t2': t2, 't3': t3}


def inputs(g):
    return (randn(g, 2), randbool(g, 2, 2, 2))


def test_fuzz_1135():
    from ember.fuzz.runner import check_or_skip
    assert check_or_skip(program, inputs, ['ember', 'ember-no-grad']) == []
