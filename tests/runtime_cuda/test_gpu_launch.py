"""Compiled Triton kernels launched by Ember's C++ launcher on torch CUDA tensors (runs on a GPU
machine; skipped elsewhere): an fp32 add, a bf16 kernel with a 2-byte scalar, every scalar type, and a
matmul needing more than 48 KiB of shared memory; on torch's current stream and on a side stream."""
import pytest
import torch

from ember._C import cuda

import cuda_test_kernels as kernels

triton = pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def capability():
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("triton-gpu"))
    specs = {"add": kernels.ADD, "axpy": kernels.AXPY_BF16, "scalars": kernels.SCALARS, "matmul": kernels.MATMUL}
    jobs = [cuda.CompileJob(src, name, sig, constexprs, num_warps=4, num_stages=3)
            for src, name, sig, constexprs in specs.values()]
    binaries = cuda.build(jobs, cache, capability=capability())
    return {key: cuda.Kernel(binary) for key, binary in zip(specs, binaries)}


def current_stream():
    return torch.cuda.current_stream().cuda_stream


def test_the_driver_is_available():
    available, reason = cuda.driver_available()
    assert available, reason


@pytest.mark.parametrize("n", [1, 1000, 4096, 100_003])
def test_add(built, n):
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    built["add"].launch(x.device.index, current_stream(), ((n + 127) // 128, 1, 1),
                        [x.data_ptr(), y.data_ptr(), out.data_ptr(), n])
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_add_on_a_side_stream(built):
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = torch.empty_like(x)
        assert current_stream() == side.cuda_stream
        built["add"].launch(x.device.index, current_stream(), (n // 128, 1, 1),
                            [x.data_ptr(), y.data_ptr(), out.data_ptr(), n])
        result = out + 0  # queued behind the kernel on the same stream
    torch.cuda.current_stream().wait_stream(side)
    torch.testing.assert_close(result, x + y, rtol=0, atol=0)


def test_bf16_with_a_two_byte_scalar(built):
    n = 5000
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x)
    alpha = 3.0  # packed as 4-byte float bits, the kernel would read 0 (the low half) instead
    built["axpy"].launch(x.device.index, current_stream(), ((n + 255) // 256, 1, 1),
                         [x.data_ptr(), y.data_ptr(), out.data_ptr(), alpha, n])
    # Triton may fuse the multiply-add: bf16's default tolerance, far below the error of a wrong alpha.
    torch.testing.assert_close(out, (x.float() * alpha + y.float()).to(torch.bfloat16))


def test_every_scalar_type(built):
    out = torch.zeros(8, device="cuda", dtype=torch.float64)
    # -7 fills an i32 slot's low 4 bytes only; 2**40 + 3 needs all 8 of an i64's; 0.25 and -2.0 are
    # 2-byte fp16/bf16; True is one byte.
    values = [out.data_ptr(), 1.5, 0.25, -2.0, True, -7, 2**40 + 3, 0.125, 3]
    built["scalars"].launch(out.device.index, current_stream(), (1, 1, 1), values)
    expected = torch.tensor([1.5, 0.25, -2.0, 1.0, -7.0, 2.0**40 + 3, 0.125, 4.0], dtype=torch.float64)
    torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=0)


def test_matmul_above_48k_of_shared_memory(built):
    kernel = built["matmul"]
    assert kernel.binary.shared_bytes > 48 * 1024
    m, n, k = 256, 384, 512
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.empty(m, n, device="cuda")
    kernel.launch(a.device.index, current_stream(), (m // 128, n // 128, 1),
                  [a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k])
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-2)


def test_launch_from_a_thread_without_a_current_context(built):
    import threading

    n = 4096
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.zeros_like(x)
    torch.cuda.synchronize()
    errors = []

    def run():
        try:
            built["add"].launch(x.device.index, 0, (n // 128, 1, 1), [x.data_ptr(), y.data_ptr(), out.data_ptr(), n])
        except Exception as e:  # reported below
            errors.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert not errors
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)
