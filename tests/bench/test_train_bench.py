"""The `train` suite (python -m ember.bench train) in its --quick sizes: it runs, measures every column it promises,
checks gradients and BatchNorm's running statistics against eager's; and its fresh-process probe. Nothing here
asserts a speed. Inductor stays out (its C++ compiles of a training step would dominate the test's time);
the CUDA test runs only where torch sees a GPU."""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python")


def _run_train(tmp_path, *argv):
    out = tmp_path / "train.json"
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "ember.bench", "train", "--quick", "--no-inductor", "--repeat", "2",
                           "--out", str(out), *argv], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return json.loads(out.read_text()), (tmp_path / "train.md").read_text()


def test_train_suite_with_adamw_measures_every_column(tmp_path):
    results, markdown = _run_train(tmp_path, "--adamw", "--no-compile-times", "--workloads", "convbn")
    assert results["ok"] is True and results["config"]["adamw"] is True
    for name in ("convbn",):
        r = results["workloads"][name]["results"]
        assert set(r) == {"eager", "ember"}
        assert r["ember"]["error"] is None and r["ember"]["differs"] == []
        assert r["ember"]["backward_graphs"] >= 1
        for n in ("eager", "ember"):
            assert r[n]["time"]["median_us"] > 0 and r[n]["saved_bytes"] > 0 and r[n]["peak_memory_bytes"] >= 0
            assert set(r[n]["phases"]) == {"forward", "backward", "optimizer"}
            assert all(p["median_us"] > 0 for p in r[n]["phases"].values())
    # BatchNorm's running statistics were compared with eager's (and matched: differs is empty above).
    assert results["workloads"]["convbn"]["results"]["ember"]["max_buffer_diff"] is not None
    assert markdown.startswith("# Ember benchmark: train") and "| convbn |" in markdown


def test_train_probe_times_a_first_compiled_step():
    from ember.bench import train_probe
    result = train_probe.probe({"workload": "mlp", "compiler": "ember", "quick": True, "device": "cpu",
                                "dtype": "float32", "adamw": False})
    assert result["error"] is None and result["first_call_s"] > 0 and result["eager_call_s"] > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_train_suite_on_cuda_in_bfloat16(tmp_path):
    results, _ = _run_train(tmp_path, "--device", "cuda", "--dtype", "bf16", "--adamw",
                            "--workloads", "llama,convbn")
    for name, row in results["workloads"].items():
        assert row["results"]["ember"]["error"] is None, (name, row["results"]["ember"]["error"])
        assert row["results"]["ember"]["cold"]["error"] is None, name
