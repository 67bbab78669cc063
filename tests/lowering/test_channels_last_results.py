"""A 2-d convolution of a dense channels-last input (on the CPU or through cuDNN) or a group norm of one on the CPU
(shapes/shape_rules_nn.cpp): its result type is channels-last, as torch's kernels make it, where the meta kernels
say contiguous. For the
convolution, meta's answer made the runtime copy each result into the recorded layout (ConvNeXt's LayerNorm2d
permutes around layer_norm, so its convolutions see such inputs); for the group norm, a decomposed kernel stored
PoolFormer's activations contiguous, and torch's pooling and 1x1 convolutions after it took their slower
contiguous paths."""
import logging

import pytest
import torch
import torch.nn.functional as F

import ember
from ember.testing import DEVICE


def test_conv_of_a_channels_last_value_keeps_eager_layout():
    g = torch.Generator().manual_seed(0)
    x, w, b = (t.to(DEVICE) for t in (torch.randn(2, 6, 5, 7, generator=g), torch.randn(4, 6, 3, 3, generator=g),
                                      torch.randn(4, generator=g)))

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


def test_conv_of_a_channel_slice_of_a_channels_last_value():
    """MixNet's mixed convolutions: a value is split along its channels and each slice feeds a convolution. Laid
    out channels-last, the slices are strided, not dense; torch's kernels copy such an input to its suggested
    channels-last format, so the conv rule answers channels-last for it and the channels_last step passes the
    slices as they are (it copied each back to contiguous strides, and the convolutions ran NCHW)."""
    from ember._C import passes
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 9, 9, generator=g).to(DEVICE)
    ws = [torch.randn(12, 4, 1, 1, generator=g).to(DEVICE), torch.randn(12, 12, 1, 1, generator=g).to(DEVICE),
          torch.randn(8, 6, 1, 1, generator=g).to(DEVICE), torch.randn(6, 1, 3, 3, generator=g).to(DEVICE)]

    def f(x, w0, w_mid, w1, w3):
        a, b = F.conv2d(F.relu(F.conv2d(x, w0)), w_mid).split(6, dim=1)
        return F.conv2d(a, w1), F.conv2d(b, w3, padding=1, stride=2, groups=6)

    ember.reset()
    with torch.no_grad():
        want, got = f(x, *ws), ember.compile(f)(x, *ws)
        text = ember.explain(f)(x, *ws).graphs[0]
    for g_, w_ in zip(got, want):
        torch.testing.assert_close(g_, w_)
        assert g_.stride() == w_.stride()
    before = passes.run_pass(passes.run_pass(text, "canonicalize"), "decompose")
    after = passes.run_pass(before, "channels_last")
    # copies: the input channels-last, the two results back to their traced layouts (none of a slice)
    assert after.count("= contiguous(") - before.count("= contiguous(") == 3, after
    ember.reset()


def test_group_norm_of_a_channels_last_value_keeps_eager_layout():
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(2, 8, 5, 7, generator=g), torch.randn(8, generator=g), torch.randn(8, generator=g)

    def f(x, w, b):
        y = F.layer_norm(x.permute(0, 2, 3, 1), (8,)).permute(0, 3, 1, 2)  # channels-last, as eager runs it
        n = F.group_norm(y, 2, w, b)
        pooled = F.avg_pool2d(n, 3, 1, 1, count_include_pad=False) - n
        return n, pooled, F.group_norm(y + pooled, 1)

    ember.reset()
    with torch.no_grad():
        want, got = f(x, w, b), ember.compile(f)(x, w, b)
    assert ember.stats()["kernels_compiled"] >= 1
    for g_, w_ in zip(got, want):
        torch.testing.assert_close(g_, w_)
        assert w_.is_contiguous(memory_format=torch.channels_last)
        assert g_.stride() == w_.stride()
    ember.reset()


def conv_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                               torch.nn.MaxPool2d(3, 2, 1), torch.nn.Conv2d(8, 8, 3, groups=2),
                               torch.nn.Conv2d(8, 16, 1)).eval().to(DEVICE)


@pytest.mark.parametrize("batch", [1, 3])
def test_convolutions_run_channels_last_and_outputs_keep_eager_layout(batch):
    """The channels_last step (src/passes/channels_last.cpp): an inference graph's convolutions read
    channels-last copies of their inputs; values, and the layouts of everything the graph returns (a conv's
    result among them), are eager's."""
    net = conv_net()

    def f(x):
        y = net(x)
        return y, F.adaptive_avg_pool2d(y, 1).flatten(1), net[0](x)

    x = torch.randn(batch, 3, 12, 10).to(DEVICE)
    ember.reset()
    with torch.no_grad():
        want, got = f(x), ember.compile(f)(x)
    assert ember.stats()["kernels_compiled"] >= 1
    for g_, w_ in zip(got, want):
        torch.testing.assert_close(g_, w_)
        assert g_.stride() == w_.stride()
    ember.reset()


