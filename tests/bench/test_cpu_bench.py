"""The `cpu` benchmark suite runs and writes what it promises; its error columns catch a wrong compiler.

The suite runs with --quick (tiny sizes, three samples) on two workloads in this process, with a
deliberately wrong "compiler" injected through run()'s extra_compilers hook; and, when EMBER_TEST_INDUCTOR=1,
once more from the command line with Inductor on a single workload (about a minute of C++ compiles on the
two-core machine, so it is opt-in). Nothing here asserts a speed: benchmarks are not tests.
"""
import json
import math
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from bench_helpers import OFFSET, WrongCompiler, check_report, suite_args  # noqa: E402
from ember.bench import compare, cpu, cpu_workloads, memory  # noqa: E402

PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python")
RESULT_KEYS = {"label", "error", "max_abs_error", "time", "speedup", "peak_memory_bytes", "memory_method", "gbs"}
PROBE_KEYS = {"compile_s", "first_call_s", "eager_call_s", "first_call_rss_bytes", "memory_method", "error"}


def _args(*argv):
    return suite_args(cpu, *argv)


@pytest.fixture
def keep_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_quick_run_writes_schema_and_catches_a_wrong_compiler(tmp_path, capsys, keep_threads):
    out = tmp_path / "cpu.json"
    status = cpu.run(_args("--quick", "--no-inductor", "--workloads", "softmax,layer_norm", "--threads", "1",
                           "--out", str(out)), extra_compilers=[WrongCompiler()])
    printed = capsys.readouterr().out
    assert status == 1  # the wrong compiler's output is wrong
    results = json.loads(out.read_text())
    check_report(tmp_path, "cpu", (tmp_path / "cpu.md").read_text(), printed, "softmax")

    assert set(results) == {"suite", "environment", "config", "bandwidth", "workloads", "geomean_speedup", "targets",
                            "ok"}
    assert results["suite"] == "cpu" and results["ok"] is False
    cfg = results["config"]
    assert cfg["compilers"] == ["ember", "wrong"] and cfg["workloads"] == ["softmax", "layer_norm"]
    assert cfg["quick"] is True and cfg["threads"] == 1 and cfg["repeat"] == 3
    bw = results["bandwidth"]
    assert bw["best_gbs"] == max(bw["torch_copy_gbs"], bw["numpy_memcpy_gbs"]) > 0

    for wname, row in results["workloads"].items():
        assert row["memory_bound"] is True
        assert row["bytes_moved"] > 0
        assert set(row["results"]) == {"eager", "ember", "wrong"}
        for cname, r in row["results"].items():
            assert RESULT_KEYS <= set(r), (wname, cname, set(r))
            assert r["error"] is None, (wname, cname, r["error"])
            assert r["time"]["samples"] == 3
            assert r["gbs"] > 0 and r["peak_memory_bytes"] >= 0
        eager, ember, wrong = (row["results"][c] for c in ("eager", "ember", "wrong"))
        assert eager["speedup"] == 1.0
        # float32 against float64: small but not zero; a wrong compiler is off by the offset it added.
        assert 0 < eager["max_abs_error"] < 1e-4
        assert 0 <= ember["max_abs_error"] < 1e-4 and ember["matches_eager"] is True and ember["wrong"] is False
        assert wrong["max_abs_error"] == pytest.approx(OFFSET, rel=1e-3)
        assert wrong["matches_eager"] is False and wrong["wrong"] is True
        assert ember["counters"]["graphs"] >= 1
        for phase in ("cold", "warm"):
            assert PROBE_KEYS <= set(ember[phase]) and ember[phase]["error"] is None, ember[phase]
            assert ember[phase]["first_call_s"] > 0
        assert "cold" not in wrong  # a fresh process cannot name an injected compiler

    assert results["geomean_speedup"]["ember"]["workloads"] == 2
    names = [t["name"] for t in results["targets"]]
    assert names == ["bandwidth softmax: ember vs copy", "bandwidth layer_norm: ember vs copy",
                     "error softmax: ember vs eager", "error layer_norm: ember vs eager"]
    for t in results["targets"]:
        assert set(t) == {"name", "ember", "reference", "unit", "ratio", "op", "target", "met"}
        assert isinstance(t["met"], bool)


