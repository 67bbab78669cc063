"""Issue 13's memory requirement: the activations a compiled training graph saves for the backward take no
more bytes than eager autograd saves for the same forward. Both are measured the same way, with
torch.autograd.graph.saved_tensors_hooks (ember.bench.train.saved_activation_bytes: unique storages,
parameters and inputs included); Ember's are what its CompiledFunction saves with ctx.save_for_backward.
Measured numbers: docs/autograd.md."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ember
from ember.bench.train import saved_activation_bytes
from ember.models.nanogpt import GPT, GPTConfig, random_tokens

@pytest.fixture(autouse=True)
def fresh_on_cpu():
    """A clean Ember; on the CPU whatever EMBER_TEST_DEVICE says: the measurement's numbers (docs/autograd.md)
    are the CPU's, and the models draw their inputs from CPU generators."""
    ember.reset()
    yield
    ember.reset()


def loss_of(out):
    if isinstance(out, tuple):
        return out[1]
    if getattr(out, "loss", None) is not None:
        return out.loss
    out = getattr(out, "logits", None) if hasattr(out, "logits") else getattr(out, "last_hidden_state", out)
    return out.float().square().mean()


def eager_and_ember(model, *args, **kwargs):
    """(eager bytes, Ember bytes) saved by one forward of `model`, measured on the second compiled call."""
    twin = copy.deepcopy(model)
    eager, _ = saved_activation_bytes(lambda: loss_of(model(*args, **kwargs)))
    compiled = ember.compile(twin)
    loss_of(compiled(*args, **kwargs)).backward()
    got, _ = saved_activation_bytes(lambda: loss_of(compiled(*args, **kwargs)))
    s = ember.stats()
    assert s["backward_graphs_compiled"] >= 1 and s["backend_errors"] == 0, s
    return eager, got


def nanogpt():
    cfg = GPTConfig(block_size=32, vocab_size=64, n_layer=2, n_head=4, n_embd=64, dropout=0.0)
    return GPT(cfg).train(), (random_tokens(cfg, 2, 32, seed=1), random_tokens(cfg, 2, 32, seed=2)), {}


def mlp():
    return nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)), (torch.randn(16, 64),), {}


def conv_bn():
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3),
                        nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 10))
    return net.train(), (torch.randn(4, 3, 8, 8),), {}


def transformers_model(name, as_users_call=False):
    """The workload's model; `as_users_call`: called as a training loop does, with labels (transformers' loss)
    and use_cache left at its default (a DynamicCache is built: issue 13's failing path, which the workloads'
    use_cache=False skipped)."""
    def build():
        pytest.importorskip("transformers")
        from ember.bench import models_workloads
        w = models_workloads.build(name)
        if not as_users_call:
            return w.model.train(), w.args, w.kwargs
        ids = w.args[0]
        return w.model.train(), (ids,), {"labels": ids}
    return build


MODELS = {"nanogpt": nanogpt, "mlp": mlp, "conv_bn": conv_bn, "gpt2": transformers_model("gpt2"),
          "llama": transformers_model("llama"), "llama_labels": transformers_model("llama", as_users_call=True),
          "bert": transformers_model("bert")}


@pytest.mark.parametrize("name", list(MODELS))
def test_model_saves_no_more_than_eager(name):
    torch.manual_seed(0)
    model, args, kwargs = MODELS[name]()
    eager, got = eager_and_ember(model, *args, **kwargs)
    assert got <= eager, f"{name}: Ember saves {got} bytes, eager {eager}"


X = (64, 256)
# Per-row statistics eager recomputes in its backward from x (amax's tie count, var's mean) are reductions,
# which the partitioner computes once in the forward and saves at the default budget: one float per row
# beyond eager (x itself costs nothing: the caller holds it). cross_entropy is differentiated through its
# decomposition, whose softmax shift is an amax.
ROW_STAT = pytest.mark.xfail(strict=True, reason="a per-row reduction eager recomputes is saved: one float per row")
OPS = {
    "layer_norm": lambda x, w: F.layer_norm(x, (256,), w, w),
    "rms_norm": lambda x, w: F.rms_norm(x, (256,), w),
    "softmax": lambda x, w: torch.softmax(x, -1),
    "log_softmax": lambda x, w: torch.log_softmax(x, -1),
    "gelu": lambda x, w: F.gelu(x * w),
    "silu": lambda x, w: F.silu(x),
    "amax": pytest.param(lambda x, w: x.amax(-1), marks=ROW_STAT),
    "var_mean": pytest.param(lambda x, w: torch.var_mean(x, -1)[0], marks=ROW_STAT),
    "views_of_saved": lambda x, w: (x.view(64, 16, 16).softmax(-1) * x.view(64, 16, 16)).sum(),
    "cross_entropy": lambda x, w: F.cross_entropy(x, torch.arange(64) % 256),
}


@pytest.mark.parametrize("op", list(OPS.values()), ids=list(OPS))
def test_op_graph_saves_no_more_than_eager(op):
    x = torch.randn(X, requires_grad=True)
    w = torch.randn(X[1], requires_grad=True)

    class One(nn.Module):
        def forward(self, x, w):
            return op(x, w)

    eager, got = eager_and_ember(One(), x, w)
    assert got <= eager, f"Ember saves {got} bytes, eager {eager}"
