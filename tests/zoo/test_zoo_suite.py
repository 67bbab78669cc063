"""The zoo suite's harness (python/ember/bench/zoo.py): it runs, writes what it promises, selects models as its
options say, and records a model that fails instead of stopping. Nothing here asserts a speed.
"""
import json
import os
import subprocess
import sys

import pytest

for _library in ("timm", "torchvision", "diffusers", "transformers"):
    pytest.importorskip(_library)

from ember.bench import zoo, zoo_models  # noqa: E402
from ember.bench.compilers import COMPILERS  # noqa: E402

PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python")


def test_catalogue_covers_the_libraries():
    libraries = [e.library for e in zoo_models.MODELS.values()]
    assert len(libraries) >= 150
    assert libraries.count("transformers") >= 40
    assert {"timm", "torchvision", "transformers", "diffusers"} == set(libraries)
    families = {e.family for e in zoo_models.MODELS.values() if e.library == "transformers"}
    assert {"decoder", "encoder", "encoder-decoder", "vision", "speech"} <= families


def test_select_by_names_filter_and_limit():
    assert zoo.select("hf_gpt2,tv_resnet18", None, None) == ["hf_gpt2", "tv_resnet18"]
    assert all(n.startswith("tv_") for n in zoo.select(None, "^tv_", None))
    assert len(zoo.select(None, "^timm_", 3)) == 3
    with pytest.raises(ValueError):
        zoo.select("no_such_model", None, None)


def test_quick_run_writes_json_and_markdown(tmp_path):
    out = tmp_path / "zoo.json"
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "ember.bench", "zoo", "--quick", "--no-inductor",
                           "--models", "diffusers_resnet_block,hf_gpt2", "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    results = json.loads(out.read_text())
    assert results["suite"] == "zoo" and results["ok"] is True
    assert list(results["models"]) == ["diffusers_resnet_block", "hf_gpt2"]
    for name, row in results["models"].items():
        ember = row["results"]["ember"]
        assert row["error"] is None and ember["error"] is None, (name, row)
        assert ember["wrong"] is False and ember["explain"]["graphs"] >= 1
        assert row["dynamo"]["graphs"] >= 1 and "speedup" in ember and "compile_s" in ember
    assert results["summary"]["passed"] == 2 and results["summary"]["wrong"] == []
    assert (tmp_path / "zoo.md").read_text().startswith("# Ember benchmark: zoo")


def test_a_model_that_fails_to_build_is_recorded(monkeypatch):
    def broken():
        raise RuntimeError("no such layer")

    monkeypatch.setitem(zoo_models.MODELS, "broken", zoo_models.Entry("timm", "cnn", broken, "a broken model"))
    config = {"dynamo": False, "warmup": 1, "repeat": 1, "min_sample_ms": 0.5, "cold_models": []}
    row = zoo.run_model("broken", [COMPILERS["ember"]], config)
    assert row["error"] == "build: RuntimeError: no such layer"


def _bn_network():
    import torch
    import torch.nn as nn
    from ember.bench.models_workloads import Workload
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 4, 1)).eval()
    return Workload(model, (torch.randn(2, 3, 8, 8),), {}, "conv, BatchNorm, ReLU")


@pytest.mark.parametrize("formula_wrong", [False, True])
def test_a_float32_verdict_of_wrong_is_rechecked_in_float64(formula_wrong):
    """The zoo's no_grad call judges an output wrong past twice eager's float64 error; before saying so it runs
    the same compiler in float64 (zoo_row.recheck_in_float64): an exact float64 run makes the verdict
    ill-conditioned, a float64 run off the reference keeps it wrong. Eager's output is shifted here so that the
    float32 rule fires on a correct compile."""
    import torch
    from ember.bench import zoo_row
    from ember.bench.models_workloads import tensors_of
    w = _bn_network()
    with torch.no_grad():
        reference = zoo_row.float64_outputs(w)
        if formula_wrong:
            reference = [t + 1.0 for t in reference]
        eager_out = [t + 1.0 for t in tensors_of(w.model(*w.args))]
        result, _ = zoo._compile_and_check(COMPILERS["ember"], w, eager_out, reference, eager_error=0.0)
    assert result["error"] is None and result["float64_error"] is not None
    assert result["wrong"] is formula_wrong and result.get("ill_conditioned", False) is not formula_wrong
