"""Generated C++ for pointwise kernels against torch: every scalar op in vector and scalar code,
special values, integer and bool and 16-bit float buffers, broadcasting, strided and offset inputs,
an output that is a view of an input, OpenMP on and off."""
import pytest
import torch

from cpp_harness import Program, compile_loop, needs_cxx

pytestmark = needs_cxx

SPECIALS = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1e-30, -1e-40, 88.7, -104.0, 0.5, 1.5, 2.5,
            -0.5, -2.5, 1.0, -1.0]


def values(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.cat([torch.tensor(SPECIALS), torch.randn(n, generator=g) * 3, torch.rand(n, generator=g) * 40 - 20])
    return x[:n].contiguous()


UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "log1p": torch.log1p,
    "expm1": torch.expm1, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "erf": torch.erf, "reciprocal": torch.reciprocal,
    "relu": torch.relu, "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc, "round": torch.round,
    "sign": torch.sign,
}


def unary_program(n, stride):
    p = Program("unary")
    x = p.buffer(f"f32[{n}]{{{stride}}} input 0")
    outs = [p.output(f"f32[{n}]{{{stride}}}") for _ in UNARY]  # strided stores keep the kernel scalar
    p.kernel(f"@k0 [i0 < {n}]")
    p.loop()
    v = p.node(f"load {x}[i0] : f32")
    for op, out in zip(UNARY, outs):
        p.store(out, "i0", p.node(f"{op} {v} : f32"))
    p.end()
    p.end()
    return p.text()


def close(actual, expected, **kw):
    torch.testing.assert_close(actual, expected, equal_nan=True, **kw)


@pytest.mark.parametrize("stride", [1, 2], ids=["vector", "scalar"])
def test_every_unary_op(cache_dir, stride):
    n = 45  # whole vectors and a tail for 8 and 16 lanes
    prog = compile_loop(unary_program(n, stride), cache_dir)
    expect = "vector over i0" if stride == 1 else "scalar (%t2 stores to %p1 with stride 2 along i0)"
    assert expect in prog.source
    x = values(n, 0)
    arg = torch.empty(n * stride)[::stride] if stride > 1 else torch.empty(n)
    arg.copy_(x)
    outs = prog.run([arg])
    for (op, fn), out in zip(UNARY.items(), outs):
        # ember::vec is within 2 ulp of libm; torch's own kernels within 1: a few float32 ulp apart.
        close(out, fn(x), rtol=3e-6, atol=1e-30, msg=lambda m, op=op: f"{op}: {m}")


def test_round_is_half_to_even_and_max_min_propagate_nan(cache_dir):
    n = 19
    p = Program("nan_rules")
    a = p.buffer(f"f32[{n}]{{1}} input 0")
    b = p.buffer(f"f32[{n}]{{1}} input 1")
    o_round, o_max, o_min = (p.output(f"f32[{n}]{{1}}") for _ in range(3))
    s_max, s_min = (p.output(f"f32[{n}]{{1}}") for _ in range(2))
    p.kernel(f"@k0 [i0 < {n}]")
    p.loop()
    va, vb = p.node(f"load {a}[i0] : f32"), p.node(f"load {b}[i0] : f32")
    p.store(o_round, "i0", p.node(f"round {va} : f32"))
    p.store(o_max, "i0", p.node(f"maximum {va}, {vb} : f32"))
    p.store(o_min, "i0", p.node(f"minimum {va}, {vb} : f32"))
    p.end()
    p.end()
    # The same ops in scalar code: a kernel over a transposed walk of a [19, 1] view.
    p.kernel(f"@k1 [i0 < 1, i1 < {n}]")
    p.loop()
    va, vb = p.node(f"load {a}[i0 + i1] : f32"), p.node(f"load {b}[i1] : f32")
    idx = p.node(f"index i1 // 2 : i64")  # an index not affine in i1 keeps the kernel scalar
    p.store(s_max, "i1", p.node(f"maximum {va}, {vb} : f32"))
    p.store(s_min, "i1", p.node(f"minimum {va}, {vb} : f32"))
    p.end()
    p.end()
    prog = compile_loop(p.text(), cache_dir)
    assert "scalar (%t" in prog.source and "integer index not affine" in prog.source
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 3.5, float("nan"), 1.0, float("nan"), -float("inf"), 4.5,
                      -3.5, 0.49999997, 7.0, float("inf"), 2.0, 5.5, -5.5, 1e10])
    y = torch.tensor([1.0, float("nan"), 0.0, float("nan"), 2.0, -1.0, 1.0, float("nan"), float("nan"), 0.0, 4.0,
                      float("inf"), 0.0, -7.0, 1.0, 3.0, 5.5, 6.0, -1e10])
    rnd, mx, mn, smx, smn = prog.run([x, y])
    assert torch.equal(rnd[~rnd.isnan()], torch.round(x)[~rnd.isnan()])
    assert torch.equal(rnd.isnan(), x.isnan())
    for got in (mx, smx):
        close(got, torch.maximum(x, y), rtol=0, atol=0)
    for got in (mn, smn):
        close(got, torch.minimum(x, y), rtol=0, atol=0)


