"""Dynamic shapes at capture (docs/dynamic-shapes.md): symbols, guards, the recompile policy.

Each test compares against eager on every call and counts compiles: the policy is torch.compile's
(static first; a dimension seen to change becomes a symbol; sizes 0 and 1 stay static).
"""
import contextlib
import functools

import pytest
import torch

import ember
from ember.testing import DEVICE

BACKENDS = ["eager", "ember"]


@pytest.fixture(autouse=True)
def fresh():
    """A clean Ember; tensors on the test device (EMBER_TEST_DEVICE=cuda on the GPU machine: the Triton
    backend compiles symbolic graphs for their traced sizes, so the counts there differ)."""
    ember.reset()
    with DEVICE if DEVICE.type != "cpu" else contextlib.nullcontext():
        yield
    ember.reset()


def compiles():
    return ember.stats()["frames_compiled"]


def one_graph_serves_all_sizes(backend):
    """Whether the backend keeps symbols: not yet the Triton backend (a symbolic graph is compiled for
    its traced sizes there, so each new size compiles again, correctly)."""
    return backend == "eager" or DEVICE.type == "cpu"


def run_all(f, compiled, inputs):
    for args in inputs:
        torch.testing.assert_close(compiled(*args), f(*args))


def attention_like(x, w):
    return torch.softmax(x * w, dim=-1) * 2.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_changing_dim_recompiles_once_into_a_symbolic_graph(backend):
    w = torch.randn(16)
    g = ember.compile(attention_like, backend=backend)
    run_all(attention_like, g, [(torch.randn(4, 8, 16), w)])
    assert compiles() == 1
    run_all(attention_like, g, [(torch.randn(4, t, 16), w) for t in (16, 17, 31, 32, 100)])
    if not one_graph_serves_all_sizes(backend):
        return
    assert compiles() == 2, ember.stats()
    # Size 1 is never a symbol: it gets a graph of its own, which size 2 does not need.
    run_all(attention_like, g, [(torch.randn(4, 1, 16), w)])
    assert compiles() == 3
    run_all(attention_like, g, [(torch.randn(4, 2, 16), w)])
    assert compiles() == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_true_compiles_once(backend):
    w = torch.randn(16)
    g = ember.compile(attention_like, backend=backend, dynamic=True)
    run_all(attention_like, g, [(torch.randn(b, t, 16), w) for b, t in ((2, 8), (3, 9), (5, 64), (2, 3))])
    if one_graph_serves_all_sizes(backend):
        assert compiles() == 1, ember.stats()


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_calls_with_rules_stay_symbolic(backend):
    """Torch calls that are not core ops (Tensor.square, F.silu, .float()) answer with symbolic sizes
    too: no guard pins a size for them."""
    def f(x):
        return torch.nn.functional.silu(x.square()).float().sum(-1)
    g = ember.compile(f, backend=backend, dynamic=True)
    run_all(f, g, [(torch.randn(b, t, dtype=torch.float64),) for b, t in ((2, 8), (3, 9), (5, 64))])
    if one_graph_serves_all_sizes(backend):
        assert compiles() == 1, ember.stats()


@pytest.mark.parametrize("backend", BACKENDS)
def test_augmented_assignment_to_a_scalar_stays_symbolic(backend):
    """`r = 0; r += t` (T5's relative-position buckets): an int's += falls back to the tensor's
    reflected op, recorded as operator.iadd, which has a rule."""
    def f(x):
        r = 0
        r += (x > 0).to(torch.long) * 4
        k = 1.0
        k -= x
        m = 2
        m *= x
        d = 3.0
        d /= x
        return r + k + m + d
    g = ember.compile(f, backend=backend, dynamic=True)
    run_all(f, g, [(torch.randn(2, n),) for n in (3, 5, 9)])
    if one_graph_serves_all_sizes(backend):
        assert compiles() == 1, ember.stats()


