"""The programs of the `cpu` suite: one builder per workload, shared by the suite and its fresh-process probe.

A builder returns a Workload with inputs drawn from fixed seeds, so that the suite's own process and every
fresh process it starts (cpu_probe.py) build bit-identical programs and inputs. Each workload has two sizes:
the full one, chosen so that one eager call takes roughly 0.2-5 ms on the two-core development machine, and a
`quick` one for the suite's test, where only the plumbing matters.

Memory-bound workloads declare the bytes one call must move at the least: every input and the output read
or written once. Achieved GB/s = those bytes / median call time, comparable with the copy bandwidth that
the suite measures (a copy also reads its source once and writes its destination once).

Plain functions pass through ember.models.as_user_code (user_code.py says why); modules are in eval().
"""
import copy
import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ember.bench import compare
from ember.models import as_user_code
from ember.models.nanogpt import Block, GPTConfig
from ember.models.seed_block import seed_block, seed_block_inputs


@dataclasses.dataclass
class Workload:
    name: str
    description: str
    fn: object           # a function (user code) or an nn.Module in eval()
    args: tuple
    memory_bound: bool

    @property
    def bytes_moved(self):
        """Inputs and output of one call, each counted once; None for compute-bound workloads."""
        if not self.memory_bound:
            return None
        with torch.no_grad():
            out = self.fn(*self.args)
        return sum(t.numel() * t.element_size() for t in (*self.args, *compare.tensors(out)))

    def float64(self):
        """The same program on float64 copies of the weights and inputs: the reference for the error columns."""
        fn = copy.deepcopy(self.fn).double() if isinstance(self.fn, nn.Module) else self.fn
        args = tuple(a.double() if a.is_floating_point() else a for a in self.args)
        return fn, args


def _randn(gen, *shape, scale=1.0, dtype=torch.float32):
    return (torch.randn(*shape, generator=gen) * scale).to(dtype)


def _with_running_stats(bn):
    # Fresh running statistics would make batch norm an identity; give it something to compute.
    bn.running_mean.uniform_(-0.5, 0.5)
    bn.running_var.uniform_(0.5, 2.0)
    bn.weight.data.uniform_(0.5, 1.5)
    bn.bias.data.uniform_(-0.2, 0.2)


def _gelu_residual(y, bias, residual):
    return F.gelu(y + bias, approximate="tanh") + residual


def _layer_norm_residual(x, residual, weight, bias):
    return F.layer_norm(x + residual, (x.shape[-1],), weight, bias, eps=1e-5)


def _rms_norm(x, weight):
    return F.rms_norm(x, (x.shape[-1],), weight, eps=1e-6)


