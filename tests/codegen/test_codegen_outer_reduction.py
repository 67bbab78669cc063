"""Outer reductions (docs/codegen-cpp.md, "Outer reductions"): a reduction over a non-innermost
dimension (LayerNorm over the channels of NCHW, mean over dim 1, column max) is vectorized along the
contiguous outer dimension, each lane reducing its own output; values match eager on sizes with
tails, size 1, sliced and permuted inputs, on every vector layer."""
import pytest
import torch
import torch.nn.functional as F

import ember

from cpp_harness import ISA_ORDER, Program, compile_loop, needs_cxx, skip_unless_this_cpu_runs

def _channel_layer_norm(x, w, b):
    """ConvNeXt's LayerNorm over the channels of an NCHW tensor (a permuted view)."""
    return F.layer_norm(x.permute(0, 2, 3, 1), (x.shape[1],), w, b, 1e-6).permute(0, 3, 1, 2) * 2.0


def _channel_layer_norm_nhwc(x, w, b):
    """The same LayerNorm returning its NHWC result: the loads walk the points contiguously, the
    stores have stride C (lane by lane)."""
    return F.layer_norm(x.permute(0, 2, 3, 1), (x.shape[1],), w, b, 1e-6)


def _mean_dim1(x):
    return x.mean(1)


def _var_dim1(x):
    return x.var(1)


def _amax_dim1(x):
    return x.amax(1)


def _sum_dim0(x):
    return x.sum(0) + 1.0


def _center_dim1(x):
    """A reduction and a later loop that uses it lane by lane."""
    return x - x.mean(1, keepdim=True)


def _close_to_eager(fn, args, got):
    """The fp64-reference rule: Ember's error <= 2x eager's + 1e-6."""
    want = fn(*args)
    ref = fn(*(a.double() for a in args))
    err_ember = (got.double() - ref).abs().max().item()
    err_eager = (want.double() - ref).abs().max().item()
    assert err_ember <= 2 * err_eager + 1e-6, (err_ember, err_eager)


@pytest.mark.parametrize("fn", [_channel_layer_norm, _channel_layer_norm_nhwc])
@pytest.mark.parametrize("shape", [(2, 12, 5, 7), (3, 5, 1, 1), (1, 1, 3, 17), (2, 40, 3, 11)])
def test_channel_layer_norm_vectorizes_and_matches(fn, shape, compiled_source):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=g) * 3 + 1
    w, b = torch.randn(shape[1], generator=g), torch.randn(shape[1], generator=g)
    out, source = compiled_source(fn, x, w, b)
    _close_to_eager(fn, (x, w, b), out)
    if shape[1] > 1 and shape[2] * shape[3] > 1:
        assert "outer reduction: vector over" in source, source[:4000]


def _dim1_all(x):
    """Every reduction kind over dim 1 in one graph (one compile)."""
    return _mean_dim1(x), _var_dim1(x), _amax_dim1(x), _center_dim1(x)


def _close_each(fn, args, got):
    for k, g in enumerate(got):
        _close_to_eager(lambda *a: fn(*a)[k], args, g)


@pytest.mark.parametrize("shape", [(4, 9, 37), (1, 3, 1), (5, 200, 3)])
def test_reductions_over_dim1_match(shape, compiled_source):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1)) + 2
    out, source = compiled_source(_dim1_all, x)
    _close_each(_dim1_all, (x,), out)
    if shape[2] > 1:
        assert "outer reduction: vector over" in source, source[:4000]


@pytest.mark.parametrize("view", ["slice", "permute", "offset"])
def test_non_contiguous_inputs_match(view, compiled_source):
    base = torch.randn(3, 11, 8, 21, generator=torch.Generator().manual_seed(2))
    x = {"slice": base[:, :, :, ::2], "permute": base.permute(0, 3, 1, 2), "offset": base[1:, 2:, 3:, 4:]}[view]
    out, _ = compiled_source(_dim1_all, x)
    _close_each(_dim1_all, (x,), out)


