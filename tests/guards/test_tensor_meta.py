"""read_tensor_meta: DLPack exchange path and attribute path, dtypes, layouts, refusals."""
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
from ember._C import guards as G  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python")


def meta(t, via_attributes=False):
    return G.read_tensor_meta(t, via_attributes)


def expected(t):
    return {
        "type": type(t),
        "dtype": str(t.dtype).removeprefix("torch."),
        "device": str(t.device),
        "sizes": list(t.shape),
        "strides": list(t.stride()),
        "requires_grad": t.requires_grad,
    }


def fields(m):
    return {k: m[k] for k in ("type", "dtype", "device", "sizes", "strides", "requires_grad")}


def test_torch_2_13_has_the_dlpack_exchange_table():
    assert G.dlpack_exchange_available()


SAMPLES = {
    "f32": lambda: torch.randn(4, 8),
    "transposed": lambda: torch.randn(4, 8).t(),
    "sliced": lambda: torch.randn(6, 8)[::2, 1:],
    "expanded": lambda: torch.randn(1, 8).expand(5, 8),
    "zero_dim": lambda: torch.tensor(3.5),
    "empty": lambda: torch.empty(0, 3),
    "bool": lambda: torch.zeros(3, dtype=torch.bool),
    "uint8": lambda: torch.zeros(3, dtype=torch.uint8),
    "int8": lambda: torch.zeros(3, dtype=torch.int8),
    "int16": lambda: torch.zeros(3, dtype=torch.int16),
    "int32": lambda: torch.zeros(3, dtype=torch.int32),
    "int64": lambda: torch.arange(6).reshape(2, 3),
    "f16": lambda: torch.zeros(2, 2, dtype=torch.float16),
    "bf16": lambda: torch.zeros(2, 2, dtype=torch.bfloat16),
    "f64": lambda: torch.zeros(2, dtype=torch.float64),
    "c64": lambda: torch.zeros(2, dtype=torch.complex64),
    "c128": lambda: torch.zeros(2, dtype=torch.complex128),
    "f8e4m3fn": lambda: torch.zeros(2, dtype=torch.float8_e4m3fn),
    "f8e5m2": lambda: torch.zeros(2, dtype=torch.float8_e5m2),
    "requires_grad": lambda: torch.randn(3, requires_grad=True),
    "non_leaf": lambda: torch.randn(3, requires_grad=True) * 2,
    "parameter": lambda: torch.nn.Parameter(torch.randn(2, 3)),
    "frozen_parameter": lambda: torch.nn.Parameter(torch.randn(2, 3), requires_grad=False),
    "channels_last": lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
    "many_dims": lambda: torch.zeros([1] * 10 + [2]),
    "meta_device": lambda: torch.empty(2, 3, device="meta"),
    "inference": lambda: torch.inference_mode()(lambda: torch.ones(2))(),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
@pytest.mark.parametrize("via_attributes", [False, True], ids=["auto", "attributes"])
def test_meta_matches_torch(name, via_attributes):
    t = SAMPLES[name]()
    m = meta(t, via_attributes)
    assert m is not None
    assert fields(m) == expected(t)


def test_text_form():
    assert meta(torch.randn(4, 8))["str"] == "f32[4, 8]{8, 1} cpu"
    assert meta(torch.randn(4, 8).t())["str"] == "f32[8, 4]{1, 8} cpu"
    assert meta(torch.tensor(1))["str"] == "i64[]{} cpu"
    assert meta(torch.zeros(2, dtype=torch.bfloat16, requires_grad=True))["str"] == "bf16[2]{1} cpu grad"
    assert meta(torch.nn.Parameter(torch.zeros(3)))["str"] == "Parameter f32[3]{1} cpu grad"


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(3, dtype=torch.complex64).conj(),  # conjugate bit
        lambda: torch.randn(3, dtype=torch.complex64).conj().imag,  # negative bit on a real tensor
        lambda: torch._neg_view(torch.randn(3)),
        lambda: torch.randn(3, dtype=torch.complex64).conj().detach(),  # bit survives detach, not a view
        lambda: torch.randn(4, 4).to_sparse(),
        lambda: torch.randn(4, 4).to_sparse_csr(),
        lambda: torch.nested.nested_tensor([torch.randn(2), torch.randn(3)]),
        lambda: torch.zeros(2, dtype=torch.uint16),  # dtypes outside ir::DType
        lambda: torch.zeros(2, dtype=torch.complex32),
        lambda: torch.quantize_per_tensor(torch.randn(3), 0.1, 0, torch.qint8),
    ],
    ids=["conj", "neg_imag", "neg_view", "conj_detached", "sparse_coo", "sparse_csr", "nested", "uint16",
         "complex32", "quantized"],
)
@pytest.mark.parametrize("via_attributes", [False, True], ids=["auto", "attributes"])
def test_tensors_ember_cannot_describe_are_refused(make, via_attributes):
    assert meta(make(), via_attributes) is None


@pytest.mark.parametrize("obj", [3, 2.5, None, "x", [1, 2], torch.float32, torch.nn.Linear(2, 2)])
def test_non_tensors_are_refused(obj):
    assert meta(obj) is None


def test_tensor_subclass_keeps_its_type():
    class Mine(torch.Tensor):
        pass

    t = torch.randn(2, 2).as_subclass(Mine)
    m = meta(t)
    assert m["type"] is Mine and m["sizes"] == [2, 2]
    assert m["str"].startswith("Mine f32[2, 2]")


def run_isolated(code):
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_attribute_fallback_when_torch_has_no_exchange_table():
    out = run_isolated(
        """
        import torch
        del torch.Tensor.__dlpack_c_exchange_api__   # before Ember first looks
        from ember._C import guards as G
        assert not G.dlpack_exchange_available()
        t = torch.randn(4, 8).t()
        m = G.read_tensor_meta(t)
        assert m["str"] == "f32[8, 4]{1, 8} cpu", m
        g = G.GuardSet()
        g.tensor_match((("local", 0, "x"),), t)
        assert g.check_args((t,), {}, {}, None)[0]
        assert not g.check_args((t.contiguous(),), {}, {}, None)[0]
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_without_torch_imported_nothing_is_a_tensor():
    out = run_isolated(
        """
        import sys
        from ember._C import guards as G
        assert "torch" not in sys.modules
        assert G.read_tensor_meta(3) is None
        assert G.current_global_state() == (True, "float32")
        import torch   # imported later: the bridge is built on the next use
        assert G.read_tensor_meta(torch.zeros(2))["str"] == "f32[2]{1} cpu"
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_generic_attribute_reads_when_torch_defines_them_in_python():
    # Ember calls torch's C getter/method directly only when they are C descriptors; shadowing
    # them on torch.Tensor with Python definitions must route every read through attributes.
    out = run_isolated(
        """
        import torch
        base = torch._C.TensorBase
        torch.Tensor.requires_grad = property(lambda self: base.requires_grad.__get__(self))
        torch.Tensor.is_neg = lambda self: base.is_neg(self)
        torch.Tensor.is_conj = lambda self: base.is_conj(self)
        from ember._C import guards as G
        assert G.read_tensor_meta(torch.zeros(2))["requires_grad"] is False
        t = torch.zeros(2, requires_grad=True)
        assert G.read_tensor_meta(t)["requires_grad"] is True
        assert G.read_tensor_meta(t, True)["requires_grad"] is True
        assert G.read_tensor_meta(torch.randn(3, dtype=torch.complex64).conj()) is None
        assert G.read_tensor_meta(torch.randn(3, dtype=torch.complex64).conj().imag) is None
        print("ok")
        """
    )
    assert out.strip() == "ok"
