"""Values the tracer must not bake into a cache entry, and state that must cross calls and graph
breaks intact (found while building graph breaks): each program is called with inputs that differ
between calls where a baked value would show, and compared with eager."""
import contextlib
import io

import numpy as np
import pytest
import torch

import ember


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


def quiet(fn, *args):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args)


def _accumulator():
    total = 0
    while True:
        value = yield total
        total = total + value


def drives_a_generator(x):
    acc = _accumulator()
    next(acc)
    acc.send(x)
    return acc.send(x * 2)


def test_a_generator_is_never_run_at_trace_time():
    # Its `send` is a new bound method of a new generator on every call.
    f = ember.compile(drives_a_generator)
    for _ in range(3):
        x = torch.randn(3)
        torch.testing.assert_close(f(x), drives_a_generator(x))


def numpy_of(x, arr):
    return x + float(np.tanh(arr).sum())


def test_calls_on_objects_guarded_by_type_are_not_folded():
    f = ember.compile(numpy_of)
    x = torch.randn(2)
    for k in range(3):
        arr = np.full(3, float(k))
        torch.testing.assert_close(f(x, arr), numpy_of(x, arr))


class Token:
    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return f"Token({self.text})"


def hashes_and_reprs(x, tok):
    return x * 2, hash(tok), repr(tok)


def test_hash_and_repr_of_a_user_object_are_computed_per_call():
    f = ember.compile(hashes_and_reprs)
    for text in ("a", "b", "c"):
        tok = Token(text)
        out = f(torch.ones(2), tok)
        assert out[1] == hash(tok) and out[2] == repr(tok)


def iterates(x, items):
    for i in items:
        x = x + i
    return x


def test_a_set_read_from_the_frame_is_not_unrolled():
    f = ember.compile(iterates)
    x = torch.zeros(2)
    for items in ({1, 2}, {5}, {1, 2, 3}):
        torch.testing.assert_close(f(x, items), iterates(x, items))


def aliases_across_a_break(x):
    log = []
    pair = (log, log)
    log.append(1)
    print("break")
    log.append(2)
    return x + 1, pair, log


def test_a_list_made_by_the_trace_keeps_its_identity_across_a_break():
    f = ember.compile(aliases_across_a_break)
    for _ in range(2):
        _, pair, log = quiet(f, torch.ones(2))
        assert pair[0] is pair[1] is log and log == [1, 2]


def set_grad_block(x):
    with torch.set_grad_enabled(False):
        y = x * 2
    return y, torch.is_grad_enabled()


def test_set_grad_enabled_block_restores_the_mode_from_before_the_call():
    f = ember.compile(set_grad_block)
    x = torch.ones(2, requires_grad=True)
    for _ in range(2):
        y, inside_after = f(x)
        assert torch.is_grad_enabled() and inside_after is True and not y.requires_grad


def under_autocast(x, w):
    return (x @ w).dtype


def test_frames_under_autocast_are_traced_with_its_casts_and_guarded_on_it():
    f = ember.compile(under_autocast)
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    assert f(x, w) == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert f(x, w) == torch.bfloat16
        out = ember.explain(under_autocast)(x, w)
    assert out.graph_count == 1 and out.graph_break_count == 0
    assert "torch.Tensor.to" in out.graphs[0] and "autocast state: cpu on bfloat16" in out.guards[0]
    with torch.autocast("cpu", dtype=torch.float16):
        assert f(x, w) == torch.float16
    assert f(x, w) == torch.float32


def shape_argument(x, shape):
    return x.reshape(shape) * 2


def test_a_torch_size_argument_is_guarded_by_value():
    f = ember.compile(shape_argument)
    x = torch.arange(6.0)
    for shape in (torch.Size([2, 3]), torch.Size([3, 2]), torch.Size([2, 3])):
        torch.testing.assert_close(f(x, shape), shape_argument(x, shape))
    s = ember.stats()
    assert s["eager_frames"] == 0 and s["frames_compiled"] == 2


def pops_kwargs(x, **kwargs):
    scale = kwargs.pop("scale", 1.0)
    kwargs["extra"] = 3
    return x * scale, kwargs


def test_the_frames_own_kwargs_dict_is_mutated_without_a_break():
    f = ember.compile(pops_kwargs)
    x = torch.ones(2)
    for scale in (2.0, 3.0):
        out, kw = f(x, scale=scale, a=1)
        torch.testing.assert_close(out, x * scale)
        assert kw == {"a": 1, "extra": 3}
    assert ember.stats()["graph_breaks"] == 0


def test_a_factory_asked_for_gradients_makes_a_leaf_that_accumulates_them():
    # torch.zeros(..., requires_grad=True) is a leaf whose .grad fills on backward; a graph's result never is
    # one, so the call runs eagerly, a graph break with its reason.
    def fn(x):
        w = torch.zeros(x.shape[-1], requires_grad=True, dtype=torch.float64)
        return w, (w * x.double()).sum()

    compiled = ember.compile(fn)
    x = torch.randn(3)
    for _ in range(2):
        w, loss = compiled(x)
        assert w.requires_grad and w.is_leaf
        loss.backward()
        torch.testing.assert_close(w.grad, x.double())
    assert ember.stats()["graph_breaks"] >= 1
    reasons = [b.reason for b in ember.explain(fn)(x).break_reasons]
    assert any("requires_grad=True" in r and "leaf" in r for r in reasons), reasons