def test_long_sums_stay_accurate(compiled_source):
    """Past 128 elements per lane a float sum would lose to eager's cascade: those loops stay scalar
    (double accumulators), max reductions of any length stay vector."""
    x = torch.rand(3000, 37, generator=torch.Generator().manual_seed(3))
    out, source = compiled_source(_sum_dim0, x)
    _close_to_eager(_sum_dim0, (x,), out)
    assert "outer reduction" not in source
    out, source = compiled_source(_amax_dim1, x.reshape(1, 3000, 37))
    assert torch.equal(out, _amax_dim1(x.reshape(1, 3000, 37)))
    assert "outer reduction: vector over" in source


def channel_norm_program(n, c, hw):
    """out = (x - mean_c) * rsqrt(var_c + eps) per (n, hw), the channel stride hw: a Welford loop and
    an epilogue loop over r0 < c, both strided along r0."""
    p = Program("channel_norm")
    x = p.buffer(f"f32[{n}, {c}, {hw}]{{{c * hw}, {hw}, 1}} input 0")
    out = p.output(f"f32[{n}, {c}, {hw}]{{{c * hw}, {hw}, 1}}")
    p.kernel(f"@k0 [i0 < {n}, i1 < {hw}]")
    p.loop(f"[r0 < {c}]")
    v = p.node(f"load {x}[i0, r0, i1] : f32")
    mean = p.node(f"welford_mean {v} : f32")
    m2 = p.node(f"welford_m2 {v} : f32")
    p.end()
    p.loop(f"[r0 < {c}]")
    v2 = p.node(f"load {x}[i0, r0, i1] : f32")
    count = p.node(f"constant {c}.0 : f32")
    var = p.node(f"div {m2}, {count} : f32")
    eps = p.node("constant 1e-05 : f32")
    inv = p.node(f"rsqrt {p.node(f'add {var}, {eps} : f32')} : f32")
    centered = p.node(f"sub {v2}, {mean} : f32")
    p.store(out, "i0, r0, i1", p.node(f"mul {centered}, {inv} : f32"))
    p.end()
    p.end()
    return p.text()


@needs_cxx
@pytest.mark.parametrize("isa", ISA_ORDER)
@pytest.mark.parametrize("c,hw", [(96, 37), (1, 3), (40, 1)])
def test_outer_welford_on_every_isa(cache_dir, isa, c, hw):
    prog = compile_loop(channel_norm_program(2, c, hw), cache_dir, isa=isa)
    if hw > 1:
        assert "outer reduction: vector over i1" in prog.source
    skip_unless_this_cpu_runs(isa)
    x = torch.randn(2, c, hw, generator=torch.Generator().manual_seed(4)) * 2 + 5
    (got,) = prog.run([x])
    want = (x - x.mean(1, keepdim=True)) * torch.rsqrt(x.var(1, unbiased=False, keepdim=True) + 1e-5)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def _var_two_ranges(x):
    return x.var((0, 2), unbiased=False)


def test_inner_welford_under_an_enclosing_range(compiled_source):
    """BatchNorm's statistics: loop [r0 < 3, r1 < 70], vector over r1 with four Welford accumulators
    that carry on across r0 (their count is not the step's number: no reciprocal there)."""
    x = torch.randn(3, 5, 70, generator=torch.Generator().manual_seed(5)) * 2 + 3
    out, source = compiled_source(_var_two_ranges, x)
    _close_to_eager(_var_two_ranges, (x,), out)
    assert "vector over r1" in source and "wf_inv" not in source


def _two_channel_layer_norms(x, w, b):
    """Swin's patch embedding norm then its first block's norm, both over the channels of the NHWC
    view: one outer-reduction kernel with two unrolled Welford loops (each its own step variable)."""
    y = F.layer_norm(x.permute(0, 2, 3, 1), (x.shape[1],), w, b)
    return F.layer_norm(y, (x.shape[1],), b, w)


def test_two_unrolled_outer_loops_compile(compiled_source):
    g = torch.Generator().manual_seed(6)
    x = torch.randn(1, 24, 4, 8, generator=g)
    w, b = torch.randn(24, generator=g), torch.randn(24, generator=g)
    out, source = compiled_source(_two_channel_layer_norms, x, w, b)
    _close_to_eager(_two_channel_layer_norms, (x, w, b), out)
    assert "outer reduction: vector over" in source and source.count("int64_t r0_u = 0;") >= 2, source[:4000]
    assert ember.stats()["codegen_failures"] == 0
