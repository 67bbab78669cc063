"""Triton's kernel ABI as Ember's launcher packs it (src/runtime/cuda/kernel.h), checked without a GPU:
the pure packing function, the parameter lists of real cubins' PTX, the driver's soft failure on a
machine without one, and the binaries the launcher refuses."""
import math
import re
import struct

import pytest
import torch

from ember._C import cuda

import cuda_test_kernels as kernels

triton = pytest.importorskip("triton")


def slot_bytes(slot, size):
    return struct.pack("<Q", slot)[:size]


def test_integers_and_pointers_fill_the_low_bytes():
    types = ["*fp32", "i32", "i64", "i1", "i8", "u32", "i16"]
    slots = cuda.pack_args(types, [0xDEAD_BEEF_0000_1000, -2, -(2**40), 7, -1, 2**32 - 1, 300])
    assert slots == [0xDEAD_BEEF_0000_1000, 0xFFFF_FFFE, 2**64 - 2**40, 1, 0xFF, 0xFFFF_FFFF, 300, 0, 0]


def test_two_scratch_pointers_follow_the_parameters():
    assert cuda.pack_args([], []) == [0, 0]
    assert cuda.pack_args(["*bf16"], [16])[-2:] == [0, 0]


@pytest.mark.parametrize("value", [1.0, -2.5, 3.14159, 1e-3, 65504.0, 70000.0, 1e-8, 6e-8, 2.0**-24 * 1.5,
                                   float("inf"), -float("inf"), 0.1, -0.0, 1.00048828125, 1e38])
@pytest.mark.parametrize("dtype,type_name", [(torch.float16, "fp16"), (torch.bfloat16, "bf16"),
                                             (torch.float32, "fp32"), (torch.float64, "fp64")])
def test_floats_round_as_torch_converts_them(value, dtype, type_name):
    # torch converts a Python float to a 16-bit scalar through float, to nearest even.
    reference = torch.tensor(value, dtype=torch.float64)
    if dtype != torch.float64:
        reference = reference.to(torch.float32).to(dtype)
    expected = reference.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[reference.element_size()])
    size = reference.element_size()
    [slot, _, _] = cuda.pack_args([type_name], [value])
    assert slot_bytes(slot, 8) == int(expected).to_bytes(size, "little", signed=True) + bytes(8 - size)


@pytest.mark.parametrize("type_name", ["fp16", "bf16", "fp32"])
def test_nan_stays_nan(type_name):
    [slot, _, _] = cuda.pack_args([type_name], [math.nan])
    size = cuda.param_bytes(type_name)
    packed = torch.frombuffer(bytearray(slot_bytes(slot, size)),
                              dtype={"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[type_name])
    assert torch.isnan(packed).all()


def test_an_integer_that_does_not_fit_its_width_is_refused():
    with pytest.raises(IndexError, match="does not fit in 32 bits"):
        cuda.pack_args(["i32"], [2**31])
    with pytest.raises(IndexError, match="does not fit in 8 bits"):
        cuda.pack_args(["u8"], [-1])


def test_unknown_and_constexpr_types_are_refused():
    with pytest.raises(ValueError, match="constexpr"):
        cuda.pack_args(["constexpr"], [1])
    with pytest.raises(ValueError, match="fp8e4nv"):
        cuda.param_bytes("fp8e4nv")


# ---- the PTX of compiled kernels: one .param per launched parameter plus the scratch pointers ----

_PTX_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8}


def ptx_params(ptx, entry):
    """Bytes of each .param of `entry`'s parameter list, in order."""
    head = ptx[ptx.index(f".entry {entry}("):]
    head = head[:head.index(")")]
    sizes = []
    for line in head.splitlines():
        m = re.search(r"\.param\s+(?:\.align\s+\d+\s+)?\.[a-z](\d+)\b.*?(?:\[(\d+)\])?,?\s*$", line)
        if m:
            sizes.append(_PTX_BYTES[m.group(1)] * int(m.group(2) or 1))
    return sizes


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("triton-abi"))
    jobs = [cuda.CompileJob(source, name, signature, constexprs, num_warps=4, num_stages=3)
            for source, name, signature, constexprs in (kernels.ADD, kernels.AXPY_BF16, kernels.SCALARS,
                                                        kernels.MATMUL)]
    return cuda.build(jobs, cache)


def test_launched_params_are_the_signature_minus_constexprs(compiled):
    add, axpy, scalars, matmul = compiled
    assert add.param_types == ["*fp32", "*fp32", "*fp32", "i32"]
    assert axpy.param_types == ["*bf16", "*bf16", "*bf16", "bf16", "i32"]
    # `one` was specialized to the constexpr 1: it is not launched.
    assert scalars.param_types == ["*fp64", "fp32", "fp16", "bf16", "i1", "i32", "i64", "fp64", "i8"]
    assert matmul.param_types == ["*fp16", "*fp16", "*fp32", "i32", "i32", "i32"]


def test_packing_matches_the_ptx_parameter_list(compiled):
    for binary in compiled:
        with open(f"{binary.dir}/kernel.ptx") as f:
            sizes = ptx_params(f.read(), binary.entry)
        assert len(sizes) == len(binary.param_types) + 2, binary.entry
        assert sizes == [cuda.param_bytes(t) for t in binary.param_types] + [8, 8], binary.entry


def test_large_shared_memory_is_in_the_metadata(compiled):
    assert compiled[3].shared_bytes > 48 * 1024
    assert all(b.global_scratch_bytes == 0 and b.num_ctas == 1 for b in compiled)


# ---- the driver and the launcher without a GPU ----

def test_driver_reports_why_it_is_missing():
    available, reason = cuda.driver_available()
    if available:
        pytest.skip("this machine has a CUDA driver")
    assert reason and ("libcuda" in reason or "cuInit" in reason)


def test_launch_without_a_driver_fails_softly(compiled):
    available, reason = cuda.driver_available()
    if available:
        pytest.skip("this machine has a CUDA driver")
    kernel = cuda.Kernel(compiled[0])
    with pytest.raises(RuntimeError, match="ember_test_add"):
        kernel.launch(0, 0, (4, 1, 1), [0, 0, 0, 512])
    kernel.launch(0, 0, (0, 1, 1), [0, 0, 0, 0])  # an empty grid launches nothing, driver or not


def test_grid_limits_are_checked_before_launching(compiled):
    kernel = cuda.Kernel(compiled[0])
    with pytest.raises(RuntimeError, match="exceeds"):
        kernel.launch(0, 0, (1, 65536, 1), [0, 0, 0, 1])
    with pytest.raises(RuntimeError, match="exceeds"):
        kernel.launch(0, 0, (2**31, 1, 1), [0, 0, 0, 1])


def test_kernels_needing_scratch_or_clusters_are_refused():
    def binary(**fields):
        b = cuda.Binary()
        b.entry, b.param_types = "k", ["*fp32"]
        for name, value in fields.items():
            setattr(b, name, value)
        return b

    cuda.Kernel(binary())
    with pytest.raises(ValueError, match="global scratch"):
        cuda.Kernel(binary(global_scratch_bytes=128))
    with pytest.raises(ValueError, match="clusters"):
        cuda.Kernel(binary(num_ctas=2))
    with pytest.raises(ValueError, match="at most"):
        cuda.Kernel(binary(param_types=["i32"] * 200))
