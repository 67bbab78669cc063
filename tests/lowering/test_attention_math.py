"""Attention whose shapes torch's fused CPU kernel refuses (docs/autograd.md, "Attention in inference"): a mask
neither 2-d nor 4-d (timm's TinyViT: a [heads, L, S] bias), k and v broadcast over q's heads (Falcon's
multi-query attention), a 4-d mask whose head dim is neither 1 nor q's. torch then runs its math backend op by
op; Ember compiles the same math form (scaled scores, mask, safe softmax, a matmul with v) into its kernels. A row
masked whole gives zeros, as torch's safe softmax does (not NaN), in inference and in training; attention the
fused kernel takes stays one call to it."""
import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import ember


def attention_calls(fn, *args):
    """Names of the aten attention ops one call of fn dispatches."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn(*args)
    return {e.key for e in prof.key_averages() if "scaled_dot_product" in e.key}


def randn(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def bool_mask(*shape, seed=3):
    m = torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) > 0.3
    m.view(-1, shape[-1])[1] = False  # a row masked whole
    return m


CASES = {
    "3-d float mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                       lambda dt: (randn(2, 4, 7, 8, dtype=dt), randn(2, 4, 9, 8, dtype=dt, seed=1),
                                   randn(2, 4, 9, 8, dtype=dt, seed=2), randn(4, 7, 9, dtype=dt, seed=3))),
    "k, v broadcast over heads, bool mask": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda dt: (randn(2, 4, 7, 8, dtype=dt), randn(2, 1, 9, 8, dtype=dt, seed=1), randn(2, 1, 9, 8, dtype=dt, seed=2),
                    bool_mask(2, 1, 7, 9))),
    "k, v broadcast over heads, causal, scale": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
        lambda dt: (randn(2, 4, 7, 8, dtype=dt), randn(2, 1, 7, 8, dtype=dt, seed=1), randn(2, 1, 7, 8, dtype=dt, seed=2))),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("case", sorted(CASES))
def test_math_form_matches_eager_and_calls_no_attention_op(case, dtype):
    fn, make = CASES[case]
    args = make(dtype)
    compiled = ember.compile(fn)
    with torch.no_grad():
        got, want = compiled(*args), fn(*args)
        reference = fn(*[a.double() if a.is_floating_point() else a for a in args])
        assert attention_calls(fn, *args), "eager runs an attention op (the case tests nothing otherwise)"
        assert attention_calls(compiled, *args) == set()
    assert not got.isnan().any()
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    ember_err = (got.double() - reference).abs().max().item()
    eager_err = (want.double() - reference).abs().max().item()
    assert ember_err <= 2 * eager_err + 1e-12


def test_attention_the_fused_kernel_takes_stays_one_call():
    q, k, v = randn(2, 4, 7, 8), randn(2, 4, 9, 8, seed=1), randn(2, 4, 9, 8, seed=2)
    fn = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)  # noqa: E731
    compiled = ember.compile(fn)
    with torch.no_grad():
        m = randn(7, 9, seed=3)
        torch.testing.assert_close(compiled(q, k, v, m), fn(q, k, v, m))
        assert attention_calls(compiled, q, k, v, m)


def test_a_row_masked_whole_gives_zeros_in_training():
    q = randn(2, 4, 7, 8).requires_grad_()
    k, v = randn(2, 1, 9, 8, seed=1).requires_grad_(), randn(2, 1, 9, 8, seed=2).requires_grad_()
    m = bool_mask(2, 1, 7, 9)
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=m)  # noqa: E731
    out = ember.compile(fn)(q, k, v)
    grads = torch.autograd.grad(out.square().sum(), (q, k, v))
    want = fn(q, k, v)
    want_grads = torch.autograd.grad(want.square().sum(), (q, k, v))
    assert not out.isnan().any() and all(not g.isnan().any() for g in grads)
    torch.testing.assert_close(out, want)
    for g, w in zip(grads, want_grads):
        torch.testing.assert_close(g, w)
