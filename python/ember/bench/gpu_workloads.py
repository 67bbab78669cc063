"""The programs of the `gpu` suite: one builder per workload, shared by the suite and its fresh-process probe.

`build(name, quick, device)` -> a cpu_workloads.Workload on `device`. Weights come from torch's global generator
seeded before construction, inputs from a seeded CPU generator, both moved to the device afterwards, so the
suite's process and every fresh process it starts (gpu_probe.py) build bit-identical programs on any device.
Everything is random-init (nothing is downloaded) and called under torch.no_grad(), modules in eval().

Full sizes follow notes/triton_backend.md's H200 measurements (softmax 8192x1024 float32, layer_norm 8192x4096
bfloat16, ...) and issue 12's models; `quick` sizes are for the suite's smoke test, where only the plumbing
matters. The pointwise and normalization programs are the cpu suite's own functions (cpu_workloads.py), so the
two suites measure the same code. Memory-bound workloads declare the bytes one call must move (Workload.
bytes_moved); the suite times those by their kernels and everything else as a caller sees a call
(cuda_measure.py).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from ember.models.nanogpt import Block, GPTConfig
from ember.models.seed_block import seed_block, seed_block_inputs

from .cpu_workloads import Workload, layer_norm_residual, rms_norm, softmax

SEED = 0


def _randn(g, *shape, scale=1.0, dtype=torch.float32, device="cpu"):
    return (torch.randn(*shape, generator=g) * scale).to(dtype=dtype, device=device)


def _dtype_name(dtype):
    return str(dtype).removeprefix("torch.")


def _module(model, dtype, device):
    return model.to(dtype=dtype, device=device).eval()


def _seed(dtype, quick, device):
    rows, features = (32, 64) if quick else (8192, 1024)
    return (f"gelu(x @ W + b, tanh) + r, {_dtype_name(dtype)}, x {rows}x{features}, W {features}x{features}",
            seed_block, seed_block_inputs(rows, features, dtype=dtype, device=device))


def seed_f32(quick, device):
    return Workload("seed_f32", *_seed(torch.float32, quick, device), memory_bound=False)


def seed_bf16(quick, device):
    return Workload("seed_bf16", *_seed(torch.bfloat16, quick, device), memory_bound=False)


def softmax_workload(quick, device):
    rows, features = (64, 128) if quick else (8192, 1024)
    g = torch.Generator().manual_seed(SEED + 1)
    return Workload("softmax", f"softmax(x, -1), float32, {rows}x{features}", softmax,
                    (_randn(g, rows, features, device=device),), memory_bound=True)


def _norm_rows_features(quick):
    return (64, 256) if quick else (8192, 4096)


def layer_norm(quick, device):
    rows, features = _norm_rows_features(quick)
    g = torch.Generator().manual_seed(SEED + 2)
    bf16 = {"dtype": torch.bfloat16, "device": device}
    args = (_randn(g, rows, features, **bf16), _randn(g, rows, features, **bf16),
            1 + _randn(g, features, scale=0.1, **bf16), _randn(g, features, scale=0.1, **bf16))
    return Workload("layer_norm", f"F.layer_norm(x + r) with weight and bias, bfloat16, {rows}x{features}",
                    layer_norm_residual, args, memory_bound=True)


def rms_norm_workload(quick, device):
    rows, features = _norm_rows_features(quick)
    g = torch.Generator().manual_seed(SEED + 3)
    bf16 = {"dtype": torch.bfloat16, "device": device}
    args = (_randn(g, rows, features, **bf16), 1 + _randn(g, features, scale=0.1, **bf16))
    return Workload("rms_norm", f"F.rms_norm(x) with weight, bfloat16, {rows}x{features}", rms_norm, args,
                    memory_bound=True)


def _tokens(quick):
    """(batch, sequence) of the transformer workloads."""
    return (2, 16) if quick else (8, 512)


def mlp(quick, device):
    d = 64 if quick else 768
    batch, seq = _tokens(quick)
    torch.manual_seed(SEED + 4)
    model = _module(nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)), torch.bfloat16, device)
    g = torch.Generator().manual_seed(SEED + 4)
    return Workload("mlp", f"Linear({d}, {4 * d}) -> GELU -> Linear({4 * d}, {d}), bfloat16, x {batch}x{seq}x{d}",
                    model, (_randn(g, batch, seq, d, dtype=torch.bfloat16, device=device),), memory_bound=False)


def nanogpt_blocks(quick, device):
    d, heads, layers = (64, 4, 2) if quick else (768, 12, 4)
    batch, seq = _tokens(quick)
    torch.manual_seed(SEED + 5)
    config = GPTConfig(block_size=seq, n_embd=d, n_head=heads)
    model = _module(nn.Sequential(*[Block(config) for _ in range(layers)]), torch.bfloat16, device)
    g = torch.Generator().manual_seed(SEED + 5)
    return Workload("nanogpt_blocks", f"{layers} nanoGPT Blocks, d={d}, {heads} heads, bfloat16, x {batch}x{seq}x{d}",
                    model, (_randn(g, batch, seq, d, dtype=torch.bfloat16, device=device),), memory_bound=False)


class CausalLMLogits(nn.Module):
    """A transformers causal LM called as one calls it for a forward pass without a cache: ids -> logits."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(ids, use_cache=False).logits


def _transformers_lm(make, vocab, dtype, quick, device, seed):
    torch.manual_seed(seed)
    model = _module(CausalLMLogits(make()), dtype, device)
    batch, seq = _tokens(quick)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seq), generator=g).to(device)
    return model, (ids,)


def _lm_sizes(quick):
    """layers, hidden, heads, vocabulary"""
    return (2, 64, 4, 128) if quick else (6, 768, 12, 8192)


