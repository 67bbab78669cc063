"""torch._foreach_{add,sub,mul,div}[_] decompose into one kernel per tensor; the in-place forms end in one
torch._foreach_copy_, whose pairs the scheduler turns into stores into the inputs (decompose_pointwise.cpp,
foreach_binary). Values and inputs after the call against eager; forms outside the rule stay torch calls."""
import contextlib

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


@contextlib.contextmanager
def loop_ir():
    """The loop IR of the graphs compiled while the block runs."""
    infos = []
    with ember.api.collecting_events() as events:
        try:
            yield infos
        finally:
            infos += [info["loop_ir"] for event, info in events if event == "compile" and info["ops"] > 0]


def chain(xs, ys, c):
    torch._foreach_add_(xs, 1.0)
    torch._foreach_mul_(xs, ys)
    torch._foreach_div_(ys, [2.0, 4.0, 8.0])
    torch._foreach_mul_(ys, c)
    zs = torch._foreach_sub(xs, ys)
    return zs[0] + xs[1], zs[2]


def inputs(dtype=torch.float32):
    torch.manual_seed(0)
    return ([torch.randn(8, dtype=dtype) for _ in range(3)], [torch.randn(2, 8, dtype=dtype)[1] for _ in range(3)],
            torch.tensor(0.5, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_foreach_chain_is_kernels(dtype):
    got_in, want_in = inputs(dtype), inputs(dtype)
    ember.reset()
    with torch.no_grad(), loop_ir() as programs:
        got = ember.compile(chain)(*got_in)
    want = chain(*want_in)
    # bf16: the returned sums are computed from unrounded differences (scheduler/inline.cpp's policy, as
    # Inductor's); the inputs, each stored once per op, are eager's bits.
    tol = {"atol": 1e-2, "rtol": 1.6e-2} if dtype == torch.bfloat16 else {}
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **tol)
    for g, w in zip(got_in[0] + got_in[1], want_in[0] + want_in[1]):
        torch.testing.assert_close(g, w, atol=0, rtol=0)
    (program,) = programs
    for name in ("_foreach_add_", "_foreach_mul_", "_foreach_div_", "_foreach_sub"):
        assert f"torch.{name}\"" not in program, program
    assert "kernel @k0" in program


def clip(grads, max_norm):
    # clip_grad_norm_'s arithmetic written out (Ember does not trace torch.nn.utils: a call to it is a break).
    norms = torch._foreach_norm(grads, 2.0)
    total = torch.linalg.vector_norm(torch.stack(norms), 2.0)
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    torch._foreach_mul_(grads, coef)
    return total


def test_gradient_clipping_is_kernels():
    def grads():
        torch.manual_seed(1)
        return [torch.randn(5, 6), torch.randn(5), torch.randn(3, 5)]
    got_g, want_g = grads(), grads()
    ember.reset()
    with torch.no_grad(), loop_ir() as programs:
        got = ember.compile(clip)(got_g, 0.1)
    want = clip(want_g, 0.1)
    torch.testing.assert_close(got, want)
    for g, w in zip(got_g, want_g):
        torch.testing.assert_close(g, w)
    (program,) = programs
    assert "_foreach_norm" not in program and "_foreach_mul_" not in program, program


def integers(xs):
    torch._foreach_add_(xs, 2)
    return xs[0] * 1


def test_integer_tensors_stay_a_torch_call():
    got_in, want_in = [torch.arange(4), torch.arange(3)], [torch.arange(4), torch.arange(3)]
    ember.reset()
    with torch.no_grad():
        got = ember.compile(integers)(got_in)
    torch.testing.assert_close(got, integers(want_in))
    for g, w in zip(got_in, want_in):
        torch.testing.assert_close(g, w)