@pytest.mark.parametrize("layout_optimization", [True, False])
def test_layout_optimization_option_turns_the_step_on_and_off(layout_optimization, monkeypatch, caplog):
    """options={"layout_optimization": False} (Inductor's option of that name) keeps the traced layouts; the
    default lays the network out. Values are eager's either way."""
    net = conv_net()
    monkeypatch.setenv("EMBER_LOGS", "passes")
    caplog.set_level(logging.INFO, logger="ember")
    x = torch.randn(2, 3, 12, 10).to(DEVICE)
    ember.reset()
    with torch.no_grad():
        got = ember.compile(net, options={"layout_optimization": layout_optimization})(x)
        torch.testing.assert_close(got, net(x))
    steps = [r.getMessage().split(" ", 2)[1] for r in caplog.records if r.name == "ember.passes"]
    assert ("channels_last" in steps) == layout_optimization, steps
    with pytest.raises(ValueError, match="layout_optimization must be a bool"):
        ember.compile(net, options={"layout_optimization": 1})(x)
    ember.reset()


@pytest.mark.parametrize("batch", [1, 3])
def test_graphs_with_channels_last_values_lay_out_weights_and_fills(batch):
    """A graph whose activations are channels-last already (a PoolFormer block after its channels-last GroupNorm,
    no conv input to lay out) gets the channels_last step's rest: the 3x3 conv's weight is laid out beside its
    channels-last input (aten copied it with a strided copy_ on every call), avg_pool2d's zero padding follows
    the layout. Values and output layouts are eager's."""
    from ember._C import passes
    torch.manual_seed(0)
    norm, mlp1, mlp2 = torch.nn.GroupNorm(1, 8), torch.nn.Conv2d(8, 16, 1), torch.nn.Conv2d(16, 8, 1, bias=False)
    down = torch.nn.Conv2d(8, 4, 3, 2, 1)

    def f(x):
        y = norm(x)
        y = x + F.avg_pool2d(y, 3, 1, 1, count_include_pad=False) - y
        return down(y + mlp2(F.gelu(mlp1(norm(y)))))

    x = torch.randn(batch, 8, 6, 5).to(memory_format=torch.channels_last)
    ember.reset()
    with torch.no_grad():
        want, got = f(x), ember.compile(f)(x)
        text = ember.explain(f)(x).graphs[0]
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride()
    before = passes.run_pass(passes.run_pass(text, "canonicalize"), "decompose")
    after = passes.run_pass(before, "channels_last")
    # the weight's copy (a permute, a contiguous copy, the inverse permute) and the fills' (two per padded dim)
    assert after.count("= contiguous(") - before.count("= contiguous(") == 5, after
    assert after.count("torch.conv2d") == 3, after
    ember.reset()


def test_a_network_whose_values_go_back_keeps_its_traced_layouts():
    """diffusers' ResNet block: a GroupNorm before each convolution reshapes the activations into groups, which
    a channels-last value can only do by a copy back. The channels_last step counts those transposes against the
    convolutions it lays out and leaves such a network as traced (it was 0.42x eager with the layout)."""
    from ember._C import passes
    torch.manual_seed(0)
    n1, c1, n2, c2 = torch.nn.GroupNorm(4, 8), torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.GroupNorm(4, 8), \
        torch.nn.Conv2d(8, 8, 3, padding=1)

    def f(x):
        return x + c2(F.silu(n2(c1(F.silu(n1(x))))))

    x = torch.randn(1, 8, 6, 5)
    with torch.no_grad():
        text = ember.explain(f)(x).graphs[0]
        want, got = f(x), ember.compile(f)(x)
    torch.testing.assert_close(got, want)
    before = passes.run_pass(passes.run_pass(text, "canonicalize"), "decompose")
    assert passes.run_pass(before, "channels_last") == before
    ember.reset()


@pytest.mark.parametrize("dtype, laid_out", [("f32", True), ("bf16", True), ("f64", False)])
def test_cuda_convolutions_are_channels_last_except_float64(dtype, laid_out):
    """On CUDA the conv rule answers a channels-last result for a dense channels-last input (cuDNN's layout choice),
    but not in float64, which cuDNN keeps contiguous: the channels_last step leaves float64 CUDA convolutions as
    traced. Checked on graph text (no GPU needed)."""
    from ember._C import passes
    text = f"""graph @frame(%0: {dtype}[2, 8, 6, 6]{{288, 36, 6, 1}} cuda:0 "L['x']", %1: {dtype}[8, 8, 3, 3]{{72, 9, 3, 1}} cuda:0 "L['w']") {{
  %2 = torch "torch.conv2d"(%0, %1, padding=1) : {dtype}[2, 8, 6, 6]{{288, 36, 6, 1}} cuda:0
  %3 = relu(%2) : {dtype}[2, 8, 6, 6]{{288, 36, 6, 1}} cuda:0
  %4 = torch "torch.conv2d"(%3, %1, padding=1) : {dtype}[2, 8, 6, 6]{{288, 36, 6, 1}} cuda:0
  return (%4)
}}
"""
    after = passes.run_pass(text, "channels_last")
    convs = [line for line in after.splitlines() if "torch.conv2d" in line]
    assert len(convs) == 2, after
    assert all(("{288, 1, 48, 8}" in c) == laid_out for c in convs), after
