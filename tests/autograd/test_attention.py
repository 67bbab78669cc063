"""scaled_dot_product_attention without dropout differentiated through fused kernels (docs/autograd.md): on the
CPU aten's _scaled_dot_product_flash_attention_for_cpu and its _backward, on CUDA (EMBER_TEST_DEVICE=cuda)
ember.autograd.cuda_attention, which runs the kernel torch's sdpa picks (cuDNN, flash, memory-efficient attention,
or the math form in float64). No island, fp64 gradcheck of the compiled function, and gradients against eager's,
with boolean masks (made additive as aten does) and grouped-query attention (k and v heads repeated: LLaMA's
`enable_gqa=True`); a mask that requires grad takes the math form (eager's math backend), with the mask's
gradient (in float16/bfloat16 computed in float32, as torch's math backend).
cuda_attention's math form is checked here on CPU tensors."""
import copy
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import ember
from ember.autograd import cuda_attention, cuda_attention_backward
from ember.testing import DEVICE

EMBER_OPT = Path(__file__).resolve().parents[2] / "build" / "py311" / "ember-opt"

CASES = {
    "plain": {},
    "causal": {"is_causal": True},
    "float mask": {"mask": "float"},
    "scale": {"scale": 0.3},
    "bool mask": {"mask": "bool"},
    "gqa": {"gqa": True, "kv_heads": 1},
    "gqa causal": {"gqa": True, "kv_heads": 1, "is_causal": True},
    "gqa bool mask": {"gqa": True, "kv_heads": 1, "mask": "bool"},
    "learned mask": {"mask": "grad"},
}


def mask_for(case, dtype):
    """The case's attention mask on the test device, or None."""
    g = torch.Generator().manual_seed(1)
    m = {"float": torch.randn(5, 6, dtype=dtype, generator=g), "bool": torch.rand(5, 6, generator=g) > 0.3,
         "grad": torch.randn(5, 6, dtype=dtype, generator=g)}.get(case.get("mask"))
    if case.get("mask") == "bool":
        m[:, 0] = True  # no row fully masked: eager's result would be NaN there
    if m is not None:
        m = m.to(DEVICE).requires_grad_(case.get("mask") == "grad")
    return m


def attention(case, dtype, reference=False):
    """The case's attention over a mask made in dtype (reference: that mask in float64, for the float64 step)."""
    m = mask_for(case, dtype)
    if reference and m is not None and m.is_floating_point():
        m = m.detach().double().requires_grad_(m.requires_grad)

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=case.get("is_causal", False),
                                              scale=case.get("scale"), enable_gqa=case.get("gqa", False))
    return f


def inputs(dtype, kv_heads=3, head_size=4):
    """q, k, v on the test device (head size 8 for CUDA's fused kernels, which want a multiple of 8)."""
    torch.manual_seed(0)
    return tuple(torch.randn(2, h, n, head_size, dtype=dtype).to(DEVICE).requires_grad_()
                 for h, n in ((3, 5), (kv_heads, 6), (kv_heads, 6)))


@pytest.mark.parametrize("name", list(CASES))
def test_fused_attention_gradcheck_without_island(name):
    ember.reset()
    case = dict(CASES[name])
    f = attention(case, torch.float64)
    q, k, v = inputs(torch.float64, case.get("kv_heads", 3))
    if case.get("is_causal"):  # torch's causal mask is top-left aligned: square, as a decoder's
        k, v = (t.detach()[:, :, :5].requires_grad_() for t in (k, v))
    compiled = ember.compile(f)
    assert torch.autograd.gradcheck(compiled, (q, k, v))
    out = compiled(q, k, v)
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), g)
    want = torch.autograd.grad(f(q, k, v), (q, k, v), g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    s = ember.stats()
    assert s["autograd_islands"] == 0 and s["backward_graphs_compiled"] >= 1, s


def mask_with_grad(dtype):
    g = torch.Generator().manual_seed(2)
    return torch.randn(3, 5, 6, dtype=dtype, generator=g).to(DEVICE).requires_grad_()


def check_math_form(f, args):
    """fp64 gradcheck of the compiled f over every argument, gradients equal to eager's, no island."""
    ember.reset()
    compiled = ember.compile(f)
    assert torch.autograd.gradcheck(compiled, args)
    out = compiled(*args)
    g = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad(out, args, g), torch.autograd.grad(f(*args), args, g)):
        torch.testing.assert_close(a, b)
    s = ember.stats()
    assert s["autograd_islands"] == 0 and s["backward_graphs_compiled"] == 1, s


