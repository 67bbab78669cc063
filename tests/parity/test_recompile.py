"""Recompiles happen exactly when a guarded property changes (shape, dtype, strides, requires_grad,
grad mode, a module flag or int attribute, a global, a Python argument, a container's length or a
module's identity) and never otherwise; weights and global tensors are read on every call, never
baked in; after `cache_limit` entries the code runs eagerly with one warning naming the guard.
"""
import warnings

import pytest
import torch
import torch.nn as nn

import ember

from .harness import N_CALLS  # noqa: F401 (the corpus' call count; these tests choose their own)


def counters():
    s = ember.stats()
    return {k: s[k] for k in ("frames_compiled", "cache_hits", "recompiles", "eager_frames")}


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


@pytest.fixture(params=["ember", "eager"])
def backend(request):
    return request.param


def scaled(x):
    return (x * 2 + 1).sum(dim=-1)


def check(fn, compiled, *args):
    torch.testing.assert_close(compiled(*args), fn(*args))


def test_same_metadata_new_values_no_recompile(backend):
    f = ember.compile(scaled, backend=backend)
    for i in range(5):
        check(scaled, f, torch.randn(3, 4))
    assert counters() == {"frames_compiled": 1, "cache_hits": 4, "recompiles": 0, "eager_frames": 0}


def test_shape_change_recompiles_once_and_old_entry_still_hits(backend):
    f = ember.compile(scaled, backend=backend)
    check(scaled, f, torch.randn(3, 4))
    check(scaled, f, torch.randn(5, 4))
    assert counters()["recompiles"] == 1
    check(scaled, f, torch.randn(3, 4))
    check(scaled, f, torch.randn(5, 4))
    assert counters() == {"frames_compiled": 2, "cache_hits": 2, "recompiles": 1, "eager_frames": 0}


def test_rank_change_recompiles(backend):
    f = ember.compile(scaled, backend=backend)
    check(scaled, f, torch.randn(3, 4))
    check(scaled, f, torch.randn(2, 3, 4))
    assert counters()["recompiles"] == 1


def test_dtype_change_recompiles(backend):
    f = ember.compile(scaled, backend=backend)
    check(scaled, f, torch.randn(3, 4))
    check(scaled, f, torch.randn(3, 4, dtype=torch.float64))
    check(scaled, f, torch.randn(3, 4, dtype=torch.float64))
    assert counters() == {"frames_compiled": 2, "cache_hits": 1, "recompiles": 1, "eager_frames": 0}


def test_stride_change_recompiles(backend):
    f = ember.compile(scaled, backend=backend)
    check(scaled, f, torch.randn(4, 4))
    check(scaled, f, torch.randn(4, 4).t())
    assert counters()["recompiles"] == 1


def test_requires_grad_change_recompiles(backend):
    f = ember.compile(scaled, backend=backend)
    x = torch.randn(3, 4)
    check(scaled, f, x)
    xg = torch.randn(3, 4, requires_grad=True)
    out = f(xg)
    assert out.requires_grad
    torch.testing.assert_close(out, scaled(xg))
    f(torch.randn(3, 4, requires_grad=True))
    assert counters() == {"frames_compiled": 2, "cache_hits": 1, "recompiles": 1, "eager_frames": 0}


def test_grad_mode_change_recompiles(backend):
    f = ember.compile(scaled, backend=backend)
    x = torch.randn(3, 4, requires_grad=True)
    assert f(x).requires_grad
    with torch.no_grad():
        out = f(x)
    assert not out.requires_grad
    torch.testing.assert_close(out, scaled(x).detach())
    assert counters()["recompiles"] == 1


def with_int(x, n):
    return x * n + n


def test_python_int_argument(backend):
    f = ember.compile(with_int, backend=backend)
    x = torch.randn(3)
    check(with_int, f, x, 2)
    check(with_int, f, x, 2)
    assert counters()["recompiles"] == 0
    check(with_int, f, x, 3)
    assert counters()["recompiles"] == 1


def with_flag(x, flag):
    return x.relu() if flag else x.tanh()


def test_python_bool_argument(backend):
    f = ember.compile(with_flag, backend=backend)
    x = torch.randn(3)
    check(with_flag, f, x, True)
    check(with_flag, f, x, False)
    check(with_flag, f, x, True)
    check(with_flag, f, x, False)
    assert counters() == {"frames_compiled": 2, "cache_hits": 2, "recompiles": 1, "eager_frames": 0}


