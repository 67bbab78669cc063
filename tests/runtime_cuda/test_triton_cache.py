"""The cubin cache (src/runtime/triton_build.h) through ember._C.cuda.build: keys, hits, corrupt
entries, permissions, the cross-process lock, compile errors and a parallel batch. Compiling needs
triton, not a GPU. Every test has its own cache directory (tmp_path)."""
import fcntl
import os
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from ember._C import cuda

import cuda_test_kernels as kernels

triton = pytest.importorskip("triton")

PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python")


def job(kernel=kernels.ADD, source=None, constexprs=None, **options):
    src, name, signature, default_constexprs = kernel
    return cuda.CompileJob(source or src, name, signature, constexprs or default_constexprs, **options)


def test_variants_get_their_own_keys_and_compile_in_parallel(tmp_path):
    base = job()
    variants = [
        base,
        job(source=kernels.ADD[0] + "# a comment changes the source\n"),
        job(constexprs=[("XBLOCK", 256)]),
        job(num_warps=8),
        job(num_stages=2),
        job(debug=True),
        job(divisible_by_16=[0, 1, 2]),
    ]
    first = cuda.build(variants, str(tmp_path), workers=3)
    assert len({b.key for b in first}) == len(variants)
    assert not any(b.cache_hit for b in first)
    assert all(b.cubin and b.entry == "ember_test_add" for b in first)
    assert first[3].num_warps == 8

    again = cuda.build(variants, str(tmp_path))
    assert all(b.cache_hit for b in again)
    assert [b.key for b in again] == [b.key for b in first]
    assert [b.cubin for b in again] == [b.cubin for b in first]


def test_layout_and_permissions(tmp_path):
    [binary] = cuda.build([job()], str(tmp_path / "cache"))
    key = binary.key
    assert binary.dir == str(tmp_path / "cache" / "triton" / key[:2] / key)
    assert sorted(os.listdir(binary.dir)) == ["kernel.cubin", "kernel.ptx", "kernel.py", "meta.json"]
    for d in (tmp_path / "cache", tmp_path / "cache" / "triton", tmp_path / "cache" / "triton" / key[:2],
              binary.dir):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    with open(os.path.join(binary.dir, "kernel.py")) as f:
        assert f.read() == kernels.ADD[0]


def test_identical_jobs_in_a_batch_compile_once(tmp_path):
    a, b = cuda.build([job(), job()], str(tmp_path))
    assert a.key == b.key and a.cubin == b.cubin
    assert len(os.listdir(os.path.dirname(a.dir))) == 2  # the entry and its lock


def test_a_corrupt_cubin_is_rebuilt(tmp_path):
    [binary] = cuda.build([job()], str(tmp_path))
    cubin_path = os.path.join(binary.dir, "kernel.cubin")
    with open(cubin_path, "r+b") as f:
        f.seek(100)
        f.write(b"\0garbage\0")
    [rebuilt] = cuda.build([job()], str(tmp_path))
    assert not rebuilt.cache_hit
    # Triton's compile is deterministic: the rebuilt entry has the very same bytes.
    assert rebuilt.cubin == binary.cubin
    with open(cubin_path, "rb") as f:
        assert f.read() == binary.cubin
    [hit] = cuda.build([job()], str(tmp_path))
    assert hit.cache_hit


def test_a_missing_or_unreadable_meta_is_rebuilt(tmp_path):
    [binary] = cuda.build([job()], str(tmp_path))
    meta = os.path.join(binary.dir, "meta.json")
    with open(meta, "w") as f:
        f.write("{not json")
    [rebuilt] = cuda.build([job()], str(tmp_path))
    assert not rebuilt.cache_hit and rebuilt.param_types == binary.param_types
    with open(meta, "wb") as f:
        f.write(b"\xff\xfe not utf-8")
    [rebuilt] = cuda.build([job()], str(tmp_path))
    assert not rebuilt.cache_hit
    os.remove(meta)
    [rebuilt] = cuda.build([job()], str(tmp_path))
    assert not rebuilt.cache_hit


def test_a_cache_dir_others_can_write_is_refused(tmp_path):
    from ember._C import codecache

    cache = tmp_path / "shared"
    cache.mkdir()
    os.chmod(cache, 0o777)
    with pytest.raises(codecache.CacheError):
        cuda.build([job()], str(cache))


def test_a_triton_error_names_the_kernel_and_carries_tritons_message(tmp_path):
    broken = kernels.ADD[0].replace("tl.store(", "tl.stroe(")
    good = job(constexprs=[("XBLOCK", 64)])
    with pytest.raises(cuda.TritonBuildError, match="ember_test_add") as info:
        cuda.build([good, job(source=broken)], str(tmp_path))
    assert "stroe" in info.value.detail
    # The job that compiled was published all the same.
    [hit] = cuda.build([good], str(tmp_path))
    assert hit.cache_hit


_CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    sys.path.insert(0, sys.argv[2])
    from ember._C import cuda
    import cuda_test_kernels as kernels
    src, name, signature, constexprs = kernels.ADD
    [b] = cuda.build([cuda.CompileJob(src, name, signature, [("XBLOCK", 512)])], sys.argv[3])
    print("hit" if b.cache_hit else "miss", b.key)
""")


def test_two_processes_compile_a_key_once(tmp_path):
    cache = tmp_path / "cache"
    # Learn the key (it does not depend on the cache directory), then hold the entry's lock while
    # both processes start, so that both find the entry missing and wait on the lock.
    [probe] = cuda.build([job(constexprs=[("XBLOCK", 512)])], str(tmp_path / "probe"))
    parent = cache / "triton" / probe.key[:2]
    parent.mkdir(parents=True)
    for d in (cache, cache / "triton", parent):
        os.chmod(d, 0o700)
    here = os.path.dirname(os.path.abspath(__file__))
    with open(parent / (probe.key + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        children = [subprocess.Popen([sys.executable, "-c", _CHILD, PYTHON_DIR, here, str(cache)],
                                     stdout=subprocess.PIPE, text=True) for _ in range(2)]
        time.sleep(3)
        fcntl.flock(lock, fcntl.LOCK_UN)
    outputs = sorted(child.communicate(timeout=300)[0].split() for child in children)
    assert all(child.returncode == 0 for child in children)
    assert outputs == [["hit", probe.key], ["miss", probe.key]]


def test_two_threads_compile_a_key_once(tmp_path):
    # The second thread waits on the entry's flock without the GIL, which the first one needs to
    # finish its compile: holding it there would deadlock.
    import threading

    results, errors = [], []

    def build():
        try:
            results.extend(cuda.build([job(constexprs=[("XBLOCK", 1024)])], str(tmp_path)))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=build, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads), "deadlocked"
    assert not errors
    assert sorted(b.cache_hit for b in results) == [False, True]
