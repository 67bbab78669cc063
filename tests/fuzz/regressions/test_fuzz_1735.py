"""Fuzz regression (python -m ember.fuzz --seed 1735 --count 1): internal-error under ember, ember-no-grad.

call 0: InternalError: ember: internal error in decompose compiling program.<resume at line 15> (<ember.fuzz>:5): after step decompose, the graph IR does not verify:
  node 3 (sigmoid): recorded f32[1, 1, 2, 2]{1, 1, 1, 2} cpu, its shape rule gives f32[1, 1, 2, 2]{4, 4, 2, 1} cpu (in the reduced program)
"""
import torch
from ember.testing import randbool, randint, randn


def program(x0):
    t6 = x0[..., None]
    t8 = t6.permute(3, 2, 1, 0)
    t10 = torch.sigmoid(t8)
    return t10


def inputs(g):
    return (randint(g, -5, 6, 2, 2, 1, dtype=torch.int64),)


def test_fuzz_1735():
    from ember.fuzz.runner import check_or_skip
    assert check_or_skip(program, inputs, ['ember', 'ember-no-grad']) == []
