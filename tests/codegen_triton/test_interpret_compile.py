"""The Triton backend end to end on the CPU: ember.compile(..., options={"triton_interpret": True}) runs a
graph's generated Triton kernels in Triton's interpreter, launched by the C++ runtime (TritonCode) between
the same extern calls as on the GPU. Results are compared with eager PyTorch; the parity corpus runs the same
way as its "ember-triton" variant (tests/parity)."""
import logging
import os

import pytest
import torch
import torch.nn.functional as F

import ember

pytest.importorskip("triton")
if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("runs in the TRITON_INTERPRET=1 test process (make test)", allow_module_level=True)

INTERPRET = {"triton_interpret": True}


def _compile(fn):
    ember.reset()
    return ember.compile(fn, options=INTERPRET)


def _check(fn, *args, rtol=1.3e-6, atol=1e-5):
    compiled = _compile(fn)
    with torch.no_grad():
        expected = fn(*args)
        got = compiled(*args)
    torch.testing.assert_close(got, expected, rtol=rtol, atol=atol)
    s = ember.stats()
    assert s["kernels_compiled"] > 0, s
    assert s["codegen_failures"] == 0 and s["backend_errors"] == 0, s
    return got


def test_pointwise_broadcast():
    _check(lambda x, y: torch.relu(x * 2 + y).sigmoid(), torch.randn(33, 17), torch.randn(17))


def test_softmax_and_layer_norm():
    x = torch.randn(16, 100)
    _check(lambda t: torch.softmax(t, -1), x)
    w, b = torch.randn(100), torch.randn(100)
    _check(lambda t: F.layer_norm(t + 1, (100,), w, b), x, atol=1e-5)


def test_long_rows_loop():
    # Rows longer than the persistent limit: the looped reduction kernels.
    _check(lambda t: (t.sum(-1), t.amax(-1), t.var(-1)), torch.randn(3, 3000), rtol=1e-5, atol=1e-4)


def test_split_reductions_through_the_runtime(monkeypatch, caplog):
    # Long reductions over few rows, at the Triton target's own thresholds: each becomes a partials
    # kernel and a combining kernel (the partials in the arena), with the decision in the schedule log.
    monkeypatch.setenv("EMBER_LOGS", "schedule")
    caplog.set_level(logging.INFO, logger="ember")
    _check(lambda t: (t.sum(), t.amax(0), torch.var_mean(t.t(), -1)), torch.randn(8192, 8) + 2, rtol=1e-5, atol=1e-4)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "split k" in text and "splits of" in text, text


def test_matmul_epilogue_between_extern_calls():
    w, b = torch.randn(32, 24), torch.randn(24)
    _check(lambda x: F.gelu(x @ w + b) @ w.t(), torch.randn(8, 32), rtol=1e-5, atol=1e-4)


def test_bf16_storage():
    x = torch.randn(64, 48, dtype=torch.bfloat16)
    _check(lambda t: F.silu(t) * t + 1, x, rtol=1.6e-2, atol=1e-2)


def test_accumulating_stores_are_atomic_adds():
    # index_add / scatter_add with many repeats per element (tl.atomic_add), a bf16 result summed in f32.
    i = torch.randint(0, 6, (300,))
    _check(lambda x, s: torch.index_add(x, 0, i, s) * 2, torch.randn(6, 33), torch.randn(300, 33), rtol=1e-5, atol=1e-4)
    j = torch.randint(0, 5, (4, 70))
    _check(lambda x, s: torch.scatter_add(x, 1, j, s), torch.randn(4, 5), torch.randn(4, 70), rtol=1e-5, atol=1e-4)
    xb, sb = torch.randn(6, 8, dtype=torch.bfloat16), torch.randn(300, 8, dtype=torch.bfloat16)
    got = _compile(lambda x, s: torch.index_add(x, 0, i, s))(xb, sb)
    torch.testing.assert_close(got, torch.index_add(xb.float(), 0, i, sb.float()).bfloat16(), rtol=1.6e-2, atol=1e-2)


def test_embedding_gradient_through_the_interpreter():
    emb = torch.nn.Embedding(40, 16, padding_idx=1)
    ids = torch.randint(0, 40, (4, 50))
    ids[0, :7] = 1
    ember.reset()
    ember.compile(lambda t: emb(t).tanh().sum(), options=INTERPRET)(ids).backward()
    got = emb.weight.grad.clone()
    emb.weight.grad = None
    emb(ids).tanh().sum().backward()
    torch.testing.assert_close(got, emb.weight.grad, rtol=1e-5, atol=1e-5)
    s = ember.stats()
    assert s["backward_graphs_compiled"] == 1 and s["codegen_failures"] == 0 and s["backend_errors"] == 0, s


