"""Derivative rules for F.adaptive_avg_pool2d, F.avg_pool2d, F.max_pool2d and F.pad (autograd/rules_data.cpp,
training_forms.cpp), which CNN stems and heads and window-padding transformers (timm's swin, hgnet) call:
gradients match torch's in fp64, with no autograd island; other pad modes stay islands, still correct."""
import pytest
import torch
import torch.nn.functional as F

import ember

pytestmark = pytest.mark.usefixtures("fresh")


def check(fn, *shape, islands=0):
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(ember.compile(fn), (x,))
    ember.reset()
    x.grad = None
    ember.compile(fn)(x).sum().backward()
    s = ember.stats()
    assert (s["backward_graphs_compiled"], s["autograd_islands"]) == (1, islands)


@pytest.mark.parametrize("size", [1, (1, 1), (2, 3)])
def test_adaptive_avg_pool2d(size):
    check(lambda x: F.adaptive_avg_pool2d(x * 2, size).sin(), 2, 3, 5, 6)


def test_constant_pad_with_negative_widths_and_a_value():
    check(lambda x: F.pad(x.cos(), (1, 2, -1, 0), value=0.5).exp(), 2, 3, 4, 5)


def test_reflect_pad_stays_an_island():
    check(lambda x: F.pad(x.cos(), (1, 1), mode="reflect"), 2, 3, 4, islands=1)


@pytest.mark.parametrize("kwargs", [{"kernel_size": 3, "stride": 2, "padding": 1},
                                    {"kernel_size": (2, 3), "dilation": 2, "ceil_mode": True}])
def test_max_pool2d_saves_its_indices(kwargs):
    check(lambda x: F.max_pool2d(x * 2, **kwargs).sin(), 2, 3, 9, 10)


@pytest.mark.parametrize("kwargs", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True,
                                                         "count_include_pad": False}])
def test_avg_pool2d(kwargs):
    check(lambda x: F.avg_pool2d(x * 2, **kwargs).sin(), 2, 3, 9, 10)
