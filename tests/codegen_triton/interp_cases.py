"""The programs tests/codegen_triton runs through Triton's interpreter: name -> (fn, make_args,
emit_triton options). Each stays under 64K elements (the interpreter takes ~0.7 ms per program)."""
import torch
import torch.nn.functional as F

import ember
from ember._C import lowering, passes


def lower(fn, args):
    """The loop IR of fn's one graph, straight from lowering."""
    explained = ember.explain(fn)(*args)
    assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons
    graph = explained.graphs[0]
    for name in ("canonicalize", "decompose", "dce", "cse"):
        graph = passes.run_pass(graph, name)
    text, _ = lowering.lower(graph)
    return text


def randn(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def with_nans(t):
    t = t.clone()
    t.view(-1)[::7] = float("nan")
    return t


def llama_rms_norm(x, w):
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
    return w * h.to(x.dtype)


def row_sums_601():
    x = torch.full((8, 300), 2.0)
    x[:, 0] = 3.0
    x[:, 1] += 4.0 * torch.arange(8)
    return x


CASES = {
    # Pointwise: broadcast of a row and a column, a scalar constant, relu.
    "pointwise_broadcast": (lambda x, r, c: torch.relu(x * r + c - 0.5),
                            lambda: [randn(33, 65), randn(65, seed=1), randn(33, 1, seed=2)], {}),
    # A strided (transposed) input read into a contiguous output.
    "pointwise_strided": (lambda x: x.t() * 2 + 1, lambda: [randn(40, 24)], {}),
    # cat: masked loads.
    "cat": (lambda a, b: torch.cat([a, b], 1) * 3, lambda: [randn(16, 5), randn(16, 11, seed=1)], {}),
    # bf16 storage, f32 math.
    "bf16": (lambda a, b: torch.sigmoid(a * b) + a, lambda: [randn(64, 48, dtype=torch.bfloat16),
                                                             randn(64, 48, dtype=torch.bfloat16, seed=1)], {}),
    "unary_math": (lambda x: (torch.exp(x) + torch.tanh(x) + torch.erf(x) + torch.log1p(x.abs()) + torch.expm1(x) +
                              torch.rsqrt(x.abs() + 1) + torch.sin(x) * torch.cos(x) + torch.sqrt(x.abs())),
                   lambda: [randn(1000) * 3], {}),
    "python_division": (lambda a, b: (torch.floor_divide(a, b), torch.remainder(a, b), torch.pow(a.abs(), b)),
                        lambda: [randn(300) * 10, randn(300, seed=1) * 3 + 0.1], {}),
    "nan_maximum": (lambda x, y: (torch.maximum(x, y), torch.minimum(x, y), x.amax(-1), x.amin(-1)),
                    lambda: [with_nans(randn(12, 20)), randn(12, 20, seed=1)], {}),
    "softmax": (lambda x: torch.softmax(x, -1), lambda: [randn(64, 100) * 4], {}),
    "log_softmax_looped": (lambda x: F.log_softmax(x, -1), lambda: [randn(6, 3000)], {}),
    "sum_looped": (lambda x: x.sum(-1), lambda: [randn(8, 3000)], {}),
    "sum_dim0": (lambda x: x.sum(0), lambda: [randn(300, 40)], {}),
    "sum_dim0_looped": (lambda x: x.sum(0), lambda: [randn(2000, 20)], {}),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (100,), w, b),
                   lambda: [randn(16, 100) + 3, randn(100, seed=1), randn(100, seed=2)], {}),
    "layer_norm_looped": (lambda x, w, b: F.layer_norm(x, (2000,), w, b),
                          lambda: [randn(4, 2000) + 3, randn(2000, seed=1), randn(2000, seed=2)], {}),
    "layer_norm_bf16": (lambda x, w, b: F.layer_norm(x, (64,), w, b),
                        lambda: [randn(32, 64, dtype=torch.bfloat16), randn(64, dtype=torch.bfloat16, seed=1),
                                 randn(64, dtype=torch.bfloat16, seed=2)], {}),
    "rms_norm": (lambda x, w: F.rms_norm(x, (96,), w, eps=1e-6), lambda: [randn(20, 96), randn(96, seed=1)], {}),
    # bf16 rms_norm, looped: one rounding at the end (torch's fused kernel).
    "rms_norm_bf16_looped": (lambda x, w: F.rms_norm(x, (1500,), w, eps=1e-6),
                             lambda: [randn(6, 1500, dtype=torch.bfloat16), randn(1500, dtype=torch.bfloat16, seed=1)],
                             {}),
    # LlamaRMSNorm: the .to(bf16) before the weight is a rounding in registers (inlined as casts).
    "llama_rms_norm_bf16": (llama_rms_norm, lambda: [randn(6, 1500, dtype=torch.bfloat16),
                                                     randn(1500, dtype=torch.bfloat16, seed=1)], {}),
    # A row sum rounded to bf16 and read back by the epilogue: forwarded by vertical fusion as casts.
    # Sums 601 + 4i round down by one in bf16 (spacing 4 there), the same under the GPU's rounding
    # to nearest and the interpreter's truncation: a missing rounding would be off by x.
    "row_sum_bf16_round_trip": (lambda x: x * x.sum(-1, keepdim=True).to(torch.bfloat16).float(),
                                lambda: [row_sums_601()], {}),
    "gelu_tanh_where": (lambda x: torch.where(x > 0, F.gelu(x, approximate="tanh"), F.gelu(x) * 0.5),
                        lambda: [randn(50, 40) * 3], {}),
    "mean_keepdim_sub": (lambda x: x - x.mean(-1, keepdim=True), lambda: [randn(30, 70)], {}),
    "var_mean": (lambda x: torch.var_mean(x, -1), lambda: [randn(10, 1500) + 5], {}),
    # An indirect load behind check_index (embedding and indexing are extern calls today).
    "gather": (lambda x, i: torch.gather(x, 1, i),
               lambda: [randn(8, 30), torch.randint(0, 30, (8, 5), generator=torch.Generator().manual_seed(1))], {}),
    "int_bool": (lambda i, x: ((i > 3) & (x < 0), i * 3 - 7, (i.sum(-1)), (x > 0).sum(-1)),
                 lambda: [torch.randint(-10, 10, (9, 13), generator=torch.Generator().manual_seed(1)), randn(9, 13)],
                 {}),
}

