"""Training graphs with symbolic sizes (issue 14): one joint forward/backward pair serves every size the guards
admit. The joint, the partition and the derivative rules keep the shape symbols; the backward binds them from
its inputs (or from the forward's size carrier, docs/autograd.md). Losses and gradients equal eager's."""
import copy

import pytest
import torch

import ember
from ember.models.nanogpt import GPT, GPTConfig, random_tokens


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


# One layer, d=32: every op kind of the 2-layer model, at half the C++ to compile (CI time).
CFG = GPTConfig(block_size=64, vocab_size=64, n_layer=1, n_head=2, n_embd=32, dropout=0.0)


def train_steps(lengths, **compile_kwargs):
    """nanoGPT's forward and backward once per length through Ember and through eager (a deep copy): the losses
    and every parameter's gradient must match. Returns ember.stats()."""
    torch.manual_seed(0)
    model = GPT(CFG).train()
    twin = copy.deepcopy(model)
    compiled = ember.compile(twin, **compile_kwargs)
    for t in lengths:
        x, y = random_tokens(CFG, 2, t, seed=t), random_tokens(CFG, 2, t, seed=t + 1)
        for p in [*model.parameters(), *twin.parameters()]:
            p.grad = None
        _, want = model(x, y)
        want.backward()
        _, got = compiled(x, y)
        got.backward()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        for (n, p), q in zip(model.named_parameters(), twin.parameters()):
            torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5, msg=lambda m: f"T={t} {n}: {m}")
    return ember.stats()


def test_nanogpt_training_dynamic_true_compiles_one_pair():
    s = train_steps((8, 16, 17, 31), dynamic=True)
    assert s["frames_compiled"] == 1 and s["backward_graphs_compiled"] == 1, s
    assert s["backend_errors"] == 0 and s["eager_frames"] == 0, s


def test_nanogpt_training_default_policy_compiles_static_then_dynamic():
    s = train_steps((8, 16, 17, 31), dynamic=None)
    assert s["frames_compiled"] == 2 and s["backward_graphs_compiled"] == 2 and s["recompiles"] == 1, s
    assert s["backend_errors"] == 0, s


def test_training_graph_compiles_with_its_symbols():
    """Batch and length stay symbolic through the joint and partition (no shape fallback); the one island is
    cross_entropy, whose decomposition reads constant sizes."""
    out = ember.explain(ember.compile(GPT(CFG).train(), dynamic=True))(random_tokens(CFG, 2, 8, seed=1),
                                                                      random_tokens(CFG, 2, 8, seed=2))
    assert out.training == [True] and out.symbol_counts == [2], (out.training, out.symbol_counts)
    assert out.shape_fallbacks == [""] and out.backend_fallbacks == [""], (out.shape_fallbacks, out.backend_fallbacks)
    assert out.autograd_islands == [["torch.nn.functional.cross_entropy"]], out.autograd_islands


@pytest.mark.parametrize("fn", [
    pytest.param(lambda x, w: (x * w).sum(), id="sum_to_size"),
    pytest.param(lambda x, w: x.sum() * w.sum(), id="size_carrier"),  # the backward reads no tensor sized by T
    pytest.param(lambda x, w: torch.softmax(x * w, 0).mean(), id="softmax_mean"),
    pytest.param(lambda x, w: torch.nn.functional.layer_norm(x, (4,), w, w).var(), id="layer_norm_var"),
    pytest.param(lambda x, w: torch.cat([x, x * w]).amax(0).sum(), id="cat_amax"),
])
def test_small_graphs_over_lengths(fn):
    """Rules that move symbolic sizes around (sum-to-size, unreduce, expand, counts as divisors): one pair serves
    three lengths, and a backward that reads no tensor sized by a symbol gets it from the forward."""
    class One(torch.nn.Module):
        def forward(self, x, w):
            return fn(x, w)

    compiled = ember.compile(One())
    for t in (5, 9, 12):
        torch.manual_seed(t)
        x = torch.randn(t, 4, dtype=torch.float64)
        ember.mark_dynamic(x, 0)  # the length alone: layer_norm's normalized_shape would specialize dim 1
        x.requires_grad_()
        w = torch.randn(4, dtype=torch.float64, requires_grad=True)
        got = compiled(x, w)
        gx, gw = torch.autograd.grad(got, (x, w))
        want = fn(x, w)
        wx, ww = torch.autograd.grad(want, (x, w))
        torch.testing.assert_close((got, gx, gw), (want, wx, ww))
    s = ember.stats()
    assert s["frames_compiled"] == 1 and s["backward_graphs_compiled"] == 1 and s["backend_errors"] == 0, s
