"""backend="ember" as a user sees it: generated kernels, their fallbacks, and what explain, stats
and EMBER_LOGS report about them (docs/backend.md)."""
import logging
import warnings

import pytest
import torch
import torch.nn.functional as F

import ember


def softmax_residual(x, r):
    return torch.softmax(x, -1) + r


def layer_norm_gelu(x, w, b):
    return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b), approximate="tanh")


def args_softmax():
    return torch.randn(8, 32), torch.randn(8, 32)


def test_generated_kernels_match_eager_and_are_counted():
    x, r = args_softmax()
    compiled = ember.compile(softmax_residual)
    for _ in range(2):
        torch.testing.assert_close(compiled(x, r), softmax_residual(x, r))
    s = ember.stats()
    assert s["kernels_compiled"] == 1, s  # softmax and the residual add: one fused kernel
    assert s["codegen_failures"] == 0


def test_explain_reports_kernels_and_planned_peak():
    x, w, b = torch.randn(4, 16), torch.randn(16), torch.randn(16)
    out = ember.explain(layer_norm_gelu)(x, w, b)
    assert out.kernel_counts == [1]
    assert out.backend_fallbacks == [""]
    # The output (4*16 floats) is allocated per call; no temporary survives fusion.
    assert out.planned_peak_bytes == [4 * 16 * 4]
    assert "planned peak memory: 256 bytes" in str(out)


def test_graph_needing_gradients_compiles_forward_and_backward():
    x = torch.randn(4, 16, requires_grad=True)
    w, b = torch.randn(16), torch.randn(16)
    out = ember.explain(layer_norm_gelu)(x, w, b)
    assert out.kernel_counts[0] >= 2  # forward and backward kernels
    assert out.backend_fallbacks == [""] and out.training == [True] and out.autograd_islands == [[]]
    ember.reset()
    compiled = ember.compile(layer_norm_gelu)
    compiled(x, w, b).sum().backward()
    g = x.grad.clone()
    x.grad = None
    layer_norm_gelu(x, w, b).sum().backward()
    torch.testing.assert_close(g, x.grad)
    assert ember.stats()["backward_graphs_compiled"] == 1


def test_compiler_failure_warns_once_counts_and_stays_correct(monkeypatch):
    # A "compiler" that always fails: the graph runs on the eager executor, with one warning that
    # carries the compiler's error.
    monkeypatch.setenv("CXX", "false")
    x, r = args_softmax()
    compiled = ember.compile(softmax_residual)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            torch.testing.assert_close(compiled(x, r), softmax_residual(x, r))
    messages = [str(w.message) for w in caught if "did not compile" in str(w.message)]
    assert len(messages) == 1, [str(w.message) for w in caught]
    assert "eager executor" in messages[0]
    s = ember.stats()
    assert s["codegen_failures"] == 1 and s["kernels_compiled"] == 0, s


def zero_dim_sum(x):
    return x.sum() * x


# A backend step that fails (an internal error, a bug), injected after decompose.
FAULT = {"inject_fault_after": "decompose"}


def test_zero_dim_reductions_reach_kernels():
    # A reduction over every dim of a 0-dim tensor keeps torch's form (an extern call); it once
    # made decompose throw.
    x = torch.tensor(3.0)
    torch.testing.assert_close(ember.compile(zero_dim_sum)(x), zero_dim_sum(x))
    s = ember.stats()
    assert s["backend_errors"] == 0 and s["kernels_compiled"] == 1, s


def test_internal_error_raises_under_strict():
    # The test suite runs with EMBER_STRICT=1 (conftest.py): an internal error is a test failure.
    x = torch.tensor(3.0)
    with pytest.raises(ember.InternalError) as info:
        ember.compile(zero_dim_sum, options=FAULT)(x)
    assert isinstance(info.value, RuntimeError)
    assert info.value.stage == "decompose" and "fault injected" in info.value.message
    assert "zero_dim_sum" in str(info.value)
    assert ember.stats()["backend_errors"] == 1


