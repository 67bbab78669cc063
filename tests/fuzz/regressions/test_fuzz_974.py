"""Fuzz regression (python -m ember.fuzz --seed 974 --count 1): internal-error under ember, ember-no-grad.

call 0: InternalError: ember: internal error in decompose compiling program.<resume at line 9> (<ember.fuzz>:5): after step decompose, the graph IR does not verify: node 9 (add): recorded f32[1, 3, 6]{18, 1, 3} cpu, its shape rule gives f32[1, 3, 6]{18, 6, 1} cpu
"""
import torch
from ember.testing import randbool, randint, randn


def program(x0, x1, x2, idx):
    t1 = torch.log1p(x0.abs())
    t2 = torch.sigmoid(idx)
    t4 = (x1 > 0)
    t5 = t2 * x0.float().mean().item()
    t6 = x0.permute(2, 0, 1)
    t7 = x2.transpose(1, 2)
    t9 = torch.where(x1 > 0, t5, t5)
    t10 = t7 * 1
    for _ in range(t7.shape[-1] % 3 + 1):
        t10 = t10.abs() + 0.5
    return (t1, t2, t7)


def inputs(g):
    return (randn(g, 3, 5, 6), randbool(g, 6), randint(g, -5, 6, 1, 6, 3, dtype=torch.int64), randint(g, 0, 6, 3, 5, 6))


def test_fuzz_974():
    from ember.fuzz.runner import check_or_skip
    assert check_or_skip(program, inputs, ['ember', 'ember-no-grad']) == []
