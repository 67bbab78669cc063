"""Generated C++ for reductions against torch: sum/prod/max/min/Welford over rows whose length
exercises the vector tail (1, 7, 8, 9, 17, 1000), NaN propagation, strided (scalar) reductions,
bfloat16 rows, softmax as one three-loop kernel and layer_norm as one kernel."""
import math

import pytest
import torch

from cpp_harness import Program, compile_loop, needs_cxx

pytestmark = needs_cxx

SIZES = [1, 7, 8, 9, 17, 1000]
ROWS = 3


def reductions_program(strided):
    """One kernel per row length. strided: rows are read down the columns of an [n, ROWS] tensor,
    so the loop is not contiguous: an outer reduction (vector over the rows) up to 512 elements,
    scalar beyond."""
    p = Program("reductions_strided" if strided else "reductions")
    outs = []
    for k, n in enumerate(SIZES):
        layout = f"{{1, {ROWS}}}" if strided else f"{{{n}, 1}}"
        x = p.buffer(f"f32[{ROWS}, {n}]{layout} input {2 * k}")
        y = p.buffer(f"f32[{ROWS}, {n}]{layout} input {2 * k + 1}")
        o = [p.output(f"f32[{ROWS}]{{1}}") for _ in range(6)]
        outs.append(o)
        p.kernel(f"@k{k} [i0 < {ROWS}]")
        p.loop(f"[r0 < {n}]")
        v = p.node(f"load {x}[i0, r0] : f32")
        w = p.node(f"load {y}[i0, r0] : f32")
        s = p.node(f"reduce_sum {v} : f32")
        mx = p.node(f"reduce_max {v} : f32")
        mn = p.node(f"reduce_min {v} : f32")
        pr = p.node(f"reduce_prod {w} : f32")
        mean = p.node(f"welford_mean {v} : f32")
        m2 = p.node(f"welford_m2 {v} : f32")
        p.end()
        p.loop()
        for out, val in zip(o, (s, mx, mn, pr, mean, m2)):
            p.store(out, "i0", val)
        p.end()
        p.end()
    return p.text()