def test_output_code_log_shows_triton(caplog):
    with caplog.at_level(logging.INFO, logger="ember"), pytest.MonkeyPatch.context() as mp:
        mp.setenv("EMBER_LOGS", "output_code")
        ember.reset()
        compiled = ember.compile(lambda x: torch.tanh(x) + 1, options=INTERPRET)
        compiled(torch.randn(8))
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "Triton for" in text and "@triton.jit" in text


def _grouped_kernels(caplog, fn, *args):
    """fn(*args) compiled through the interpreter under no_grad, and the grouped kernels it printed."""
    with caplog.at_level(logging.INFO, logger="ember"), pytest.MonkeyPatch.context() as mp, torch.no_grad():
        mp.setenv("EMBER_LOGS", "output_code")
        caplog.clear()
        out = _compile(fn)(*args)
    text = "\n".join(r.getMessage() for r in caplog.records)
    return out, [line for line in text.splitlines() if line.startswith("# kernel") and "(grouped kernel)" in line]


def test_grouped_kernels_run_every_member(caplog):
    # One foreach op over tensors of odd sizes, a one-element tensor, a view at an offset and bf16 beside
    # float32: a grouped kernel per body (docs/codegen-triton.md, "Grouped kernels"); 70 float32 tensors
    # (140 pointers) pass the 120-pointer budget of one launch, so they take two.
    g = torch.Generator().manual_seed(3)
    base = torch.randn(50, generator=g)
    xs = [torch.randn(s, generator=g) for s in [(37,), (1,), (5, 7), (256, 130), (1, 1), (1025,)]]
    xs += [base[3:40]] + [torch.randn(9, generator=g) for _ in range(63)]
    xs += [torch.randn(s, generator=g).to(torch.bfloat16) for s in [(300,), (2, 3)]]

    def f(xs):
        return torch._foreach_mul(xs, 3.0)

    got, grouped = _grouped_kernels(caplog, f, xs)
    want = f(xs)
    assert len(got) == len(want) == 72
    for a, b in zip(got, want):  # the interpreter's float32 -> bfloat16 conversion truncates: bf16 is close only
        torch.testing.assert_close(a, b, **({} if a.dtype == torch.bfloat16 else {"rtol": 0, "atol": 0}))
    assert len(grouped) == 3, grouped  # float32: two launches; bfloat16: one


def test_grouped_optimizer_step_matches_eager(caplog, monkeypatch):
    # ember.compile(opt.step) of AdamW: the per-parameter updates are grouped kernels (one launch for all
    # parameters, one for the step counters), over three steps, within the float64-reference rule.
    def params():
        g = torch.Generator().manual_seed(0)
        return [torch.nn.Parameter(torch.randn(s, generator=g, dtype=torch.float64))
                for s in [(64, 33), (33,), (1,), (300,), (7, 9)]]

    def run(dtype, compiled):
        ps = [torch.nn.Parameter(p.detach().to(dtype)) for p in params()]
        opt = torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, foreach=False)
        step = _compile(opt.step) if compiled else opt.step
        for k in range(3):
            g = torch.Generator().manual_seed(10 + k)
            for p in ps:
                p.grad = torch.randn(p.shape, generator=g, dtype=torch.float64).to(dtype)
            step()
        return ps

    monkeypatch.setenv("EMBER_LOGS", "output_code")
    with caplog.at_level(logging.INFO, logger="ember"):
        got = run(torch.float32, True)
    want, ref = run(torch.float32, False), run(torch.float64, False)
    for g_, w, r in zip(got, want, ref):
        eager_err = (w.double() - r).abs().max().item()
        assert (g_.double() - r).abs().max().item() <= 2 * eager_err + 1e-6
    text = "\n".join(r.getMessage() for r in caplog.records)
    members = [line.split("kernels")[1].split() for line in text.splitlines() if line.startswith("#   members: kernels")]
    assert [len(m) for m in members] == [5, 5], members  # the step counters, the updates


def test_reduction_over_size_one_ranges():
    # Fuzz seed 21045: a reduction whose loop ranges are all of size 1 loaded at an address of those
    # variables alone, which were the scalar 0: a load of no block shape, which tl.max could not reduce.
    _check(lambda x: x.narrow(0, 1, 1).amax(dim=(0, 1)), torch.randn(2, 1))


def test_a_row_every_program_stores():
    # Fuzz seed 21248: `x0 * 1` is kept for after the break and fused into the reduction over its expanded rows,
    # so every row's program stores the same row: tl.store needs the pointer in the block's shape (it broadcasts
    # the value and the mask to the pointer's, never the pointer to theirs).
    def f(x0, x1):
        t2 = x0 * 1
        t3 = t2.movedim(0, 0)
        t5 = t2.unsqueeze(0).expand(3, *t2.shape)
        t10 = t5.var(dim=1, keepdim=True)
        if x1.sum() > 0:
            t11 = torch.rsqrt(t5.abs() + 1)
        else:
            t11 = torch.log1p((-1 + t3).abs())
        return t10, t11

    for y in (torch.ones(1), -torch.ones(1)):
        _check(f, torch.randn(6), y)


