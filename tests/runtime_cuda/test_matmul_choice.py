"""max-autotune's matmul choice without a GPU (runtime/autotune.h, choose_matmul): the extern call +
epilogue (a) against the template (b) with timers written here, and the disk cache of the choice
in the best-config cache."""
import os

from ember._C import cuda

MM = ["BLOCK_M=128 BLOCK_N=128 BLOCK_K=64 GROUP_M=8 num_warps=4 num_stages=3",
      "BLOCK_M=64 BLOCK_N=128 BLOCK_K=64 GROUP_M=8 num_warps=4 num_stages=3"]


def test_the_template_wins_when_faster():
    r = cuda.choose_matmul(lambda: 0.40, MM, {MM[0]: 0.35, MM[1]: 0.30}.__getitem__)
    assert r["use_template"] and r["best"] == MM[1] and r["extern_ms"] == 0.40 and r["best_ms"] == 0.30
    assert r["describe"].endswith(": template") and "0.4 ms" in r["describe"]


def test_the_extern_call_stays_when_faster_or_tied():
    assert not cuda.choose_matmul(lambda: 0.25, MM, lambda c: 0.30)["use_template"]
    # Within 0.1%: today's path is kept (no template to load for the same time).
    assert not cuda.choose_matmul(lambda: 0.30, MM, lambda c: 0.2999)["use_template"]
    assert cuda.choose_matmul(lambda: 0.30, MM, lambda c: 0.29)["use_template"]


def test_a_template_that_never_runs_keeps_the_extern_call():
    r = cuda.choose_matmul(lambda: 1.0, MM, lambda c: "out of resources")
    assert not r["use_template"] and "out of resources" in r["template_failed"]
    assert r["describe"].endswith(": extern")


def test_template_configs_get_coordinate_descent():
    seen = []

    def timer(config):
        seen.append(config)
        return 1.0 if "num_warps=8" in config else 2.0
    r = cuda.choose_matmul(lambda: 1.5, MM, timer, coordinate_descent=True)
    assert r["use_template"] and "num_warps=8" in r["best"] and r["found_by_coordinate_descent"]
    # Blocks every candidate shares (BLOCK_N, BLOCK_K, GROUP_M here) never move.
    assert all("GROUP_M=8" in c and "BLOCK_N=128" in c and "BLOCK_K=64" in c for c in seen)


def test_an_extern_call_that_fails_is_an_error():
    try:
        cuda.choose_matmul(lambda: "cuBLAS error", MM, lambda c: 1.0)
    except RuntimeError as e:
        assert "cuBLAS error" in str(e)
    else:
        raise AssertionError("expected RuntimeError")


def test_the_choice_is_cached_with_the_best_configs(tmp_path):
    cache = str(tmp_path / "cache")
    assert cuda.load_matmul_choice(cache, "k1") is None
    cuda.store_matmul_choice(cache, "k1", True, MM[1], 0.4, 0.3)
    cuda.store_matmul_choice(cache, "k2", False, MM[0], 0.2, 0.3)
    assert cuda.load_matmul_choice(cache, "k1") == (True, MM[1])
    assert cuda.load_matmul_choice(cache, "k2") == (False, "")
    path = cuda.best_config_path(cache, "k1")
    assert os.path.dirname(path) == os.path.join(cache, "triton", "best")
    text = open(path).read()
    assert '"choice": "template"' in text and '"extern_ms": 0.4' in text
    # A kernel's best-config entry is not a matmul choice, and a broken entry is tuned again.
    cuda.store_best_config(cache, "k3", MM[0], 1.0)
    assert cuda.load_matmul_choice(cache, "k3") is None
    with open(cuda.best_config_path(cache, "k4"), "w") as f:
        f.write('{"choice": "template", "config": "BLOCK_M=x"}')
    assert cuda.load_matmul_choice(cache, "k4") is None
