"""Converting loads (ev::load_float, vec_convert.h): a load of an integer or bool buffer whose
users are casts to f32 vectorizes on every vector layer with the bits of static_cast<float> —
values near 2^24, 2^31 and 2^63, negative ones, masked tails — and the BERT padding-mask softmax
that motivated it runs vector code."""

import pytest
import torch


from cpp_harness import ISA_ORDER, Program, compile_loop, needs_cxx, skip_unless_this_cpu_runs

pytestmark = needs_cxx

ISA_ORDER = ["scalar", "avx2", "avx512"]
DTYPES = {"i64": torch.int64, "i32": torch.int32, "i16": torch.int16, "i8": torch.int8, "u8": torch.uint8,
          "b8": torch.bool}


def convert_program(dt, rows, n):
    """out0 = float(x) + y (contiguous, a masked tail when n % lanes != 0); out1 = float(x[i0, 0]) * y
    (one element per row, broadcast)."""
    p = Program(f"convert_{dt}")
    x = p.buffer(f"{dt}[{rows}, {n}]{{{n}, 1}} input 0")
    y = p.buffer(f"f32[{rows}, {n}]{{{n}, 1}} input 1")
    out = p.output(f"f32[{rows}, {n}]{{{n}, 1}}")
    out_b = p.output(f"f32[{rows}, {n}]{{{n}, 1}}")
    p.kernel(f"@k0 [i0 < {rows}]")
    p.loop(f"[r0 < {n}]")
    yv = p.node(f"load {y}[i0, r0] : f32")
    row = p.node(f"cast {p.node(f'load {x}[i0, r0] : {dt}')} : f32")
    p.store(out, "i0, r0", p.node(f"add {row}, {yv} : f32"))
    first = p.node(f"cast {p.node(f'load {x}[i0, 0] : {dt}')} : f32")
    p.store(out_b, "i0, r0", p.node(f"mul {first}, {yv} : f32"))
    p.end()
    p.end()
    return p.text()


def values(dt, rows, n):
    if dt == "b8":
        return torch.arange(rows * n).reshape(rows, n) % 3 == 0
    info = torch.iinfo(DTYPES[dt])
    g = torch.Generator().manual_seed(0)
    x = torch.randint(info.min, info.max, (rows, n), generator=g, dtype=DTYPES[dt])
    if dt == "i64":
        # Rounding cases of the float conversion: ties to even past 2^24, near 2^31 and the ends.
        special = [2**24 + 1, 2**24 + 3, -(2**24 + 1), 2**31 - 1, 2**31, -(2**31) - 1, 2**53 + 1,
                   2**62 + 2**38 + 1, info.max, info.min, -1, 0, 1, 16777217 * 3]
        x.view(-1)[:len(special)] = torch.tensor(special)
    elif dt == "i32":
        x.view(-1)[:6] = torch.tensor([2**24 + 1, 2**24 + 3, info.max, info.min, -(2**24 + 1), 0], dtype=torch.int32)
    return x


@pytest.mark.parametrize("isa", ISA_ORDER)
@pytest.mark.parametrize("dt", list(DTYPES))
def test_converting_loads_give_static_cast_bits_on_every_isa(cache_dir, isa, dt):
    rows, n = 3, 37  # 37: full vectors then a masked tail on every layer
    prog = compile_loop(convert_program(dt, rows, n), cache_dir, isa=isa)
    assert "vector over r0" in prog.source and "ev::load_float(" in prog.source
    skip_unless_this_cpu_runs(isa)
    x, y = values(dt, rows, n), torch.randn(rows, n)
    got, got_b = prog.run([x, y])
    assert torch.equal(got, x.float() + y)
    assert torch.equal(got_b, x[:, :1].float() * y)


def test_an_integer_load_used_as_an_integer_stays_scalar(cache_dir):
    """A load whose value feeds integer arithmetic is no converting load: int64 values of unknown
    range have no vector lanes."""
    p = Program("int_use")
    x = p.buffer("i64[2, 19]{19, 1} input 0")
    out = p.output("f32[2, 19]{19, 1}")
    p.kernel("@k0 [i0 < 2]")
    p.loop("[r0 < 19]")
    t0 = p.node(f"load {x}[i0, r0] : i64")
    t1 = p.node(f"add {t0}, {p.node('constant 1 : i64')} : i64")
    p.store(out, "i0, r0", p.node(f"cast {t1} : f32"))
    p.end()
    p.end()
    prog = compile_loop(p.text(), cache_dir)
    assert "scalar (%t0 loads from i64 buffer %p0)" in prog.source
    x = torch.tensor([[2**40 + 7] * 19, [-3] * 19])
    assert torch.equal(prog.run([x])[0], (x + 1).float())


def _padding_mask_softmax(scores, mask):
    extended = (1.0 - mask[:, None, None, :].to(scores.dtype)) * torch.finfo(scores.dtype).min
    return torch.softmax(scores + extended, dim=-1)


def test_padding_mask_softmax_is_vector_code_and_matches_eager(compiled_source):
    scores = torch.randn(2, 3, 5, 37)
    mask = torch.ones(2, 37, dtype=torch.int64)
    mask[0, 30:] = 0
    mask[1, 11:] = 0
    got, source = compiled_source(_padding_mask_softmax, scores, mask)
    torch.testing.assert_close(got, _padding_mask_softmax(scores, mask))
    assert "ev::load_float(" in source and "loads from i64" not in source


@pytest.mark.parametrize("isa", ISA_ORDER)
def test_exp_far_below_range_is_zero_on_every_isa(cache_dir, isa):
    """exp of lanes below -104 (a padding mask's finfo.min) is +0 without the subnormal detour that
    made them slow; lanes near the subnormal range keep their values."""
    p = Program("exp_low")
    x = p.buffer("f32[1, 37]{37, 1} input 0")
    out = p.output("f32[1, 37]{37, 1}")
    p.kernel("@k0 [i0 < 1]")
    p.loop("[r0 < 37]")
    p.store(out, "i0, r0", p.node(f"exp {p.node(f'load {x}[i0, r0] : f32')} : f32"))
    p.end()
    p.end()
    prog = compile_loop(p.text(), cache_dir, isa=isa)
    skip_unless_this_cpu_runs(isa)
    x = torch.tensor([[-3.4028234663852886e38, -1e10, -104.5, -104.0, -103.9, -100.0, -90.0, -87.0, 0.0,
                       float("nan"), float("-inf")] * 3 + [-3e38] * 4])
    got = prog.run([x])[0]
    torch.testing.assert_close(got, torch.exp(x), rtol=4e-7, atol=0, equal_nan=True)
    assert torch.equal(got[x < -104], torch.zeros_like(got[x < -104]))