def test_binary_compare_and_select_ops(cache_dir):
    n = 37
    p = Program("binary")
    a = p.buffer(f"f32[{n}]{{1}} input 0")
    b = p.buffer(f"f32[{n}]{{1}} input 1")
    float_ops = ["add", "sub", "mul", "div", "pow", "maximum", "minimum"]
    vec_outs = [p.output(f"f32[{n}]{{1}}") for _ in float_ops]
    o_where, o_cast, o_nan = (p.output(f"f32[{n}]{{1}}") for _ in range(3))
    cmp_ops = ["eq", "ne", "lt", "le", "gt", "ge"]
    cmp_outs = [p.output(f"b8[{n}]{{1}}") for _ in cmp_ops]
    o_and, o_or, o_not, o_isnan = (p.output(f"b8[{n}]{{1}}") for _ in range(4))
    o_fdiv, o_mod = (p.output(f"f32[{n}]{{1}}") for _ in range(2))
    # k0: all f32, so vector code (compares become masks).
    p.kernel(f"@k0 [i0 < {n}]")
    p.loop()
    va, vb = p.node(f"load {a}[i0] : f32"), p.node(f"load {b}[i0] : f32")
    for op, out in zip(float_ops, vec_outs):
        p.store(out, "i0", p.node(f"{op} {va}, {vb} : f32"))
    lt = p.node(f"lt {va}, {vb} : b8")
    p.store(o_where, "i0", p.node(f"where {lt}, {va}, {vb} : f32"))
    gt = p.node(f"gt {va}, {vb} : b8")
    both = p.node(f"logical_or {lt}, {gt} : b8")
    p.store(o_cast, "i0", p.node(f"cast {both} : f32"))
    isn = p.node(f"isnan {va} : b8")
    zero = p.node("constant 0 : f32")
    p.store(o_nan, "i0", p.node(f"where {isn}, {zero}, {va} : f32"))
    p.end()
    p.end()
    # k1: bool stores and floordiv/mod keep it scalar.
    p.kernel(f"@k1 [i0 < {n}]")
    p.loop()
    va, vb = p.node(f"load {a}[i0] : f32"), p.node(f"load {b}[i0] : f32")
    masks = {}
    for op, out in zip(cmp_ops, cmp_outs):
        masks[op] = p.node(f"{op} {va}, {vb} : b8")
        p.store(out, "i0", masks[op])
    p.store(o_and, "i0", p.node(f"logical_and {masks['le']}, {masks['ge']} : b8"))
    p.store(o_or, "i0", p.node(f"logical_or {masks['lt']}, {masks['gt']} : b8"))
    p.store(o_not, "i0", p.node(f"logical_not {va} : b8"))
    p.store(o_isnan, "i0", p.node(f"isnan {va} : b8"))
    p.store(o_fdiv, "i0", p.node(f"floordiv {va}, {vb} : f32"))
    p.store(o_mod, "i0", p.node(f"mod {va}, {vb} : f32"))
    p.end()
    p.end()
    prog = compile_loop(p.text(), cache_dir)
    assert "pointwise: vector over i0" in prog.source
    assert "stores to b8 buffer" in prog.source
    x = values(n, 1)
    y = torch.cat([torch.tensor([1.0, float("nan"), 2.0, -3.0, 0.0, 0.5]), torch.randn(n) * 4])[:n]
    y[10] = x[10]  # one equal pair
    outs = prog.run([x, y])
    refs = [x + y, x - y, x * y, x / y, torch.pow(x, y), torch.maximum(x, y), torch.minimum(x, y),
            torch.where(x < y, x, y), ((x < y) | (x > y)).float(), torch.where(x.isnan(), 0.0, x),
            x == y, x != y, x < y, x <= y, x > y, x >= y, (x <= y) & (x >= y), (x < y) | (x > y),
            torch.logical_not(x), x.isnan(), torch.floor_divide(x, y), torch.remainder(x, y)]
    names = float_ops + ["where", "cast", "isnan-where"] + cmp_ops + ["and", "or", "not", "isnan", "floordiv", "mod"]
    assert len(outs) == len(refs)
    for name, got, ref in zip(names, outs, refs):
        close(got, ref, rtol=2e-6, atol=1e-30, msg=lambda m, name=name: f"{name}: {m}")


