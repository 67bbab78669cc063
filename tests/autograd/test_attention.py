"""scaled_dot_product_attention without dropout, on the CPU, differentiated through aten's fused kernels
(_scaled_dot_product_flash_attention_for_cpu and its _backward, docs/autograd.md): no island, fp64
gradcheck of the compiled function, and gradients against eager's, with boolean masks (made additive as aten
does) and grouped-query attention (k and v heads repeated: LLaMA's `enable_gqa=True`); a mask that requires grad
takes the math form (eager's math backend), with the mask's gradient; where neither applies (bfloat16 with such a
mask) attention stays an island and is still right."""
import pytest
import torch
import torch.nn.functional as F

import ember

CASES = {
    "plain": {},
    "causal": {"is_causal": True},
    "float mask": {"mask": "float"},
    "scale": {"scale": 0.3},
    "bool mask": {"mask": "bool"},
    "gqa": {"gqa": True, "kv_heads": 1},
    "gqa causal": {"gqa": True, "kv_heads": 1, "is_causal": True},
    "gqa bool mask": {"gqa": True, "kv_heads": 1, "mask": "bool"},
}


def attention(case, dtype):
    g = torch.Generator().manual_seed(1)
    m = {"float": torch.randn(5, 6, dtype=dtype, generator=g), "bool": torch.rand(5, 6, generator=g) > 0.3,
         "grad": torch.randn(5, 6, dtype=dtype, generator=g, requires_grad=True)}.get(case.get("mask"))
    if case.get("mask") == "bool":
        m[:, 0] = True  # no row fully masked: eager's result would be NaN there

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=case.get("is_causal", False),
                                              scale=case.get("scale"), enable_gqa=case.get("gqa", False))
    return f


def inputs(dtype, kv_heads=3):
    torch.manual_seed(0)
    q = torch.randn(2, 3, 5, 4, dtype=dtype, requires_grad=True)
    k = torch.randn(2, kv_heads, 6, 4, dtype=dtype, requires_grad=True)
    v = torch.randn(2, kv_heads, 6, 4, dtype=dtype, requires_grad=True)
    return q, k, v


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
    return torch.randn(3, 5, 6, dtype=dtype, generator=g).requires_grad_()


def test_attention_with_a_mask_that_requires_grad_takes_the_math_form():
    """A learned additive mask (a relative-position bias: timm's MaxViT, transformers' Swin): eager's fused kernels
    give it no gradient and torch runs its math backend; Ember's math form (training_forms.cpp) gives the mask
    its gradient, no island, and gradcheck passes over q, k, v and the mask, broadcast over the batch."""
    ember.reset()

    def f(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.4)
    args = (*inputs(torch.float64), mask_with_grad(torch.float64))
    compiled = ember.compile(f)
    assert torch.autograd.gradcheck(compiled, args)
    out = compiled(*args)
    g = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad(out, args, g), torch.autograd.grad(f(*args), args, g)):
        torch.testing.assert_close(a, b)
    s = ember.stats()
    assert s["autograd_islands"] == 0 and s["backward_graphs_compiled"] == 1, s


@pytest.mark.parametrize("shapes", [[(2, 3, 2, 5, 4)] * 3, [(2, 4, 5, 3), (2, 1, 6, 3), (2, 1, 6, 3)]],
                         ids=["5d", "kv_heads_broadcast"])
def test_attention_the_fused_kernels_refuse_takes_the_math_form(shapes):
    """q, k, v of rank 5 (timm's NesT: blocks of tokens per head), or one k and v head broadcast over q's heads
    without enable_gqa (transformers' Falcon), which eager's fused kernels do not take: the math form, no island."""
    ember.reset()

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)
    torch.manual_seed(0)
    args = tuple(torch.randn(*s, dtype=torch.float64, requires_grad=True) for s in shapes)
    compiled = ember.compile(f)
    assert torch.autograd.gradcheck(compiled, args)
    out = compiled(*args)
    g = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad(out, args, g), torch.autograd.grad(f(*args), args, g)):
        torch.testing.assert_close(a, b)
    s = ember.stats()
    assert s["autograd_islands"] == 0 and s["backward_graphs_compiled"] == 1, s


def test_attention_the_kernel_does_not_take_stays_an_island():
    """bfloat16 with a mask that requires grad: neither the fused kernel nor the math form (float32/float64) takes
    it; attention stays an island, with eager's gradients."""
    ember.reset()
    f = attention({"mask": "grad"}, torch.bfloat16)
    q, k, v = inputs(torch.bfloat16)
    out = ember.compile(f)(q, k, v)
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), g)
    want = torch.autograd.grad(f(q, k, v), (q, k, v), g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    assert ember.stats()["autograd_islands"] == 1


def test_grouped_query_attention_with_dropout_draws_eagers_masks_under_fallback_random():
    """Attention with dropout takes its math form (training_forms.cpp); with enable_gqa its k and v heads are
    repeated first, and under fallback_random the masks are eager's: the step is eager's."""
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


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", ["causal", "gqa bool mask"])
def test_half_precision_attention_takes_the_fused_kernel(name, dtype):
    """In float16/bfloat16 the fused kernel runs as eager's does (its logsumexp is float32): no island, and
    the output and gradients are within the float64-reference rule (error at most twice eager's; grouped
    heads' gradients are summed in another order than eager's)."""
    ember.reset()
    case = dict(CASES[name])
    q, k, v = inputs(dtype, case.get("kv_heads", 3))
    if case.get("is_causal"):
        k, v = (t.detach()[:, :, :5].requires_grad_() for t in (k, v))
    g = torch.randn(q.shape[:-1] + v.shape[-1:], dtype=dtype)

    def step(fn, args):
        out = fn(*args)
        return (out, *torch.autograd.grad(out, args, g.to(out.dtype)))

    f = attention(case, dtype)
    got = step(ember.compile(f), (q, k, v))
    want = step(f, (q, k, v))
    ref = step(attention(case, torch.float64), [t.detach().double().requires_grad_() for t in (q, k, v)])
    for a, b, r in zip(got, want, ref):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert (a.double() - r).abs().max() <= 2 * (b.double() - r).abs().max() + 1e-3
    s = ember.stats()
    assert s["autograd_islands"] == 0 and s["backward_graphs_compiled"] == 1, s
