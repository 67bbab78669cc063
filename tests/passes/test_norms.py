"""torch.linalg.vector_norm, torch.norm and Tensor.norm decompose for ord 2 ("fro", None), 1 and inf into one
reduction in opmath, rounded once (decompose_reduce.cpp, norm_rule); other orders, dtype= and out= stay torch's.
Values against eager; the supported forms leave no torch call."""
import contextlib
import math

import pytest
import torch

import ember
import ember.api
from ember.testing import DEVICE


@pytest.fixture(autouse=True)
def on_device():
    """Tensors on the test device (EMBER_TEST_DEVICE=cuda on the GPU machine: the Triton backend)."""
    with DEVICE if DEVICE.type != "cpu" else contextlib.nullcontext():
        yield


FORMS = {
    "Tensor.norm last dim": lambda x: x.norm(dim=-1),
    "Tensor.norm all": lambda x: x.norm(),
    "Tensor.norm p=1 kept": lambda x: x.norm(p=1, dim=(0, 1), keepdim=True),
    "torch.norm inf": lambda x: torch.norm(x, p=math.inf, dim=1),
    "torch.norm fro": lambda x: torch.norm(x, p="fro", dim=(1, 2)),
    "vector_norm kept": lambda x: torch.linalg.vector_norm(x, 2, dim=-1, keepdim=True),
    "vector_norm empty dims": lambda x: torch.linalg.vector_norm(x, ord=1, dim=[]),
}
REFUSED = {
    "vector_norm ord 3": lambda x: torch.linalg.vector_norm(x, ord=3, dim=-1),
    "vector_norm dtype": lambda x: torch.linalg.vector_norm(x, dim=-1, dtype=torch.float64),
    "torch.norm nuc": lambda x: torch.norm(x[0], p="nuc"),
}


def compiled_program(fn, x):
    ember.reset()
    with ember.api.collecting_events() as events, torch.no_grad():
        got = ember.compile(fn)(x)
    programs = [info["loop_ir"] for event, info in events if event == "compile" and info["ops"] > 0]
    return got, programs


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("form", FORMS)
def test_norm_is_one_reduction(form, dtype):
    fn = FORMS[form]
    x = torch.randn(3, 4, 5).to(dtype)
    got, programs = compiled_program(lambda t: fn(t) * 1, x)
    torch.testing.assert_close(got, fn(x) * 1)
    assert programs and all("norm" not in p for p in programs), programs


@pytest.mark.parametrize("form", REFUSED)
def test_other_forms_stay_torch_calls(form):
    fn = REFUSED[form]
    x = torch.randn(3, 4, 5)
    got, _ = compiled_program(fn, x)
    torch.testing.assert_close(got, fn(x))
