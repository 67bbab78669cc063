"""A 2-d convolution of a dense channels-last input on the CPU (shapes/shape_rules_nn.cpp): its result type is
channels-last, as torch's CPU kernels make it (meta's contiguous answer made the runtime copy each result into
the recorded layout). ConvNeXt's LayerNorm2d permutes around layer_norm, so its convolutions see such inputs."""
import torch
import torch.nn.functional as F

import ember


def test_conv_of_a_channels_last_value_keeps_eager_layout():
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(2, 6, 5, 7, generator=g), torch.randn(4, 6, 3, 3, generator=g), torch.randn(4, generator=g)

    def f(x, w, b):
        y = F.layer_norm(x.permute(0, 2, 3, 1), (6,)).permute(0, 3, 1, 2)
        return F.conv2d(y, w, b, padding=1), F.conv2d(y, w[:, :, :1, :1].contiguous())

    ember.reset()
    with torch.no_grad():
        want, got = f(x, w, b), ember.compile(f)(x, w, b)
    for g_, w_ in zip(got, want):
        torch.testing.assert_close(g_, w_)
        assert w_.is_contiguous(memory_format=torch.channels_last)
        assert g_.stride() == w_.stride()
    ember.reset()
