"""Transposing pointwise kernels (docs/codegen-cpp.md, "Tiled transposes"): a residual add that reads
one operand transposed (MLP-Mixer, ConvNeXt) runs in kSize x kSize tiles transposed in registers, and
a ViT's `transpose(1, 2).reshape` reads each vector contiguously within its aligned chunk. Results
equal eager's bit for bit (the same additions), with row and column tails, on every vector layer."""
import pytest
import torch


from cpp_harness import ISA_ORDER, Program, compile_loop, needs_cxx, skip_unless_this_cpu_runs

def _add_transposed(x, y):
    return x + y.transpose(-1, -2)


def _add_channels_last(x, y, scale):
    """ConvNeXt's residual: NCHW shortcut + layer scale * the NHWC branch permuted back."""
    return x + (y * scale).permute(0, 3, 1, 2)


def _merge_heads(q):
    """ViT's `(attn @ v).transpose(1, 2).reshape(B, N, C)`."""
    b, h, n, d = q.shape
    return q.transpose(1, 2).reshape(b, n, h * d) + 1.0


@pytest.mark.parametrize("shape", [(3, 37, 45), (2, 16, 32), (1, 5, 3), (40, 7)])
def test_transposed_add_is_tiled_and_exact(shape, compiled_source):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=g)
    y = torch.randn(*shape[:-2], shape[-1], shape[-2], generator=g)
    out, source = compiled_source(_add_transposed, x, y)
    assert torch.equal(out, _add_transposed(x, y))
    assert "in transposed tiles of" in source, source[:3000]


def test_channels_last_residual_is_tiled_and_exact(compiled_source):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 20, 5, 7, generator=g)
    y = torch.randn(2, 5, 7, 20, generator=g)
    scale = torch.randn(20, generator=g)
    out, source = compiled_source(_add_channels_last, x, y, scale)
    torch.testing.assert_close(out, _add_channels_last(x, y, scale), rtol=0, atol=0)
    assert "in transposed tiles of" in source, source[:3000]


@pytest.mark.parametrize("d,chunked", [(32, True), (24, False), (4, False)])
def test_merged_heads_vectorize(d, chunked, compiled_source):
    """Heads of a multiple of 16 elements: each vector loads contiguously within its chunk; others
    (a chunk crosses heads) load lane by lane and stay vector code (docs/codegen-cpp.md)."""
    q = torch.randn(2, 3, 11, d, generator=torch.Generator().manual_seed(2))
    out, source = compiled_source(_merge_heads, q)
    assert torch.equal(out, _merge_heads(q))
    assert "pointwise: vector over i2" in source, source[:3000]
    assert ("t0_lanes[l] = [&](const int64_t i2)" not in source) == chunked, source[:3000]


def transpose_program(rows, cols):
    """out[i0, i1] = x[i1, i0] * 2 + y[i0, i1]: one transposed load, one contiguous."""
    p = Program("transpose")
    x = p.buffer(f"f32[{cols}, {rows}]{{{rows}, 1}} input 0")
    y = p.buffer(f"f32[{rows}, {cols}]{{{cols}, 1}} input 1")
    out = p.output(f"f32[{rows}, {cols}]{{{cols}, 1}}")
    p.kernel(f"@k0 [i0 < {rows}, i1 < {cols}]")
    p.loop()
    a = p.node(f"load {x}[i1, i0] : f32")
    b = p.node(f"load {y}[i0, i1] : f32")
    two = p.node("constant 2.0 : f32")
    p.store(out, "i0, i1", p.node(f"add {p.node(f'mul {a}, {two} : f32')}, {b} : f32"))
    p.end()
    p.end()
    return p.text()


@needs_cxx
@pytest.mark.parametrize("isa", ISA_ORDER)
@pytest.mark.parametrize("rows,cols", [(35, 50), (16, 16), (3, 9)])
def test_tiles_on_every_isa(cache_dir, isa, rows, cols):
    prog = compile_loop(transpose_program(rows, cols), cache_dir, isa=isa)
    assert "ev::transpose(" in prog.source
    skip_unless_this_cpu_runs(isa)
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(cols, rows, generator=g), torch.randn(rows, cols, generator=g)
    (got,) = prog.run([x, y])
    assert torch.equal(got, x.t() * 2 + y)
