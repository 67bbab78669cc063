"""scaled_dot_product_attention without dropout, on the CPU, differentiated through aten's fused kernels
(_scaled_dot_product_flash_attention_for_cpu and its _backward, docs/autograd.md): no island, fp64
gradcheck of the compiled function, and gradients against eager's (a boolean mask as the additive mask torch's
CPU attention makes of it); where the kernel does not apply (grouped-query attention) attention stays an island
and is still right."""
import pytest
import torch
import torch.nn.functional as F

import ember

CASES = {
    "plain": {},
    "causal": {"is_causal": True},
    "float mask": {"mask": "float"},
    "bool mask": {"mask": "bool"},
    "scale": {"scale": 0.3},
}


def attention(case, dtype):
    # Every row of the boolean mask attends somewhere (a fully masked row is NaN in eager too).
    m = {"float": torch.randn(5, 6, dtype=dtype),
         "bool": (torch.rand(5, 6) > 0.3) | torch.eye(5, 6, dtype=torch.bool)}.get(case.get("mask"))

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
    q, k, v = inputs(torch.float64)
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


def test_attention_the_kernel_does_not_take_stays_an_island():
    ember.reset()
    f = attention({"gqa": True}, torch.float32)
    q, k, v = inputs(torch.float32, kv_heads=1)
    out = ember.compile(f)(q, k, v)
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), g)
    want = torch.autograd.grad(f(q, k, v), (q, k, v), g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert ember.stats()["autograd_islands"] == 1