@pytest.mark.parametrize("backend", BACKENDS)
def test_size_aware_builtins_keep_sizes_symbolic(backend):
    """len(), isinstance(), type(), getattr() and the operator module's functions take sizes as they
    are (transformers' mask code asks `len(mask.shape) == 4`): no guard pins a size for them."""
    import operator

    def f(x, mask):
        assert isinstance(x.shape[0], int) and type(x.shape[1]) is int
        if isinstance(mask, torch.Tensor) and len(mask.shape) == 4:
            return x
        n = operator.mul(x.shape[0], len(x.shape))
        return x * getattr(mask, "shape")[1] + operator.getitem(x.shape, 0) + n
    g = ember.compile(f, backend=backend, dynamic=True)
    run_all(f, g, [(torch.randn(b, t), torch.ones(b, t)) for b, t in ((2, 8), (3, 9), (5, 64))])
    if one_graph_serves_all_sizes(backend):
        assert compiles() == 1, ember.stats()


def test_dynamic_false_recompiles_per_size():
    g = ember.compile(attention_like, backend="eager", dynamic=False)
    w = torch.randn(16)
    run_all(attention_like, g, [(torch.randn(4, t, 16), w) for t in (8, 9, 10)])
    assert compiles() == 3


def test_mark_dynamic_makes_the_first_graph_symbolic():
    g = ember.compile(attention_like, backend="eager")
    w = torch.randn(16)
    x = torch.randn(4, 8, 16)
    ember.mark_dynamic(x, 1)
    run_all(attention_like, g, [(x, w)] + [(torch.randn(4, t, 16), w) for t in (9, 30)])
    assert compiles() == 1
    out = ember.explain(attention_like, backend="eager")(x, w)
    assert out.symbol_counts == [1] and "shape guard" in out.guards[0]


def test_mark_static_keeps_a_dim_static():
    g = ember.compile(attention_like, backend="eager", dynamic=True)
    w = torch.randn(16)
    xs = [torch.randn(4, t, 16) for t in (8, 9)]
    for x in xs:
        ember.mark_static(x, 1)
    run_all(attention_like, g, [(x, w) for x in xs])
    assert compiles() == 2


def branchy(x):
    if x.shape[1] > 10:
        return x * 2
    return x - 1


def test_a_branch_on_a_size_is_a_relation_guard():
    g = ember.compile(branchy, backend="eager", dynamic=True)
    run_all(branchy, g, [(torch.randn(2, t),) for t in (12, 20, 11)])
    assert compiles() == 1
    # The other side of the branch: the relation fails and a second graph is made.
    run_all(branchy, g, [(torch.randn(2, t),) for t in (5, 10, 3)])
    assert compiles() == 2