def _rms_norm_formula(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


def _softmax(x):
    return torch.softmax(x, -1)


def _masked_softmax(x):
    n = x.shape[-1]
    return torch.softmax(x.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf")), -1)


def _position_add(x, table):
    return x + table[torch.arange(x.shape[1])]


def _tril_mul(x):
    return x * torch.tril(torch.ones(x.shape[-2], x.shape[-1], dtype=x.dtype))


def _causal_attention(q, k, v):
    t = q.shape[-2]
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
    att = att.masked_fill(torch.tril(torch.ones(t, t)) == 0, float("-inf"))
    return torch.softmax(att, -1) @ v


def _cross_entropy(logits, targets):
    return F.cross_entropy(logits, targets)


gelu_residual = as_user_code(_gelu_residual)
layer_norm_residual = as_user_code(_layer_norm_residual)
rms_norm = as_user_code(_rms_norm if hasattr(F, "rms_norm") else _rms_norm_formula)
softmax = as_user_code(_softmax)
masked_softmax = as_user_code(_masked_softmax)
position_add = as_user_code(_position_add)
tril_mul = as_user_code(_tril_mul)
causal_attention = as_user_code(_causal_attention)
cross_entropy = as_user_code(_cross_entropy)


class LlamaRMSNorm(nn.Module):
    """transformers' LlamaRMSNorm: the formula in float32, then the weight."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


class GeluMLPBlock(nn.Module):
    """A pre-norm transformer MLP (GPT-2, ViT): x + fc2(gelu(fc1(layer_norm(x))))."""

    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Embeddings(nn.Module):
    """BERT-style embeddings: token and position tables (positions from arange), then LayerNorm."""

    def __init__(self, vocab, positions, d):
        super().__init__()
        self.tokens = nn.Embedding(vocab, d)
        self.positions = nn.Embedding(positions, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1])
        return self.norm(self.tokens(ids) + self.positions(pos))


# Blocks of the zoo's models (timm, torchvision, transformers, diffusers), as their libraries write them.
class SwiGLUMLP(nn.Module):
    """LLaMA's MLP: down(silu(gate(x)) * up(x)), no biases."""

    def __init__(self, d, hidden):
        super().__init__()
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rope(q, k, cos, sin):
    # transformers' apply_rotary_pos_emb, cos/sin [seq, head_dim] broadcast over batch and heads.
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def _padding_mask_softmax(scores, mask):
    # BERT's extended attention mask: (1 - mask) * finfo.min added to the scores, then softmax.
    extended = (1.0 - mask[:, None, None, :].to(scores.dtype)) * torch.finfo(scores.dtype).min
    return torch.softmax(scores + extended, dim=-1)


def _label_smoothing_loss(logits, targets):
    return F.cross_entropy(logits, targets, label_smoothing=0.1)


rotate_half = as_user_code(_rotate_half)  # _rope's callee must be user code too (traced, not a break)
rope = as_user_code(_rope)
padding_mask_softmax = as_user_code(_padding_mask_softmax)
label_smoothing_loss = as_user_code(_label_smoothing_loss)


class GroupNormSiLU(nn.Module):
    """diffusers' ResnetBlock2D entry: silu(group_norm(x)) with 32 groups."""

    def __init__(self, channels):
        super().__init__()
        self.norm = nn.GroupNorm(32, channels, eps=1e-6)

    def forward(self, x):
        return F.silu(self.norm(x))


class DepthwiseConvBN(nn.Module):
    """MobileNetV3 / EfficientNet: depthwise 3x3 conv, BatchNorm (eval), hardswish."""

    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False)
        self.bn = nn.BatchNorm2d(channels)
        self.act = nn.Hardswish()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class SqueezeExcite(nn.Module):
    """timm's SqueezeExcite: x * sigmoid(expand(relu(reduce(mean over H, W))))."""

    def __init__(self, channels, reduced):
        super().__init__()
        self.reduce = nn.Conv2d(channels, reduced, 1)
        self.expand = nn.Conv2d(reduced, channels, 1)

    def forward(self, x):
        s = x.mean((2, 3), keepdim=True)
        return x * torch.sigmoid(self.expand(F.relu(self.reduce(s))))


class ConvNeXtBlock(nn.Module):
    """timm's ConvNeXt block (channels-last MLP): dwconv 7x7, LayerNorm, 4x MLP with GELU, layer scale."""

    def __init__(self, d):
        super().__init__()
        self.dwconv = nn.Conv2d(d, d, 7, padding=3, groups=d)
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.gamma = nn.Parameter(torch.full((d,), 0.5))

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.fc2(F.gelu(self.fc1(self.norm(y)))) * self.gamma
        return x + y.permute(0, 3, 1, 2)


class ViTAttention(nn.Module):
    """timm's ViT Attention: one qkv projection, heads split by reshape/permute, SDPA, output projection."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        y = F.scaled_dot_product_attention(q, k, v)
        return self.proj(y.transpose(1, 2).reshape(b, n, c))


class MixerTokenMLP(nn.Module):
    """MLP-Mixer's token mixing: x + (mlp over the token axis of layer_norm(x))."""

    def __init__(self, tokens, d, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(tokens, hidden)
        self.fc2 = nn.Linear(hidden, tokens)

    def forward(self, x):
        y = self.norm(x).transpose(1, 2)
        return x + self.fc2(F.gelu(self.fc1(y))).transpose(1, 2)


def _seed(dtype, quick):
    # This CPU has no bfloat16 matmul instructions: the same program in bfloat16 gets a smaller matrix.
    if quick:
        rows, features = 16, 64
    elif dtype == torch.float32:
        rows, features = 128, 256
    else:
        rows, features = 64, 128
    name = "float32" if dtype == torch.float32 else "bfloat16"
    return (f"gelu(x @ W + b, tanh) + r, {name}, x {rows}x{features}, W {features}x{features}", seed_block,
            seed_block_inputs(rows, features, dtype=dtype))


def _rows_features(quick):
    return (32, 128) if quick else (512, 1024)


def seed_f32(quick):
    return Workload("seed_f32", *_seed(torch.float32, quick), memory_bound=False)


def seed_bf16(quick):
    return Workload("seed_bf16", *_seed(torch.bfloat16, quick), memory_bound=False)


def seed_epilogue(quick):
    rows, features = _rows_features(quick)
    g = torch.Generator().manual_seed(1)
    args = (_randn(g, rows, features), _randn(g, features, scale=0.1), _randn(g, rows, features))
    return Workload("seed_epilogue", f"gelu(y + b, tanh) + r (the seed block without its matmul), {rows}x{features}",
                    gelu_residual, args, memory_bound=True)


def layer_norm(quick):
    rows, features = _rows_features(quick)
    g = torch.Generator().manual_seed(2)
    args = (_randn(g, rows, features), _randn(g, rows, features), 1 + _randn(g, features, scale=0.1),
            _randn(g, features, scale=0.1))
    return Workload("layer_norm", f"F.layer_norm(x + r) with weight and bias, {rows}x{features}",
                    layer_norm_residual, args, memory_bound=True)


def rms_norm_workload(quick):
    rows, features = _rows_features(quick)
    g = torch.Generator().manual_seed(3)
    args = (_randn(g, rows, features), 1 + _randn(g, features, scale=0.1))
    how = "F.rms_norm" if hasattr(F, "rms_norm") else "x * rsqrt(mean(x^2) + eps) * w"
    return Workload("rms_norm", f"{how} with weight, {rows}x{features}", rms_norm, args, memory_bound=True)


def softmax_workload(quick):
    rows, features = _rows_features(quick)
    g = torch.Generator().manual_seed(4)
    return Workload("softmax", f"softmax(x, -1), {rows}x{features}", softmax, (_randn(g, rows, features),),
                    memory_bound=True)


def mlp(quick):
    rows, d = (16, 32) if quick else (32, 256)
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)).eval()
    g = torch.Generator().manual_seed(5)
    return Workload("mlp", f"Linear({d}, {4 * d}) -> GELU -> Linear({4 * d}, {d}), x {rows}x{d}", model,
                    (_randn(g, rows, d),), memory_bound=False)