def sum_list(xs):
    out = xs[0]
    for t in xs[1:]:
        out = out + t
    return out


def test_list_length_change_recompiles(backend):
    f = ember.compile(sum_list, backend=backend)
    check(sum_list, f, [torch.randn(2), torch.randn(2)])
    check(sum_list, f, [torch.randn(2), torch.randn(2)])
    assert counters()["recompiles"] == 0
    check(sum_list, f, [torch.randn(2), torch.randn(2), torch.randn(2)])
    assert counters()["recompiles"] == 1


def read_dict(d):
    return sum([v * i for i, v in enumerate(d.values())])


def test_dict_keys_change_recompiles(backend):
    f = ember.compile(read_dict, backend=backend)
    check(read_dict, f, {"a": torch.randn(2), "b": torch.randn(2)})
    check(read_dict, f, {"a": torch.randn(2), "b": torch.randn(2)})
    assert counters()["recompiles"] == 0
    check(read_dict, f, {"b": torch.randn(2), "a": torch.randn(2)})
    assert counters()["recompiles"] == 1


K = 2.0
FLAG = True
WEIGHT = torch.randn(4)


def uses_globals(x):
    y = x * K
    if FLAG:
        y = y + WEIGHT
    return y


def test_global_change_recompiles_and_unchanged_does_not(backend):
    global K, FLAG
    f = ember.compile(uses_globals, backend=backend)
    x = torch.randn(3, 4)
    try:
        check(uses_globals, f, x)
        check(uses_globals, f, x)
        assert counters()["recompiles"] == 0
        K = 3.0
        check(uses_globals, f, x)
        assert counters()["recompiles"] == 1
        FLAG = False
        check(uses_globals, f, x)
        assert counters()["recompiles"] == 2
        check(uses_globals, f, x)
        assert counters()["recompiles"] == 2
    finally:
        K, FLAG = 2.0, True


def test_global_tensor_values_are_read_each_call(backend):
    f = ember.compile(uses_globals, backend=backend)
    x = torch.randn(3, 4)
    check(uses_globals, f, x)
    saved = WEIGHT.clone()
    try:
        WEIGHT.mul_(-3)
        check(uses_globals, f, x)
    finally:
        WEIGHT.copy_(saved)
    assert counters()["recompiles"] == 0


class Flagged(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.use_residual = True
        self.repeats = 2

    def forward(self, x):
        y = x
        for _ in range(self.repeats):
            y = self.fc(y)
        return y + x if self.use_residual else y


def test_module_flag_attribute_change_recompiles(backend):
    m = Flagged()
    cm = ember.compile(m, backend=backend)
    x = torch.randn(3, 4)
    check(m, cm, x)
    check(m, cm, x)
    assert counters()["recompiles"] == 0
    m.use_residual = False
    check(m, cm, x)
    assert counters()["recompiles"] == 1
    check(m, cm, x)
    assert counters()["recompiles"] == 1


def test_module_int_attribute_change_recompiles(backend):
    m = Flagged()
    cm = ember.compile(m, backend=backend)
    x = torch.randn(3, 4)
    check(m, cm, x)
    m.repeats = 3
    check(m, cm, x)
    assert counters()["recompiles"] == 1
    check(m, cm, x)
    assert counters()["recompiles"] == 1


def test_module_train_eval_switch_recompiles(backend):
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.BatchNorm1d(4))
    cm = ember.compile(m, backend=backend, options={"fallback_random": True})  # eager's dropout masks
    x = torch.randn(6, 4)
    m.eval()
    check(m, cm, x)
    check(m, cm, x)
    assert counters()["recompiles"] == 0
    m.train()
    torch.manual_seed(0)
    expected = m(x)
    torch.manual_seed(0)
    got = cm(x)
    torch.testing.assert_close(got, expected)
    assert counters()["recompiles"] == 1


def test_parameter_update_in_place_is_seen_without_recompile(backend):
    m = nn.Linear(4, 3)
    cm = ember.compile(m, backend=backend)
    x = torch.randn(2, 4)
    check(m, cm, x)
    for _ in range(2):
        with torch.no_grad():
            for p in m.parameters():
                p.add_(torch.randn_like(p))
        check(m, cm, x)
    with torch.no_grad():
        m.weight.mul_(-1)
    check(m, cm, x)
    assert counters()["recompiles"] == 0