def test_half_reduction_compared_with_its_recomputed_operand():
    # Fuzz seed 20693 (docs/fuzzing.md): amin's result is stored in float16 (rounded) and the where's kernel
    # recomputes tanh; unless that recomputation rounds tanh to float16 too (as eager's stored tensor is),
    # `amin - tanh > 0` holds at the minimum itself and the other branch is taken.
    def f(x):
        t = torch.tanh(x)
        m = t.amin(dim=0, keepdim=True)
        return torch.where((m - t) > 0, m, x)

    _check(f, torch.tensor([0.5, -1.2], dtype=torch.float16), rtol=1e-3, atol=1e-3)


def test_option_is_checked():
    with pytest.raises(ValueError, match="unknown option"):
        ember.compile(lambda x: x, options={"triton_interpreter": True})
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TRITON_INTERPRET")
        with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
            ember.compile(lambda x: x, options=INTERPRET)


def test_max_autotune_interprets_the_first_config_without_timing(tmp_path, monkeypatch):
    # The interpreter never tunes (docs/cuda-runtime.md, "Autotuning"): max-autotune lists more
    # candidates in the source, the first runs, and no choice is written; no CPU-mode warning either.
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    ember.reset()
    import warnings
    x = torch.randn(16, 100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ember.compile(lambda t: torch.softmax(t, -1), mode="max-autotune", options=INTERPRET)(x)
    torch.testing.assert_close(got, torch.softmax(x, -1))
    assert not (tmp_path / "triton" / "best").exists()


# Symbolic sizes (docs/dynamic-shapes.md, "Triton"): one graph, its kernels taking the shape symbols
# as arguments, serves every size; odd sizes exercise the masks, long rows the looped reductions.
@pytest.mark.parametrize("name, fn, shapes, tol", [
    ("pointwise", lambda a, b: torch.relu(a * b + 1), [((33, 65), (65,)), ((7, 3), (3,)), ((16, 64), (64,))], {}),
    ("softmax", lambda a: torch.softmax(a, -1), [((8, 100),), ((5, 3),), ((3, 2000),)], {"rtol": 1e-5, "atol": 1e-5}),
    ("layer_norm", lambda a: F.layer_norm(a, (a.shape[-1],)), [((8, 100),), ((5, 33),)], {"rtol": 1e-5, "atol": 1e-4}),
])
def test_symbolic_sizes(name, fn, shapes, tol):
    ember.reset()
    compiled = ember.compile(fn, dynamic=True, options=INTERPRET)
    for shape in shapes:
        args = [torch.randn(*s) for s in shape]
        with torch.no_grad():
            torch.testing.assert_close(compiled(*args), fn(*args), **tol)
    s = ember.stats()
    assert s["codegen_failures"] == 0 and s["backend_errors"] == 0, s
    if name != "layer_norm":  # normalized_shape is a Python int the frontend specializes (a recompile per width)
        assert s["frames_compiled"] == 1 and s["recompiles"] == 0, s


def test_symbolic_batch_layer_norm():
    # A symbolic batch with a constant row: the persistent Welford kernel, masked on the batch.
    w, b = torch.randn(100), torch.randn(100)
    fn = lambda t: F.layer_norm(t, (100,), w, b)  # noqa: E731
    ember.reset()
    compiled = ember.compile(fn, dynamic=True, options=INTERPRET)
    for rows in (8, 3, 17):
        x = torch.randn(rows, 100)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), fn(x), rtol=1e-5, atol=1e-4)
    s = ember.stats()
    assert s["codegen_failures"] == 0 and s["backend_errors"] == 0, s


def test_symbolic_kernels_index_in_int32_under_a_guard():
    # Unbounded sizes that fit int32 at the traced call: int32 index math, and the frame guards the kernel's
    # points and span (`100*s0 <= 2147483647`), naming why; a call past it would recompile (int64 there).
    w, b = torch.randn(100), torch.randn(100)
    fn = lambda t: F.layer_norm(t, (100,), w, b)  # noqa: E731
    ember.reset()
    report = ember.explain(fn, dynamic=True, options=INTERPRET)(torch.randn(8, 100))
    guards = "\n".join(report.guards)
    assert "100*s0 <= 2147483647" in guards and "int32 indexing of the graph's Triton kernels" in guards, guards
    compiled = ember.compile(fn, dynamic=True, options=INTERPRET)
    for rows in (8, 3, 17):
        x = torch.randn(rows, 100)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), fn(x), rtol=1e-5, atol=1e-4)