INT_BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "floordiv": torch.floor_divide, "mod": torch.remainder, "maximum": torch.maximum, "minimum": torch.minimum,
    "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
}


@pytest.mark.parametrize("dtype,name", [(torch.int32, "i32"), (torch.int64, "i64")])
def test_integer_ops_and_casts(cache_dir, dtype, name):
    n = 29
    p = Program(f"ints_{name}")
    a = p.buffer(f"{name}[{n}]{{1}} input 0")
    b = p.buffer(f"{name}[{n}]{{1}} input 1")
    f = p.buffer(f"f32[{n}]{{1}} input 2")
    m = p.buffer(f"b8[{n}]{{1}} input 3")
    bin_outs = [p.output(f"{name}[{n}]{{1}}") for _ in INT_BINARY]
    un_ops = ["neg", "abs", "sign", "bitwise_not"]
    un_outs = [p.output(f"{name}[{n}]{{1}}") for _ in un_ops]
    o_pow = p.output(f"{name}[{n}]{{1}}")
    o_to_f32, o_from_f32, o_bool_f32, o_f32_bool = (p.output(s) for s in (
        f"f32[{n}]{{1}}", f"{name}[{n}]{{1}}", f"f32[{n}]{{1}}", f"b8[{n}]{{1}}"))
    o_sum = p.output(f"{name}[1]{{1}}")
    p.kernel(f"@k0 [i0 < {n}]")
    p.loop()
    va, vb = p.node(f"load {a}[i0] : {name}"), p.node(f"load {b}[i0] : {name}")
    vf, vm = p.node(f"load {f}[i0] : f32"), p.node(f"load {m}[i0] : b8")
    for op, out in zip(INT_BINARY, bin_outs):
        p.store(out, "i0", p.node(f"{op} {va}, {vb} : {name}"))
    for op, out in zip(un_ops, un_outs):
        p.store(out, "i0", p.node(f"{op} {va} : {name}"))
    three = p.node(f"constant 3 : {name}")
    small = p.node(f"mod {vb}, {three} : {name}")
    p.store(o_pow, "i0", p.node(f"pow {va}, {small} : {name}"))
    p.store(o_to_f32, "i0", p.node(f"cast {va} : f32"))
    p.store(o_from_f32, "i0", p.node(f"cast {vf} : {name}"))
    p.store(o_bool_f32, "i0", p.node(f"cast {vm} : f32"))
    p.store(o_f32_bool, "i0", p.node(f"cast {vf} : b8"))
    p.end()
    p.end()
    p.kernel("@k1")
    p.loop(f"[r0 < {n}]")
    s = p.node(f"reduce_sum {p.node(f'load {a}[r0] : {name}')} : {name}")
    p.end()
    p.loop()
    p.store(o_sum, "0", s)
    p.end()
    p.end()
    prog = compile_loop(p.text(), cache_dir)
    g = torch.Generator().manual_seed(2)
    x = torch.randint(-50, 50, (n,), generator=g, dtype=dtype)
    y = torch.randint(1, 9, (n,), generator=g, dtype=dtype) * torch.where(torch.arange(n) % 2 == 0, 1, -1).to(dtype)
    fl = torch.randn(n, generator=g) * 20
    fl[0] = 0.0
    fl[1] = -0.7
    mk = torch.rand(n, generator=g) > 0.5
    outs = prog.run([x, y, fl, mk])
    refs = [fn(x, y) for fn in INT_BINARY.values()] + [-x, x.abs(), x.sign(), torch.bitwise_not(x)]
    refs += [torch.pow(x, torch.remainder(y, 3)), x.float(), fl.to(dtype), mk.float(), fl.to(torch.bool), x.sum(0, keepdim=True).to(dtype)]
    for got, ref in zip(outs, refs):
        assert got.dtype == ref.dtype
        assert torch.equal(got, ref), (got, ref)


