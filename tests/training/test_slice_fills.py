"""A constant written into a slice of a value the graph made (passes/functional_writes.cpp, slice_fills_as_cats):
torchvision's Swin V2 clones its qkv bias and zeroes the key third in place (`qkv_bias[n:2 * n].zero_()`) before
F.linear reads the clone. Written as cat(b[:start], full, b[end:]), the training graph is differentiated ahead of
time (no eager fallback, no island) with eager's outputs and gradients; a write that an earlier alias of the
value must see is left as it was (the graph runs eagerly, still right)."""
import pytest
import torch
import torch.nn.functional as F

import ember

pytestmark = pytest.mark.usefixtures("fresh")


def swin_v2_bias(x, w, b):
    b = b.clone()
    n = b.numel() // 3
    b[n:2 * n].zero_()
    return F.linear(x, w, b)


def column_fill_read_after(x):
    y = x * 2
    y[:, 1:3].fill_(0.5)
    return y.sum(-1), y


def two_fills(x):
    y = x * 3 + 1
    y[:1].zero_()
    y[:, -2:].fill_(3.0)
    return y * x


def alias_before_write(x):
    y = x.clone()
    v = y.view(-1)
    y[0:1].zero_()
    return v * x.view(-1)


def inputs(fn):
    torch.manual_seed(0)
    if fn is swin_v2_bias:
        return (torch.randn(2, 4, requires_grad=True), torch.randn(6, 4, requires_grad=True),
                torch.randn(6, requires_grad=True))
    return (torch.randn(3, 4, dtype=torch.float64, requires_grad=True),)


def outputs_and_grads(fn, args):
    outs = fn(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    gen = torch.Generator().manual_seed(1)
    weights = [torch.randn(o.shape, generator=gen, dtype=o.dtype, device="cpu").to(o.device) for o in outs]
    return [o.detach() for o in outs], torch.autograd.grad(outs, args, weights)


@pytest.mark.parametrize("fn", [swin_v2_bias, column_fill_read_after, two_fills], ids=lambda f: f.__name__)
def test_slice_fill_is_differentiated_ahead_of_time(fn):
    info = ember.explain(fn)(*inputs(fn))
    assert info.backend_fallbacks == [""], info.backend_fallbacks
    ember.reset()
    got = outputs_and_grads(ember.compile(fn), inputs(fn))
    s = ember.stats()
    assert s["backward_graphs_compiled"] == 1 and s["autograd_islands"] == 0, s
    torch.testing.assert_close(got, outputs_and_grads(fn, inputs(fn)))
    if fn is not swin_v2_bias:
        assert torch.autograd.gradcheck(ember.compile(fn), inputs(fn))


def test_write_seen_by_an_earlier_alias_stays_a_write():
    fn = alias_before_write
    info = ember.explain(fn)(*inputs(fn))
    assert "in place" in info.backend_fallbacks[0], info.backend_fallbacks
    ember.reset()
    torch.testing.assert_close(outputs_and_grads(ember.compile(fn), inputs(fn)), outputs_and_grads(fn, inputs(fn)))


def fill_in_a_transposed_clone(x):
    # The clone keeps the transpose's layout, and the add after the fill was typed with it: the row-major cat
    # would change the add's layout (fuzz seed 1708378), so the fill stays a write.
    y = x.movedim(1, 0).clone()
    y[1:].fill_(0.5)
    return y + y


@pytest.mark.parametrize("grad", [False, True])
def test_fill_in_a_transposed_clone_keeps_its_layout(grad):
    x = torch.randn(5, 6, dtype=torch.float64, requires_grad=grad)
    with torch.set_grad_enabled(grad):
        got, want = ember.compile(fill_in_a_transposed_clone)(x), fill_in_a_transposed_clone(x)
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride() == (1, 6)
    s = ember.stats()
    assert s["backend_errors"] == 0 and s["codegen_failures"] == 0, s
