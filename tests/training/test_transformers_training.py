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
    compiled = ember.compile(twin)
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
