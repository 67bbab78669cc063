"""Fuzz regression (python -m ember.fuzz --seed 1708378 --count 1): internal-error under ember, ember-no-grad.

call 0: InternalError: ember: internal error in functional_writes ...: after step functional_writes, the graph IR
does not verify: node 24 (add): recorded f32[6, 5]{1, 6} cpu, its shape rule gives f32[6, 5]{5, 1} cpu

A constant written into a slice of a clone of a transposed view (`t6 = x.movedim(1, 0).clone(); t6[1:].fill_(0.5)`)
was rewritten as a row-major cat, while the add after it had the clone's transposed layout: the fill is now
rewritten only on a row-major value (passes/functional_writes.cpp; tests/training/test_slice_fills.py).
"""
import torch
from ember.testing import randbool, randint, randn


def program(x0, x1_same):
    t1 = x0.clone()
    t1.transpose(0, -1)[1:].clamp_(-1, 1)
    t3 = x1_same.clone()
    t4 = t3[:, 0]
    t3.fill_(0.5)
    t5 = x1_same.movedim(1, 0)
    t6 = t5.clone()
    t6[1:].fill_(0.5)
    t8 = torch.softmax(t3, dim=0)
    t11 = t4 * 1
    for _ in range(t4.shape[-1] % 3 + 1):
        t11 = torch.log1p(t11.abs()) + 0.5
    t12 = (t6 + t6)
    t13 = t4.sum(dim=-1, keepdim=True)
    t14 = t4[-1, ...]
    t15 = x0.clone()
    t16 = t15.diagonal()
    t15.zero_()
    return {'t5': t5, 't8': t8}


def inputs(g):
    x0 = randn(g, 5, 6)
    return (x0, x0)


def test_fuzz_1708378():
    from ember.fuzz.runner import check_or_skip
    assert check_or_skip(program, inputs, ['ember', 'ember-no-grad']) == []
