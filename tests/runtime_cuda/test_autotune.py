"""The autotuner without a GPU (runtime/autotune.h): the choice among candidate configs with a timer
written here, coordinate descent's moves and bounds, configs that cannot run, and the disk cache of
choices. The device side (events, in-place save and restore) is test_fake_driver.py's."""
import os
import stat

import pytest

from ember._C import cuda

POI = ["XBLOCK=1024 num_warps=4 num_stages=1", "XBLOCK=512 num_warps=8 num_stages=1",
       "XBLOCK=256 num_warps=4 num_stages=1"]


def timer_of(times):
    seen = []

    def timer(config):
        seen.append(config)
        return times(config) if callable(times) else times[config]
    return timer, seen


def test_the_fastest_candidate_is_kept():
    timer, seen = timer_of({POI[0]: 3.0, POI[1]: 1.5, POI[2]: 2.0})
    r = cuda.tune_configs(POI, timer)
    assert r["best"] == POI[1] and r["best_ms"] == 1.5
    assert seen == POI and r["timed"] == 3 and not r["found_by_coordinate_descent"]


def test_ties_keep_the_heuristics_order():
    timer, _ = timer_of(lambda c: 1.0)
    assert cuda.tune_configs(POI, timer)["best"] == POI[0]


def test_a_config_that_cannot_run_is_dropped_with_its_reason():
    timer, _ = timer_of({POI[0]: "cuLaunchKernel: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", POI[1]: 2.0, POI[2]: 3.0})
    r = cuda.tune_configs(POI, timer)
    assert r["best"] == POI[1]
    assert r["dropped"] == [POI[0] + ": cuLaunchKernel: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"]


def test_no_config_that_runs_is_an_error_listing_every_reason():
    timer, _ = timer_of(lambda c: "does not compile: out of registers")
    with pytest.raises(RuntimeError, match="no candidate config") as e:
        cuda.tune_configs(POI[:2], timer)
    assert str(e.value).count("out of registers") == 2


def block(config, name):
    return int(config.split(name + "=")[1].split()[0])


def test_coordinate_descent_walks_one_field_at_a_time_within_the_candidates_blocks():
    # Fastest at XBLOCK=32 RBLOCK=64 num_warps=2; the candidates reach XBLOCK 64 and RBLOCK 256.
    def ms(c):
        return 1 + abs(block(c, "XBLOCK") - 32) / 8 + abs(block(c, "RBLOCK") - 64) / 64 + abs(block(c, "num_warps") - 2)
    timer, seen = timer_of(ms)
    start = ["XBLOCK=1 RBLOCK=256 num_warps=8 num_stages=1", "XBLOCK=64 RBLOCK=8 num_warps=4 num_stages=1"]
    r = cuda.tune_configs(start, timer, coordinate_descent=True)
    assert r["best"] == "XBLOCK=32 RBLOCK=64 num_warps=2 num_stages=1"
    assert r["found_by_coordinate_descent"]
    assert all(block(c, "XBLOCK") <= 64 and block(c, "RBLOCK") <= 256 for c in seen)
    assert len(seen) == len(set(seen))  # each config timed once
    assert r["timed"] == len(seen) <= 2 + 32


def test_coordinate_descent_keeps_a_move_only_when_over_a_tenth_of_a_percent_faster():
    base = "XBLOCK=64 num_warps=4 num_stages=1"
    timer, seen = timer_of(lambda c: 1.0 if c == base else 0.9995)  # 0.05% faster: noise
    r = cuda.tune_configs([base], timer, coordinate_descent=True)
    assert r["best"] == base and not r["found_by_coordinate_descent"]
    # One candidate: its XBLOCK is fixed (as a persistent reduction's RBLOCK must be); only warps move.
    assert set(seen[1:]) == {"XBLOCK=64 num_warps=8 num_stages=1", "XBLOCK=64 num_warps=2 num_stages=1"}


def test_coordinate_descent_moves_no_block_every_candidate_shares():
    start = ["XBLOCK=8 RBLOCK=128 num_warps=4 num_stages=1", "XBLOCK=1 RBLOCK=128 num_warps=2 num_stages=1"]
    timer, seen = timer_of(lambda c: 1.0 / block(c, "num_warps") + 0.01 * block(c, "XBLOCK"))
    r = cuda.tune_configs(start, timer, coordinate_descent=True)
    assert all(block(c, "RBLOCK") == 128 for c in seen)
    assert all(block(c, "XBLOCK") <= 8 for c in seen)
    assert r["found_by_coordinate_descent"]


def test_malformed_configs_are_refused():
    with pytest.raises(ValueError):
        cuda.tune_configs(["XBLOCK=64"], lambda c: 1.0)


def test_the_choice_is_cached_on_disk(tmp_path):
    cache = str(tmp_path / "cache")
    key = "ab" * 32
    assert cuda.load_best_config(cache, key) is None
    cuda.store_best_config(cache, key, POI[1], 0.25)
    assert cuda.load_best_config(cache, key) == POI[1]
    path = cuda.best_config_path(cache, key)
    assert path == os.path.join(cache, "triton", "best", key + ".json")
    for d in (cache, os.path.join(cache, "triton"), os.path.dirname(path)):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert not [f for f in os.listdir(os.path.dirname(path)) if f != key + ".json"]  # no temporaries left
    import json
    entry = json.load(open(path))
    assert entry["config"] == POI[1] and entry["time_ms"] == 0.25


def test_an_unreadable_entry_is_ignored(tmp_path):
    cache = str(tmp_path)
    key = "cd" * 32
    cuda.store_best_config(cache, key, POI[0], 1.0)
    with open(cuda.best_config_path(cache, key), "w") as f:
        f.write('{"config": "XBLOCK=')
    assert cuda.load_best_config(cache, key) is None
