"""The programs test_matmul_template.py runs: name -> (fn, make_args). Each is one extern matmul and
the pointwise kernel after it, small (the interpreter runs every candidate config of each)."""
import torch
import torch.nn.functional as F

from interp_cases import randn

BF16 = torch.bfloat16

CASES = {
    # The seed block in float32 with M, N and K tails (no block divides 50, 72 or 40).
    "linear_bias_gelu_residual_f32": (
        lambda x, w, b, r: F.gelu(F.linear(x, w, b), approximate="tanh") + r,
        lambda: [randn(50, 40), randn(72, 40, seed=1) * 0.2, randn(72, seed=2), randn(50, 72, seed=3)]),
    # The seed block in bfloat16 (bf16 output, bias inside the linear).
    "linear_bias_gelu_residual_bf16": (
        lambda x, w, b, r: F.gelu(F.linear(x, w, b), approximate="tanh") + r,
        lambda: [randn(64, 128, dtype=BF16), randn(128, 128, dtype=BF16, seed=1) * 0.1,
                 randn(128, dtype=BF16, seed=2), randn(64, 128, dtype=BF16, seed=3)]),
    # A residual add after a plain mm (the add stays in the epilogue: the residual is 2-D).
    "mm_residual_add": (lambda a, b, r: (a @ b + r) * 0.5,
                        lambda: [randn(48, 32), randn(32, 80, seed=1), randn(48, 80, seed=2)]),
    # bmm: the batch on grid axis 1.
    "bmm_relu": (lambda a, b: torch.relu(torch.bmm(a, b)) * 2,
                 lambda: [randn(3, 33, 20), randn(3, 20, 17, seed=1)]),
    # A 3-D input: leading dims fold into rows, the epilogue's i0, i1 split out of the row.
    "linear_3d_sigmoid_bf16": (lambda x, w: torch.sigmoid(F.linear(x, w)) * 3,
                               lambda: [randn(2, 24, 32, dtype=BF16), randn(48, 32, dtype=BF16, seed=1) * 0.2]),
}
