"""The `gpu` benchmark suite runs and writes what it promises, on whatever device this machine has.

With a CUDA device the suite runs as it would on the H200 (CUDA-event timing, the CUDA allocator, every mode);
without one it runs with its hidden `--device cpu` option, which exercises everything but CUDA timing and
memory (wall-clock timing and resident-set memory instead) and skips reduce-overhead. --quick (tiny sizes,
three samples) and no Inductor (whose compiles take minutes on the two-core machine); a deliberately wrong
compiler is injected through run()'s extra_compilers hook, and the error columns must catch it. Nothing here
asserts a speed: benchmarks are not tests.
"""
import json
import os

import pytest

torch = pytest.importorskip("torch")

from bench_helpers import OFFSET, WrongCompiler, check_report, suite_args  # noqa: E402
from ember.bench import compare, gpu, gpu_workloads  # noqa: E402
from ember.bench.compilers import COMPILERS, lookup  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
RESULT_KEYS = {"label", "error", "max_abs_error", "time", "speedup", "peak_memory_bytes", "memory_method", "gbs"}


def _run(tmp_path, *argv, extra=()):
    out = tmp_path / "gpu.json"
    status = gpu.run(suite_args(gpu, "--quick", "--no-inductor", "--device", DEVICE, "--out", str(out), *argv),
                     extra_compilers=list(extra))
    return status, json.loads(out.read_text()), (tmp_path / "gpu.md").read_text()


def test_quick_run_writes_schema_and_catches_a_wrong_compiler(tmp_path, capsys):
    status, results, markdown = _run(tmp_path, "--workloads", "softmax,decode_step", "--no-compile-times",
                                     extra=[WrongCompiler()])
    printed = capsys.readouterr().out
    assert status == 1  # the wrong compiler's output is wrong
    check_report(tmp_path, "gpu", markdown, printed, "softmax")
    assert "| decode_step |" in markdown
    assert "same-size copy GB/s" in markdown

    assert set(results) == {"suite", "environment", "config", "bandwidth", "workloads", "geomean_speedup", "targets",
                            "ok"}
    assert results["suite"] == "gpu" and results["ok"] is False
    cfg = results["config"]
    modes = ["default", "reduce-overhead", "max-autotune"] if DEVICE == "cuda" else ["default", "max-autotune"]
    assert cfg["modes"] == modes and cfg["device"] == DEVICE and cfg["repeat"] == 3
    assert cfg["skipped_modes"] == ([] if DEVICE == "cuda" else ["reduce-overhead"])
    ember_names = ["ember" if m == "default" else f"ember-{m}" for m in modes]
    assert cfg["compilers"] == ember_names + ["wrong"]
    assert results["environment"]["device"] == DEVICE
    assert results["bandwidth"]["copy_gbs"] == results["bandwidth"]["best_gbs"] > 0

    for wname, row in results["workloads"].items():
        assert row["memory_bound"] is (wname == "softmax")
        # a copy of the row's own bytes, beside the reference copy
        assert (row.get("same_size_copy_gbs", 0) > 0) == row["memory_bound"]
        assert row["timing"] == ("wall clock" if DEVICE == "cpu" else "kernel" if row["memory_bound"] else "call")
        assert set(row["results"]) == {"eager", *ember_names, "wrong"}
        for cname, r in row["results"].items():
            assert RESULT_KEYS <= set(r), (wname, cname, set(r))
            assert r["error"] is None, (wname, cname, r["error"])
            assert r["time"]["samples"] == 3 and r["peak_memory_bytes"] >= 0
            assert (r["gbs"] is not None) == row["memory_bound"]
            assert "cold" not in r  # --no-compile-times
        assert row["results"]["eager"]["speedup"] == 1.0
        for cname in ember_names:
            ember = row["results"][cname]
            assert ember["wrong"] is False, (wname, cname)  # bfloat16 may differ from eager, by being more accurate
            assert ember["counters"]["graphs"] >= 1
        wrong = row["results"]["wrong"]
        assert wrong["max_abs_error"] == pytest.approx(OFFSET, abs=0.05)  # decode_step rounds to bfloat16
        assert wrong["matches_eager"] is False and wrong["wrong"] is True

    names = [t["name"] for t in results["targets"]]
    assert names == [f"bandwidth softmax: {c} vs copy" for c in ember_names]
    for t in results["targets"]:
        assert set(t) == {"name", "ember", "reference", "unit", "ratio", "op", "target", "met"}
        assert isinstance(t["met"], bool)
    if DEVICE == "cpu":
        assert "Skipped on cpu: mode reduce-overhead (needs CUDA)." in markdown


def test_compile_times_in_fresh_processes(tmp_path):
    status, results, markdown = _run(tmp_path, "--workloads", "softmax", "--modes", "default")
    assert status == 0, markdown
    ember = results["workloads"]["softmax"]["results"]["ember"]
    for phase in ("cold", "warm"):
        assert ember[phase]["error"] is None, ember[phase]
        assert set(ember[phase]) == {"compile_s", "first_call_s", "eager_call_s", "error"}
        assert ember[phase]["first_call_s"] > 0
    assert "| workload | ember cold | ember warm |" in markdown