def nanogpt_block(quick):
    batch, seq, d, heads = (1, 8, 32, 2) if quick else (2, 64, 128, 4)
    torch.manual_seed(6)
    model = Block(GPTConfig(block_size=seq, n_embd=d, n_head=heads)).eval()
    g = torch.Generator().manual_seed(6)
    return Workload("nanogpt_block", f"nanoGPT Block, d={d}, {heads} heads, x {batch}x{seq}x{d}", model,
                    (_randn(g, batch, seq, d),), memory_bound=False)


def conv_bn_relu(quick):
    batch, channels, size = (1, 4, 8) if quick else (2, 16, 32)
    torch.manual_seed(7)
    model = nn.Sequential(nn.Conv2d(channels, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                          nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU()).eval()
    for bn in (model[1], model[4]):
        _with_running_stats(bn)
    g = torch.Generator().manual_seed(7)
    return Workload("conv_bn_relu", f"(Conv2d 3x3 -> BatchNorm2d(eval) -> ReLU) x2, {channels}->32->32 channels, "
                    f"x {batch}x{channels}x{size}x{size}", model, (_randn(g, batch, channels, size, size),),
                    memory_bound=False)


# Integer index values (iota) in kernels: causal masks from triu/tril and arange positions.
def _mask_shape(quick):
    return (2, 16, 16) if quick else (32, 256, 256)


def masked_softmax_workload(quick):
    g = torch.Generator().manual_seed(8)
    shape = _mask_shape(quick)
    return Workload("masked_softmax", f"softmax(x.masked_fill(triu(ones, 1), -inf), -1), x {'x'.join(map(str, shape))}",
                    masked_softmax, (_randn(g, *shape),), memory_bound=True)


def position_add_workload(quick):
    g = torch.Generator().manual_seed(9)
    batch, seq, d = _mask_shape(quick)
    return Workload("position_add", f"x + table[arange(seq)], x {batch}x{seq}x{d}, table {2 * seq}x{d}",
                    position_add, (_randn(g, batch, seq, d), _randn(g, 2 * seq, d)), memory_bound=True)


def tril_mul_workload(quick):
    g = torch.Generator().manual_seed(10)
    shape = _mask_shape(quick)
    return Workload("tril_mul", f"x * tril(ones), x {'x'.join(map(str, shape))}", tril_mul, (_randn(g, *shape),),
                    memory_bound=True)


# From real models: attention with a causal mask, a GELU MLP block, Llama's RMSNorm, BERT's embeddings, a loss.
def causal_attention_workload(quick):
    batch, heads, seq, hd = (1, 2, 8, 16) if quick else (2, 4, 128, 32)
    g = torch.Generator().manual_seed(11)
    args = tuple(_randn(g, batch, heads, seq, hd) for _ in range(3))
    return Workload("causal_attention", f"softmax(q @ k^T / sqrt(d), tril mask) @ v, {batch}x{heads}x{seq}x{hd}",
                    causal_attention, args, memory_bound=False)


def gelu_mlp_block(quick):
    rows, d = (8, 32) if quick else (128, 256)
    torch.manual_seed(12)
    model = GeluMLPBlock(d).eval()
    g = torch.Generator().manual_seed(12)
    return Workload("gelu_mlp_block", f"x + fc2(gelu(fc1(layer_norm(x)))), d={d}, x {rows}x{d}", model,
                    (_randn(g, rows, d),), memory_bound=False)


def llama_rms_norm(quick):
    rows, features = _rows_features(quick)
    torch.manual_seed(13)
    model = LlamaRMSNorm(features).eval()
    with torch.no_grad():
        model.weight.uniform_(0.5, 1.5)
    g = torch.Generator().manual_seed(13)
    return Workload("llama_rms_norm", f"LlamaRMSNorm (x * rsqrt(mean(x^2) + eps) * w), {rows}x{features}", model,
                    (_randn(g, rows, features),), memory_bound=True)


def embeddings(quick):
    batch, seq, vocab, d = (2, 8, 64, 32) if quick else (8, 128, 8192, 256)
    torch.manual_seed(14)
    model = Embeddings(vocab, seq, d).eval()
    g = torch.Generator().manual_seed(14)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    return Workload("embeddings", f"layer_norm(tokens(ids) + positions(arange)), vocab {vocab}, d {d}, ids {batch}x{seq}",
                    model, (ids,), memory_bound=False)


def cross_entropy_workload(quick):
    rows, classes = (16, 64) if quick else (256, 8192)
    g = torch.Generator().manual_seed(15)
    args = (_randn(g, rows, classes), torch.randint(0, classes, (rows,), generator=g))
    return Workload("cross_entropy", f"F.cross_entropy(logits {rows}x{classes}, targets)", cross_entropy, args,
                    memory_bound=False)


def _module_workload(name, description, model, seed, *input_shapes):
    model = model.eval()
    g = torch.Generator().manual_seed(seed)
    return Workload(name, description, model, tuple(_randn(g, *shape) for shape in input_shapes),
                    memory_bound=False)


# The zoo's blocks (grown from issue 15): each pattern is one Ember graph in a zoo model.
def swiglu_mlp(quick):
    rows, d, hidden = (8, 32, 64) if quick else (128, 256, 688)
    torch.manual_seed(16)
    return _module_workload("swiglu_mlp", f"LLaMA MLP down(silu(gate(x)) * up(x)), d={d}, hidden {hidden}, x {rows}x{d}",
                            SwiGLUMLP(d, hidden), 16, (rows, d))


def rope_workload(quick):
    batch, heads, seq, hd = (1, 2, 8, 16) if quick else (4, 8, 128, 64)
    g = torch.Generator().manual_seed(17)
    args = (_randn(g, batch, heads, seq, hd), _randn(g, batch, heads, seq, hd), _randn(g, seq, hd), _randn(g, seq, hd))
    return Workload("rope", f"rotary embedding of q and k (rotate_half, cat), {batch}x{heads}x{seq}x{hd}", rope, args,
                    memory_bound=True)


def padding_mask_softmax_workload(quick):
    batch, heads, seq = (2, 2, 16) if quick else (8, 4, 128)
    g = torch.Generator().manual_seed(18)
    mask = (torch.rand(batch, seq, generator=g) > 0.2).to(torch.int64)
    return Workload("padding_mask_softmax", f"softmax(scores + (1 - mask) * finfo.min), scores {batch}x{heads}x{seq}x{seq}",
                    padding_mask_softmax, (_randn(g, batch, heads, seq, seq), mask), memory_bound=True)


def group_norm_silu(quick):
    batch, channels, size = (1, 32, 8) if quick else (2, 128, 32)
    torch.manual_seed(19)
    return _module_workload("group_norm_silu", f"silu(group_norm(x, 32 groups)), x {batch}x{channels}x{size}x{size}",
                            GroupNormSiLU(channels), 19, (batch, channels, size, size))


def depthwise_conv_bn(quick):
    batch, channels, size = (1, 8, 8) if quick else (2, 96, 32)
    torch.manual_seed(20)
    model = DepthwiseConvBN(channels)
    _with_running_stats(model.bn)
    return _module_workload("depthwise_conv_bn", f"hardswish(bn(depthwise conv 3x3)), x {batch}x{channels}x{size}x{size}",
                            model, 20, (batch, channels, size, size))


def squeeze_excite(quick):
    batch, channels, size = (1, 8, 8) if quick else (4, 128, 28)
    torch.manual_seed(21)
    return _module_workload("squeeze_excite", f"x * sigmoid(fc(relu(fc(mean_hw(x))))), x {batch}x{channels}x{size}x{size}",
                            SqueezeExcite(channels, channels // 4), 21, (batch, channels, size, size))


def convnext_block(quick):
    batch, d, size = (1, 8, 8) if quick else (2, 96, 28)
    torch.manual_seed(22)
    return _module_workload("convnext_block", f"ConvNeXt block (dwconv 7x7, LayerNorm, MLP, layer scale), d={d}, "
                            f"x {batch}x{d}x{size}x{size}", ConvNeXtBlock(d), 22, (batch, d, size, size))


def vit_attention(quick):
    batch, tokens, d, heads = (1, 9, 32, 2) if quick else (4, 197, 192, 3)
    torch.manual_seed(23)
    return _module_workload("vit_attention", f"timm ViT Attention (qkv, SDPA, proj), d={d}, {heads} heads, "
                            f"x {batch}x{tokens}x{d}", ViTAttention(d, heads), 23, (batch, tokens, d))


def mixer_token_mlp(quick):
    batch, tokens, d = (1, 16, 32) if quick else (4, 196, 256)
    torch.manual_seed(24)
    return _module_workload("mixer_token_mlp", f"MLP-Mixer token mixing x + mlp(norm(x)^T)^T, x {batch}x{tokens}x{d}",
                            MixerTokenMLP(tokens, d, tokens * 2), 24, (batch, tokens, d))


def label_smoothing_ce(quick):
    rows, classes = (16, 64) if quick else (512, 1000)
    g = torch.Generator().manual_seed(25)
    args = (_randn(g, rows, classes), torch.randint(0, classes, (rows,), generator=g))
    return Workload("label_smoothing_ce", f"F.cross_entropy(label_smoothing=0.1), logits {rows}x{classes}",
                    label_smoothing_loss, args, memory_bound=False)


# Run order and the names used on the command line and as JSON keys.
BUILDERS = {
    "seed_f32": seed_f32,
    "seed_bf16": seed_bf16,
    "seed_epilogue": seed_epilogue,
    "layer_norm": layer_norm,
    "rms_norm": rms_norm_workload,
    "softmax": softmax_workload,
    "mlp": mlp,
    "nanogpt_block": nanogpt_block,
    "conv_bn_relu": conv_bn_relu,
    "masked_softmax": masked_softmax_workload,
    "position_add": position_add_workload,
    "tril_mul": tril_mul_workload,
    "causal_attention": causal_attention_workload,
    "gelu_mlp_block": gelu_mlp_block,
    "llama_rms_norm": llama_rms_norm,
    "embeddings": embeddings,
    "cross_entropy": cross_entropy_workload,
    "swiglu_mlp": swiglu_mlp,
    "rope": rope_workload,
    "padding_mask_softmax": padding_mask_softmax_workload,
    "group_norm_silu": group_norm_silu,
    "depthwise_conv_bn": depthwise_conv_bn,
    "squeeze_excite": squeeze_excite,
    "convnext_block": convnext_block,
    "vit_attention": vit_attention,
    "mixer_token_mlp": mixer_token_mlp,
    "label_smoothing_ce": label_smoothing_ce,
}


def build(name, quick):
    return BUILDERS[name](quick)
