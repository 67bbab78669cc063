"""What cuts the GPU backend's compile time, without a GPU (docs/cuda-runtime.md, "Compile time"):
the worker pool started early and warmed up (python/ember/_triton/compile.py, prestart), its
per-stage statistics, identical jobs compiled once, and the cubin cache serving a second build.
Compiling needs triton, not a GPU; each test has its own cache directories and its own workers."""
import json
import os

import pytest

from ember._C import cuda

import cuda_test_kernels as kernels

triton = pytest.importorskip("triton")
from ember._triton import compile as triton_compile  # noqa: E402

if os.environ.get("TRITON_INTERPRET") == "1":
    pytest.skip("this process interprets Triton kernels; cubins need the compiler", allow_module_level=True)

STAGES = {"frontend", "ttir", "ttgir", "llir", "ptx", "cubin", "total"}


@pytest.fixture(autouse=True)
def own_workers(tmp_path, monkeypatch):
    """Workers started in this test, with Triton's own cache in tmp_path, stopped afterwards."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-own"))
    triton_compile.shutdown()
    triton_compile.reset_stats()
    yield
    triton_compile.shutdown()


def job(constexprs=None):
    src, name, signature, default_constexprs = kernels.ADD
    return cuda.CompileJob(src, name, signature, constexprs or default_constexprs)


def test_identical_jobs_compile_once_and_a_second_build_hits_the_cache(tmp_path):
    cache = str(tmp_path / "cache")
    first = cuda.build([job(), job(), job([("XBLOCK", 256)])], cache, workers=2)
    stats = triton_compile.stats()
    assert stats["batches"] == 1 and stats["jobs"] == 2, stats  # the duplicate rode along
    assert first[0].key == first[1].key != first[2].key
    assert set(stats["job_seconds"]) == STAGES
    assert stats["job_seconds"]["total"] >= stats["job_seconds"]["cubin"] > 0
    assert 1 <= stats["workers_started"] <= 2 and stats["worker_boot_seconds"] > 0
    # The statistics stay out of the cache entry.
    with open(os.path.join(first[0].dir, "meta.json")) as f:
        assert not {"seconds", "boot_seconds"} & set(json.load(f))

    again = cuda.build([job(), job([("XBLOCK", 256)])], cache)
    assert all(b.cache_hit for b in again)
    assert triton_compile.stats()["jobs"] == 2  # nothing more reached Triton


def test_prestarted_workers_are_warm_when_the_first_batch_comes(tmp_path):
    triton_compile.prestart(1)
    pool = triton_compile._get_pool()
    assert len(pool.workers) == 1
    # The worker boots and warms up on its own (a job waits for that): the job pays none of Triton's
    # one-time costs.
    cuda.build([job()], str(tmp_path / "cache"), workers=1)
    stats = triton_compile.stats()
    assert stats["workers_started"] == 1 and len(pool.workers) == 1  # the prestarted worker served it
    # Warm: the first-compile costs (hashing libtriton.so for Triton's key, imports: about 1.3 s on a
    # 2-core box) went into the boot, not the job's frontend.
    assert stats["job_seconds"]["frontend"] < stats["worker_boot_seconds"], stats


def test_default_workers_follow_the_cores_this_process_may_use():
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert triton_compile.default_workers() == max(1, min(16, cores))