def test_attention_with_a_mask_that_requires_grad_takes_the_math_form():
    """A learned additive mask (a relative-position bias: timm's MaxViT, transformers' Swin): eager's fused kernels
    give it no gradient and torch runs its math backend; Ember's math form (training_forms.cpp) gives the mask
    its gradient, no island, and gradcheck passes over q, k, v and the mask, broadcast over the batch."""
    def f(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.4)
    check_math_form(f, (*inputs(torch.float64), mask_with_grad(torch.float64)))


@pytest.mark.parametrize("shapes", [[(2, 3, 2, 5, 4)] * 3, [(2, 4, 5, 3), (2, 1, 6, 3), (2, 1, 6, 3)]],
                         ids=["5d", "kv_heads_broadcast"])
def test_attention_the_fused_kernels_refuse_takes_the_math_form(shapes):
    """q, k, v of rank 5 (timm's NesT: blocks of tokens per head), or one k and v head broadcast over q's heads
    without enable_gqa (transformers' Falcon), which eager's fused kernels do not take: the math form, no island."""
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)
    torch.manual_seed(0)
    check_math_form(f, tuple(torch.randn(*s, dtype=torch.float64, requires_grad=True) for s in shapes))


def test_grouped_query_attention_with_dropout_draws_eagers_masks_under_fallback_random():
    """Attention with dropout takes its math form (training_forms.cpp); with enable_gqa its k and v heads are
    repeated first, and under fallback_random the masks are eager's: the step is eager's. On the CPU only: CUDA's
    fused kernels draw their own numbers, which no math form can draw (such a graph runs eagerly there)."""
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, is_causal=True, enable_gqa=True)

    def step(fn):
        torch.manual_seed(0)
        q, k, v = (torch.randn(2, h, 6, 8, requires_grad=True) for h in (4, 2, 2))
        torch.manual_seed(5)
        out = fn(q, k, v)
        out.backward(torch.ones_like(out))
        return out.detach(), q.grad, k.grad, v.grad

    ember.reset()
    want = step(f)
    got = step(ember.compile(f, options={"fallback_random": True}))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    s = ember.stats()
    assert s["autograd_islands"] == 0 and s["backward_graphs_compiled"] == 1, s


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("name", ["causal", "gqa bool mask", "scale", "learned mask"])
def test_attention_in_low_precision(name, dtype):
    """In float16/bfloat16/float32 the fused kernel runs as eager's does (its logsumexp is float32), and a learned
    mask takes the math form, in float32 for the half types as torch's math backend: no island, and the output and
    gradients are within the float64-reference rule (error at most twice eager's; grouped heads' gradients are
    summed in another order than eager's)."""
    ember.reset()
    case = dict(CASES[name])
    q, k, v = inputs(dtype, case.get("kv_heads", 3), head_size=8)
    if case.get("is_causal"):
        k, v = (t.detach()[:, :, :5].requires_grad_() for t in (k, v))
    g = torch.randn(q.shape[:-1] + v.shape[-1:], dtype=dtype).to(DEVICE)

    def step(fn, args):
        out = fn(*args)
        return (out, *torch.autograd.grad(out, args, g.to(out.dtype)))

    f = attention(case, dtype)
    got = step(ember.compile(f), (q, k, v))
    want = step(f, (q, k, v))
    ref = step(attention(case, dtype, reference=True), [t.detach().double().requires_grad_() for t in (q, k, v)])
    ref = [r.to(DEVICE) for r in ref]
    for a, b, r in zip(got, want, ref):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert (a.double() - r).abs().max() <= 2 * (b.double() - r).abs().max() + 1e-3
    s = ember.stats()
    assert s["autograd_islands"] == 0 and s["backward_graphs_compiled"] == 1, s


def test_half_precision_attention_with_dropout_on_the_cpu_takes_the_math_form():
    """bfloat16 attention with dropout on the CPU: torch runs its math backend in float32, and so does Ember's math
    form; under fallback_random it draws eager's numbers, so output and gradients are eager's, with no island."""
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.3)

    def step(fn):
        q, k, v = (t.cpu().detach().requires_grad_() for t in inputs(torch.bfloat16, head_size=8))
        torch.manual_seed(5)
        out = fn(q, k, v)
        return (out, *torch.autograd.grad(out, (q, k, v), torch.ones_like(out)))

    ember.reset()
    for a, b in zip(step(ember.compile(f, options={"fallback_random": True})), step(f)):
        torch.testing.assert_close(a, b)
    s = ember.stats()
    assert s["autograd_islands"] == 0 and s["backward_graphs_compiled"] == 1, s


