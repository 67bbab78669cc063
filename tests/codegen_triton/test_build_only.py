"""The GPU backend's compile path without a GPU: option triton_build_only compiles graphs on the CPU
as for CUDA (their Triton kernels built to sm_90 cubins through the cubin cache) and runs them on the
eager executor (python/ember/options.py; docs/cuda-runtime.md, "Compile time"). Results are eager's,
the cubins land in EMBER_CACHE_DIR, a second process-level compile hits them, a recompile with a
symbolic size builds its own kernels, and bench's compile breakdown reports it all. Small graphs, a
few kernels: seconds (each Triton compile is about 0.3 s on the 2-core dev box)."""
import glob
import os

import pytest
import torch

import ember

pytest.importorskip("triton")
from ember._triton import compile as triton_compile  # noqa: E402
from ember.bench import compile_breakdown  # noqa: E402

if os.environ.get("TRITON_INTERPRET") == "1":
    pytest.skip("this process interprets Triton kernels; cubins need the compiler", allow_module_level=True)

BUILD_ONLY = {"triton_build_only": True}


@pytest.fixture(autouse=True)
def own_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "ember"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-own"))
    triton_compile.shutdown()  # workers of this test read its TRITON_CACHE_DIR
    ember.reset()
    yield
    ember.reset()
    triton_compile.shutdown()


def softmax_plus(x):
    return torch.softmax(x * 2, -1) + 1


def cubins(tmp_path):
    return glob.glob(str(tmp_path / "ember" / "triton" / "*" / "*" / "kernel.cubin"))


def test_builds_cubins_and_runs_eagerly(tmp_path):
    x = torch.randn(4, 32)
    with compile_breakdown.collect() as breakdown:
        out = ember.compile(softmax_plus, options=BUILD_ONLY)(x)
    torch.testing.assert_close(out, softmax_plus(x))
    assert breakdown["graphs"] == 1 and breakdown["triton"]["jobs"] >= 1, breakdown
    assert len(cubins(tmp_path)) == breakdown["triton"]["jobs"]
    assert "compile" in breakdown["stages_s"]
    line = compile_breakdown.line(breakdown)
    assert f"triton: {breakdown['triton']['jobs']} jobs in 1 batches" in line, line

    ember.reset()  # a new compile of the same graph: every cubin from the cache
    with compile_breakdown.collect() as again:
        ember.compile(softmax_plus, options=BUILD_ONLY)(x)
    assert again["triton"]["jobs"] == 0 and "compile (cached)" in again["stages_s"], again


def test_a_recompile_with_a_symbolic_size_builds_its_kernels():
    with compile_breakdown.collect() as breakdown:
        fn = ember.compile(softmax_plus, options=BUILD_ONLY)
        for rows in (3, 5, 7):
            x = torch.randn(rows, 32)
            torch.testing.assert_close(fn(x), softmax_plus(x))
    assert breakdown["graphs"] == 2, breakdown  # static, then rows symbolic
    assert breakdown["triton"]["batches"] == 2, breakdown


def test_a_symbolic_graph_builds_the_classes_ahead():
    # x * 2 + 1 over [s]: xnumel = s, a multiple of 16 at the first call (s = 48) and at s = 272
    # (17 << 4), not at 17 << 0..3: two classes of its one kernel, built in the graph's one batch
    # (runtime/triton_code.h, ahead_classes).
    with compile_breakdown.collect() as breakdown:
        fn = ember.compile(lambda x: x * 2 + 1, dynamic=True, options=BUILD_ONLY)
        x = torch.randn(48)
        torch.testing.assert_close(fn(x), x * 2 + 1)
    assert breakdown["graphs"] == 1 and breakdown["triton"]["batches"] == 1, breakdown
    assert breakdown["triton"]["jobs"] == 2, breakdown


def test_under_max_autotune_only_the_hints_class_is_built_ahead():
    # Each class is one job per config there (up to 8): the symbolic kernel builds its configs in the
    # hints' class only, as many jobs as the static kernel of the same size (the other classes at
    # first need).
    jobs = []
    for dynamic in (False, True):
        ember.reset()
        with compile_breakdown.collect() as breakdown:
            fn = ember.compile(lambda x: x * 2 + 1, dynamic=dynamic, mode="max-autotune-no-cudagraphs",
                               options=BUILD_ONLY)
            x = torch.randn(48)
            torch.testing.assert_close(fn(x), x * 2 + 1)
        jobs.append(breakdown["triton"]["jobs"])
    assert jobs[0] > 1 and jobs[1] == jobs[0], jobs
