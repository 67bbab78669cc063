"""The seed block: gelu(x @ W + b) + residual, the smallest program with a matmul, an epilogue and a residual.

It is the first workload every stage of Ember is measured on (notes/anchors.md measures it on a GPU with
the tanh form of GELU, so this uses the same form).
"""
import torch
import torch.nn.functional as F

from .user_code import as_user_code


def _seed_block(x, weight, bias, residual):
    return F.gelu(x @ weight + bias, approximate="tanh") + residual


seed_block = as_user_code(_seed_block)


def seed_block_inputs(rows, features, *, dtype=torch.float32, device="cpu", seed=0):
    """(x, weight, bias, residual) with a fixed seed; weight is square so the residual matches the output."""
    g = torch.Generator(device="cpu").manual_seed(seed)

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(dtype=dtype, device=device)

    x = randn(rows, features)
    weight = randn(features, features, scale=features ** -0.5)
    bias = randn(features, scale=0.1)
    residual = randn(rows, features)
    return x, weight, bias, residual