def test_parameter_replaced_gives_right_result(backend):
    m = nn.Linear(4, 3)
    cm = ember.compile(m, backend=backend)
    x = torch.randn(2, 4)
    check(m, cm, x)
    m.weight = nn.Parameter(torch.randn(3, 4))
    check(m, cm, x)
    m.bias = None
    check(m, cm, x)


LAYER = nn.Linear(4, 2)


def calls_global_module(x):
    return LAYER(x)


def test_global_module_replaced_recompiles(backend):
    global LAYER
    f = ember.compile(calls_global_module, backend=backend)
    x = torch.randn(3, 4)
    saved = LAYER
    try:
        check(calls_global_module, f, x)
        LAYER = nn.Linear(4, 2)
        check(calls_global_module, f, x)
        assert counters()["recompiles"] == 1
        LAYER = nn.Linear(4, 5)
        check(calls_global_module, f, x)
    finally:
        LAYER = saved


def test_two_compiled_wrappers_of_one_function_keep_separate_caches(backend):
    f1 = ember.compile(scaled, backend=backend)
    f2 = ember.compile(scaled, backend=backend)
    x = torch.randn(3, 4)
    check(scaled, f1, x)
    check(scaled, f2, x)
    check(scaled, f1, x)
    s = counters()
    assert s["frames_compiled"] == 2 and s["recompiles"] == 0 and s["cache_hits"] == 1


def test_uncompiled_calls_are_not_intercepted(backend):
    f = ember.compile(scaled, backend=backend)
    x = torch.randn(3, 4)
    f(x)
    before = counters()
    scaled(x)
    scaled(torch.randn(7, 2))
    assert counters() == before


# ---------------------------------------------------------------------------------------------
# Cache limit

def _ember_warnings(records):
    return [w for w in records if "ember" in str(w.message)]


def test_cache_limit_falls_back_with_one_warning(backend):
    # dynamic=False: each size its own graph (by default the second size would make one symbolic graph).
    f = ember.compile(scaled, backend=backend, dynamic=False, options={"cache_limit": 8})
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        for n in range(1, 9):
            check(scaled, f, torch.randn(n, 3))
        assert _ember_warnings(records) == []
    assert counters()["frames_compiled"] == 8
    assert counters()["recompiles"] == 7
    with pytest.warns(UserWarning, match=r"L\['x'\]") as records:
        for n in range(9, 14):
            check(scaled, f, torch.randn(n, 3))
        check(scaled, f, torch.randn(2, 3))
    ours = _ember_warnings(records)
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert "scaled" in str(ours[0].message)
    assert counters()["frames_compiled"] == 8


def test_cache_limit_option_is_respected(backend):
    f = ember.compile(scaled, backend=backend, dynamic=False, options={"cache_limit": 2})
    with pytest.warns(UserWarning, match="ember"):
        for n in (2, 3, 4, 5):
            check(scaled, f, torch.randn(n, 3))
    assert counters()["frames_compiled"] == 2


def test_cache_limit_is_per_compiled_callable(backend):
    f = ember.compile(scaled, backend=backend, options={"cache_limit": 1})
    g = ember.compile(scaled, backend=backend, options={"cache_limit": 1})
    with pytest.warns(UserWarning, match="ember"):
        check(scaled, f, torch.randn(2, 3))
        check(scaled, f, torch.randn(3, 3))
    check(scaled, g, torch.randn(3, 3))
    assert counters()["frames_compiled"] == 2


class _StepCounter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.steps = 0
        self.scale = 2

    def forward(self, x):
        self.steps += 1
        self.total = self.steps * 10 + 1  # arithmetic on it stays symbolic too
        return x * self.scale


def test_int_attribute_counter_does_not_recompile():
    ember.reset()
    m = _StepCounter()
    c = ember.compile(m)
    x = torch.randn(3)
    for i in range(1, 21):
        torch.testing.assert_close(c(x), x * 2)
        assert m.steps == i and m.total == i * 10 + 1
    s = ember.stats()
    assert s["frames_compiled"] == 1 and s["recompiles"] == 0 and s["eager_frames"] == 0, s


def test_int_attribute_used_as_a_value_recompiles_when_it_changes():
    ember.reset()
    m = _StepCounter()
    c = ember.compile(m)
    x = torch.randn(3)
    c(x)
    c(x)
    m.scale = 3  # multiplies a tensor: specialized, guarded by value
    torch.testing.assert_close(c(x), x * 3)
    s = ember.stats()
    assert s["frames_compiled"] == 2 and s["recompiles"] == 1, s
