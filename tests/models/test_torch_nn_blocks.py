"""torch.nn blocks that used to split (issue 15): nn.MultiheadAttention returns `(out, None)` without
weights (F.multi_head_attention_forward is traced through, so it also trains without an autograd island),
and conv -> BatchNorm -> ReLU(inplace=True) in a module whose parameters require grad, called under no_grad
(an in-place op on a value derived from them). Each must capture in one graph without breaks and match eager."""
import pytest
import torch
import torch.nn as nn

import ember


@pytest.fixture(autouse=True)
def _fresh():
    ember.reset()
    yield
    ember.reset()


def _whole(model, *args):
    """One graph, no break, eager's result on both backends (eval, no_grad)."""
    with torch.no_grad():
        expected = model(*args)
        out = ember.explain(model)(*args)
        assert (out.graph_count, out.graph_break_count) == (1, 0), [r.reason for r in out.break_reasons]
        for backend in ("eager", "ember"):
            ember.reset()
            compiled = ember.compile(model, backend=backend, fullgraph=True)
            for _ in range(2):
                torch.testing.assert_close(compiled(*args), expected, rtol=1e-4, atol=1e-5)
            assert ember.stats()["frames_compiled"] == 1


class SelfAttention(nn.Module):
    def __init__(self, batch_first):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 4, batch_first=batch_first)

    def forward(self, x):
        out, weights = self.attn(x, x, x, need_weights=False)
        assert weights is None
        return out


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention(batch_first):
    torch.manual_seed(0)
    _whole(SelfAttention(batch_first).eval(), torch.randn(2, 5, 16))


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention_module_returns_its_none(batch_first):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 2, batch_first=batch_first).eval()
    x = torch.randn(3, 4, 16)
    with torch.no_grad():
        out, weights = ember.compile(mha, fullgraph=True)(x, x, x, need_weights=False)
        torch.testing.assert_close(out, mha(x, x, x, need_weights=False)[0])
    assert weights is None


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_trains_without_an_island(need_weights):
    """F.multi_head_attention_forward is traced through (its projections, mask, softmax or fused attention), so
    a training step compiles one forward and one backward graph with no autograd island; float64 gradients of
    the input and of every parameter equal eager's."""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 4, batch_first=True, dtype=torch.float64)
    mask = torch.ones(5, 5, dtype=torch.bool).triu(1)

    def loss(x):
        out, weights = mha(x, x, x, attn_mask=mask, need_weights=need_weights)
        return out.sin().sum() + (0 if weights is None else weights.square().sum())

    x = torch.randn(2, 5, 16, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(ember.compile(loss, fullgraph=True), (x,))
    params = [x, *mha.parameters()]
    want = torch.autograd.grad(loss(x), params)
    ember.reset()
    got = torch.autograd.grad(ember.compile(loss, fullgraph=True)(x), params)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    s = ember.stats()
    assert (s["graphs"], s["graph_breaks"], s["backward_graphs_compiled"], s["autograd_islands"]) == (1, 0, 1, 0), s


def returns_none_in_a_tuple(x):
    return x * 2, None, (x + 1, None)


def test_user_code_returning_none_in_a_tuple():
    x = torch.randn(3)
    out = ember.explain(returns_none_in_a_tuple)(x)
    assert (out.graph_count, out.graph_break_count) == (1, 0)
    got = ember.compile(returns_none_in_a_tuple, fullgraph=True)(x)
    assert got[1] is None and got[2][1] is None
    torch.testing.assert_close(got[0], x * 2)
    torch.testing.assert_close(got[2][0], x + 1)


@pytest.mark.parametrize("batch_first", [True, False])
def test_transformer_encoder_layer(batch_first):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=batch_first).eval()
    _whole(layer, torch.randn(2, 5, 16))


class Encoder(nn.Module):
    """nn.TransformerEncoder in eval under no_grad would take torch's fast path (one opaque op per layer, and
    nested tensors for a padding mask); Ember takes the composite path, whose ops it fuses."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x, padding):
        return self.encoder(x, src_key_padding_mask=padding)


def test_transformer_encoder_padding_mask():
    torch.manual_seed(0)
    padding = torch.zeros(2, 5, dtype=torch.bool)
    padding[1, 3:] = True
    model = Encoder().eval()
    _whole(model, torch.randn(2, 5, 16), padding)
    with torch.no_grad():
        assert ember.explain(model)(torch.randn(2, 5, 16), padding).kernel_counts[0] > 0


class ConvBnReLU(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


class BasicBlock(nn.Module):
    """A resnet-style residual block: in-place ReLUs on BatchNorm outputs and on the residual sum."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = ConvBnReLU(cin, cout, stride)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.bn2(self.conv2(self.conv1(x)))
        out += self.down(x)
        return self.relu(out)


def _with_running_stats(model):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return model.eval()


def test_conv_bn_inplace_relu_under_no_grad():
    torch.manual_seed(0)
    model = _with_running_stats(ConvBnReLU(3, 8))
    assert all(p.requires_grad for p in model.parameters())
    _whole(model, torch.randn(2, 3, 8, 8))


def test_resnet_blocks_under_no_grad():
    torch.manual_seed(0)
    model = _with_running_stats(nn.Sequential(ConvBnReLU(3, 8), BasicBlock(8, 8, 1), BasicBlock(8, 16, 2),
                                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 4)))
    _whole(model, torch.randn(2, 3, 16, 16))


def test_inplace_relu_with_grad_still_matches_eager():
    """With grad enabled, eager refuses nothing here either (the BatchNorm output is not a leaf)."""
    torch.manual_seed(0)
    model = _with_running_stats(ConvBnReLU(3, 4))
    x = torch.randn(1, 3, 6, 6)
    expected = model(x)
    got = ember.compile(model, backend="eager")(x)
    torch.testing.assert_close(got, expected)
    assert got.requires_grad == expected.requires_grad


class ScaleReLUNorm(nn.Module):
    """In-place ops on values computed from a parameter that requires grad, with grad enabled:
    eager allows them (the values have a grad_fn), so the trace's meta tensors must too."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(4))
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        y = x * self.scale
        y.relu_()
        return torch.relu_(self.bn(y)) + 1


@pytest.mark.parametrize("grad", [True, False])
def test_inplace_ops_on_values_computed_from_parameters(grad):
    torch.manual_seed(0)
    model = _with_running_stats(ScaleReLUNorm())
    x = torch.randn(3, 4)
    with torch.set_grad_enabled(grad):
        out = ember.explain(model)(x)
        assert (out.graph_count, out.graph_break_count) == (1, 0), [r.reason for r in out.break_reasons]
        expected = model(x)
        ember.reset()
        got = ember.compile(model, backend="eager")(x)
    torch.testing.assert_close(got, expected)
    assert got.requires_grad == expected.requires_grad == grad
    if grad:
        (g_eager,) = torch.autograd.grad(expected.sum(), model.scale)
        (g_ember,) = torch.autograd.grad(got.sum(), model.scale)
        torch.testing.assert_close(g_ember, g_eager)