def test_internal_error_without_strict_warns_once_counts_and_stays_correct():
    x = torch.tensor(3.0)
    compiled = ember.compile(zero_dim_sum, options={"strict": False, **FAULT})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            torch.testing.assert_close(compiled(x * 2), zero_dim_sum(x * 2))
        ember.compile(zero_dim_sum, options={"strict": False, **FAULT})(x)  # the same site: no second warning
    messages = [str(w.message) for w in caught if "internal error" in str(w.message)]
    assert len(messages) == 1, [str(w.message) for w in caught]
    assert "fault injected" in messages[0] and "eager executor" in messages[0]
    s = ember.stats()
    assert s["backend_errors"] == 2 and s["codegen_failures"] == 0 and s["kernels_compiled"] == 0, s
    out = ember.explain(zero_dim_sum, options={"strict": False, **FAULT})(x)
    assert out.backend_fallbacks[0].startswith("internal error in the backend"), out


def test_strict_from_the_environment(monkeypatch):
    monkeypatch.setenv("EMBER_STRICT", "0")
    x = torch.tensor(3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.testing.assert_close(ember.compile(zero_dim_sum, options=FAULT)(x), zero_dim_sum(x))
    with pytest.raises(ember.InternalError):
        ember.compile(zero_dim_sum, options={"strict": True, **FAULT})(x)
    monkeypatch.setenv("EMBER_STRICT", "yes")
    with pytest.raises(ValueError, match="EMBER_STRICT"):
        ember.compile(zero_dim_sum)


def test_fallbacks_by_design_are_not_internal_errors(monkeypatch):
    # Under strict: a training graph that cannot be differentiated ahead of time (an in-place write
    # of a value that requires grad, seen through a view), one with only extern calls, generated C++
    # that does not compile -- each runs on the eager executor without raising, and none is a backend
    # error.
    def writes_grad_value(x):
        y = x * 2
        v = y[1:]
        y.add_(1)
        return y.exp() + v.sum()

    ember.compile(writes_grad_value)(torch.randn(4, 16, requires_grad=True))
    ember.compile(lambda a, b: a @ b)(torch.randn(3, 4), torch.randn(4, 5))
    monkeypatch.setenv("CXX", "false")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ember.compile(softmax_residual)(*args_softmax())
    s = ember.stats()
    assert s["backend_errors"] == 0 and s["codegen_failures"] == 1 and s["kernels_compiled"] == 0, s


def test_logs_schedule_output_code_and_perf(monkeypatch, caplog):
    monkeypatch.setenv("EMBER_LOGS", "schedule,output_code,perf")
    caplog.set_level(logging.INFO, logger="ember")
    x, r = args_softmax()
    ember.compile(softmax_residual)(x, r)
    text = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("ember"))
    assert "kernel @k0" in text            # the scheduled loop IR
    assert "vertical" in text or "inline" in text  # fusion decisions with reasons
    assert "ember_entry" in text or "extern \"C\"" in text  # the generated C++
    for step in ("canonicalize", "decompose", "dce", "cse", "lower", "simplify", "schedule", "plan", "emit"):
        assert f"{step} " in text, step  # per-step times, every pipeline step
    assert "compile (cached)" in text or "compile " in text


def test_logs_passes_print_the_ir_after_each_step_that_changed_it(monkeypatch, caplog):
    monkeypatch.setenv("EMBER_LOGS", "passes")
    caplog.set_level(logging.INFO, logger="ember")
    x, r = args_softmax()
    ember.compile(softmax_residual)(x, r)
    steps = [r.getMessage().split(" ", 2)[1] for r in caplog.records if r.name == "ember.passes"]
    # Captured softmax binds its defaults and decomposes, lowers to loop IR, fuses, is planned and
    # emitted; dce, cse and simplify find nothing to do.
    assert steps == ["canonicalize", "decompose", "lower", "schedule", "plan", "emit"], steps
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "ember.passes")
    assert "amax(" in text and "kernel @k0" in text and "ember_entry" in text


