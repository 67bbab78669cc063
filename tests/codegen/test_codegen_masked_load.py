"""Masked loads in vector code (docs/codegen-cpp.md, "Masked loads"): a cat's inputs are f32 loads under
a mask along the vectorized variable; vector code loads only the mask's lanes (VecF::load(p, MaskF)), so the
lanes outside a part, whose addresses lie before or past its buffer, are never read. Chunks that straddle
a boundary, tails and every vector layer give eager's bits. nanoGPT's backward assembles the q/k/v
gradients ([B, H, T, d] each) into [B, T, 3C] this way, and LLaMA's rotary embedding (its backward too)
indexes its halves at `i % d +- d/2`, which steps by one within each aligned chunk."""
import pytest
import torch

import ember

from cpp_harness import ISA_ORDER, Program, compile_loop, needs_cxx, skip_unless_this_cpu_runs

def _cat3(a, b, c):
    return torch.cat([a, b, c], dim=-1)


def _qkv_grads(q, k, v):
    """The backward of `q, k, v = qkv.split(C, 2)` then `.view(B, T, H, d).transpose(1, 2)` each."""
    b, h, t, d = q.shape
    return torch.cat([x.transpose(1, 2).reshape(b, t, h * d) for x in (q, k, v)], dim=-1)


@pytest.mark.parametrize("widths", [(5, 14, 3), (16, 32, 16), (1, 1, 40)])
def test_cat_vectorizes_and_is_exact(widths, compiled_source):
    g = torch.Generator().manual_seed(0)
    parts = [torch.randn(3, 7, w, generator=g) for w in widths]
    out, source = compiled_source(_cat3, *parts)
    assert torch.equal(out, _cat3(*parts))
    assert "pointwise: vector over" in source, source[:3000]
    assert "is a masked load" not in source, source[:3000]


def _rotary(q, cos, sin):
    """transformers' apply_rotary_pos_emb: rotate_half cats a tuple, `torch.cat((-x2, x1), dim=-1)`."""
    half = q.shape[-1] // 2
    return q * cos + torch.cat((-q[..., half:], q[..., :half]), dim=-1) * sin


def test_rotary_embedding_with_a_tuple_cat_is_one_vector_kernel(compiled_source):
    """A cat of a tuple lowers as a cat of a list (canonicalize makes it one): the rotary embedding is one
    kernel; it was the negation, an extern torch.cat and the rest (three passes over q in LLaMA's forward)."""
    g = torch.Generator().manual_seed(2)
    q = torch.randn(2, 4, 9, 32, generator=g)
    cos, sin = (torch.randn(1, 1, 9, 32, generator=g) for _ in range(2))
    out, source = compiled_source(_rotary, q, cos, sin)
    torch.testing.assert_close(out, _rotary(q, cos, sin))
    assert "pointwise: vector over" in source, source[:3000]
    explained = ember.explain(_rotary)(q, cos, sin)
    assert explained.kernel_counts == [1] and "torch.cat" not in source, explained


def test_qkv_gradient_assembly_vectorizes(compiled_source):
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 4, 9, 32, generator=g) for _ in range(3))
    out, source = compiled_source(_qkv_grads, q, k, v)
    assert torch.equal(out, _qkv_grads(q, k, v))
    assert "pointwise: vector over" in source, source[:3000]


def _rotary_merged(x, cos, sin):
    """LLaMA's rotary embedding, then its heads merged: out[b, t, h*d + j] reads x at j +- d/2 under a
    mask, at index `i2 % d` along the vectorized variable (chunk-contiguous for d = 32)."""
    b, h, t, d = x.shape
    rot = torch.cat((-x[..., d // 2:], x[..., : d // 2]), dim=-1)
    return (x * cos + rot * sin).transpose(1, 2).reshape(b, t, h * d)


def test_rotary_index_vectorizes_within_chunks(compiled_source):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 3, 9, 32, generator=g)
    cos, sin = torch.randn(9, 32, generator=g), torch.randn(9, 32, generator=g)
    out, source = compiled_source(_rotary_merged, x, cos, sin)
    assert torch.equal(out, _rotary_merged(x, cos, sin))
    assert "not affine in" not in source and "is a masked load" not in source, source[:4000]


def cat_program(rows, first, second):
    """out[i0, i1] = x[i0, i1] where i1 < first, else y[i0, i1 - first] * 2: each masked off past its part."""
    cols = first + second
    p = Program("cat")
    x = p.buffer(f"f32[{rows}, {first}]{{{first}, 1}} input 0")
    y = p.buffer(f"f32[{rows}, {second}]{{{second}, 1}} input 1")
    out = p.output(f"f32[{rows}, {cols}]{{{cols}, 1}}")
    p.kernel(f"@k0 [i0 < {rows}, i1 < {cols}]")
    p.loop()
    i = p.node("index i1 : i64")
    bound = p.node(f"constant {first} : i64")
    lo = p.node(f"lt {i}, {bound} : b8")
    a = p.node(f"load {x}[i0, i1] if {lo} else 0.0 : f32")
    hi = p.node(f"ge {i}, {bound} : b8")
    b = p.node(f"load {y}[i0, i1 + -{first}] if {hi} else 0.0 : f32")
    two = p.node("constant 2.0 : f32")
    p.store(out, "i0, i1", p.node(f"where {lo}, {a}, {p.node(f'mul {b}, {two} : f32')} : f32"))
    p.end()
    p.end()
    return p.text()


@needs_cxx
@pytest.mark.parametrize("isa", ISA_ORDER)
@pytest.mark.parametrize("rows,first,second", [(3, 5, 14), (4, 1, 3)])
def test_masked_loads_on_every_isa(cache_dir, isa, rows, first, second):
    prog = compile_loop(cat_program(rows, first, second), cache_dir, isa=isa)
    assert "ev::where(" in prog.source and "is a masked load" not in prog.source, prog.source
    skip_unless_this_cpu_runs(isa)
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(rows, first, generator=g), torch.randn(rows, second, generator=g)
    (got,) = prog.run([x, y])
    assert torch.equal(got, torch.cat([x, y * 2], dim=1))
