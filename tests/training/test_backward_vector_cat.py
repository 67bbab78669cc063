"""An attention block's q/k/v split, compiled for training: its backward assembles the three [B, H, T, d]
gradients, read transposed, into the [B, T, 3C] gradient of the projection (the cat that masked vector loads
made vector code, docs/codegen-cpp.md "Masked loads"). Gradients equal eager's for a head size whose chunks
stay within a head (d = 32) and one that keeps the kernel scalar (d = 12)."""
import pytest
import torch
import torch.nn as nn

import ember

pytestmark = pytest.mark.usefixtures("fresh")


class QKV(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(c, 3 * c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        return (q * k.sigmoid() + v * 2).square().mean()


@pytest.mark.parametrize("c,heads", [(64, 2), (36, 3)])
def test_qkv_gradients_match_eager(c, heads):
    torch.manual_seed(0)
    model = QKV(c, heads)
    x = torch.randn(2, 9, c, requires_grad=True)
    ember.compile(model)(x).backward()
    got = {n: p.grad.clone() for n, p in model.named_parameters()} | {"x": x.grad.clone()}
    model.zero_grad()
    x.grad = None
    model(x).backward()
    want = {n: p.grad for n, p in model.named_parameters()} | {"x": x.grad}
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")
    assert ember.stats()["backward_graphs_compiled"] == 1