@pytest.mark.parametrize("half", ["bf16", "f16"])
def test_16_bit_float_buffers(cache_dir, half):
    dtype = torch.bfloat16 if half == "bf16" else torch.float16
    n = 53
    p = Program(f"half_{half}")
    x = p.buffer(f"{half}[{n}]{{1}} input 0")
    y = p.buffer(f"{half}[{n}]{{2}} input 1")  # strided: the scalar kernel reads it
    out = p.output(f"{half}[{n}]{{1}}")
    out_s = p.output(f"{half}[{n}]{{1}}")
    p.kernel(f"@k0 [i0 < {n}]")
    p.loop()
    v = p.node(f"load {x}[i0] : f32")
    e = p.node(f"exp {v} : f32")
    c = p.node("constant 0.3 : f32")
    p.store(out, "i0", p.node(f"mul {e}, {c} : f32"))
    p.end()
    p.end()
    p.kernel(f"@k1 [i0 < {n}]")
    p.loop()
    v = p.node(f"load {y}[i0] : f32")
    e = p.node(f"exp {v} : f32")
    c = p.node("constant 0.3 : f32")
    p.store(out_s, "i0", p.node(f"mul {e}, {c} : f32"))
    p.end()
    p.end()
    prog = compile_loop(p.text(), cache_dir)
    assert "pointwise: vector over i0" in prog.source and "scalar (%t" in prog.source
    a = (torch.randn(n) * 3).to(dtype)
    a[:4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0])
    b = torch.empty(2 * n, dtype=dtype)[::2]
    b.copy_(a)
    got, got_s = prog.run([a, b])
    ref = (torch.exp(a.float()) * 0.3).to(dtype)
    # float32 math is within a few ulp of torch's; after rounding to 16 bits it is equal but for
    # rare ties: allow one 16-bit ulp.
    for g_ in (got, got_s):
        assert g_.dtype == dtype
        close(g_.float(), ref.float(), rtol=1e-2, atol=0)
    close(got, got_s, rtol=0, atol=0)  # vector and scalar code agree bit for bit


def test_broadcasting_strided_and_offset_inputs_and_an_output_view(cache_dir):
    rows, cols = 5, 37
    p = Program("layouts")
    a = p.buffer(f"f32[{rows}, {cols}]{{{cols}, 1}} input 0")
    bias = p.buffer(f"f32[{cols}]{{1}} input 1")
    scale = p.buffer(f"f32[{rows}, 1]{{1, 1}} input 2")
    at = p.buffer(f"f32[{rows}, {cols}]{{1, {rows}}} input 3")  # a transposed tensor
    big = p.buffer(f"f32[{rows}, {cols + 8}]{{{cols + 8}, 1}} input 4")
    window = p.buffer(f"f32[{rows}, {cols}]{{{cols + 8}, 1}} view {big} + 3")
    out = p.output(f"f32[{rows}, {cols}]{{{cols}, 1}}")
    out_t = p.output(f"f32[{rows}, {cols}]{{{cols}, 1}}")
    p.outputs.append(window)  # returned as it is: a view of an input
    p.kernel(f"@k0 [i0 < {rows}, i1 < {cols}]")
    p.loop()
    va = p.node(f"load {a}[i0, i1] : f32")
    vb = p.node(f"load {bias}[i1] : f32")
    vs = p.node(f"load {scale}[i0, 0] : f32")
    vw = p.node(f"load {window}[i0, i1] : f32")
    t = p.node(f"mul {vb}, {vs} : f32")
    u = p.node(f"add {va}, {t} : f32")
    p.store(out, "i0, i1", p.node(f"add {u}, {vw} : f32"))
    p.end()
    p.end()
    p.kernel(f"@k1 [i0 < {rows}, i1 < {cols}]")
    p.loop()
    p.store(out_t, "i0, i1", p.node(f"load {at}[i0, i1] : f32"))
    p.end()
    p.end()
    prog = compile_loop(p.text(), cache_dir)
    assert "pointwise: vector over i1" in prog.source
    assert "pointwise: vector over i1, in transposed tiles of i0 x i1" in prog.source  # the transposing copy
    A = torch.randn(rows, cols)
    B = torch.randn(cols)
    S = torch.randn(rows, 1)
    AT = torch.randn(cols, rows).t()
    BIG = torch.randn(rows, cols + 8)
    got, got_t, win = prog.run([A, B, S, AT, BIG])
    close(got, A + B * S + BIG[:, 3:3 + cols], rtol=1e-6, atol=1e-6)
    assert torch.equal(got_t, AT) and got_t.is_contiguous()
    assert win.data_ptr() == BIG[:, 3:].data_ptr() and torch.equal(win, BIG[:, 3:3 + cols])
    assert win.stride() == (cols + 8, 1)


