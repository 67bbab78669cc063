"""The `train` suite's workloads: models in training mode, random init, with the inputs of one step.

Needs: torch; transformers for `gpt2` and `llama`.
Guarantees: `build(name, quick, device, dtype)` returns a Workload whose `model` is in train() on `device`,
its floating parameters and buffers in `dtype`, deterministic for a name (its own seeds); `loss(model(*args))`
is the scalar the step differentiates. The same call in the suite's process and in its fresh-process probe
(train_probe.py) builds the same model.
Why these sizes: on the CPU (one thread) a step of each lasts about 50-200 ms, long enough for the compiled
kernels to matter and short enough for a shared 2-core machine; on CUDA the language models are GPT-2-small
wide (d=768) so that a bf16 step on an H200 is not all launch overhead. `--quick` shrinks everything to a few
milliseconds: it checks that the suite runs.
"""
import dataclasses

import torch
from torch import nn

BUILDERS = ("nanogpt", "nanogpt_dropout", "mlp", "gpt2", "llama", "convbn")
SEED = 13  # issue 13


@dataclasses.dataclass
class Workload:
    name: str
    description: str
    model: nn.Module
    args: tuple


def loss(out):
    """The scalar a step differentiates: a (logits, loss) pair's loss, a scalar as is, else the mean square."""
    if isinstance(out, tuple):
        return out[1]
    if out.dim() == 0:
        return out
    return out.float().square().mean()


def _lm_sizes(quick, device):
    """(layers, width, heads, vocabulary, batch, sequence) of the transformers language models."""
    if quick:
        return 2, 64, 4, 128, 2, 16
    if device == "cuda":
        return 6, 768, 12, 8192, 8, 512
    return 4, 256, 8, 1024, 2, 128


def _tokens(vocab, batch, seq, device, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, seq), generator=g).to(device)


class CausalLMLoss(nn.Module):
    """A transformers causal LM called as a training loop calls it: ids -> its own shifted cross-entropy loss."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(ids, labels=ids, use_cache=False).loss


def _nanogpt(name, quick, device):
    from ember.models.nanogpt import GPT, GPTConfig, random_tokens
    dropout = 0.1 if name.endswith("dropout") else 0.0
    if quick:
        cfg, batch, seq = GPTConfig(block_size=32, vocab_size=64, n_layer=2, n_head=4, n_embd=64, dropout=dropout), 2, 32
    elif device == "cuda":
        cfg, batch, seq = GPTConfig(block_size=512, vocab_size=8192, n_layer=6, n_head=12, n_embd=768,
                                    dropout=dropout), 8, 512
    else:
        cfg, batch, seq = GPTConfig(block_size=128, vocab_size=256, n_layer=4, n_head=8, n_embd=256,
                                    dropout=dropout), 4, 128
    model = GPT(cfg)
    x = random_tokens(cfg, batch, seq, seed=1, device=device)
    y = random_tokens(cfg, batch, seq, seed=2, device=device)
    return model, (x, y), (f"nanoGPT {cfg.n_layer} layers, d={cfg.n_embd}, {cfg.n_head} heads, vocabulary "
                           f"{cfg.vocab_size}, batch {batch} x {seq}, dropout {dropout}")


def _mlp(quick, device):
    d, rows = (64, 16) if quick else (768, 256) if device == "cpu" else (2048, 8192)
    model = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
    x = torch.randn(rows, d, generator=torch.Generator().manual_seed(SEED)).to(device)
    return model, (x,), f"MLP {d} -> {4 * d} -> {d}, GELU, batch {rows}"


def _gpt2(quick, device):
    from transformers import GPT2Config, GPT2LMHeadModel
    layers, d, heads, vocab, batch, seq = _lm_sizes(quick, device)
    # Dropout off (transformers' default is 0.1): the gradients are then comparable with every compiler's.
    cfg = GPT2Config(n_layer=layers, n_embd=d, n_head=heads, vocab_size=vocab, n_positions=seq, bos_token_id=0,
                     eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return (CausalLMLoss(GPT2LMHeadModel(cfg)), (_tokens(vocab, batch, seq, device, SEED + 1),),
            f"transformers GPT2LMHeadModel, {layers} layers, d={d}, {heads} heads, vocabulary {vocab}, "
            f"batch {batch} x {seq}, dropout 0, labels = ids")


def _llama(quick, device):
    from transformers import LlamaConfig, LlamaForCausalLM
    layers, d, heads, vocab, batch, seq = _lm_sizes(quick, device)
    cfg = LlamaConfig(num_hidden_layers=layers, hidden_size=d, num_attention_heads=heads,
                      num_key_value_heads=heads // 4, intermediate_size=8 * d // 3, vocab_size=vocab,
                      max_position_embeddings=seq, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    return (CausalLMLoss(LlamaForCausalLM(cfg)), (_tokens(vocab, batch, seq, device, SEED + 2),),
            f"transformers LlamaForCausalLM, {layers} layers, d={d}, {heads} heads ({heads // 4} key/value heads), "
            f"vocabulary {vocab}, batch {batch} x {seq}, labels = ids")


class ConvBN(nn.Module):
    """A small CIFAR-style net: three conv-BatchNorm-ReLU stages (the last two stride 2), average pool, linear,
    cross-entropy against fixed labels. BatchNorm in training mode normalizes by the batch's statistics and
    updates its running mean, variance and batch count: state the compiled step must write back as eager does."""

    def __init__(self, widths, classes=10):
        super().__init__()
        layers, cin = [], 3
        for i, w in enumerate(widths):
            layers += [nn.Conv2d(cin, w, 3, stride=1 if i == 0 else 2, padding=1, bias=False), nn.BatchNorm2d(w),
                       nn.ReLU()]
            cin = w
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(cin, classes)

    def forward(self, x, labels):
        h = self.features(x).mean(dim=(2, 3))
        return nn.functional.cross_entropy(self.head(h), labels)


def _convbn(quick, device):
    widths, batch, size = ((8, 16, 16), 2, 8) if quick else ((32, 64, 128), 16, 32) if device == "cpu" else \
        ((64, 128, 256), 128, 64)
    g = torch.Generator().manual_seed(SEED + 3)
    x = torch.randn(batch, 3, size, size, generator=g).to(device)
    labels = torch.randint(0, 10, (batch,), generator=g).to(device)
    return (ConvBN(widths), (x, labels), f"conv net {' -> '.join(map(str, widths))} channels (3x3, BatchNorm in "
            f"training mode, ReLU), batch {batch} x 3 x {size} x {size}, cross-entropy")


def build(name, quick, device, dtype):
    torch.manual_seed(SEED)
    if name.startswith("nanogpt"):
        model, args, desc = _nanogpt(name, quick, device)
    elif name == "mlp":
        model, args, desc = _mlp(quick, device)
    elif name == "gpt2":
        model, args, desc = _gpt2(quick, device)
    elif name == "llama":
        model, args, desc = _llama(quick, device)
    elif name == "convbn":
        model, args, desc = _convbn(quick, device)
    else:
        raise ValueError(f"unknown workload {name!r}; known: {', '.join(BUILDERS)}")
    model = model.to(device=device, dtype=dtype).train()
    args = tuple(a.to(dtype) if a.is_floating_point() else a for a in args)
    return Workload(name, f"{desc}, {str(dtype).removeprefix('torch.')}", model, args)
