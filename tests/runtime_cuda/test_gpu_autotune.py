"""Autotuning on the GPU (runs on a CUDA machine; skipped elsewhere): graphs compiled with
mode="max-autotune" time their kernels' candidate configs at the first call, match eager, cache the
choice under EMBER_CACHE_DIR/triton/best, and a second process takes the choice from there without
timing; a kernel updating its input in place gives x + 1 once, whatever the trials did."""
import glob
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import ember

pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")

_PROGRAM = """
    import sys
    sys.path.insert(0, {python_dir!r})
    import torch, ember
    torch.manual_seed(0)
    x = torch.randn(4096, 1024, device="cuda")
    for name, fn in [("softmax", lambda t: torch.softmax(t, -1)), ("sum0", lambda t: t.sum(0))]:
        got = ember.compile(fn, mode="max-autotune")(x)
        # The tuned configs sum in another order than eager: the float64-reference rule (DESIGN.md).
        ref = fn(x.double())
        err, eager_err = (got.double() - ref).abs().max().item(), (fn(x).double() - ref).abs().max().item()
        assert err <= 2 * eager_err + 1e-6, (name, err, eager_err)
        print(name, "ok", ember.stats()["kernels_compiled"])
"""


def run(cache, logs="", program=_PROGRAM):
    """(stdout, stderr) of `program` in a fresh process with this cache and EMBER_LOGS."""
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache), EMBER_LOGS=logs)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(program.format(python_dir=PYTHON_DIR))],
                            env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout, result.stderr


def test_max_autotune_picks_a_config_caches_it_and_a_second_process_skips_tuning(tmp_path):
    cache = tmp_path / "cache"
    stdout, stderr = run(cache, logs="perf")
    assert "softmax ok" in stdout and "sum0 ok" in stdout
    assert "autotuning Triton kernel" in stderr and "timed" in stderr, stderr
    choices = glob.glob(str(cache / "triton" / "best" / "*.json"))
    assert choices, "no tuning choice was cached"
    before = {path: os.path.getmtime(path) for path in choices}
    stdout, stderr = run(cache, logs="perf")
    assert "softmax ok" in stdout and "sum0 ok" in stdout
    assert " timed " not in stderr and "cached choice" in stderr, stderr
    assert {path: os.path.getmtime(path) for path in glob.glob(str(cache / "triton" / "best" / "*.json"))} == before


def test_in_place_updates_are_undone_after_the_trials(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))

    def add_one(x):
        x.add_(1)
        return x * 2

    x = torch.arange(1 << 16, device="cuda", dtype=torch.float32)
    expected = x + 1
    out = ember.compile(add_one, mode="max-autotune")(x)
    torch.testing.assert_close(x, expected)  # incremented once
    torch.testing.assert_close(out, expected * 2)


def test_default_mode_compiles_one_config_and_does_not_tune(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    x = torch.randn(512, 512, device="cuda")
    torch.testing.assert_close(ember.compile(lambda t: torch.softmax(t, -1))(x), torch.softmax(x, -1))
    assert not glob.glob(str(tmp_path / "triton" / "best" / "*.json"))
