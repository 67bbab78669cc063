"""The launcher's driver calls, checked without a GPU against a stand-in libcuda.so.1
(fake_libcuda.c, compiled here and put on LD_LIBRARY_PATH of a child process): how entries are
resolved, the primary context retained on a thread with none, the module loaded once, the opt-in to
large shared memory, and each launch's grid, block, shared bytes, stream and packed parameters."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")
CC = shutil.which("cc") or shutil.which("gcc")


@pytest.fixture(scope="module")
def fake_driver_dir(tmp_path_factory):
    if CC is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("fake-cuda")
    subprocess.run([CC, "-shared", "-fPIC", "-O1", "-o", str(d / "libcuda.so.1"), os.path.join(HERE, "fake_libcuda.c")],
                   check=True)
    return d


def run_child(fake_driver_dir, tmp_path, script, **env):
    log = tmp_path / "driver.log"
    child_env = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver_dir), FAKE_CUDA_LOG=str(log), **env)
    result = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {PYTHON_DIR!r})\n" +
                             textwrap.dedent(script)], env=child_env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout, log.read_text().splitlines() if log.exists() else []


_LAUNCH = """
    from ember._C import cuda
    print(cuda.driver_available())
    b = cuda.Binary()
    b.entry, b.cubin, b.num_warps, b.shared_bytes = "ember_k", b"CUBN", 8, 100000
    b.param_types = ["*fp32", "i32", "bf16", "i1", "i64"]
    k = cuda.Kernel(b)
    k.launch(0, 0x1234, (3, 2, 1), [0xABC, -5, 3.0, True, 2**40])
    k.launch(0, 0x1234, (7, 1, 1), [0xDEF, 5, -1.0, False, -1])
    k.launch(0, 0x1234, (0, 1, 1), [0xDEF, 5, -1.0, False, -1])
    b.shared_bytes = 240000
    try:
        cuda.Kernel(b).launch(0, 0, (1, 1, 1), [0, 0, 0.0, 0, 0])
    except RuntimeError as e:
        print(e)
"""


def test_launch_sequence(fake_driver_dir, tmp_path):
    stdout, log = run_child(fake_driver_dir, tmp_path, _LAUNCH, FAKE_CUDA_PARAMS="7")
    assert stdout.splitlines()[0] == "(True, '')"
    resolved = [line.split()[1:] for line in log if line.startswith("cuGetProcAddress_v2")]
    assert all(version == "12000" and flags == "1" for _, version, flags in resolved)  # CUDA 12.0 ABI, legacy stream
    assert {name for name, _, _ in resolved} >= {"cuInit", "cuLaunchKernel", "cuModuleLoadData", "cuCtxGetDevice"}
    calls = [line for line in log if not line.startswith("cuGetProcAddress_v2")]
    launch = "cuLaunchKernel grid={} block=256,1,1 shared=100000 stream=0x1234 extra=(nil) params= {}"
    assert calls == [
        "cuInit 0",
        # No context was current on this thread: the primary one is retained and made current.
        "cuDevicePrimaryCtxRetain 0",
        "cuCtxSetCurrent",
        "cuModuleLoadData CUBN",
        "cuModuleGetFunction ember_k",
        # 100000 > 48 KiB: opt in up to the device's limit (232448) minus static shared memory (1024).
        "cuFuncSetCacheConfig 1",
        "cuFuncSetAttribute 8 231424",
        # Slots: the pointer, -5 as 32 bits, bf16 3.0, i1, an i64, then the two scratch pointers.
        launch.format("3,2,1", "abc fffffffb 4040 1 10000000000 0 0"),
        launch.format("7,1,1", "def 5 bf80 0 ffffffffffffffff 0 0"),
        # The empty grid launched nothing; the second kernel loads its own module and refuses.
        "cuModuleLoadData CUBN",
        "cuModuleGetFunction ember_k",
    ]
    assert stdout.splitlines()[1] == ("Triton kernel ember_k needs 240000 bytes of dynamic shared memory; "
                                      "cuda:0 allows 231424")


def test_no_device_is_a_soft_failure(fake_driver_dir, tmp_path):
    stdout, _ = run_child(fake_driver_dir, tmp_path, """
        from ember._C import cuda
        print(cuda.driver_available())
        b = cuda.Binary()
        b.entry, b.param_types = "ember_k", []
        try:
            cuda.Kernel(b).launch(0, 0, (1, 1, 1), [])
        except RuntimeError as e:
            print(e)
    """, FAKE_CUDA_NO_DEVICE="1")
    assert stdout.splitlines() == [
        "(False, 'cuInit failed: CUDA_ERROR_NO_DEVICE: fake driver')",
        "Triton kernel ember_k: cuInit failed: CUDA_ERROR_NO_DEVICE: fake driver",
    ]


_TUNE = """
    import ctypes
    from ember._C import cuda
    configs = ["XBLOCK=16 num_warps=8 num_stages=1", "XBLOCK=8 num_warps=2 num_stages=1",
               "XBLOCK=4 num_warps=4 num_stages=1"]
    kernels = []
    for c in configs:
        b = cuda.Binary()
        b.entry, b.cubin, b.num_warps, b.param_types = "ember_add_one", b"CUBN", int(c.split("num_warps=")[1][0]), ["*fp32"]
        kernels.append(cuda.Kernel(b))
    x = (ctypes.c_float * 16)(*range(16))
    ptr = ctypes.addressof(x)
    r = cuda.tune_on_device(configs, kernels, 0, 0x1234, 16, [ptr], [(ptr, 64)])
    print(r["best"], r["timed"], r["best_ms"])
    print(list(x))  # the trials' updates undone
    kernels[configs.index(r["best"])].launch(0, 0x1234, (2, 1, 1), [ptr])
    print(list(x))
"""


def test_tuning_times_with_events_and_restores_in_place_buffers(fake_driver_dir, tmp_path):
    # The fake's launch adds 1 to 16 floats (a kernel doing x += 1) and times a launch by its warps.
    stdout, log = run_child(fake_driver_dir, tmp_path, _TUNE, FAKE_CUDA_ADD_ONE="16")
    lines = stdout.splitlines()
    assert lines[0] == "XBLOCK=8 num_warps=2 num_stages=1 3 2.0"
    assert lines[1] == str([float(i) for i in range(16)])
    assert lines[2] == str([float(i + 1) for i in range(16)])  # x + 1, once
    calls = [line.split()[0] + (" " + line.split()[1] if line.startswith(("cuMemAlloc", "cuMemcpy", "cuEventCreate")) else "")
             for line in log if not line.startswith(("cuGetProcAddress", "cuInit", "cuModule", "cuCtx", "cuDevice"))]
    per_config = (["cuLaunchKernel"] * 3 + ["cuEventRecord", "cuLaunchKernel", "cuEventRecord"] * 10 +
                  ["cuEventSynchronize", "cuMemcpyDtoDAsync 64"])
    assert calls == (["cuEventCreate 0"] * 20 + ["cuMemAlloc 64", "cuMemcpyDtoDAsync 64"] + per_config * 3 +
                     ["cuEventRecord", "cuEventSynchronize", "cuMemFree"] + ["cuEventDestroy"] * 20 +
                     ["cuLaunchKernel"])
    assert all("stream=0x1234" in line for line in log if line.startswith(("cuEventRecord", "cuMemcpy", "cuLaunch")))
