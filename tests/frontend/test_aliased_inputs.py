"""Tensors that share memory among a frame's inputs (runtime/aliased_inputs.h). One tensor object reached
through several names is one graph input, guarded `is` on later calls (`f(x, x)`, tied weights, the locals a
graph break passes on: fuzz seeds 7216, 7609, 8233); distinct tensors that share memory with one the graph
writes run that call op by op, with a warning and stats()["aliased_input_calls"]. Tensors are made on the test
device (EMBER_TEST_DEVICE=cuda on the GPU machine)."""
import contextlib
import re
import warnings

import pytest
import torch

import ember
from ember.testing import DEVICE


@pytest.fixture(autouse=True)
def on_device():
    with DEVICE if DEVICE.type != "cpu" else contextlib.nullcontext():
        yield


def graph_inputs(explained):
    return [len(re.findall(r"%\d+:", g.splitlines()[0])) for g in explained.graphs]


def write_then_read(a, b):
    a.mul_(2)
    return b * 2


def test_one_tensor_twice_is_one_input():
    x, y = torch.ones(3), torch.ones(3)
    ember.reset()
    f = ember.compile(write_then_read)
    torch.testing.assert_close(f(x, x), write_then_read(y, y))
    torch.testing.assert_close(x, y)
    z = torch.ones(3)
    assert graph_inputs(ember.explain(write_then_read)(z, z)) == [1]
    # Compiled for one object; distinct tensors miss the identity guard and compile again.
    ember.reset()
    f = ember.compile(write_then_read)
    f(x, x)
    a, b = torch.ones(3), torch.ones(3)
    torch.testing.assert_close(f(a, b), torch.full((3,), 2.0))
    torch.testing.assert_close(a, torch.full((3,), 2.0))
    assert ember.stats()["recompiles"] == 1


@pytest.mark.parametrize("views", ["same", "equal views", "overlapping views"])
def test_written_input_sharing_memory_runs_eagerly(views):
    ember.reset()
    f = ember.compile(write_then_read)
    f(torch.ones(3), torch.ones(3))  # compiled for two distinct tensors
    base, ref = torch.arange(6.0), torch.arange(6.0)
    pick = {"same": lambda t: (t[:3],) * 2, "equal views": lambda t: (t[:3], t[:3]),
            "overlapping views": lambda t: (t[:3], t[1:4])}[views]
    with pytest.warns(RuntimeWarning, match="shares memory"):
        got = f(*pick(base))
    torch.testing.assert_close(got, write_then_read(*pick(ref)))
    torch.testing.assert_close(base, ref)
    assert ember.stats()["aliased_input_calls"] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per graph
        f(*pick(base))
    assert ember.stats()["aliased_input_calls"] == 2


def test_disjoint_views_stay_compiled():
    ember.reset()
    f = ember.compile(write_then_read)
    base, ref = torch.arange(6.0), torch.arange(6.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = f(base[:3], base[3:])
    torch.testing.assert_close(got, write_then_read(ref[:3], ref[3:]))
    torch.testing.assert_close(base, ref)
    assert ember.stats()["aliased_input_calls"] == 0


def foreach_then_read(xs, y):
    torch._foreach_mul_(xs, 2)
    return y + 1


def test_foreach_write_counts_as_a_write():
    ember.reset()
    f = ember.compile(foreach_then_read)
    f([torch.ones(2), torch.ones(2)], torch.ones(2))
    a, ra = torch.ones(4), torch.ones(4)
    with pytest.warns(RuntimeWarning, match="shares memory"):
        got = f([a[:2], torch.ones(2)], a.view(2, 2)[0])
    torch.testing.assert_close(got, foreach_then_read([ra[:2], torch.ones(2)], ra.view(2, 2)[0]))
    torch.testing.assert_close(a, ra)


def names_at_a_break(x0, log):
    t2 = x0
    t11 = x0
    t11[t11 > 0]  # data-dependent: a graph break
    x0.mul_(2)
    log.append(t2 * 2)
    return t11, t2 is x0


def test_locals_naming_one_tensor_across_a_break():
    x, y = torch.rand(2, 3) + 0.5, None
    y = x.clone()
    got_log, want_log = [], []
    ember.reset()
    got = ember.compile(names_at_a_break)(x, got_log)
    want = names_at_a_break(y, want_log)
    assert ember.stats()["graph_breaks"] == 1
    assert got[0] is x and got[1] is True and want[1] is True
    torch.testing.assert_close(x, y)
    torch.testing.assert_close(got_log, want_log)


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(self.emb(ids))


def test_tied_weights_are_one_input():
    m, ids = Tied(), torch.tensor([[1, 2, 3]])
    ember.reset()
    with torch.no_grad():
        torch.testing.assert_close(ember.compile(m)(ids), m(ids))
        (n,) = graph_inputs(ember.explain(m)(ids))
    assert n == 2  # ids and the one weight
    # Untied on a later call: the identity guard misses and the frame compiles again.
    m.head.weight = torch.nn.Parameter(torch.randn(10, 4))
    with torch.no_grad():
        torch.testing.assert_close(ember.compile(m)(ids), m(ids))


def test_symbolic_sizes_are_read_per_call():
    # A dynamic graph's input spans come from the call's tensors (static ones from the guarded types).
    ember.reset()
    f = ember.compile(write_then_read, dynamic=True)
    f(torch.ones(3), torch.ones(3))
    f(torch.ones(5), torch.ones(5))
    base, ref = torch.arange(9.0), torch.arange(9.0)
    with pytest.warns(RuntimeWarning, match="shares memory"):
        got = f(base[:4], base[2:6])
    torch.testing.assert_close(got, write_then_read(ref[:4], ref[2:6]))
    torch.testing.assert_close(base, ref)
    assert ember.stats()["aliased_input_calls"] == 1
