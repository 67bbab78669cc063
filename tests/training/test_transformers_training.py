"""transformers' GPT-2, BERT, LLaMA and T5 (tiny random-init configs, python/ember/bench/models_workloads.py)
trained one step through Ember: the loss and every parameter's gradient against eager autograd."""
import copy

import pytest
import torch

import ember
from ember.bench import models_workloads

pytest.importorskip("transformers")


def loss_of(out):
    logits = out.logits if hasattr(out, "logits") else out.last_hidden_state
    return logits.float().square().mean()


@pytest.mark.parametrize("name", ["gpt2", "bert", "llama", "t5"])
def test_one_training_step_matches_eager(name):
    ember.reset()
    w = models_workloads.build(name)
    model = w.model.train()
    twin = copy.deepcopy(model)
    torch.manual_seed(0)
    want = loss_of(model(*w.args, **w.kwargs))
    want.backward()
    # Every gradient against eager's: dropout (GPT-2, BERT, T5 train with it) draws eager's masks.
    compiled = ember.compile(twin, options={"fallback_random": True})
    torch.manual_seed(0)
    got = loss_of(compiled(*w.args, **w.kwargs))
    got.backward()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for (n, p), q in zip(model.named_parameters(), twin.parameters()):
        if p.grad is None:
            assert q.grad is None, n
            continue
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name} {n}: {m}")
    s = ember.stats()
    assert s["backward_graphs_compiled"] >= 1 and s["backend_errors"] == 0, s


def test_llama_called_as_users_do():
    """Issue 13: LLaMA called with labels and without use_cache=False (the workloads above pass it) builds a
    DynamicCache, whose first torch.cat joins a legacy empty 1-D tensor along dim -2; its rule once read that
    dim unnormalized and the joint fell back to the eager executor (on the CPU and on the GPU host alike: the
    joint comes before any target). The loss is transformers' own; on EMBER_TEST_DEVICE."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from ember.testing import DEVICE
    ember.reset()
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                                         num_attention_heads=4, num_key_value_heads=2, vocab_size=128)).to(DEVICE)
    twin = copy.deepcopy(model)
    x = torch.randint(0, 128, (2, 8)).to(DEVICE)
    want = model(x, labels=x).loss
    want.backward()
    got = ember.compile(twin, dynamic=False)(x, labels=x).loss
    got.backward()
    s = ember.stats()
    assert s["backward_graphs_compiled"] == 1 and s["backend_errors"] == 0, s  # attention (GQA) is an island
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for (n, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5, msg=lambda m: f"{n}: {m}")
