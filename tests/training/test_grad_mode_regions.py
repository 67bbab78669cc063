"""Training graphs with grad-mode regions inside them (docs/autograd.md, "Grad-mode regions"): a
`torch.no_grad()` block, an `@torch.no_grad()` helper, `enable_grad()` inside no_grad. The graph is
differentiated ahead of time (backward compiled, no island), gradients equal eager's, and the grad mode
after the call is what eager leaves. transformers 5.17's LLaMA rotary embedding is this pattern."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ember


pytestmark = pytest.mark.usefixtures("fresh")


def run(fn, model, x):
    """Loss, every parameter's gradient and the grad mode after the call."""
    model.zero_grad(set_to_none=True)
    loss = fn(x)
    mode = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters()}, mode


def check(model, x, calls=2):
    twin = copy.deepcopy(model)
    compiled = ember.compile(twin)
    for _ in range(calls):
        want = run(model, model, x)
        got = run(compiled, twin, x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1].keys() == want[1].keys()
        for name, g in want[1].items():
            if g is None:
                assert got[1][name] is None, name
            else:
                torch.testing.assert_close(got[1][name], g, msg=lambda m: f"{name}: {m}")
        assert got[2] == want[2]
    s = ember.stats()
    assert s["backward_graphs_compiled"] == 1 and s["autograd_islands"] == 0 and s["eager_frames"] == 0, s
    assert s["frames_compiled"] == 1 and s["graph_breaks"] == 0, s


class NoGradBlock(nn.Module):
    """A weight read inside no_grad by an op that decomposes (layer_norm's weight must get no gradient
    through it), a no_grad value reaching the loss, and enable_grad nested inside no_grad."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.scale = nn.Parameter(torch.randn(8))

    def forward(self, x):
        with torch.no_grad():
            gate = F.softmax(self.norm(x) * self.scale, -1)
            with torch.enable_grad():
                h = self.lin(x) * self.scale
        return (h * gate + self.norm(h)).square().mean()


@torch.no_grad()
def rotary(inv_freq, n):
    t = torch.arange(n, dtype=inv_freq.dtype)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


class RotaryHelper(nn.Module):
    """LLaMA's rotary pattern: cos/sin from a decorated no_grad helper, applied to a projection."""

    def __init__(self):
        super().__init__()
        self.q = nn.Linear(8, 8)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8)))

    def forward(self, x):
        cos, sin = rotary(self.inv_freq, x.shape[-2])
        q = self.q(x)
        rot = torch.cat((-q[..., 4:], q[..., :4]), dim=-1)
        return (q * cos + rot * sin).sum()


class LeavesGradDisabled(nn.Module):
    """Turns grad off for the caller after computing its loss (eager leaves it off)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        loss = self.lin(x).tanh().sum()
        torch.set_grad_enabled(False)
        return loss


def test_no_grad_block_with_a_weight_inside():
    torch.manual_seed(0)
    check(NoGradBlock(), torch.randn(4, 8))


def test_decorated_no_grad_helper():
    torch.manual_seed(0)
    check(RotaryHelper(), torch.randn(2, 6, 8))


def test_grad_mode_left_disabled_as_eager():
    torch.manual_seed(0)
    try:
        check(LeavesGradDisabled(), torch.randn(4, 8))
    finally:
        torch.set_grad_enabled(True)


def test_graph_that_starts_under_no_grad_and_enables_grad():
    torch.manual_seed(0)
    model = nn.Linear(8, 8)
    twin = copy.deepcopy(model)

    def loss_of(m):
        def f(x):
            with torch.enable_grad():
                return m(x).square().sum()
        return f

    x = torch.randn(4, 8)
    compiled = ember.compile(loss_of(twin))
    for fn, m in ((loss_of(model), model), (compiled, twin)):
        with torch.no_grad():
            loss = fn(x)
            assert not torch.is_grad_enabled()
        assert loss.requires_grad
        loss.backward()
    torch.testing.assert_close(twin.weight.grad, model.weight.grad)
    torch.testing.assert_close(twin.bias.grad, model.bias.grad)
    assert ember.stats()["backward_graphs_compiled"] == 1
