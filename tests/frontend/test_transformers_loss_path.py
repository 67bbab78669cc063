"""transformers' training call, `model(ids, labels=ids)` in train() mode with gradients on, is captured in as
many graphs as torch.compile makes or fewer (Dynamo's explain: GPT-2 2 graphs / 1 break at its
`logger.warning_once`, BERT 1 / 0), with eager's loss and gradients. The loss path is what broke the frame:
GPT-2's `loss_function` property calls an lru_cache'd `warning_once` (test_lru_cache.py), BERT's masked-LM head
builds a `CrossEntropyLoss()` in its forward. Tiny random-init configs; skipped without transformers."""
import pytest
import torch

import ember

transformers = pytest.importorskip("transformers")

VOCAB = 64


def gpt2():
    cfg = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=16, resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(cfg), {"use_cache": False}


def bert():
    cfg = transformers.BertConfig(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                                  vocab_size=VOCAB, max_position_embeddings=16, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0)
    return transformers.BertForMaskedLM(cfg), {}


# (builder, torch.compile's graph count on the same call, backend): GPT-2 through the whole training pipeline,
# BERT's capture on the eager backend (its C++ compile would cost CI seconds and checks nothing more here).
CASES = {"gpt2": (gpt2, 2, "ember"), "bert": (bert, 1, "eager")}


@pytest.mark.parametrize("name", sorted(CASES))
def test_training_call_with_labels(name):
    build, dynamo_graphs, backend = CASES[name]
    torch.manual_seed(0)
    model, extra = build()
    model.train()
    ids = torch.randint(3, VOCAB, (2, 8))

    def step(ids):
        return model(input_ids=ids, labels=ids, **extra).loss

    ember.reset()
    e = ember.explain(step, backend=backend)(ids)
    assert e.graph_count <= dynamo_graphs, e.break_reasons
    assert e.graph_break_count == 0, [r.reason for r in e.break_reasons]
    ember.reset()
    loss = ember.compile(step, backend=backend)(ids)
    grads = torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)
    ref = step(ids)
    ref_grads = torch.autograd.grad(ref, list(model.parameters()), allow_unused=True)
    torch.testing.assert_close(loss, ref)
    for (n, _), g, r in zip(model.named_parameters(), grads, ref_grads):
        assert (g is None) == (r is None), n
        if g is not None:
            torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-5, msg=n)
