"""Parity cases for nn.Modules: torch.nn layers (Linear, norms, BatchNorm in eval and train,
convolutions, Embedding, attention), containers (Sequential, ModuleList, ModuleDict, ParameterList),
user modules with nested submodules, parameters, buffers, super(), staticmethods, classmethods,
properties, flags, and the nanoGPT model of models.py. Every module here must be captured in one
graph (counters "strict") unless noted.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ember.testing import Call, randint, randn

from .models import GPT, MLP, Block, CausalSelfAttention, GPTConfig
from .registry import case, module_case


def x34(g):
    return (randn(g, 3, 4),)


def x_btc(g):
    return (randn(g, 2, 5, 8),)


def img(g):
    return (randn(g, 2, 3, 8, 8),)


# ---------------------------------------------------------------------------------------------
# torch.nn layers

module_case("nn_linear", lambda: nn.Linear(4, 3), inputs=x34, grad=True)
module_case("nn_linear_no_bias", lambda: nn.Linear(4, 5, bias=False), inputs=x34)
module_case("nn_linear_3d_input", lambda: nn.Linear(8, 6), inputs=x_btc)
module_case("nn_linear_bfloat16", lambda: nn.Linear(4, 3).to(torch.bfloat16),
            inputs=lambda g: (randn(g, 3, 4, dtype=torch.bfloat16),))
module_case("nn_linear_float16", lambda: nn.Linear(4, 3).half(), inputs=lambda g: (randn(g, 3, 4, dtype=torch.float16),))
module_case("nn_bilinear", lambda: nn.Bilinear(4, 4, 2), inputs=lambda g: (randn(g, 3, 4), randn(g, 3, 4)))
module_case("nn_identity_flatten_unflatten",
            lambda: nn.Sequential(nn.Identity(), nn.Flatten(), nn.Unflatten(1, (4, 6))), inputs=lambda g: (randn(g, 2, 3, 8),))

module_case("nn_layernorm", lambda: nn.LayerNorm(8), inputs=x_btc, grad=True)
module_case("nn_layernorm_no_affine", lambda: nn.LayerNorm(8, elementwise_affine=False), inputs=x_btc)
module_case("nn_layernorm_2d_shape", lambda: nn.LayerNorm((5, 8), eps=1e-3), inputs=x_btc)
module_case("nn_rmsnorm", lambda: nn.RMSNorm(8), inputs=x_btc, grad=True)
module_case("nn_rmsnorm_eps", lambda: nn.RMSNorm(8, eps=1e-5), inputs=x_btc)
module_case("nn_groupnorm", lambda: nn.GroupNorm(2, 6), inputs=lambda g: (randn(g, 2, 6, 4, 4),))
module_case("nn_groupnorm_no_affine", lambda: nn.GroupNorm(3, 6, affine=False), inputs=lambda g: (randn(g, 2, 6, 5),))
module_case("nn_instancenorm", lambda: nn.InstanceNorm1d(3, affine=True), inputs=lambda g: (randn(g, 2, 3, 6),))


def _bn1d_eval():
    m = nn.BatchNorm1d(4)
    with torch.no_grad():
        m.running_mean.copy_(torch.randn(4))
        m.running_var.copy_(torch.rand(4) + 0.5)
    return m.eval()


def _bn2d_eval():
    m = nn.BatchNorm2d(3)
    with torch.no_grad():
        m.running_mean.copy_(torch.randn(3))
        m.running_var.copy_(torch.rand(3) + 0.5)
        m.weight.copy_(torch.randn(3))
    return m.eval()


module_case("nn_batchnorm1d_eval", _bn1d_eval, inputs=lambda g: (randn(g, 5, 4),))
module_case("nn_batchnorm2d_eval", _bn2d_eval, inputs=img)
module_case("nn_batchnorm1d_train", lambda: nn.BatchNorm1d(4), inputs=lambda g: (randn(g, 5, 4),), grad=True)
module_case("nn_batchnorm2d_train", lambda: nn.BatchNorm2d(3, momentum=0.2), inputs=img)
module_case("nn_batchnorm1d_train_cumulative", lambda: nn.BatchNorm1d(4, momentum=None), inputs=lambda g: (randn(g, 6, 4, 3),),
            counters="any", note="momentum=None reads float(num_batches_tracked): data-dependent, runs eagerly")
module_case("nn_batchnorm_no_running_stats", lambda: nn.BatchNorm1d(4, track_running_stats=False).eval(),
            inputs=lambda g: (randn(g, 5, 4),))

module_case("nn_conv1d", lambda: nn.Conv1d(3, 4, 3, padding=1), inputs=lambda g: (randn(g, 2, 3, 10),), grad=True)
module_case("nn_conv1d_stride_dilation", lambda: nn.Conv1d(3, 6, 3, stride=2, dilation=2, groups=3, bias=False),
            inputs=lambda g: (randn(g, 2, 3, 12),))
module_case("nn_conv2d", lambda: nn.Conv2d(3, 4, 3), inputs=img, grad=True)
module_case("nn_conv2d_padding_same_groups", lambda: nn.Conv2d(4, 8, (3, 1), padding="same", groups=2),
            inputs=lambda g: (randn(g, 1, 4, 6, 6),))
module_case("nn_conv2d_padding_mode_reflect", lambda: nn.Conv2d(3, 2, 3, padding=1, padding_mode="reflect"), inputs=img)
module_case("nn_conv_transpose2d", lambda: nn.ConvTranspose2d(3, 2, 2, stride=2), inputs=img)
module_case("nn_pooling_stack",
            lambda: nn.Sequential(nn.MaxPool2d(2), nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten()), inputs=img)

module_case("nn_embedding", lambda: nn.Embedding(10, 4), inputs=lambda g: (randint(g, 0, 10, 2, 5),))
module_case("nn_embedding_padding_idx", lambda: nn.Embedding(10, 4, padding_idx=0),
            inputs=lambda g: (randint(g, 0, 10, 3, 4),))
module_case("nn_embedding_bag", lambda: nn.EmbeddingBag(10, 4, mode="mean"), inputs=lambda g: (randint(g, 0, 10, 3, 4),))

module_case("nn_activations_sequential",
            lambda: nn.Sequential(nn.ReLU(), nn.GELU(approximate="tanh"), nn.SiLU(), nn.Tanh(), nn.Sigmoid(),
                                  nn.LeakyReLU(0.2), nn.ELU(), nn.Softplus(), nn.Hardswish(), nn.Mish()),
            inputs=x34)
module_case("nn_softmax_modules", lambda: nn.Sequential(nn.Linear(4, 5), nn.LogSoftmax(dim=-1)), inputs=x34)
module_case("nn_dropout_eval", lambda: nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).eval(), inputs=x34)
module_case("nn_dropout_train_seeded", lambda: nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5)), inputs=x34)
module_case("nn_multihead_attention", lambda: nn.MultiheadAttention(8, 2, batch_first=True),
            inputs=lambda g: (randn(g, 2, 5, 8), randn(g, 2, 5, 8), randn(g, 2, 5, 8)),
            note="nn.MultiheadAttention is not named by the issue")
module_case("nn_loss_modules", lambda: nn.CrossEntropyLoss(label_smoothing=0.1),
            inputs=lambda g: (randn(g, 6, 5), randint(g, 0, 5, 6)))


# ---------------------------------------------------------------------------------------------
# Containers

module_case("seq_mlp", lambda: nn.Sequential(nn.Linear(4, 16), nn.GELU(), nn.Linear(16, 2)), inputs=x34, grad=True)
module_case("seq_nested",
            lambda: nn.Sequential(nn.Sequential(nn.Linear(4, 8), nn.ReLU()), nn.Sequential(nn.Linear(8, 8), nn.Tanh()),
                                  nn.Linear(8, 1)), inputs=x34)


def _seq_ordered():
    from collections import OrderedDict
    return nn.Sequential(OrderedDict([("fc1", nn.Linear(4, 6)), ("act", nn.ReLU()), ("fc2", nn.Linear(6, 3))]))


module_case("seq_ordered_dict", _seq_ordered, inputs=x34)


@case(inputs=x34, module=True)
class SequentialIndexing(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.Sigmoid())

    def forward(self, x):
        y = self.seq[0](x)
        y = self.seq[1:3](y)
        return self.seq[-1](y), len(self.seq)


@case(inputs=x34, module=True, grad=True)
class ModuleListLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x)) + x
        return x


@case(inputs=x34, module=True)
class ModuleListIndexSliceEnumerate(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(4)])

    def forward(self, x):
        x = self.layers[0](x) + self.layers[-1](x)
        for i, layer in enumerate(self.layers[1:3]):
            x = layer(x) * (i + 1)
        outs = [layer(x).sum() for layer in self.layers]
        return x, torch.stack(outs), len(self.layers)


@case(inputs=x34, module=True)
class ModuleListZip(nn.Module):
    def __init__(self):
        super().__init__()
        self.projs = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
        self.norms = nn.ModuleList([nn.LayerNorm(4), nn.LayerNorm(4)])

    def forward(self, x):
        for proj, norm in zip(self.projs, self.norms):
            x = norm(proj(x))
        return x


@case(inputs=x34, module=True)
class ModuleDictAccess(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "reg": nn.Linear(4, 1)})

    def forward(self, x):
        out = {name: head(x) for name, head in self.heads.items()}
        out["sum"] = self.heads["cls"](x).sum(-1) + self.heads.reg(x).squeeze(-1)
        return out, list(self.heads.keys()), "cls" in self.heads


@case(inputs=x34, module=True)
class ParameterListAndDict(nn.Module):
    def __init__(self):
        super().__init__()
        self.scales = nn.ParameterList([nn.Parameter(torch.randn(4)) for _ in range(3)])
        self.shifts = nn.ParameterDict({"a": nn.Parameter(torch.randn(4)), "b": nn.Parameter(torch.randn(4))})

    def forward(self, x):
        for s in self.scales:
            x = x * s
        return x + self.shifts["a"] - self.shifts["b"]


# ---------------------------------------------------------------------------------------------
# User modules: parameters, buffers, nesting, methods, super(), flags

@case(inputs=x34, module=True, grad=True)
class RawParameters(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 3))
        self.bias = nn.Parameter(torch.zeros(3))
        self.gain = nn.Parameter(torch.tensor(1.5))

    def forward(self, x):
        return (x @ self.weight + self.bias) * self.gain


@case(inputs=x34, module=True)
class Buffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.randn(4))
        self.register_buffer("inv_std", torch.rand(4) + 0.5, persistent=False)
        self.register_buffer("maybe", None)

    def forward(self, x):
        y = (x - self.mean) * self.inv_std
        if self.maybe is not None:
            y = y + self.maybe
        return y


@case(inputs=x34, module=True)
class NestedModules(nn.Module):
    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.norm = nn.LayerNorm(4)

        def forward(self, x):
            return self.norm(self.fc(x)).relu()

    class Middle(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = NestedModules.Inner()
            self.b = NestedModules.Inner()

        def forward(self, x):
            return self.b(self.a(x)) + x

    def __init__(self):
        super().__init__()
        self.m1 = NestedModules.Middle()
        self.m2 = NestedModules.Middle()
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        return self.out(self.m2(self.m1(x)))


@case(inputs=x34, module=True)
class SharedSubmodule(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(self.fc(x).tanh()) + self.fc.weight.sum()


@case(inputs=x34, module=True)
class HelperMethods(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def _project(self, x, scale=1.0):
        return self.fc(x) * scale

    def _gate(self, x):
        return torch.sigmoid(x)

    def forward(self, x):
        return self._project(x, scale=2.0) * self._gate(x)


@case(inputs=x34, module=True)
class StaticClassProperty(nn.Module):
    eps = 1e-3

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    @staticmethod
    def normalize(x):
        return x / (x.norm(dim=-1, keepdim=True) + 1)

    @classmethod
    def stabilize(cls, x):
        return x + cls.eps

    @property
    def scale(self):
        return self.fc.weight.shape[0] ** -0.5

    def forward(self, x):
        return self.stabilize(self.normalize(self.fc(x))) * self.scale + StaticClassProperty.normalize(x)


class _BaseBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)


@case(inputs=x34, module=True)
class SuperForward(_BaseBlock):
    def __init__(self):
        super().__init__()
        self.extra = nn.Parameter(torch.ones(4))

    def forward(self, x):
        return super().forward(x) * self.extra + super(SuperForward, self).forward(x)


@case(inputs=lambda g: (randn(g, 3, 4), True), module=True)
class ForwardFlagArgument(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, residual=False):
        y = self.fc(x)
        return y + x if residual else y


@case(inputs=lambda g: Call(randn(g, 3, 4), mask=randn(g, 3, 4) > 0, scale=0.5), module=True)
class ForwardKeywordArguments(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, *, mask=None, scale=1.0, bias=None):
        y = self.fc(x) * scale
        if mask is not None:
            y = y.masked_fill(mask, 0.0)
        if bias is not None:
            y = y + bias
        return y


@case(inputs=x34, module=True)
class ConfigAttributes(nn.Module):
    def __init__(self):
        super().__init__()
        self.use_bias = True
        self.act = "gelu"
        self.dims = [4, 8, 4]
        self.scale = 0.5
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(self.dims, self.dims[1:])])
        self.bias = nn.Parameter(torch.zeros(4))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.dims) - 2:
                x = F.gelu(x) if self.act == "gelu" else F.relu(x)
        if self.use_bias:
            x = x + self.bias
        return x * self.scale


@case(inputs=x34, module=True)
class TrainingFlagBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        if self.training:
            y = y * 2
        return y, self.training


def _eval_branch():
    return TrainingFlagBranch().eval()


module_case("training_flag_branch_eval", _eval_branch, inputs=x34)


@case(inputs=x34, module=True)
class ReturnsStructures(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        y = self.fc(x)
        return {"logits": y, "aux": [y.sum(), (y.mean(), None)], "shape": y.shape}


@case(inputs=x34, module=True)
class ModuleIteration(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        total = x
        for child in self.children():
            total = child(total)
        n = sum([p.numel() for p in [self.a.weight, self.b.weight]])
        return total, n


@case(inputs=x34, module=True, counters="any",
      note="a forward hook on a submodule: correct result required, capture not required by the issue")
class ModuleWithSubmoduleHook(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.fc.register_forward_hook(lambda mod, args, out: out * 10)

    def forward(self, x):
        return self.fc(x) + 1


# ---------------------------------------------------------------------------------------------
# Real blocks: MLPs, attention, transformer pieces

@case(inputs=x_btc, module=True, grad=True)
class GatedMLP(nn.Module):
    """SwiGLU feed-forward, as in LLaMA."""

    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(8, 16, bias=False)
        self.w3 = nn.Linear(8, 16, bias=False)
        self.w2 = nn.Linear(16, 8, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


@case(inputs=x_btc, module=True, grad=True)
class ManualAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.out = nn.Linear(8, 8)
        self.n_head = 2

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = [t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v)]
        att = q @ k.transpose(-2, -1) / math.sqrt(C // self.n_head)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.out(y)


@case(inputs=x_btc, module=True)
class SdpaAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(8, 8)
        self.k = nn.Linear(8, 8)
        self.v = nn.Linear(8, 8)
        self.heads = 4

    def forward(self, x):
        B, T, C = x.shape
        h = self.heads
        q, k, v = [proj(x).view(B, T, h, -1).transpose(1, 2) for proj in (self.q, self.k, self.v)]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).flatten(2)


@case(inputs=x_btc, module=True)
class RotaryEmbedding(nn.Module):
    def __init__(self):
        super().__init__()
        inv = 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8))
        self.register_buffer("inv_freq", inv)

    def forward(self, x):
        T = x.shape[1]
        t = torch.arange(T, dtype=self.inv_freq.dtype)
        freqs = torch.outer(t, self.inv_freq)
        cos, sin = freqs.cos(), freqs.sin()
        x1, x2 = x[..., ::2], x[..., 1::2]
        return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


@case(inputs=img, module=True)
class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(self.conv2(x) + x, 2)
        return self.head(self.pool(x).flatten(1))


@case(inputs=lambda g: (randn(g, 2, 3, 12),), module=True)
class Conv1dResidual(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 3, 5, padding=2)
        self.norm = nn.GroupNorm(1, 3)

    def forward(self, x):
        return x + F.gelu(self.norm(self.conv(x)))


@case(inputs=lambda g: (randint(g, 0, 20, 2, 6),), module=True)
class EmbeddingBagOfWords(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.norm = nn.RMSNorm(8)
        self.cls = nn.Linear(8, 3)

    def forward(self, idx):
        h = self.norm(self.emb(idx)).mean(dim=1)
        return self.cls(h).log_softmax(-1)


# ---------------------------------------------------------------------------------------------
# nanoGPT (models.py)

def _tokens(g):
    return (randint(g, 0, 64, 2, 8),)


def _tokens_targets(g):
    return (randint(g, 0, 64, 2, 8), randint(g, 0, 64, 2, 8))


module_case("gpt_mlp", lambda: MLP(GPTConfig()), inputs=lambda g: (randn(g, 2, 8, 16),))
module_case("gpt_attention_sdpa", lambda: CausalSelfAttention(GPTConfig()), inputs=lambda g: (randn(g, 2, 8, 16),))
module_case("gpt_attention_manual", lambda: CausalSelfAttention(GPTConfig(flash=False)),
            inputs=lambda g: (randn(g, 2, 8, 16),))
module_case("gpt_block", lambda: Block(GPTConfig()), inputs=lambda g: (randn(g, 2, 8, 16),), grad=True)
module_case("gpt_logits", lambda: GPT(GPTConfig()).eval(), inputs=_tokens)
module_case("gpt_loss", lambda: GPT(GPTConfig()), inputs=_tokens_targets, grad=True)
module_case("gpt_loss_manual_attention", lambda: GPT(GPTConfig(flash=False, bias=False)), inputs=_tokens_targets,
            grad=True)
module_case("gpt_train_dropout_seeded", lambda: GPT(GPTConfig(dropout=0.1, flash=False)), inputs=_tokens_targets)
