"""Outputs of a compiled training graph that are views of its intermediates (ember.autograd._unviewed): eager
code after the call may write into them in place (transformers' wav2vec2 masks its features with
`hidden_states[mask] = embed` after a graph break); torch refuses in-place writes to a custom Function's view
outputs, so such an output comes back as a plain alias, and the write's gradient is eager's. A view that aliases
another output still refuses the write (loudly, never a wrong gradient)."""
import pytest
import torch
import torch.nn.functional as F

import ember

pytestmark = pytest.mark.usefixtures("fresh")


def project(x, w, b):
    # A 3-d linear with a bias: the result is addmm's reshaped, a view of an intermediate (wav2vec2's projection).
    return F.linear(x, w, b), x * 2


def masked_step(fn, x, w, b, mask):
    h, s = fn(x, w, b)
    h[mask] = 0.5  # an in-place write into the graph's output, in eager code
    (h.square().sum() + s.sum()).backward()
    return h.detach(), x.grad, w.grad, b.grad


def test_write_into_a_view_output():
    mask = torch.tensor([[True, False, True, False, False], [False, True, False, False, True]])
    leaves = [torch.randn(2, 5, 4), torch.randn(3, 4), torch.randn(3)]
    copies = lambda: [t.clone().requires_grad_(True) for t in leaves]  # noqa: E731
    want = masked_step(project, *copies(), mask)
    got = masked_step(ember.compile(project), *copies(), mask)
    torch.testing.assert_close(got, want)
    assert ember.stats()["backward_graphs_compiled"] == 1


def two_names(x, w, b):
    h = F.linear(x, w, b)
    return h, h.transpose(0, 1)


def test_write_into_a_view_another_output_aliases_refuses():
    x, w, b = torch.randn(2, 5, 4), torch.randn(3, 4, requires_grad=True), torch.randn(3)
    h, t = ember.compile(two_names)(x, w, b)
    with pytest.raises(RuntimeError, match="inplace"):
        t[0] = 0.0