def sizes_in_python(x):
    b, t, c = x.size()
    n = x.numel()
    return x.reshape(b * t, c) * (n // (b * t)), len(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_size_arithmetic_stays_correct(backend):
    g = ember.compile(sizes_in_python, backend=backend, dynamic=True)
    for t in (3, 5, 8):
        x = torch.randn(2, t, 4)
        out, n = g(x)
        ref, n_ref = sizes_in_python(x)
        torch.testing.assert_close(out, ref)
        assert n == n_ref


def duck(x, y):
    return x + y


def test_equal_sizes_share_a_symbol_and_are_guarded_equal():
    g = ember.compile(duck, backend="eager", dynamic=True)
    run_all(duck, g, [(torch.randn(5, 4), torch.randn(5, 4)), (torch.randn(7, 4), torch.randn(7, 4))])
    assert compiles() == 1
    # Different sizes break the equality the first graph relies on: recompile (and broadcasting
    # here then raises exactly as eager does).
    with pytest.raises(RuntimeError):
        g(torch.randn(6, 4), torch.randn(3, 4))


def test_guard_text_names_the_reason():
    g = ember.compile(branchy, backend="eager", dynamic=True)
    g(torch.randn(2, 12))
    out = ember.explain(branchy, backend="eager", dynamic=True)(torch.randn(2, 12))
    assert "shape guard: 10 < s1: 10 < s1 (" in out.guards[0] and "test_dynamic_capture.py" in out.guards[0], out.guards[0]


@pytest.mark.parametrize("make, sample", [
    (lambda: torch.nn.Linear(24, 10), lambda b: torch.randn(b, 24)),
    (lambda: torch.nn.LayerNorm(24), lambda b: torch.randn(b, 5, 24)),
    (lambda: torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU()), lambda b: torch.randn(b, 3, 12, 12)),
], ids=["linear", "layer_norm", "conv_relu"])
def test_a_size_a_rule_needs_static_does_not_pin_the_batch(make, sample):
    """Under dynamic=True every input dim starts symbolic; a rule that needs one of them equal to a
    parameter's size (in_features, normalized_shape, in_channels) pins just those, with that reason, and
    the batch stays symbolic: one graph over batch sizes. (A conv's spatial sizes stay symbolic too: its
    output sizes are floor divisions of them, trace_shapes.cpp.)"""
    torch.manual_seed(0)
    m = make().to(DEVICE)
    g = ember.compile(m, dynamic=True)
    with torch.no_grad():
        run_all(m, g, [(sample(b).to(DEVICE),) for b in (2, 7, 16)])
        if one_graph_serves_all_sizes("ember"):
            assert compiles() == 1, ember.stats()
        out = ember.explain(m, dynamic=True)(sample(5).to(DEVICE))
    lines = "\n".join(out.guards).splitlines()
    pinned = [line for line in lines if "shape rule needs these sizes static" in line or "channels static" in line]
    assert pinned and not any(line.startswith("shape guard: s0 ==") for line in pinned), lines


def renames_kwarg(old_name, new_name):
    """transformers' deprecate_kwarg: a decorator that tests its **kwargs with `in`, then passes them on."""
    def wrapper(func):
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            if old_name in kwargs and new_name in kwargs:
                kwargs.pop(old_name)
            elif old_name in kwargs:
                kwargs[new_name] = kwargs.pop(old_name)
            return func(*args, **{**kwargs})
        return wrapped
    return wrapper


@renames_kwarg("length", "q_length")
def causal_mask(batch_size, q_length, shape=None, **kwargs):
    assert shape[-1] == q_length
    return torch.ones(batch_size, 1, q_length, q_length, dtype=torch.bool).tril()


def masked(x):
    mask = causal_mask(batch_size=x.shape[0], length=x.shape[1], shape=x.shape, extra={"n": x.shape[1]})
    return x * mask[:, 0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_sizes_in_a_decorators_kwargs_stay_symbolic(backend):
    g = ember.compile(masked, backend=backend, dynamic=True)
    run_all(masked, g, [(torch.randn(2, t, t),) for t in (8, 16, 17)])
    if one_graph_serves_all_sizes(backend):
        assert compiles() == 1, ember.stats()


def size_in_a_tuple(x):
    # `in` compares sizes by value; a size as a dict key is its value (both guarded).
    return x * (x.shape[1] in (8, x.shape[0])) + ("n" in {"n": x.shape[1]}) + len({x.shape[0]: 1, 3: 2})


def test_in_compares_sizes_by_value():
    g = ember.compile(size_in_a_tuple, backend="eager", dynamic=True)
    run_all(size_in_a_tuple, g, [(torch.randn(b, t),) for b, t in ((2, 8), (3, 5), (4, 4), (3, 6))])


def cache_update(x):
    # transformers' DynamicCache: the first update joins a legacy empty 1-D tensor with the keys.
    keys = torch.tensor([], dtype=x.dtype, device=x.device)
    return torch.cat([keys, x.transpose(1, 2)], dim=-2) * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_cat_with_a_legacy_empty_tensor_stays_symbolic(backend):
    g = ember.compile(cache_update, backend=backend, dynamic=True)
    run_all(cache_update, g, [(torch.randn(2, t, 4, 6),) for t in (8, 16, 17)])
    if one_graph_serves_all_sizes(backend):
        assert compiles() == 1, ember.stats()