def test_targets_compare_each_mode_with_inductor():
    """Targets from made-up rows: what is compared with what, and met / not met / n/a."""
    def result(us, gbs=None, cold=None):
        r = {"time": {"median_us": us}, "gbs": gbs}
        if cold is not None:
            r["cold"] = {"compile_s": cold, "error": None}
        return r

    rows = {
        "softmax": {"memory_bound": True, "results": {
            "eager": result(30.0), "ember": result(20.0, gbs=3700, cold=1.0), "inductor": result(25.0, gbs=3000, cold=6.0),
            "ember-reduce-overhead": result(20.0, gbs=3000, cold=1.0),
            "inductor-reduce-overhead": result(24.0, gbs=3100, cold=6.0)}},
        "decode_step": {"memory_bound": False, "results": {
            "eager": result(600.0), "ember": result(300.0, cold=2.5), "inductor": result(400.0, cold=3.0),
            "ember-reduce-overhead": result(150.0, cold=2.0), "inductor-reduce-overhead": {"error": "boom"}}},
    }
    config = {"modes": ["default", "reduce-overhead"], "compile_times": True,
              "compilers": ["ember", "inductor", "ember-reduce-overhead", "inductor-reduce-overhead"]}
    checks = {t["name"]: t for t in gpu._targets(rows, config, {"best_gbs": 4000.0})}
    assert list(checks) == [
        "time geomean (2 workloads): ember vs inductor",
        "cold compile, sum over 2 workloads: ember vs inductor",
        "bandwidth softmax: ember vs copy",
        "time geomean (1 workloads): ember-reduce-overhead vs inductor-reduce-overhead",
        "time decode_step: ember-reduce-overhead vs inductor-reduce-overhead",
        "cold compile, sum over 1 workloads: ember-reduce-overhead vs inductor-reduce-overhead",
        "bandwidth softmax: ember-reduce-overhead vs copy"]
    assert checks["time geomean (2 workloads): ember vs inductor"]["met"] is True
    assert checks["cold compile, sum over 2 workloads: ember vs inductor"]["ratio"] == pytest.approx(3.5 / 9)
    assert checks["cold compile, sum over 2 workloads: ember vs inductor"]["met"] is False
    assert checks["bandwidth softmax: ember vs copy"]["met"] is True  # 3700 >= 0.9 * 4000
    assert checks["bandwidth softmax: ember-reduce-overhead vs copy"]["met"] is False
    assert checks["time decode_step: ember-reduce-overhead vs inductor-reduce-overhead"]["met"] is None


def test_compilers_in_modes_resolve_by_name():
    c = COMPILERS["inductor"].in_mode("max-autotune")
    assert (c.name, c.mode, c.family) == ("inductor-max-autotune", "max-autotune", "dynamo")
    assert lookup("inductor-max-autotune") == c and lookup("ember") is COMPILERS["ember"]
    assert COMPILERS["ember"].in_mode("default") is COMPILERS["ember"]
    with pytest.raises(KeyError, match="unknown compiler 'ember-turbo'"):
        lookup("ember-turbo")
    with pytest.raises(ValueError, match="unknown mode 'turbo'"):
        COMPILERS["ember"].in_mode("turbo")


def test_unknown_mode_and_cuda_only_modes_on_cpu_are_rejected(tmp_path):
    with pytest.raises(ValueError, match=r"unknown mode\(s\) \['turbo'\]"):
        _run(tmp_path, "--modes", "default,turbo")
    if DEVICE == "cpu":
        with pytest.raises(ValueError, match="none of them runs on cpu"):
            _run(tmp_path, "--modes", "reduce-overhead")


def test_every_workload_builds_and_has_a_float64_reference():
    for name in gpu_workloads.BUILDERS:
        w = gpu_workloads.build(name, quick=True, device=DEVICE)
        ref_fn, ref_args = w.float64()
        with torch.no_grad():
            out, ref = w.fn(*w.args), ref_fn(*ref_args)
        assert ref.dtype == torch.float64 and out.shape == ref.shape and out.device.type == DEVICE, name
        error = compare.max_abs_error(out, ref)
        # bfloat16, and on CUDA the float32 workloads whose matmuls or convolutions may use TF32
        low_precision = out.dtype == torch.bfloat16 or DEVICE == "cuda" and name in ("seed_f32", "gpt2", "resnet50")
        assert error is not None and error < (0.5 if low_precision else 1e-2), (name, error)
        assert (w.bytes_moved is not None) == w.memory_bound, name


def test_resnet50_without_torchvision_has_torchvision_s_parameter_count():
    model = gpu_workloads.ResNet50()
    assert sum(p.numel() for p in model.parameters()) == 25_557_032
    assert model(torch.randn(1, 3, 64, 64)).shape == (1, 1000)


@pytest.mark.skipif(os.environ.get("EMBER_TEST_INDUCTOR") != "1",
                    reason="Inductor's compiles take minutes on the two-core machine; set EMBER_TEST_INDUCTOR=1 to run")
def test_with_inductor(tmp_path):
    out = tmp_path / "gpu.json"
    status = gpu.run(suite_args(gpu, "--quick", "--device", DEVICE, "--workloads", "softmax", "--modes", "default",
                                "--out", str(out)))
    results = json.loads(out.read_text())
    assert status == 0, results
    r = results["workloads"]["softmax"]["results"]["inductor"]
    assert r["error"] is None and r["wrong"] is False and r["cold"]["error"] is None
    names = [t["name"] for t in results["targets"]]
    assert names == ["time geomean (1 workloads): ember vs inductor",
                     "cold compile, sum over 1 workloads: ember vs inductor", "bandwidth softmax: ember vs copy"]
