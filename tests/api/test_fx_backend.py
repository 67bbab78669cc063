"""torch.compile(model, backend="ember"): Dynamo's FX graphs compiled by Ember.

These tests use torch.compile on purpose: the adapter is the one place Ember meets Dynamo.
"""
import pytest
import torch
import torch.nn.functional as F

import ember


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class Attention(torch.nn.Module):
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


MODELS = {
    "mlp": (lambda: torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)),
            lambda: torch.randn(4, 8)),
    "norms": (lambda: torch.nn.Sequential(torch.nn.LayerNorm(8), torch.nn.Softmax(-1)), lambda: torch.randn(3, 5, 8)),
    "attention": (Attention, lambda: torch.randn(2, 6, 16)),
    "conv_bn": (lambda: torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).eval(),
                lambda: torch.randn(2, 3, 8, 8)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_match_eager(name):
    make_model, make_input = MODELS[name]
    torch.manual_seed(0)
    model = make_model()
    x = make_input()
    compiled = torch.compile(model, backend="ember")
    with torch.no_grad():
        expected = model(x)
        for _ in range(3):
            torch.testing.assert_close(compiled(x), expected)
    s = ember.stats()
    assert s["frames_compiled"] == 1, s
    assert s["eager_frames"] == 0, s
    assert s["cache_hits"] == 2, s


def test_gradients_flow_through_the_adapter():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())
    x = torch.randn(4, 8)
    compiled = torch.compile(model, backend="ember")
    compiled(x).sum().backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for g, p in zip(got, model.parameters()):
        torch.testing.assert_close(g, p.grad)


def test_dynamo_graph_break_gives_two_ember_graphs():
    def f(x):
        y = torch.sin(x) + 1
        print("between the graphs")
        return torch.cos(y) * 2

    x = torch.randn(5)
    compiled = torch.compile(f, backend="ember")
    torch.testing.assert_close(compiled(x), f(x))
    assert ember.stats()["graphs"] == 2


def test_backend_found_by_name():
    from torch._dynamo.backends.registry import lookup_backend

    from ember.fx_backend import ember_backend
    assert lookup_backend("ember") is ember_backend