def gpt2(quick, device):
    from transformers import GPT2Config, GPT2LMHeadModel
    layers, d, heads, vocab = _lm_sizes(quick)
    batch, seq = _tokens(quick)

    def make():
        return GPT2LMHeadModel(GPT2Config(n_layer=layers, n_embd=d, n_head=heads, vocab_size=vocab, n_positions=seq,
                                          bos_token_id=0, eos_token_id=0))

    model, args = _transformers_lm(make, vocab, torch.float32, quick, device, SEED + 6)
    return Workload("gpt2", f"transformers GPT2LMHeadModel, {layers} layers, d={d}, {heads} heads, vocabulary {vocab}, "
                    f"float32, batch {batch}x{seq}", model, args, memory_bound=False)


def llama(quick, device):
    from transformers import LlamaConfig, LlamaForCausalLM
    layers, d, heads, vocab = _lm_sizes(quick)
    batch, seq = _tokens(quick)

    def make():
        return LlamaForCausalLM(LlamaConfig(num_hidden_layers=layers, hidden_size=d, num_attention_heads=heads,
                                            num_key_value_heads=heads // 4, intermediate_size=8 * d // 3,
                                            vocab_size=vocab, max_position_embeddings=seq, bos_token_id=0,
                                            eos_token_id=0))

    model, args = _transformers_lm(make, vocab, torch.bfloat16, quick, device, SEED + 7)
    return Workload("llama", f"transformers LlamaForCausalLM, {layers} layers, d={d}, {heads} heads ({heads // 4} "
                    f"key/value heads), vocabulary {vocab}, bfloat16, batch {batch}x{seq}", model, args,
                    memory_bound=False)


class Bottleneck(nn.Module):
    """ResNet's bottleneck block (1x1 -> 3x3 with the stride -> 1x1 to 4x the width), as torchvision's."""

    def __init__(self, inplanes, planes, stride):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(inplanes, planes, 1, bias=False), nn.BatchNorm2d(planes)
        self.conv2, self.bn2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes)
        self.conv3, self.bn3 = nn.Conv2d(planes, 4 * planes, 1, bias=False), nn.BatchNorm2d(4 * planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != 4 * planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, 4 * planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(4 * planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + identity)


class ResNet50(nn.Module):
    """torchvision's resnet50 architecture (25,557,032 parameters), for machines without torchvision."""

    def __init__(self, num_classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, inplanes = [], 64
        for planes, count, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(count):
                blocks.append(Bottleneck(inplanes, planes, stride if i == 0 else 1))
                inplanes = 4 * planes
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def resnet50(quick, device):
    batch, size = (1, 64) if quick else (32, 224)
    torch.manual_seed(SEED + 8)
    try:
        from torchvision.models import resnet50 as make
        source = "torchvision's resnet50"
    except ImportError:
        make, source = ResNet50, "ResNet-50 (torchvision is not installed: gpu_workloads.ResNet50, the same layers)"
    model = _module(make(), torch.float32, device)
    g = torch.Generator().manual_seed(SEED + 8)
    return Workload("resnet50", f"{source}, float32, x {batch}x3x{size}x{size}", model,
                    (_randn(g, batch, 3, size, size, device=device),), memory_bound=False)


class DecoderLayer(nn.Module):
    """A pre-norm decoder layer for one new token that attends to a key/value cache it reads but does not grow."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

    def forward(self, x, past_k, past_v):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(d, dim=2)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = torch.cat([past_k, k.view(b, t, self.heads, d // self.heads).transpose(1, 2)], dim=2)
        v = torch.cat([past_v, v.view(b, t, self.heads, d // self.heads).transpose(1, 2)], dim=2)
        y = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln_2(x))


class DecoderStep(nn.Module):
    """One decoding step: the new token's hidden state through every layer, each with its own cache slice."""

    def __init__(self, d, heads, layers):
        super().__init__()
        self.layers = nn.ModuleList([DecoderLayer(d, heads) for _ in range(layers)])

    def forward(self, x, past_k, past_v):
        for i, layer in enumerate(self.layers):
            x = layer(x, past_k[i], past_v[i])
        return x


def decode_step(quick, device):
    d, heads, layers, past = (64, 4, 2, 16) if quick else (768, 12, 4, 512)
    torch.manual_seed(SEED + 9)
    model = _module(DecoderStep(d, heads, layers), torch.bfloat16, device)
    g = torch.Generator().manual_seed(SEED + 9)
    bf16 = {"dtype": torch.bfloat16, "device": device}
    cache = (layers, 1, heads, past, d // heads)
    args = (_randn(g, 1, 1, d, **bf16), _randn(g, *cache, **bf16), _randn(g, *cache, **bf16))
    return Workload("decode_step", f"one decoding step (batch 1, one token) through {layers} layers, d={d}, {heads} "
                    f"heads, attending to a {past}-token key/value cache, bfloat16: launch-bound", model, args,
                    memory_bound=False)


# Run order and the names used on the command line and as JSON keys.
BUILDERS = {
    "seed_f32": seed_f32,
    "seed_bf16": seed_bf16,
    "softmax": softmax_workload,
    "layer_norm": layer_norm,
    "rms_norm": rms_norm_workload,
    "mlp": mlp,
    "nanogpt_blocks": nanogpt_blocks,
    "gpt2": gpt2,
    "llama": llama,
    "resnet50": resnet50,
    "decode_step": decode_step,
}
LAUNCH_BOUND = "decode_step"  # where reduce-overhead's target is checked


def build(name, quick, device):
    return BUILDERS[name](quick, device)
