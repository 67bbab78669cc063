"""On CUDA, a compiled training step's peak memory stays near eager's (issue 13's peak-memory target; the H200 run
of docs/benchmarks.md had Ember's nanoGPT step at 2.0x eager's peak). torch.cuda.max_memory_allocated over one
step after warm-up, minus what was allocated before it (weights, inputs, kept arenas), as `bench train` measures
it. Skips without CUDA; a 4-layer bf16 nanoGPT, seconds on an H200."""
import copy

import pytest
import torch

import ember
from ember.models.nanogpt import GPT, GPTConfig, random_tokens

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def step_peak(model, run, args):
    for p in model.parameters():
        p.grad = None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    run(*args)[1].backward()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def test_training_step_peak_near_eager():
    ember.reset()
    torch.manual_seed(0)
    cfg = GPTConfig(block_size=256, vocab_size=512, n_layer=4, n_head=4, n_embd=256, dropout=0.0)
    model = GPT(cfg).cuda().to(torch.bfloat16).train()
    twin = copy.deepcopy(model)
    args = (random_tokens(cfg, 8, 256, seed=1).cuda(), random_tokens(cfg, 8, 256, seed=2).cuda())
    compiled = ember.compile(twin)
    for _ in range(2):
        step_peak(model, model, args)
        step_peak(twin, compiled, args)
    eager = step_peak(model, model, args)
    got = step_peak(twin, compiled, args)
    assert ember.stats()["backward_graphs_compiled"] >= 1
    assert got <= 1.25 * eager, (got / 1e6, eager / 1e6)
    ember.reset()