def test_verify_option_checks_every_step():
    # The verifier after each step changes nothing for a valid compilation (tests run with it on).
    x, r = args_softmax()
    fn = ember.compile(softmax_residual, options={"verify": True})
    torch.testing.assert_close(fn(x, r), softmax_residual(x, r))
    assert ember.stats()["kernels_compiled"] >= 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_seed_block_matmul_plus_one_kernel(dtype):
    torch.manual_seed(0)
    x, w, b, r = (torch.randn(16, 32, dtype=dtype), torch.randn(32, 32, dtype=dtype), torch.randn(32, dtype=dtype),
                  torch.randn(16, 32, dtype=dtype))

    def seed(x, w, b, r):
        return F.gelu(x @ w + b, approximate="tanh") + r

    out = ember.explain(seed)(x, w, b, r)
    assert out.kernel_counts == [1], out
    got = ember.compile(seed)(x, w, b, r)
    ref = seed(*(t.double() for t in (x, w, b, r)))
    eager_err = (seed(x, w, b, r).double() - ref).abs().max().item()
    ember_err = (got.double() - ref).abs().max().item()
    assert ember_err <= 2 * eager_err + 1e-6, (ember_err, eager_err)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("exponent", [0.0, 1.0, 2.0, 3.0, 3, -2.0, -0.5, -1.0])
def test_pow_by_small_constants_takes_torchs_exact_forms(exponent, dtype):
    # torch computes these as products, a quotient, rsqrt or a reciprocal, not with pow: the generated
    # kernel must give the same bits (pow(x, 3) by libm's powf differs from x*x*x in the last place).
    torch.manual_seed(0)
    x = torch.cat([torch.randn(4093) * 3, torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan")])])
    x = x.to(dtype)
    if exponent == -0.5:
        x = x.abs()

    def f(t):
        return torch.pow(t, exponent) + 1

    out = ember.explain(f)(x)
    assert out.kernel_counts == [1], out
    torch.testing.assert_close(ember.compile(f)(x), f(x), rtol=0, atol=0, equal_nan=True)


# The arena of temporaries (and the tensors over it) is kept between calls: results of one call must
# never change when a later call runs, whatever an extern did with a temporary.
def temp_unsqueezed_in_place(x):
    y = x * 2
    y.unsqueeze_(0)  # an extern that changes a temporary's tensor (sizes) in place
    return y + 1


def temp_returned_by_extern(x):
    y = x * 2
    return y.unsqueeze_(0), y.sum()  # the first output aliases the temporary's memory


def temp_into_matmul(x, w):
    h = torch.tanh(x) * 2  # a temporary handed to an extern matmul, then to a kernel
    return torch.relu(h @ w) + h.sum()


@pytest.mark.parametrize("fn", [temp_unsqueezed_in_place, temp_returned_by_extern])
def test_reused_arena_keeps_earlier_results(fn):
    compiled = ember.compile(fn)
    kept = []
    for _ in range(4):
        x = torch.randn(3, 4)
        out = compiled(x)
        outs = out if isinstance(out, tuple) else (out,)
        want = fn(x.clone())
        wants = want if isinstance(want, tuple) else (want,)
        for o, w in zip(outs, wants):
            torch.testing.assert_close(o, w)
        kept.append((outs, tuple(o.clone() for o in outs)))
    for outs, copies in kept:  # later calls did not write into earlier outputs
        for o, c in zip(outs, copies):
            assert torch.equal(o, c)
    assert ember.stats()["kernels_compiled"] >= 1


def test_reused_arena_under_threads():
    import threading
    compiled = ember.compile(temp_into_matmul)
    w = torch.randn(64, 64)
    inputs = [torch.randn(32, 64) for _ in range(8)]
    expected = [compiled(x, w) for x in inputs]  # one thread: the bits every thread must get
    for x, e in zip(inputs, expected):
        torch.testing.assert_close(e, temp_into_matmul(x, w), rtol=1e-4, atol=1e-4)  # h.sum() of 2048 terms
    failures = []

    def worker(k):
        for _ in range(20):
            if not torch.equal(compiled(inputs[k], w), expected[k]):
                failures.append(k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    assert ember.stats()["kernels_compiled"] >= 1
