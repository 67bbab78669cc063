"""Dropout in compiled training graphs (docs/autograd.md, "Random ops"): by default it draws Philox streams
(philox_rand) from one seed per call, fused with its neighbours, and the backward recomputes the mask from
the saved seed instead of saving it; `fallback_random` keeps eager's exact masks
(test_training.py::test_dropout_masks_are_eagers). Statistics, reproducibility, the mask the backward
replays, gradcheck, what is saved, and a nanoGPT step with dropout."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import ember
from ember import rng
from ember.bench.train import saved_activation_bytes
from ember.models.nanogpt import GPT, GPTConfig, random_tokens
from ember.testing import DEVICE

pytestmark = pytest.mark.usefixtures("fresh")

P = 0.3


def drop(x, w):
    return F.dropout(x * w, p=P, training=True)


def run(fn, x, w, seed=None):
    if seed is not None:
        torch.manual_seed(seed)
    out = fn(x, w)
    out.backward(torch.ones_like(out))
    return out.detach(), w.grad


def inputs():
    torch.manual_seed(0)
    x = torch.rand(64, 257) + 0.5  # no zeros: a zero output means a dropped element
    return x, torch.rand(64, 257).add_(0.5).requires_grad_()


def test_mask_statistics_scale_and_the_replayed_mask():
    x, w = inputs()
    out, g = run(ember.compile(drop), x, w, seed=1)
    kept = out != 0
    assert abs(kept.float().mean().item() - (1 - P)) < 0.02
    # Kept elements are scaled by 1 / (1 - p) as eager scales them.
    torch.testing.assert_close(out[kept], (x * w.detach())[kept] / (1 - P))
    # The backward recomputed the forward's mask: d out / d w = x / (1 - p) exactly where it was kept.
    torch.testing.assert_close(g, torch.where(kept, x / (1 - P), torch.zeros_like(x)))
    s = ember.stats()
    assert s["backward_graphs_compiled"] == 1 and s["autograd_islands"] == 0 and s["backend_errors"] == 0


def test_the_mask_is_the_reference_draw_of_the_call_seed():
    """End to end: the seed is torch.randint's draw from the default generator, the mask rng.py's numbers
    (a tensor past the parallel threshold: the kernel splits across threads)."""
    x = (torch.rand(300, 257) + 0.5).requires_grad_()
    torch.manual_seed(11)
    out = ember.compile(lambda x: F.dropout(x, p=P, training=True))(x)
    torch.manual_seed(11)
    seed = int(rng.philox_seed(x.device))
    keep = torch.from_numpy(rng.philox_uniform(seed, np.arange(x.numel())) >= P).view(x.shape)
    assert torch.equal((out != 0).cpu(), keep)


def test_symbolic_sizes():
    """With dynamic=True the mask's sizes are symbols: one graph serves both lengths, and its backward replays
    the forward's mask."""
    compiled = ember.compile(drop, dynamic=True)
    for n in (33, 47):
        x = torch.rand(4, n) + 0.5
        w = torch.rand(4, n).add_(0.5).requires_grad_()
        out, g = run(compiled, x, w)
        kept = out != 0
        torch.testing.assert_close(g, torch.where(kept, x / (1 - P), torch.zeros_like(x)))
    s = ember.stats()
    assert s["frames_compiled"] == 1 and s["recompiles"] == 0 and s["backward_graphs_compiled"] == 1, s


def test_manual_seed_reproduces_and_calls_differ():
    x, w = inputs()
    compiled = ember.compile(drop)
    a, _ = run(compiled, x, w, seed=7)
    w.grad = None
    b, _ = run(compiled, x, w, seed=7)
    w.grad = None
    c, _ = run(compiled, x, w)  # the generator moved on: another seed
    assert torch.equal(a, b)
    assert not torch.equal(a != 0, c != 0)


def test_gradcheck_with_the_seed_fixed():
    """torch.manual_seed before each call fixes the Philox seed (drawn from torch's generator), so the
    compiled function is deterministic and gradcheck applies; under fallback_random too (native_dropout)."""
    for options in ({}, {"fallback_random": True}):
        ember.reset()
        compiled = ember.compile(lambda x: F.dropout(torch.sin(x), p=0.4, training=True), options=options)

        def seeded(x):
            torch.manual_seed(3)
            return compiled(x)

        x = torch.randn(6, 9, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(seeded, (x,))
        assert ember.stats()["backward_graphs_compiled"] == 1


def test_the_mask_is_not_saved():
    """The forward saves the seed (8 bytes), not a mask: less than eager, which saves the bool mask."""
    x, w = inputs()

    def loss(fn):
        return fn(x, w).sum()

    compiled = ember.compile(drop)
    loss(compiled).backward()
    eager_bytes, _ = saved_activation_bytes(lambda: loss(drop))
    ember_bytes, _ = saved_activation_bytes(lambda: loss(compiled))
    mask_bytes = x.numel()  # eager's bool mask
    seed_bytes = 8
    assert ember_bytes <= eager_bytes - mask_bytes + seed_bytes
    ember.reset()
    saved_with_exact, _ = saved_activation_bytes(lambda: loss(ember.compile(drop, options={"fallback_random": True})))
    assert saved_with_exact == ember_bytes - seed_bytes + mask_bytes  # the mask instead of the seed


def test_nanogpt_step_with_dropout(monkeypatch, caplog):
    """A training step with dropout > 0 in attention and the MLP: one graph, a compiled backward, no
    extern dropout (every dropout is philox_rand fused into kernels)."""
    monkeypatch.setenv("EMBER_LOGS", "partition")
    cfg = GPTConfig(block_size=16, vocab_size=64, n_layer=2, n_head=2, n_embd=32, dropout=0.1)
    torch.manual_seed(0)
    model = GPT(cfg).train()
    compiled = ember.compile(model)
    x, y = random_tokens(cfg, 2, 16, seed=1, device=DEVICE), random_tokens(cfg, 2, 16, seed=2, device=DEVICE)
    with caplog.at_level("INFO", logger="ember.partition"):
        _, loss = compiled(x, y)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    s = ember.stats()
    assert s["graph_breaks"] == 0 and s["backward_graphs_compiled"] == 1 and s["autograd_islands"] == 0, s
    assert s["backend_errors"] == 0, s
    partition = "\n".join(r.getMessage() for r in caplog.records)
    assert "philox_rand" in partition and "dropout" not in partition, partition


def test_fallback_random_must_be_a_bool():
    with pytest.raises(ValueError, match="fallback_random"):
        ember.compile(drop, options={"fallback_random": 1})