@pytest.mark.skipif(os.environ.get("EMBER_TEST_INDUCTOR") != "1",
                    reason="Inductor's C++ compiles take about a minute for one workload on the two-core machine; "
                           "set EMBER_TEST_INDUCTOR=1 to run")
def test_with_inductor_from_the_command_line(tmp_path):
    out = tmp_path / "cpu.json"
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "ember.bench", "cpu", "--quick", "--workloads", "softmax",
                           "--threads", "1", "--out", str(out)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    results = json.loads(out.read_text())
    r = results["workloads"]["softmax"]["results"]["inductor"]
    assert r["error"] is None and r["wrong"] is False and r["counters"]["graphs"] >= 1
    assert r["cold"]["error"] is None and r["warm"]["error"] is None
    names = [t["name"] for t in results["targets"]]
    assert names[:4] == ["time softmax: ember vs inductor", "time geomean (1 workloads): ember vs inductor",
                         "cold compile, sum over 1 workloads: ember vs inductor",
                         "warm compile, sum over 1 workloads: ember vs inductor"]
    assert "| check | ember | reference | ratio | target | met |" in proc.stdout


def test_unknown_workload_is_rejected(keep_threads):
    with pytest.raises(ValueError, match=r"unknown workload\(s\) \['nope'\]; known: seed_f32, seed_bf16"):
        cpu.run(_args("--workloads", "softmax,nope", "--out", os.devnull))


def test_every_workload_builds_and_has_a_float64_reference():
    for name in cpu_workloads.BUILDERS:
        w = cpu_workloads.build(name, quick=True)
        ref_fn, ref_args = w.float64()
        with torch.no_grad():
            out, ref = w.fn(*w.args), ref_fn(*ref_args)
        for o, r in zip(compare.tensors(out), compare.tensors(ref), strict=True):
            assert r.dtype == torch.float64 and o.shape == r.shape, name
        error = compare.max_abs_error(out, ref)
        assert error is not None and error < (0.1 if name == "seed_bf16" else 1e-3), (name, error)
        assert (w.bytes_moved is not None) == w.memory_bound, name


def test_max_abs_error_flags_nonfinite_output():
    ref = torch.zeros(4, dtype=torch.float64)
    assert compare.max_abs_error(torch.tensor([0.0, 1.0, -2.0, 0.5]), ref) == 2.0
    assert compare.max_abs_error(torch.tensor([0.0, math.nan, 0.0, 0.0]), ref) is None


def test_peak_delta_sees_an_allocation():
    size = 64 << 20

    def allocate():
        torch.ones(size // 4)  # touched pages: resident until freed

    peak = memory.peak_delta(allocate, 2)
    assert peak["bytes"] >= size * 0.9, peak
    assert peak["method"] in ("VmHWM - VmRSS", "ru_maxrss growth (a lower bound)")


ZOO_BLOCKS = list(cpu_workloads.BUILDERS)[list(cpu_workloads.BUILDERS).index("swiglu_mlp"):]


@pytest.mark.parametrize("name", ZOO_BLOCKS)
def test_zoo_block_workloads_compile_whole_and_match(name):
    # The zoo's blocks are one graph each in their models: here too, with kernels, and eager's result.
    import ember
    w = cpu_workloads.build(name, quick=True)
    ember.reset()
    with torch.no_grad():
        out = ember.compile(w.fn)(*w.args)
        torch.testing.assert_close(out, w.fn(*w.args))
    stats = ember.stats()
    assert (stats["graphs"], stats["graph_breaks"], stats["eager_frames"]) == (1, 0, 0), stats
    assert stats["kernels_compiled"] >= 1 and stats["codegen_failures"] == 0
