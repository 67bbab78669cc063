"""Integer index values in vector code (ev::VecI, int32 lanes): the bits of the scalar int64
arithmetic on every vector layer, scalar code where a value may leave int32, and the causal-mask
softmax that motivated them."""
import pytest
import torch

import ember

from cpp_harness import ISA_ORDER, Program, compile_loop, needs_cxx, skip_unless_this_cpu_runs

pytestmark = needs_cxx

def index_program(rows, n, big):
    """Every integer op with int32 lanes, compares, where on integers and masks, casts; `big` the
    coefficient of a second index whose float conversion rounds."""
    p = Program("iota")
    x = p.buffer(f"f32[{rows}, {n}]{{{n}, 1}} input 0")
    out = p.output(f"f32[{rows}, {n}]{{{n}, 1}}")
    out_big = p.output(f"f32[{rows}, {n}]{{{n}, 1}}")
    p.kernel(f"@k0 [i0 < {rows}]")
    p.loop(f"[r0 < {n}]")
    t0 = p.node("index 3*r0 + i0 : i64")
    two = p.node("constant 2 : i64")
    t3 = p.node(f"sub {p.node(f'mul {t0}, {two} : i64')}, {two} : i64")
    t5 = p.node(f"abs {p.node(f'neg {t3} : i64')} : i64")
    t7 = p.node(f"minimum {p.node(f'maximum {t5}, {two} : i64')}, {t0} : i64")
    t8 = p.node(f"add {t7}, {two} : i64")
    t11 = p.node(f"eq {p.node(f'cast {t8} : i32')}, {p.node('constant 7 : i32')} : b8")
    t12 = p.node(f"ne {t0}, {two} : b8")
    t13, t14, t15 = (p.node(f"{op} {t0}, {t8} : b8") for op in ("lt", "le", "ge"))
    t18 = p.node(f"add {p.node(f'where {t13}, {t0}, {t8} : i64')}, {p.node(f'cast {t14} : i64')} : i64")
    t20 = p.node(f"logical_and {p.node(f'cast {t18} : b8')}, {t11} : b8")
    t22 = p.node(f"cast {p.node(f'where {t15}, {t20}, {t12} : b8')} : f32")
    nonzero = p.node(f"cast {p.node(f'load {x}[i0, r0] : f32')} : b8")
    p.store(out, "i0, r0", p.node(f"where {nonzero}, {t22}, {p.node(f'cast {t18} : f32')} : f32"))
    wide = p.node(f"index {big}*r0 + i0 : i64")
    p.store(out_big, "i0, r0", p.node(f"cast {wide} : f32"))
    p.end()
    p.end()
    return p.text()


def reference(x, big):
    rows, n = x.shape
    t0 = 3 * torch.arange(n).view(1, n) + torch.arange(rows).view(rows, 1)
    t3 = t0 * 2 - 2
    t7 = torch.minimum(torch.maximum((-t3).abs(), torch.tensor(2)), t0)
    t8 = t7 + 2
    t11 = t8.to(torch.int32) == 7
    t18 = torch.where(t0 < t8, t0, t8) + (t0 <= t8).long()
    t21 = torch.where(t0 >= t8, t18.bool() & t11, t0 != 2)
    out = torch.where(x.bool(), t21.float(), t18.float())
    wide = big * torch.arange(n).view(1, n) + torch.arange(rows).view(rows, 1)
    return out, wide.float()


@pytest.mark.parametrize("isa", ISA_ORDER)
def test_int32_lanes_give_the_int64_results_on_every_isa(cache_dir, isa):
    rows, n, big = 5, 19, 50_000_017  # 19: a masked tail; big * (18 + 15) still fits in int32
    prog = compile_loop(index_program(rows, n, big), cache_dir, isa=isa)
    assert "vector over r0" in prog.source and "ev::VecI::iota" in prog.source
    skip_unless_this_cpu_runs(isa)
    x = torch.randn(rows, n)
    x[:, ::3] = 0.0
    got, got_big = prog.run([x])
    ref, ref_big = reference(x, big)
    assert torch.equal(got, ref)
    assert torch.equal(got_big, ref_big)


def test_a_value_that_may_leave_int32_keeps_its_loop_scalar(cache_dir):
    rows, n, big = 3, 19, 70_000_003  # big * (18 + 15) > 2^31: a masked tail's lanes would wrap
    prog = compile_loop(index_program(rows, n, big), cache_dir)
    assert "not proven to fit in int32" in prog.source
    x = torch.randn(rows, n)
    got, got_big = prog.run([x])
    ref, ref_big = reference(x, big)
    assert torch.equal(got, ref)
    assert torch.equal(got_big, ref_big)


def _masked_softmax(x):
    n = x.shape[-1]
    return torch.softmax(x.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf")), -1)


def _tril_mul(x):
    return x * torch.tril(torch.ones(x.shape[-2], x.shape[-1]))


@pytest.mark.parametrize("fn", [_masked_softmax, _tril_mul])
@pytest.mark.parametrize("shape", [(2, 37, 37), (1, 64, 64)])
def test_causal_masks_compiled_match_eager(fn, shape):
    ember.reset()
    x = torch.randn(*shape)
    torch.testing.assert_close(ember.compile(fn)(x), fn(x), rtol=1e-6, atol=1e-6)