def test_openmp_on_and_off_agree(cache_dir):
    rows, cols = 96, 1003
    p = Program("parallel")
    x = p.buffer(f"f32[{rows}, {cols}]{{{cols}, 1}} input 0")
    out = p.output(f"f32[{rows}, {cols}]{{{cols}, 1}}")
    sums = p.output(f"f32[{rows}]{{1}}")
    p.kernel(f"@k0 [i0 < {rows}, i1 < {cols}]")
    p.loop()
    v = p.node(f"load {x}[i0, i1] : f32")
    p.store(out, "i0, i1", p.node(f"tanh {v} : f32"))
    p.end()
    p.end()
    p.kernel(f"@k1 [i0 < {rows}]")
    p.loop(f"[r0 < {cols}]")
    s = p.node(f"reduce_sum {p.node(f'load {x}[i0, r0] : f32')} : f32")
    p.end()
    p.loop()
    p.store(sums, "i0", s)
    p.end()
    p.end()
    text = p.text()
    par = compile_loop(text, cache_dir, parallel_threshold=1024)
    ser = compile_loop(text, cache_dir, openmp=False)
    assert "#pragma omp parallel for" in par.source and "#pragma omp" not in ser.source
    data = torch.randn(rows, cols)
    a, b = par.run([data]), ser.run([data])
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    close(a[0], torch.tanh(data), rtol=3e-6, atol=1e-7)
    close(a[1], data.sum(1), rtol=1e-5, atol=1e-4)


def test_a_pointwise_kernel_with_few_rows_splits_its_vector_loop(cache_dir):
    p = Program("wide")
    n = 70001
    x = p.buffer(f"f32[2, {n}]{{{n}, 1}} input 0")
    out = p.output(f"f32[2, {n}]{{{n}, 1}}")
    p.kernel(f"@k0 [i0 < 2, i1 < {n}]")
    p.loop()
    p.store(out, "i0, i1", p.node(f"sigmoid {p.node(f'load {x}[i0, i1] : f32')} : f32"))
    p.end()
    p.end()
    prog = compile_loop(p.text(), cache_dir)
    assert "parallel over the vector chunks of i1" in prog.source
    data = torch.randn(2, n)
    close(prog.run([data])[0], torch.sigmoid(data), rtol=3e-6, atol=1e-7)


def test_a_pointwise_kernel_with_few_small_rows_runs_one_region_over_them(cache_dir):
    # 32 rows of 1024: a region per row would fork and join 32 times for 1024 lanes each.
    p = Program("rows")
    x = p.buffer("f32[32, 1024]{1024, 1} input 0")
    out = p.output("f32[32, 1024]{1024, 1}")
    p.kernel("@k0 [i0 < 32, i1 < 1024]")
    p.loop()
    p.store(out, "i0, i1", p.node(f"sigmoid {p.node(f'load {x}[i0, i1] : f32')} : f32"))
    p.end()
    p.end()
    prog = compile_loop(p.text(), cache_dir)
    assert "parallel over 1 outer loop(s), 32 points" in prog.source
    assert prog.source.count("#pragma omp parallel for") == 1
    data = torch.randn(32, 1024)
    close(prog.run([data])[0], torch.sigmoid(data), rtol=3e-6, atol=1e-7)
