"""Stores into graph inputs (docs/scheduler.md, "Stores into inputs"; docs/memory.md): a copy of a computed
value into a graph input becomes the computing kernel's store into the input. Values, version counters,
inputs that share memory (such a call runs eagerly: runtime/aliased_inputs.h), and the optimizer step's program
(no copy-back)."""
import contextlib

import pytest
import torch

import ember
import ember.api


@contextlib.contextmanager
def compiles():
    """The compile events' infos (loop IR, code) while the block runs."""
    infos = []
    with ember.api.collecting_events() as events:
        try:
            yield infos
        finally:
            infos += [info for event, info in events if event == "compile" and info["ops"] > 0]


def scale_shift(x, y):
    x.copy_(x * 2 + y)


def test_copy_into_input_is_a_store():
    ember.reset()
    x, y = torch.randn(64), torch.randn(64)
    expected = x * 2 + y
    version = x._version
    f = ember.compile(scale_shift)
    with compiles() as infos:
        f(x, y)
    torch.testing.assert_close(x, expected)
    assert x._version > version  # eager's copy_ bumps it too
    (info,) = infos
    assert "copy_" not in info["loop_ir"], info["loop_ir"]
    assert "into input b0" in info["schedule"]
    expected = x * 2 + y
    f(x, y)  # again, compiled
    torch.testing.assert_close(x, expected)


def in_place_chain(x, y):
    x.mul_(2).add_(y)
    x -= 1
    return x.sum()


def test_in_place_ops_on_an_input_store_into_it():
    ember.reset()
    x, y = torch.randn(64), torch.randn(64)
    rx = x.clone()
    expected = in_place_chain(rx, y)
    version = x._version
    f = ember.compile(in_place_chain)
    with compiles() as infos:
        got = f(x, y)
    torch.testing.assert_close(x, rx)
    torch.testing.assert_close(got, expected)
    assert x._version > version
    (info,) = infos
    assert "extern" not in info["loop_ir"], info["loop_ir"]


def test_input_store_with_aliasing_inputs_keeps_old_values():
    # x and y view one storage: k0 would store into x while y's old values are still to be read (y is x
    # itself here). The runtime sees the overlap and runs that call op by op, as eager reads and writes.
    ember.reset()
    f = ember.compile(scale_shift)
    a = torch.randn(64)
    f(a.clone(), torch.randn(64))  # compiled for two distinct tensors
    ref = a.clone()
    scale_shift(ref, ref.clone())  # what eager's functional copy computes: 2 * a + a
    version = a._version
    with pytest.warns(RuntimeWarning, match=r"L\['x'\] shares memory with L\['y'\]"):
        f(a, a)
    torch.testing.assert_close(a, ref)
    assert a._version > version
    assert ember.stats()["aliased_input_calls"] == 1


def shifted(x, y):
    x.copy_(y * 3 + x)
    return x.sum()


def test_partial_overlap_between_inputs():
    ember.reset()
    f = ember.compile(shifted)
    base = torch.randn(80)
    f(torch.randn(64), torch.randn(64))
    x, y = base[:64], base[16:]  # overlapping views of one storage
    ref_base = base.clone()
    rx, ry = ref_base[:64], ref_base[16:]
    expected_sum = shifted(rx, ry.clone())
    with pytest.warns(RuntimeWarning, match="shares memory"):
        got = f(x, y)
    torch.testing.assert_close(base, ref_base)
    torch.testing.assert_close(got, expected_sum)
    assert ember.stats()["aliased_input_calls"] == 1


def test_adam_program_has_no_copy_back():
    ember.reset()
    params = [torch.nn.Parameter(torch.randn(n)) for n in (16, 24, 24)]
    for p in params:
        p.grad = torch.randn_like(p)
    ref = [torch.nn.Parameter(p.detach().clone()) for p in params]
    for p, q in zip(ref, params):
        p.grad = q.grad.clone()
    opt = torch.optim.AdamW(params, lr=0.1, foreach=False)
    ref_opt = torch.optim.AdamW(ref, lr=0.1, foreach=False)
    opt.step()
    ref_opt.step()
    step = ember.compile(opt.step)
    versions = [p._version for p in params]
    with compiles() as infos:
        step()
    ref_opt.step()
    assert step.eager_reason is None
    (info,) = infos
    assert "_foreach_copy_" not in info["loop_ir"] and "extern" not in info["loop_ir"], info["loop_ir"]
    # One per parameter (same shapes share only the scalars) and one per step counter (`step + 1`, written
    # back in the graph: docs/autograd.md, "Optimizers").
    assert info["kernels"] == 6
    for p, q, v in zip(params, ref, versions):
        torch.testing.assert_close(p, q)
        assert p._version > v
    for p, q in zip(params, ref):
        torch.testing.assert_close(opt.state[p]["exp_avg"], ref_opt.state[q]["exp_avg"])
        torch.testing.assert_close(opt.state[p]["exp_avg_sq"], ref_opt.state[q]["exp_avg_sq"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_input_store_on_cuda(mode):
    # Triton kernels storing into inputs; under CUDA graphs, inputs copied into the graph's slots are
    # copied back, and overlapping inputs run the graph plainly (runtime/cuda_graph_runner.h).
    ember.reset()
    f = ember.compile(scale_shift, mode=mode)
    for _ in range(3):  # reduce-overhead records on the second call, replays from the third
        x, y = torch.randn(256, device="cuda"), torch.randn(256, device="cuda")
        expected = x * 2 + y
        f(x, y)
        torch.testing.assert_close(x, expected)
    a = torch.randn(256, device="cuda")
    expected = a * 3
    f(a, a)
    torch.testing.assert_close(a, expected)
