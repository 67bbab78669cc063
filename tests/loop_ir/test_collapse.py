"""The collapse pass end to end (docs/loop-ir.md, "Collapse"): kernels whose accesses walk
adjacent loops contiguously run one long loop; permuted and sliced inputs keep their loops; values
match eager on odd sizes, static and symbolic."""
import re

import pytest
import torch

import ember


def _pointwise(x):
    return torch.relu(x) * 2.0 + 1.0


def _plane_mean(x):
    return x.mean((2, 3))


def _squeeze_excite(x):
    return x * torch.sigmoid(x.mean((2, 3), keepdim=True))


def test_contiguous_pointwise_is_one_loop(compiled_source):
    x = torch.randn(3, 5, 7, 9)
    out, source = compiled_source(_pointwise, x)
    torch.testing.assert_close(out, _pointwise(x))
    assert "[i0 < 945]" in source


def test_plane_reduction_and_broadcast_collapse(compiled_source):
    x = torch.randn(2, 3, 9, 11)
    out, source = compiled_source(_plane_mean, x)
    torch.testing.assert_close(out, _plane_mean(x))
    assert "[r0 < 99]" in source
    out, source = compiled_source(_squeeze_excite, x)
    torch.testing.assert_close(out, _squeeze_excite(x))
    assert "[r0 < 99]" in source


@pytest.mark.parametrize("view", ["permute", "transpose_plane", "slice"])
def test_non_contiguous_inputs_keep_their_loops(view, compiled_source):
    """A slice's accesses are not contiguous: its loops stay. A permuted input's result has the input's layout
    (as eager's TensorIterator gives it), so the kernel walks both in memory order (order_outer_by_stores):
    one vector loop over every element, as for a contiguous input."""
    base = torch.randn(2, 3, 7, 9)
    x = {"permute": base.permute(0, 2, 3, 1), "transpose_plane": base.transpose(2, 3),
         "slice": base[:, :, :, :5]}[view]
    out, source = compiled_source(_pointwise, x)
    torch.testing.assert_close(out, _pointwise(x))
    assert out.stride() == _pointwise(x).stride()
    assert (f"[i0 < {x.numel()}]" in source) == (view != "slice"), source[:2000]
    out, _ = compiled_source(_plane_mean, x)
    torch.testing.assert_close(out, _plane_mean(x))


def _gelu_scaled(x):
    return torch.nn.functional.gelu(x) * 2


def test_channels_last_pointwise_walks_memory_order(compiled_source):
    """A channels-last activation (timm's ConvNeXt runs its convolutions channels-last) is iterated as
    [N, C, H, W] by its logical dims, stride 1 along C: the kernel takes the layout's order instead and
    vectorizes (it ran scalar, "stride 16 along i2", and made ConvNeXt-atto slower than eager)."""
    x = torch.randn(2, 16, 5, 7).to(memory_format=torch.channels_last)
    out, source = compiled_source(_gelu_scaled, x)
    torch.testing.assert_close(out, _gelu_scaled(x))
    assert out.stride() == _gelu_scaled(x).stride()
    assert "pointwise: vector over" in source and "pointwise: scalar" not in source, source[:2000]


def test_symbolic_outer_size_collapses_over_constant_inner(compiled_source):
    for n in (3, 5):
        x = torch.randn(n, 6, 7)
        ember.mark_dynamic(x, 0)
        out, source = compiled_source(_pointwise, x)
        torch.testing.assert_close(out, _pointwise(x))
    assert re.search(r"\[i0 < 42\*s\d+\]", source), source[:3000]


def test_symbolic_inner_sizes_collapse(compiled_source):
    # Both sizes symbolic: i1 + s1*i0 becomes (j % s1) + s1*(j // s1), which simplify folds to j
    # (the fold with a symbolic divisor), so the kernel is one loop over s0*s1 elements; a
    # broadcast row (x + b[None, :]) reads b at j % s1, not affine, and keeps its two loops.
    for n, m in ((3, 5), (4, 7)):
        x = torch.randn(n, m)
        ember.mark_dynamic(x, 0)
        ember.mark_dynamic(x, 1)
        out, source = compiled_source(_pointwise, x)
        torch.testing.assert_close(out, _pointwise(x))
    assert re.search(r"\[i0 < s\d+\*s\d+\]", source), source[:3000]
    b = torch.randn(7)
    out, source = compiled_source(lambda t, u: t + u, x, b)
    torch.testing.assert_close(out, x + b)


def _gate(x, g):
    return x * torch.sigmoid(g)


def test_invariant_sigmoid_is_hoisted_out_of_the_vector_loop(compiled_source):
    x, g = torch.randn(2, 5, 9, 11), torch.randn(2, 5, 1, 1)
    out, source = compiled_source(_gate, x, g)
    torch.testing.assert_close(out, _gate(x, g))
    assert "loop 0 []: once per outer point" in source and "loop 1 [r0 < 99]: vector over r0" in source


def _padded_scaled_rows(x, c, w, s):
    # Rows after the first read w and s under a row mask (i0 - 1 >= 0, a b8 value): the load of s and
    # its rsqrt do not change along the vector variable, but the mask is not f32 and the load of w (which
    # does change) reads it too, so the mask stays in the vector loop and with it the guarded load of s.
    return x + torch.cat([c, (w * torch.rsqrt(s + 1e-12)).expand(16, 64)])


def test_invariant_reading_a_value_kept_in_the_loop_stays_there(compiled_source):
    # BEiT's backward (cat's gradient beside a LayerNorm's): the hoisted load read the mask before it was
    # computed, and the program did not verify (the graph ran on the eager executor).
    x, c, w, s = torch.randn(17, 64), torch.randn(1, 64), torch.randn(64), torch.rand(1, 1) + 0.5
    out, _ = compiled_source(_padded_scaled_rows, x, c, w, s)
    torch.testing.assert_close(out, _padded_scaled_rows(x, c, w, s))
    assert ember.stats()["backend_errors"] == 0
