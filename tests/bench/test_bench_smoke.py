"""Smoke tests of the benchmark harness, the demo and the reference models: they run, they write what they
promise.

The overhead suite runs in a tiny configuration (a 2-layer model, few samples, no Inductor, whose C++
compile would dominate the test's time). Nothing here asserts a speed: benchmarks are not tests.
"""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python")


def _run_bench(*args, timeout=300):
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "ember.bench", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def test_overhead_suite_writes_expected_json(tmp_path):
    out = tmp_path / "overhead.json"
    compilers = ["ember_eager", "ember", "dynamo_eager"]
    proc = _run_bench("overhead", "--compilers", ",".join(compilers), "--repeats", "3", "--warmup", "1",
                      "--min-sample-ms", "0.2", "--capture-repeats", "2", "--layers", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    results = json.loads(out.read_text())
    assert (tmp_path / "overhead.md").read_text().startswith("# Ember benchmark: overhead")

    assert set(results) >= {"suite", "environment", "config", "workloads", "capture", "targets", "ok"}
    assert results["suite"] == "overhead" and results["ok"] is True
    assert results["config"]["compilers"] == compilers
    assert set(results["environment"]) >= {"python", "torch", "cpu", "cpu_count", "torch_threads"}
    assert set(results["workloads"]) == {"add", "gpt"}
    for wname, workload in results["workloads"].items():
        assert set(workload["results"]) == set(compilers)  # JSON keys are sorted
        for cname, r in workload["results"].items():
            assert r["error"] is None, (wname, cname, r["error"])
            assert r["matches_eager"] is True, (wname, cname)
            assert set(r) >= {"label", "first_call_s", "capture_s", "eager", "compiled", "compiled_over_eager",
                              "overhead", "counters"}
            for key in ("eager", "compiled"):
                assert set(r[key]) >= {"median_us", "min_us", "iqr_us", "samples", "calls_per_sample"}
                assert r[key]["samples"] == 3
            assert set(r["overhead"]) == {"us", "noise_us", "within_noise"}
            assert r["counters"]["graphs"] >= 1, (wname, cname, r["counters"])
            if cname.startswith("ember"):
                assert set(r["counters"]) >= {"trace_seconds", "graph_breaks", "ops_captured"}

    assert set(results["capture"]) == set(compilers)
    for cname, c in results["capture"].items():
        assert set(c) >= {"eager_call_s", "first_call_s_samples", "capture_s_samples", "capture_s",
                          "trace_seconds_samples", "trace_seconds_median"}
        assert len(c["capture_s_samples"]) == 2
        assert (c["trace_seconds_median"] is not None) == cname.startswith("ember")

    names = [t["name"] for t in results["targets"]]
    assert names == ["overhead add: ember_eager vs dynamo_eager", "overhead gpt: ember_eager vs dynamo_eager",
                     "capture gpt: ember vs dynamo_eager", "capture gpt: ember_eager vs dynamo_eager"]
    for t in results["targets"]:
        assert set(t) == {"name", "ember", "reference", "unit", "target", "ratio", "met"}


def test_unknown_compiler_is_rejected():
    proc = _run_bench("overhead", "--compilers", "ember,turbo", "--out", os.devnull)
    assert proc.returncode != 0
    assert "turbo" in proc.stderr and "known: ember_eager, ember, dynamo_eager, inductor" in proc.stderr


def test_models_suite_writes_expected_json(tmp_path):
    out = tmp_path / "models.json"
    proc = _run_bench("models", "--quick", "--no-inductor", "--models", "nanogpt", "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    results = json.loads(out.read_text())
    assert results["suite"] == "models" and list(results["models"]) == ["nanogpt"]
    row = results["models"]["nanogpt"]["results"]
    assert set(row) == {"eager", "ember"}
    assert row["ember"]["error"] is None and row["ember"]["graphs"] >= 1 and not row["ember"]["wrong"]
    assert row["ember"]["time"]["median_us"] > 0
    assert (tmp_path / "models.md").read_text().startswith("# Ember benchmark: models")


def test_optim_suite_writes_expected_json(tmp_path):
    out = tmp_path / "optim.json"
    proc = _run_bench("optim", "--quick", "--no-inductor", "--workloads", "sgd", "--repeat", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    row = json.loads(out.read_text())["workloads"]["sgd"]["results"]
    assert set(row) == {"eager_foreach", "eager_fused", "ember"}
    assert row["ember"]["error"] is None and row["ember"]["median_s"] > 0 and row["ember"]["max_param_diff"] < 1e-5


def test_models_suite_rejects_unknown_model():
    proc = _run_bench("models", "--quick", "--models", "gpt5", "--out", os.devnull)
    assert proc.returncode != 0 and "gpt5" in proc.stderr


def test_timing_difference_needs_paired_samples():
    from ember.bench import timing
    a = timing.Timing([3e-6, 4e-6, 5e-6], 10)
    b = timing.Timing([1e-6, 1e-6, 2e-6], 10)
    d = timing.difference(a, b)
    assert d.value == pytest.approx(3e-6)
    with pytest.raises(ValueError, match="not taken together"):
        timing.difference(a, timing.Timing([1e-6], 10))


def test_nanogpt_shapes_tied_weights_and_loss():
    from ember.models import GPT, GPTConfig, random_tokens
    config = GPTConfig(block_size=8, vocab_size=32, n_layer=2, n_head=2, n_embd=16)
    torch.manual_seed(0)
    model = GPT(config)
    assert model.lm_head.weight is model.transformer.wte.weight
    idx = random_tokens(config, 3, 8)
    logits = model(idx)
    assert logits.shape == (3, 8, 32)
    logits2, loss = model(idx, targets=idx)
    torch.testing.assert_close(logits2, logits)
    loss.backward()
    assert model.lm_head.weight.grad is not None
    # Causality: changing the last token must not change earlier positions' logits.
    idx2 = idx.clone()
    idx2[:, -1] = (idx2[:, -1] + 1) % config.vocab_size
    with torch.no_grad():
        torch.testing.assert_close(model(idx2)[:, :-1], model(idx)[:, :-1])
    with pytest.raises(ValueError, match="exceeds block_size"):
        model(random_tokens(GPTConfig(block_size=9, vocab_size=32), 1, 9))
    with pytest.raises(ValueError, match="divisible by n_head"):
        GPTConfig(n_embd=10, n_head=3)


def test_demo_runs_and_matches_eager():
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "ember.demo", "--repeats", "2", "--warmup", "1",
                           "--min-sample-ms", "0.2", "--show-graphs", "0"], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    table = [line for line in proc.stdout.splitlines() if line.startswith("| seed block") or
             line.startswith("| nanoGPT")]
    assert len(table) == 2 and all(line.rstrip().endswith("| yes |") for line in table), proc.stdout
