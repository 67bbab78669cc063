"""Roundings in registers (docs/scheduler.md, "Rounding"): a float16/bfloat16 value recomputed inside
a kernel is rounded to its dtype there (a cast to bf16/f16 read by a cast back to f32), as the buffer
it replaces would hold it. Vector code spells the pair ev::round_bf16 / ev::round_f16 (vec_convert.h)
with the bits of the scalar conversions on every ISA, and a compiled chain of low-precision
arithmetic gives eager's bits: each op rounds where eager's does."""

import pytest
import torch

from cpp_harness import ISA_ORDER, Program, compile_loop, needs_cxx, skip_unless_this_cpu_runs

pytestmark = needs_cxx

HALF = {"bf16": torch.bfloat16, "f16": torch.float16}


def rounding_program(dt, rows, n):
    """out = float(dt(x * y)) + z: the product rounded in registers, then an f32 add."""
    p = Program(f"round_{dt}")
    x = p.buffer(f"f32[{rows}, {n}]{{{n}, 1}} input 0")
    y = p.buffer(f"f32[{rows}, {n}]{{{n}, 1}} input 1")
    z = p.buffer(f"f32[{rows}, {n}]{{{n}, 1}} input 2")
    out = p.output(f"f32[{rows}, {n}]{{{n}, 1}}")
    p.kernel(f"@k0 [i0 < {rows}]")
    p.loop(f"[r0 < {n}]")
    product = p.node(f"mul {p.node(f'load {x}[i0, r0] : f32')}, {p.node(f'load {y}[i0, r0] : f32')} : f32")
    rounded = p.node(f"cast {p.node(f'cast {product} : {dt}')} : f32")
    p.store(out, "i0, r0", p.node(f"add {rounded}, {p.node(f'load {z}[i0, r0] : f32')} : f32"))
    p.end()
    p.end()
    return p.text()


def special_products(rows, n):
    """x * y over random values and the cases of the rounding: ties to even either way, overflow to
    infinity, subnormals of both formats, NaN, infinities and signed zeros."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, n, generator=g) * 4
    special = [1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-9, 65520.0, 65519.0, 3.4e38, 2**-130,
               2**-20, 2**-25, 6e-8, float("nan"), float("inf"), float("-inf"), -0.0, 0.0, -(1 + 2**-8), 1e-45]
    x.view(-1)[:len(special)] = torch.tensor(special)
    y = torch.ones(rows, n)
    y.view(-1)[len(special):] = torch.randn(rows * n - len(special), generator=g)
    return x, y


@pytest.mark.parametrize("isa", ISA_ORDER)
@pytest.mark.parametrize("dt", list(HALF))
def test_rounding_in_registers_is_vector_code_with_the_conversions_bits(cache_dir, isa, dt):
    rows, n = 3, 37  # full vectors, then a masked tail on every layer
    prog = compile_loop(rounding_program(dt, rows, n), cache_dir, isa=isa)
    assert "vector over r0" in prog.source and f"ev::round_{dt}(" in prog.source
    skip_unless_this_cpu_runs(isa)
    x, y = special_products(rows, n)
    z = torch.zeros(rows, n)
    z[1:] = torch.randn(rows - 1, n)
    got = prog.run([x, y, z])[0]
    want = (x * y).to(HALF[dt]).float() + z
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def _chain(a, b, c):
    t = a * b + c
    u = t / (b.abs() + 1)
    return u - a * t


@pytest.mark.parametrize("dtype", list(HALF.values()), ids=list(HALF))
def test_low_precision_chain_gives_eagers_bits(compiled_source, dtype):
    # Every op of the chain is correctly rounded in float32 and then rounded to the dtype, in eager and
    # in the one fused kernel alike; unrounded intermediates would differ in the last bits.
    g = torch.Generator().manual_seed(1)
    a, b, c = (torch.randn(4, 75, generator=g).to(dtype) for _ in range(3))
    got, source = compiled_source(_chain, a, b, c)
    assert torch.equal(got, _chain(a, b, c))
    assert source.count("kernel @") == 1 or source.count("void kernel") <= 1, source
    assert f"ev::round_{'bf16' if dtype == torch.bfloat16 else 'f16'}(" in source


def _compare_with_reduction(x):
    t = torch.tanh(x)
    m = t.amin(dim=-1, keepdim=True)
    return torch.where(m - t >= 0, 1.0, 0.0), (t == t.amax(dim=-1, keepdim=True)).sum(-1)


@pytest.mark.parametrize("dtype", list(HALF.values()), ids=list(HALF))
def test_reduction_result_agrees_with_its_recomputed_operand(compiled_source, dtype):
    # Fuzz seed 20693: the reduction's stored (rounded) result compared with its operand recomputed in the
    # next kernel: each row's minimum and maximum are found by ==, as in eager.
    x = torch.randn(16, 40, dtype=dtype)
    got, _ = compiled_source(_compare_with_reduction, x)
    want = _compare_with_reduction(x)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert int(got[0].sum()) >= 16 and bool((got[1] >= 1).all())
