"""A compiled training step keeps no more alive between its forward and its backward than eager does, and its
backward frees each saved tensor after its last use (docs/memory.md, "Training").

Kept between forward and backward = the bytes autograd saves (saved_tensors_hooks, as
tests/training/test_saved_memory.py counts them) plus the arenas compiled graphs keep (ember.stats()'s
arena_bytes_kept). The backward's release of saved tensors is read from ember.stats()'s input_bytes_released.
CPU, small models: a few seconds.
"""
import copy

import pytest
import torch
import torch.nn as nn

import ember
from ember.bench.train import saved_activation_bytes
from ember.models.nanogpt import GPT, GPTConfig, random_tokens


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)), (torch.randn(16, 64),)


def nanogpt():
    torch.manual_seed(0)
    cfg = GPTConfig(block_size=32, vocab_size=64, n_layer=2, n_head=4, n_embd=64, dropout=0.0)
    return GPT(cfg).train(), (random_tokens(cfg, 2, 32, seed=1), random_tokens(cfg, 2, 32, seed=2))


def loss_of(out):
    return out[1] if isinstance(out, tuple) else out.square().mean()


@pytest.mark.parametrize("build", [mlp, nanogpt])
def test_kept_between_forward_and_backward_at_most_eager(build):
    model, args = build()
    twin = copy.deepcopy(model)
    eager, _ = saved_activation_bytes(lambda: loss_of(model(*args)))
    compiled = ember.compile(twin)
    loss_of(compiled(*args)).backward()
    base = ember.stats()["arena_bytes_kept"]
    got, _ = saved_activation_bytes(lambda: loss_of(compiled(*args)))
    kept = ember.stats()["arena_bytes_kept"]
    assert ember.stats()["backend_errors"] == 0
    # The arenas are the compiled graphs' (forward and backward, both at most 1 MiB here): what the step adds
    # between its forward and its backward is the saved bytes alone.
    assert kept <= base
    assert got + kept - base <= eager, (got, kept, base, eager)


@pytest.mark.parametrize("build", [mlp, nanogpt])
def test_backward_frees_saved_tensors_as_it_goes(build):
    model, args = build()
    twin = copy.deepcopy(model)
    loss_of(model(*args)).backward()
    compiled = ember.compile(twin)
    loss_of(compiled(*args)).backward()
    before = ember.stats()["input_bytes_released"]
    for p in twin.parameters():
        p.grad = None
    loss_of(compiled(*args)).backward()
    assert ember.stats()["input_bytes_released"] > before
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_retain_graph_keeps_saved_tensors():
    model, args = mlp()
    twin = copy.deepcopy(model)
    compiled = ember.compile(twin)
    loss_of(compiled(*args)).backward()  # compiles
    for m in (model, twin):
        for p in m.parameters():
            p.grad = None
    loss = loss_of(compiled(*args))
    loss.backward(retain_graph=True)
    loss.backward()  # the saved tensors are still there: gradients accumulate twice
    eager = loss_of(model(*args))
    eager.backward(retain_graph=True)
    eager.backward()
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5)