def inputs(strided):
    g = torch.Generator().manual_seed(3)
    args = []
    for n in SIZES:
        x = torch.randn(ROWS, n, generator=g) + 2.0
        if n > 1:
            x[2, n // 2] = float("nan")  # row 2 propagates NaN through every reduction
        y = 1.0 + 0.01 * torch.randn(ROWS, n, generator=g)
        if strided:
            x, y = x.t().contiguous().t(), y.t().contiguous().t()
        args += [x, y]
    return args


def check_reductions(outs, args):
    for k, n in enumerate(SIZES):
        x, y = args[2 * k].double(), args[2 * k + 1].double()
        s, mx, mn, pr, mean, m2 = outs[6 * k:6 * k + 6]
        ref_mean = x.mean(1)
        refs = [x.sum(1), x.amax(1), x.amin(1), y.prod(1), ref_mean, ((x - ref_mean[:, None]) ** 2).sum(1)]
        # float32 accumulation over n elements; the reference is float64.
        tol = 2e-6 * n + 1e-5
        for name, got, ref in zip(["sum", "max", "min", "prod", "mean", "m2"], (s, mx, mn, pr, mean, m2), refs):
            torch.testing.assert_close(got.double(), ref, rtol=tol, atol=tol, equal_nan=True,
                                       msg=lambda m, name=name, n=n: f"{name} over {n}: {m}")
            if n > 1 and name != "prod":  # prod reads y, which has no NaN
                assert got[2].isnan(), f"{name} over {n} lost the NaN"


@pytest.mark.parametrize("strided", [False, True], ids=["vector", "scalar"])
def test_reductions_over_rows_of_every_tail_length(cache_dir, strided):
    prog = compile_loop(reductions_program(strided), cache_dir)
    for n in SIZES:
        if strided and n > 512:  # 4 accumulators x 128 elements per lane: longer sums load lane by lane
            assert f"[r0 < {n}]: vector over r0" in prog.source
        elif strided or n == 1:  # the rows' points are contiguous: an outer reduction, one lane per row
            assert "outer reduction: vector over i0" in prog.source
        else:
            assert "ev::WelfordF" in prog.source and "loop 0 [r0 < 7]: vector over r0" in prog.source
    args = inputs(strided)
    check_reductions(prog.run(args), args)


def test_bf16_row_sum_and_max(cache_dir):
    n = 17
    p = Program("bf16_rows")
    x = p.buffer(f"bf16[{ROWS}, {n}]{{{n}, 1}} input 0")
    o_sum, o_max = p.output(f"bf16[{ROWS}]{{1}}"), p.output(f"f32[{ROWS}]{{1}}")
    p.kernel(f"@k0 [i0 < {ROWS}]")
    p.loop(f"[r0 < {n}]")
    v = p.node(f"load {x}[i0, r0] : f32")
    s, m = p.node(f"reduce_sum {v} : f32"), p.node(f"reduce_max {v} : f32")
    p.end()
    p.loop()
    p.store(o_sum, "i0", s)
    p.store(o_max, "i0", m)
    p.end()
    p.end()
    prog = compile_loop(p.text(), cache_dir)
    assert "ev::load_bf16(" in prog.source
    data = torch.randn(ROWS, n).to(torch.bfloat16)
    got_sum, got_max = prog.run([data])
    assert got_sum.dtype == torch.bfloat16
    torch.testing.assert_close(got_sum, data.float().sum(1).to(torch.bfloat16), rtol=8e-3, atol=1e-2)
    assert torch.equal(got_max, data.float().amax(1))


def softmax_kernel(p, k, x, out, rows, n):
    p.kernel(f"@k{k} [i0 < {rows}]")
    p.loop(f"[r0 < {n}]")
    v = p.node(f"load {x}[i0, r0] : f32")
    mx = p.node(f"reduce_max {v} : f32")
    p.end()
    p.loop(f"[r0 < {n}]")
    v = p.node(f"load {x}[i0, r0] : f32")
    e = p.node(f"exp {p.node(f'sub {v}, {mx} : f32')} : f32")
    s = p.node(f"reduce_sum {e} : f32")
    p.end()
    p.loop(f"[r0 < {n}]")
    v = p.node(f"load {x}[i0, r0] : f32")
    e = p.node(f"exp {p.node(f'sub {v}, {mx} : f32')} : f32")
    p.store(out, "i0, r0", p.node(f"div {e}, {s} : f32"))
    p.end()
    p.end()


def test_softmax_as_one_kernel(cache_dir):
    rows = 5
    p = Program("softmax")
    for k, n in enumerate(SIZES):
        x = p.buffer(f"f32[{rows}, {n}]{{{n}, 1}} input {k}")
        out = p.output(f"f32[{rows}, {n}]{{{n}, 1}}")
        softmax_kernel(p, k, x, out, rows, n)
    prog = compile_loop(p.text(), cache_dir)
    assert prog.source.count("extern \"C\" void ember_k_") == len(SIZES)
    g = torch.Generator().manual_seed(4)
    args = [torch.randn(rows, n, generator=g) * 4 for n in SIZES]
    args[-1][1, 5] = 80.0  # large logits: the max subtraction matters
    for x, got in zip(args, prog.run(args)):
        torch.testing.assert_close(got, torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
    # The third loop loads exp(x - max) that the second kept, for every row long enough to vectorize.
    assert prog.source.count("kept in sc_t") == len([n for n in SIZES if n > 1])
    assert prog.source.count("loaded from sc_t") == len([n for n in SIZES if n > 1])
    assert "acc_t1_3" in prog.source  # rows of 1000 reduce with four accumulators
    # Row pipelining: the max pass of row i0 + 1 runs in row i0's last loop (every vectorized size).
    assert prog.source.count("also runs loop 0 for i0 + 1") == len([n for n in SIZES if n > 1])


@pytest.mark.parametrize("openmp", [False, True])
@pytest.mark.parametrize("n", [8, 37, 1000])
def test_pipelined_rows_have_the_bits_of_rows_alone(cache_dir, openmp, n):
    """The row max computed one row ahead (inside the previous row's last loop, per OpenMP thread
    from the first row of its chunk) gives every row the bits the same kernel gives it alone."""
    rows = 67  # odd, so the two threads' chunks differ in length
    many, one = Program(f"pipelined_{n}"), Program(f"single_{n}")
    for p, r in ((many, rows), (one, 1)):
        x = p.buffer(f"f32[{r}, {n}]{{{n}, 1}} input 0")
        softmax_kernel(p, 0, x, p.output(f"f32[{r}, {n}]{{{n}, 1}}"), r, n)
    pipelined = compile_loop(many.text(), cache_dir, openmp=openmp, parallel_threshold=1)
    alone = compile_loop(one.text(), cache_dir, openmp=openmp)
    assert "also runs loop 0 for i0 + 1" in pipelined.source
    assert "also runs loop 0" not in alone.source
    assert ("#pragma omp for schedule(static)" in pipelined.source) == openmp
    g = torch.Generator().manual_seed(12)
    x = torch.randn(rows, n, generator=g) * 20
    x[3, n // 2] = float("nan")
    x[4, :] = float("-inf")
    x[5, 0] = float("inf")
    x[33, 1] = -0.0
    x[34:36] = torch.linspace(-120, 0, n)
    got, = pipelined.run([x])
    for i in range(rows):
        want, = alone.run([x[i:i + 1].clone()])
        assert torch.equal(got[i:i + 1].view(torch.int32), want.view(torch.int32)), f"row {i}"


def shifted_exp_program(n, max_of, scale_in_max):
    """Row sums of exp(x * 2 - max(m * c)): m is x itself (max_of="x") or a second input holding the
    same values ("y"); c is 2, or 3 when not scale_in_max. Only m = x with c = 2 proves the argument
    <= 0 (every x * 2 is one of the values the max ranges over)."""
    p = Program("shifted_exp")
    x = p.buffer(f"f32[4, {n}]{{{n}, 1}} input 0")
    y = p.buffer(f"f32[4, {n}]{{{n}, 1}} input 1")
    e_out = p.output(f"f32[4, {n}]{{{n}, 1}}")
    s_out = p.output("f32[4]{1}")
    p.kernel("@k0 [i0 < 4]")
    p.loop(f"[r0 < {n}]")
    v = p.node(f"load {x if max_of == 'x' else y}[i0, r0] : f32")
    c = p.node(f"constant {2.0 if scale_in_max else 3.0} : f32")
    mx = p.node(f"reduce_max {p.node(f'mul {v}, {c} : f32')} : f32")
    p.end()
    p.loop(f"[r0 < {n}]")
    v = p.node(f"load {x}[i0, r0] : f32")
    c = p.node("constant 2.0 : f32")
    scaled = p.node(f"mul {v}, {c} : f32")
    e = p.node(f"exp {p.node(f'sub {scaled}, {mx} : f32')} : f32")
    p.store(e_out, "i0, r0", e)
    s = p.node(f"reduce_sum {e} : f32")
    p.end()
    p.loop()
    p.store(s_out, "i0", s)
    p.end()
    p.end()
    return p.text()


@pytest.mark.parametrize("n", [8, 37, 1000])
def test_exp_of_a_row_minus_its_max_has_the_bits_of_exp(cache_dir, n):
    """exp(v - max(v)) is emitted as ev::exp_nonpositive (no |x| in its range check) exactly when the
    max ranges over the same values; its bits equal ev::exp's on rows with NaN, +-inf, all -inf,
    spreads past exp's underflow (subnormal results) and zeros of both signs."""
    proven = compile_loop(shifted_exp_program(n, "x", True), cache_dir)
    other_buffer = compile_loop(shifted_exp_program(n, "y", True), cache_dir)
    other_scale = compile_loop(shifted_exp_program(n, "x", False), cache_dir)
    assert "ev::exp_nonpositive(" in proven.source
    assert "ev::exp_nonpositive(" not in other_buffer.source and "ev::exp(" in other_buffer.source
    assert "ev::exp_nonpositive(" not in other_scale.source
    g = torch.Generator().manual_seed(8)
    x = torch.randn(4, n, generator=g) * 30
    x[0, 3] = float("nan")
    x[1, :] = float("-inf")
    x[2, 1], x[2, 5] = float("inf"), -0.0
    x[3, :] = -0.0
    x[3, 2:7] = torch.tensor([-43.3, -45.0, -50.0, -52.0, -60.0])  # x * 2 below -86.5 and -104
    got_e, got_s = proven.run([x, x.clone()])
    want_e, want_s = other_buffer.run([x, x.clone()])
    assert torch.equal(got_e.view(torch.int32), want_e.view(torch.int32))
    assert torch.equal(got_s.view(torch.int32), want_s.view(torch.int32))
    assert (got_e[3, 4:7] < 1.2e-38).all() and (got_e[3, 4:7] >= 0).all()  # subnormal or zero
    torch.testing.assert_close(got_e, torch.exp(x * 2 - (x * 2).amax(-1, keepdim=True)), equal_nan=True)


def kept_exp_program(n, out_spec, out_index, reread):
    """exp(x) kept by the sum loop for the loop that stores exp(x) / sum into `out`; reread: a
    fourth loop reads exp(x) again after that store (so the kept values cannot live in `out`)."""
    p = Program("kept_exp")
    x = p.buffer(f"f32[4, {n}]{{{n}, 1}} input 0")
    out = p.output(out_spec)
    p.kernel("@k0 [i0 < 4]")
    p.loop(f"[r0 < {n}]")
    s = p.node(f"reduce_sum {p.node('exp ' + p.node(f'load {x}[i0, r0] : f32') + ' : f32')} : f32")
    p.end()
    p.loop(f"[r0 < {n}]")
    e = p.node(f"exp {p.node(f'load {x}[i0, r0] : f32')} : f32")
    p.store(out, out_index, p.node(f"div {e}, {s} : f32"))
    p.end()
    if reread:
        out2 = p.output("f32[4]{1}")
        p.loop(f"[r0 < {n}]")
        m = p.node(f"reduce_max {p.node('exp ' + p.node(f'load {x}[i0, r0] : f32') + ' : f32')} : f32")
        p.end()
        p.loop()
        p.store(out2, "i0", m)
        p.end()
    p.end()
    return p.text()


@pytest.mark.parametrize("case", ["row", "padded", "bf16", "reread"])
def test_kept_values_live_in_the_output_row_only_when_safe(cache_dir, case):
    """The kept exp(x) is written straight into the output row (and normalized there in place) when
    the storing loop writes a float32 row in the kept layout (rows may be padded apart) and nothing
    reads it later; otherwise it stays in a stack array. Results are the same either way."""
    n = 37
    spec = {"row": f"f32[4, {n}]{{{n}, 1}}", "padded": f"f32[4, {n}]{{40, 1}}",
            "bf16": f"bf16[4, {n}]{{{n}, 1}}", "reread": f"f32[4, {n}]{{{n}, 1}}"}[case]
    prog = compile_loop(kept_exp_program(n, spec, "i0, r0", case == "reread"), cache_dir)
    assert "kept in sc_t" in prog.source
    in_output = case in ("row", "padded")
    assert ("(the output row)" in prog.source) == in_output
    assert ("alignas(64) float sc_t" in prog.source) == (not in_output)
    x = torch.randn(4, n, generator=torch.Generator().manual_seed(11))
    got = prog.run([x])
    want = x.exp() / x.exp().sum(-1, keepdim=True)
    if case == "bf16":
        want = want.to(torch.bfloat16)
    torch.testing.assert_close(got[0], want, rtol=1e-5, atol=1e-7)
    if case == "reread":
        torch.testing.assert_close(got[1], x.exp().amax(-1))


def exp_rows_program(rows, ranges, index, writes_input):
    """Loop 1 sums exp(x) over `ranges`, loop 2 stores exp(x) / sum (into the input itself when
    writes_input, where keeping exp(x) for loop 2 would be legal but is refused: the kernel writes
    what it loads)."""
    p = Program("exp_rows")
    shape = f"[{rows}, 3, 37]{{111, 37, 1}}"
    x = p.buffer(f"f32{shape} input 0")
    out = x if writes_input else p.output(f"f32{shape}")
    p.kernel(f"@k0 [i0 < {rows}]")
    p.loop(ranges)
    v = p.node(f"load {x}[{index}] : f32")
    s = p.node(f"reduce_sum {p.node(f'exp {v} : f32')} : f32")
    p.end()
    p.loop(ranges)
    v = p.node(f"load {x}[{index}] : f32")
    e = p.node(f"exp {v} : f32")
    p.store(out, index, p.node(f"div {e}, {s} : f32"))
    p.end()
    p.end()
    if writes_input:
        p.outputs.append(x)
    return p.text()


@pytest.mark.parametrize("writes_input", [False, True])
def test_a_value_kept_between_loops_over_two_dimensions(cache_dir, writes_input):
    rows = 4
    prog = compile_loop(exp_rows_program(rows, "[r0 < 3, r1 < 37]", "i0, r0, r1", writes_input), cache_dir)
    assert ("kept in sc_t" in prog.source) == (not writes_input)
    g = torch.Generator().manual_seed(6)
    x = torch.randn(rows, 3, 37, generator=g)
    want = x.exp() / x.exp().sum((1, 2), keepdim=True)
    got, = prog.run([x.clone()])
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


def layer_norm_program(rows, n, eps):
    p = Program("layer_norm")
    x = p.buffer(f"f32[{rows}, {n}]{{{n}, 1}} input 0")
    w = p.buffer(f"f32[{n}]{{1}} input 1")
    b = p.buffer(f"f32[{n}]{{1}} input 2")
    out = p.output(f"f32[{rows}, {n}]{{{n}, 1}}")
    p.kernel(f"@k0 [i0 < {rows}]")
    p.loop(f"[r0 < {n}]")
    v = p.node(f"load {x}[i0, r0] : f32")
    mean = p.node(f"welford_mean {v} : f32")
    m2 = p.node(f"welford_m2 {v} : f32")
    p.end()
    p.loop()
    count = p.node(f"constant {float(n)} : f32")
    var = p.node(f"div {m2}, {count} : f32")
    eps_node = p.node(f"constant {eps} : f32")
    rstd = p.node(f"rsqrt {p.node(f'add {var}, {eps_node} : f32')} : f32")
    p.end()
    p.loop(f"[r0 < {n}]")
    v = p.node(f"load {x}[i0, r0] : f32")
    centered = p.node(f"sub {v}, {mean} : f32")
    normed = p.node(f"mul {centered}, {rstd} : f32")
    scaled = p.node(f"mul {normed}, {p.node(f'load {w}[r0] : f32')} : f32")
    p.store(out, "i0, r0", p.node(f"add {scaled}, {p.node(f'load {b}[r0] : f32')} : f32"))
    p.end()
    p.end()
    return p.text()


@pytest.mark.parametrize("n", [9, 1000])
def test_layer_norm_as_one_kernel(cache_dir, n):
    rows, eps = 6, 1e-5
    prog = compile_loop(layer_norm_program(rows, n, eps), cache_dir)
    assert prog.source.count("extern \"C\" void ember_k_") == 1
    assert "loop 1 []: once per outer point" in prog.source
    g = torch.Generator().manual_seed(5)
    x = torch.randn(rows, n, generator=g) * 3 + 10  # an offset mean: naive variance would lose digits
    w, b = torch.randn(n, generator=g), torch.randn(n, generator=g)
    got, = prog.run([x, w, b])
    ref = torch.nn.functional.layer_norm(x.double(), (n,), w.double(), b.double(), eps)
    eager = torch.nn.functional.layer_norm(x, (n,), w, b, eps)
    ember_err = (got.double() - ref).abs().max().item()
    eager_err = (eager.double() - ref).abs().max().item()
    assert ember_err <= 2 * eager_err + 1e-5, (ember_err, eager_err)


def test_a_kernel_without_outer_loops_reduces_everything(cache_dir):
    n = 4099
    p = Program("total")
    x = p.buffer(f"f32[{n}]{{1}} input 0")
    out = p.output("f32[]{} ")
    p.kernel("@k0")
    p.loop(f"[r0 < {n}]")
    s = p.node(f"reduce_sum {p.node(f'load {x}[r0] : f32')} : f32")
    p.end()
    p.loop()
    p.store(out, "", s)
    p.end()
    p.end()
    prog = compile_loop(p.text(), cache_dir)
    data = torch.rand(n)
    got, = prog.run([data])
    assert got.shape == ()
    assert math.isclose(got.item(), data.double().sum().item(), rel_tol=1e-5)


def test_a_value_kept_by_a_loop_that_itself_loads_it(cache_dir):
    """exp(x) in three loops: the second loads it from the first's scratch, and the third, matched
    against the second, must read that same scratch (the second never computes it)."""
    rows, n = 3, 45
    p = Program("exp_three_loops")
    x = p.buffer(f"f32[{rows}, {n}]{{{n}, 1}} input 0")
    out = p.output(f"f32[{rows}, {n}]{{{n}, 1}}")
    p.kernel(f"@k0 [i0 < {rows}]")
    p.loop(f"[r0 < {n}]")
    v = p.node(f"load {x}[i0, r0] : f32")
    s0 = p.node(f"reduce_sum {p.node(f'exp {v} : f32')} : f32")
    p.end()
    p.loop(f"[r0 < {n}]")
    v = p.node(f"load {x}[i0, r0] : f32")
    e = p.node(f"exp {v} : f32")
    s1 = p.node(f"reduce_sum {p.node(f'mul {e}, {e} : f32')} : f32")
    p.end()
    p.loop(f"[r0 < {n}]")
    v = p.node(f"load {x}[i0, r0] : f32")
    e = p.node(f"exp {v} : f32")
    d = p.node(f"div {e}, {s1} : f32")
    p.store(out, "i0, r0", p.node(f"add {d}, {s0} : f32"))
    p.end()
    p.end()
    prog = compile_loop(p.text(), cache_dir)
    assert prog.source.count("kept in sc_t") == 1 and prog.source.count("loaded from sc_t") == 2
    g = torch.Generator().manual_seed(8)
    x_in = torch.randn(rows, n, generator=g)
    ex = x_in.double().exp()
    want = ex / (ex * ex).sum(1, keepdim=True) + ex.sum(1, keepdim=True)
    got, = prog.run([x_in])
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [37, 1000])
def test_division_by_a_row_value_has_the_bits_of_division(cache_dir, n):
    """A divisor computed before a vector loop becomes an ev::DivisorF (reciprocal, multiply and two
    fmas where operands allow, else a divide): every quotient must equal torch's x / d bit for bit,
    over divisors and dividends on both sides of the fast route's range, zeros, subnormals,
    infinities and NaN."""
    specials = [0.0, -0.0, 1e-45, -3e-39, float("inf"), float("-inf"), float("nan"), 1.0, 3.0]
    g = torch.Generator().manual_seed(11)
    # Random significands with exponents in [-70, 70], random signs.
    def spread(*shape):
        mant = 1 + torch.rand(*shape, generator=g)
        exps = torch.randint(-70, 71, shape, generator=g).float()
        signs = torch.where(torch.rand(*shape, generator=g) < 0.5, -1.0, 1.0)
        return (signs * mant * torch.exp2(exps)).float()
    divisors = torch.cat([torch.tensor(specials), spread(40), torch.tensor([1e30, 1e-30, float.fromhex("0x1.fffffep-1")])])
    rows = divisors.numel()
    x = spread(rows, n)
    x[::3] = x[::3].abs() * 1e-3 + 0.25  # rows inside the fast route's range (softmax-like)
    x[1, :9] = torch.tensor(specials)
    x[4, 5] = float("nan")

    p = Program("divide_rows")
    xb = p.buffer(f"f32[{rows}, {n}]{{{n}, 1}} input 0")
    db = p.buffer(f"f32[{rows}]{{1}} input 1")
    out = p.output(f"f32[{rows}, {n}]{{{n}, 1}}")
    p.kernel(f"@k0 [i0 < {rows}]")
    p.loop()
    d = p.node(f"load {db}[i0] : f32")
    p.end()
    p.loop(f"[r0 < {n}]")
    v = p.node(f"load {xb}[i0, r0] : f32")
    p.store(out, "i0, r0", p.node(f"div {v}, {d} : f32"))
    p.end()
    p.end()
    prog = compile_loop(p.text(), cache_dir)
    assert "ev::DivisorF t0_d(t0);" in prog.source and "ev::divide(t1, t0_d)" in prog.source
    (got,) = prog.run([x, divisors])
    want = x / divisors[:, None]
    same = (got.view(torch.int32) == want.view(torch.int32)) | (got.isnan() & want.isnan())
    bad = (~same).nonzero()
    assert bad.numel() == 0, f"{bad.shape[0]} quotients differ, first at {bad[0].tolist()}: " \
        f"{x[tuple(bad[0])].item()!r} / {divisors[bad[0][0]].item()!r} gave {got[tuple(bad[0])].item()!r}, " \
        f"want {want[tuple(bad[0])].item()!r}"
