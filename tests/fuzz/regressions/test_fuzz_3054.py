"""Fuzz regression (python -m ember.fuzz --seed 3054 --count 1): wrong-result under ember, ember-no-grad.

call0.out[0]: Tensor-likes are not close!; error vs float64 0.00233 > bound 1e-06 (eager's error 0)
"""
import pytest
import torch
from ember.testing import randbool, randint, randn


def program(idx):
    t2 = idx.to(torch.bfloat16)
    t3 = (torch.exp(idx.clamp(max=3)) + torch.sqrt(t2.abs()))
    return t3


def inputs(g):
    return (randint(g, 0, 3, 1,),)


@pytest.mark.xfail(strict=True, reason="known, not fixed yet (session 21's long run): bf16 arithmetic after an explicit cast computed in float32 and not rounded to bf16 (the inliner's deliberate policy, as Inductor's), where the float64 reference keeps the program's bf16 casts")
def test_fuzz_3054():
    from ember.fuzz.runner import check_or_skip
    assert check_or_skip(program, inputs, ['ember', 'ember-no-grad']) == []
