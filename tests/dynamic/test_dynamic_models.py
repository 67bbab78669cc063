"""Language models over changing sequence lengths and batch sizes (issue 14): results equal eager's and
the graph count follows torch.compile's schedule (static first, then one graph with the changing
dimension symbolic; size 1 apart)."""
import pytest
import torch

import ember
from ember.models.nanogpt import GPT, GPTConfig, random_tokens


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


def small_gpt(device="cpu"):
    torch.manual_seed(0)
    cfg = GPTConfig(block_size=128, vocab_size=64, n_layer=2, n_head=4, n_embd=64, dropout=0.0)
    return GPT(cfg).to(device).eval(), cfg


def run(model, cfg, shapes, device="cpu", tolerance=None, **compile_kwargs):
    """Compiles `model`, calls it on tokens of each (batch, length), compares with eager; ember.stats()."""
    g = ember.compile(model, **compile_kwargs)
    tol = {} if tolerance is None else {"rtol": tolerance, "atol": tolerance}
    with torch.no_grad():
        for b, t in shapes:
            x = random_tokens(cfg, b, t, seed=b * 1000 + t).to(device)
            torch.testing.assert_close(g(x), model(x), **tol)
    return ember.stats()


@pytest.mark.parametrize("backend", ["eager", "ember"])
def test_nanogpt_over_sequence_lengths_compiles_twice(backend):
    model, cfg = small_gpt()
    stats = run(model, cfg, [(2, t) for t in (8, 16, 17, 31, 32, 64, 100)], backend=backend)
    assert stats["frames_compiled"] == 2, stats


def test_nanogpt_over_batch_sizes_and_lengths():
    model, cfg = small_gpt()
    # Batch 1 is static (size 1); batch 3 then 8 makes the batch symbolic; lengths change throughout.
    stats = run(model, cfg, [(1, 8), (3, 8), (8, 16), (3, 17), (8, 31), (1, 9)], backend="ember")
    assert stats["frames_compiled"] <= 4, stats


def test_nanogpt_dynamic_true_compiles_once():
    model, cfg = small_gpt()
    stats = run(model, cfg, [(2, 8), (3, 17), (5, 64)], backend="ember", dynamic=True)
    assert stats["frames_compiled"] == 1, stats