# Split reductions (scheduler/split.cpp) at interpreter sizes: the thresholds are lowered so that
# small tensors split (the Triton target splits from 2 x 132 programs and partials of 2048).
SPLIT = {"split_min_programs": 64, "split_min_rnumel": 16}
SPLIT_CASES = {
    "split_sum_dim0": (lambda x: x.sum(0), lambda: [randn(600, 40)], SPLIT),
    "split_sum_full_bf16": (lambda x: x.sum(), lambda: [randn(96, 70, dtype=torch.bfloat16)], SPLIT),
    "split_sum_keepdim_odd": (lambda x: x.sum(1, keepdim=True), lambda: [randn(5, 1001)], SPLIT),
    "split_sum_middle_dim": (lambda x: x.sum(1), lambda: [randn(4, 500, 6)], SPLIT),
    "split_amax_amin_nan": (lambda x: (x.amax(1, keepdim=True), x.amin(1)), lambda: [with_nans(randn(3, 2000))], SPLIT),
    "split_var_mean": (lambda x: torch.var_mean(x, -1), lambda: [randn(4, 3000) + 5], SPLIT),
    "split_var_dim0": (lambda x: x.var(0), lambda: [randn(1500, 7) * 2 + 1], SPLIT),
    "split_mean_bf16_epilogue": (lambda x: (x.mean(0) * 2).to(torch.bfloat16),
                                 lambda: [randn(1024, 24, dtype=torch.bfloat16)], SPLIT),
    # Splits past the first reduced range (its divisors give too few programs): 12 = 3 * 4 splits over
    # [3, 64] rows, the first range cut whole and the second into chunks of 16; and over [4, 300] with
    # the rows strided (not contiguous with the columns); Welford's counts across both.
    "split_two_ranges_outer": (lambda x: (x * 2).sum((0, 1)), lambda: [randn(3, 64, 24)], SPLIT),
    "split_two_ranges_strided": (lambda x: x.sum((0, 2)), lambda: [randn(4, 6, 300)], SPLIT),
    "split_two_ranges_var": (lambda x: torch.var(x, (0, 1)), lambda: [randn(3, 64, 24) + 3], SPLIT),
}
CASES.update(SPLIT_CASES)


def every_op_inputs():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 16, generator=g) * 2
    return [x, torch.randn(4, 16, generator=g).abs() + 0.5, x.to(torch.bfloat16), x.to(torch.float16), x.double(),
            torch.randint(0, 16, (4, 16), generator=g), torch.randint(1, 5, (4, 16), generator=g, dtype=torch.int32),
            torch.rand(4, 16, generator=g) < 0.5, torch.randn(4, generator=g)]


def division_inputs():
    g = torch.Generator().manual_seed(6)
    b = torch.randint(1, 6, (64,), generator=g, dtype=torch.int32) * (1 - 2 * (torch.arange(64, dtype=torch.int32) % 2))
    y = torch.randn(64, generator=g) * 3
    return [torch.randint(-40, 40, (64,), generator=g, dtype=torch.int32), b, torch.randn(64, generator=g) * 10,
            torch.where(y.abs() < 0.1, 0.5, y)]


# Loop IR programs (golden files) compared with the C++ backend's results for the same program:
# name -> (golden file name, make_args).
LOOP_CASES = {
    "every_op": ("emit_triton_every_op.loop", every_op_inputs),
    "python_division_int": ("emit_triton_python_division.loop", division_inputs),
}