@pytest.mark.parametrize("name", ["plain", "causal", "float mask", "scale", "bool mask"])
def test_cuda_attention_math_form_matches_autograd(name):
    """ember.autograd.cuda_attention where neither fused kernel applies (here: CPU tensors) computes the math
    form: its output, logsumexp and backward against torch autograd through scaled_dot_product_attention."""
    case = dict(CASES[name])
    q, k, v = (t.cpu().detach().requires_grad_() for t in inputs(torch.float64))
    if case.get("is_causal"):
        k, v = (t.detach()[:, :, :5].requires_grad_() for t in (k, v))
    mask = mask_for(case, torch.float64)
    mask = None if mask is None else mask.cpu()
    additive = mask if mask is None or mask.dtype != torch.bool else torch.where(mask, 0.0, float("-inf")).double()
    is_causal, scale = case.get("is_causal", False), case.get("scale")
    out, lse = cuda_attention(q, k, v, additive, is_causal, scale)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale)
    torch.testing.assert_close(out, want)
    scores = q @ k.transpose(-2, -1) * (scale or q.size(-1) ** -0.5)
    if is_causal:
        scores = scores.masked_fill(torch.ones(5, 5, dtype=torch.bool).tril().logical_not(), float("-inf"))
    elif additive is not None:
        scores = scores + additive
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1))
    g = torch.randn_like(out)
    got = cuda_attention_backward(g, q, k, v, additive, out, lse, is_causal, scale)
    for a, b in zip(got, torch.autograd.grad(want, (q, k, v), g)):
        torch.testing.assert_close(a, b)


CUDA_GRAPH = """graph @frame(%0: bf16[2, 3, 5, 8]{120, 8, 24, 1} cuda:0 grad "L['q']", \
%1: bf16[2, 3, 5, 8]{120, 8, 24, 1} cuda:0 grad "L['k']", %2: bf16[2, 3, 5, 8]{120, 8, 24, 1} cuda:0 grad "L['v']", \
%3: b8[5, 5]{5, 1} cuda:0 "L['mask']") {
  %4 = torch "torch.nn.functional.scaled_dot_product_attention"(%0, %1, %2, %3, scale=0.5) : \
bf16[2, 3, 5, 8]{120, 40, 8, 1} cuda:0 grad
  %5 = transpose(%4, 1, 2) : bf16[2, 5, 3, 8]{120, 8, 40, 1} cuda:0 grad
  %6 = reshape(%5, [2, 5, 24]) : bf16[2, 5, 24]{120, 24, 1} cuda:0 grad
  return (%6)
}
"""


