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

import torch
import torch.nn as nn
import torch.nn.functional as F

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
        return sum(t.numel() * t.element_size() for t in (*self.args, out))

    def float64(self):
        """The same program on float64 copies of the weights and inputs: the reference for the error columns."""
        fn = copy.deepcopy(self.fn).double() if isinstance(self.fn, nn.Module) else self.fn
        args = tuple(a.double() if a.is_floating_point() else a for a in self.args)
        return fn, args


def _randn(gen, *shape, scale=1.0, dtype=torch.float32):
    return (torch.randn(*shape, generator=gen) * scale).to(dtype)


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


gelu_residual = as_user_code(_gelu_residual)
layer_norm_residual = as_user_code(_layer_norm_residual)
rms_norm = as_user_code(_rms_norm if hasattr(F, "rms_norm") else _rms_norm_formula)
softmax = as_user_code(_softmax)


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
    # Fresh running statistics would make batch norm an identity; give it something to compute.
    for bn in (model[1], model[4]):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.uniform_(-0.2, 0.2)
    g = torch.Generator().manual_seed(7)
    return Workload("conv_bn_relu", f"(Conv2d 3x3 -> BatchNorm2d(eval) -> ReLU) x2, {channels}->32->32 channels, "
                    f"x {batch}x{channels}x{size}x{size}", model, (_randn(g, batch, channels, size, size),),
                    memory_bound=False)


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
}


def build(name, quick):
    return BUILDERS[name](quick)