@pytest.mark.skipif(not EMBER_OPT.exists(), reason="ember-opt is built by `make build` (not by the GPU machine's build)")
def test_cuda_training_form(tmp_path):
    """On CUDA the training form is ember.autograd.cuda_attention (checked here on the graph text, without a GPU):
    the boolean mask made additive; the output typed as cuDNN and flash lay it out, dense in q's dimension order
    ([B, L, H, D] for q/k/v split from [B, L, H * D]), which the backward reads, and a contiguous copy of it typed
    as traced for the transpose after it; the backward's gradients laid out as their inputs' order."""
    path = tmp_path / "attention.ir"
    path.write_text(CUDA_GRAPH)
    run = subprocess.run([str(EMBER_OPT), "--verify", "--stop-after", "partition", str(path)], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    forward = run.stdout[run.stdout.index("graph @forward"):run.stdout.index("graph @backward")]
    backward = run.stdout[run.stdout.index("graph @backward"):]
    assert 'torch "ember.autograd.cuda_attention"(%0, %1, %2, %' in forward
    assert ", False, 0.5) : tuple(bf16[2, 3, 5, 8]{120, 8, 24, 1} cuda:0, f32[2, 3, 5]{15, 5, 1} cuda:0)" in forward
    assert "contiguous(" in forward and ": bf16[2, 3, 5, 8]{120, 40, 8, 1} cuda:0" in forward
    assert "where(%3, 0.0, -inf)" in forward and "scaled_dot_product_attention" not in run.stdout
    grads = "tuple(" + ", ".join(["bf16[2, 3, 5, 8]{120, 8, 24, 1} cuda:0"] * 3) + ")"
    assert 'torch "ember.autograd.cuda_attention_backward"' in backward and grads in backward
    # Contiguous q, k, v: every result contiguous, and no copy.
    path.write_text(CUDA_GRAPH.replace("{120, 8, 24, 1} cuda:0 grad", "{120, 40, 8, 1} cuda:0 grad"))
    run = subprocess.run([str(EMBER_OPT), "--verify", "--stop-after", "partition", str(path)], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    forward = run.stdout[run.stdout.index("graph @forward"):run.stdout.index("graph @backward")]
    assert ", False, 0.5) : tuple(bf16[2, 3, 5, 8]{120, 40, 8, 1} cuda:0, f32[2, 3, 5]{15, 5, 1} cuda:0)" in forward
    assert "contiguous(" not in forward
    grads = "tuple(" + ", ".join(["bf16[2, 3, 5, 8]{120, 40, 8, 1} cuda:0"] * 3) + ")"
    assert grads in run.stdout[run.stdout.index("graph @backward"):]


def test_cuda_backward_reads_the_forward_layout():
    """cuda_attention_backward hands the kernels the output (and its gradient) in the layout their forward gave:
    torch 2.11's cuDNN and memory-efficient backwards return wrong gradients for another (measured on the H200)."""
    from ember.autograd import _forward_layout
    packed = torch.randn(2, 5, 3 * 24)
    q = packed[..., :24].view(2, 5, 3, 8).transpose(1, 2)  # split from a projection: [B, L, H, D] order
    assert _forward_layout("cudnn", q) == _forward_layout("flash", q) == (120, 8, 24, 1)
    assert _forward_layout("cudnn", q.contiguous()) == (120, 40, 8, 1)
    assert _forward_layout("efficient", q.contiguous()) == (120, 8, 24, 1)


@pytest.mark.skipif(DEVICE != "cuda", reason="CUDA's fused kernels (EMBER_TEST_DEVICE=cuda)")
@pytest.mark.parametrize("kernel", ["CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION"])
def test_cuda_heads_split_from_a_projection(kernel):
    """nanoGPT's attention in bf16: q, k, v split from one projection. Ember's gradients, and eager's after Ember's
    in the same process, match a float32 reference: Ember once handed cuDNN's backward a contiguous output where
    its forward gave [B, L, H, D] order, and cuDNN's cached plan then made whichever ran second wrong."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from ember.models.nanogpt import CausalSelfAttention, GPTConfig
    torch.manual_seed(0)
    cfg = GPTConfig(block_size=256, vocab_size=64, n_layer=1, n_head=4, n_embd=256, dropout=0.0)
    block = CausalSelfAttention(cfg).to("cuda", torch.bfloat16).train()
    x = torch.randn(2, 256, 256, device="cuda", dtype=torch.bfloat16)

    def grads(module, dtype):
        xr = x.to(dtype).requires_grad_()
        out = module(xr)
        return torch.autograd.grad(out.float().square().mean(), [xr, *module.parameters()])

    reference = copy.deepcopy(block).float()
    with sdpa_kernel([SDPBackend.MATH]):
        want = grads(reference, torch.float32)
    ember.reset()
    with sdpa_kernel([getattr(SDPBackend, kernel)]):
        runs = {"eager before": grads(block, torch.bfloat16), "ember": grads(ember.compile(block), torch.bfloat16),
                "eager after": grads(block, torch.bfloat16)}
    for who, got in runs.items():
        for a, b in zip(got, want):
            err = ((a.double() - b.double()).norm() / b.double().norm()).item()
            assert err < 3e-2, f"{who}: relative error {err:.2e}"


def test_heads_merged_after_attention_cost_no_copy(monkeypatch, caplog):
    """nanoGPT's attention in training: the fused kernel lays its output out as [B, L, H, D], the graph restores
    the traced [B, H, L, D] layout, and the model's `transpose(1, 2).contiguous()` copies it back. The two copies
    compose into one that moves nothing, which the scheduler drops (the output projection reads the kernel's
    result), in the forward and in the backward's recomputation. Gradients match eager's."""
    from ember.models.nanogpt import CausalSelfAttention, GPTConfig
    torch.manual_seed(0)
    cfg = GPTConfig(block_size=16, vocab_size=64, n_layer=1, n_head=4, n_embd=32, dropout=0.0)
    block = CausalSelfAttention(cfg).to(DEVICE).train()
    x = torch.randn(2, 16, 32, device=DEVICE, requires_grad=True)
    ember.reset()
    monkeypatch.setenv("EMBER_LOGS", "schedule")
    with caplog.at_level("INFO", logger="ember.schedule"):
        out = ember.compile(block)(x)
    got = torch.autograd.grad(out.square().mean(), [x, *block.parameters()])
    want = torch.autograd.grad(block(x).square().mean(), [x, *block.parameters()])
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    log = "\n".join(r.getMessage() for r in caplog.records)
    assert log.count("stored each element at the address it loaded it from") == 2, log
    assert ember.stats()["autograd_islands"] == 0
