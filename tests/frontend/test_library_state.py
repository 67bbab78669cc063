"""State of the Python process that library code reads at trace time: the process environment
(os.environ, os.getenv) and function signatures (inspect.signature). The trace folds such reads
to constants only under guards that see them change: each program is compiled, the state is
changed between calls, and every result is compared with eager."""
import inspect
import os
from os import environ

import pytest
import torch

import ember

FLAG = "EMBER_TEST_LIBRARY_STATE_FLAG"


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.delenv(FLAG, raising=False)
    ember.reset()
    yield
    ember.reset()


def env_branch(x):
    if os.environ.get(FLAG, "0") == "1":
        return x * 2
    return x + 1


def env_getenv(x):
    return x * 3 if os.getenv(FLAG) is not None else x - 3


def env_contains(x):
    return x.sin() if FLAG in environ else x.cos()


def env_value(x):
    return x * float(os.environ[FLAG])


@pytest.mark.parametrize("fn", [env_branch, env_getenv, env_contains], ids=lambda f: f.__name__)
def test_an_environment_variable_is_guarded_set_and_unset(fn, monkeypatch):
    compiled = ember.compile(fn, fullgraph=True)
    x = torch.randn(4)
    for value in (None, "1", "0", None, "1"):
        if value is None:
            monkeypatch.delenv(FLAG, raising=False)
        else:
            monkeypatch.setenv(FLAG, value)
        torch.testing.assert_close(compiled(x), fn(x))
    stats = ember.stats()
    # Unset, "1" and "0" are three entries; the last two calls reuse them.
    assert stats["frames_compiled"] == 3, stats


def test_the_guard_names_the_variable(monkeypatch):
    e = ember.explain(env_branch)(torch.randn(2))
    assert any(f"'{FLAG}' not in os.environ" in g for g in e.guards), e.guards
    ember.reset()
    monkeypatch.setenv(FLAG, "1")
    e = ember.explain(env_branch)(torch.randn(2))
    assert any(f"os.environ['{FLAG}'] == b'1'" in g for g in e.guards), e.guards


def test_an_unset_variable_raises_keyerror_as_in_eager(monkeypatch):
    compiled = ember.compile(env_value)
    x = torch.randn(3)
    with pytest.raises(KeyError):
        env_value(x)
    with pytest.raises(KeyError):
        compiled(x)
    monkeypatch.setenv(FLAG, "2.5")
    torch.testing.assert_close(compiled(x), env_value(x))


def env_mutation(x):
    os.environ[FLAG] = "7"
    return x + 1


def env_iteration(x):
    return x + len([k for k in os.environ if k == FLAG])


@pytest.mark.parametrize("fn", [env_mutation, env_iteration], ids=lambda f: f.__name__)
def test_other_uses_of_os_environ_break_and_run_in_cpython(fn):
    x = torch.randn(3)
    e = ember.explain(fn)(x)
    assert e.break_reasons, "os.environ beyond get/[]/in must not be traced"
    ember.reset()
    compiled = ember.compile(fn)
    torch.testing.assert_close(compiled(x), fn(x))
    if fn is env_mutation:
        assert os.environ[FLAG] == "7"


class Chunked(torch.nn.Module):
    def chunk(self, a, b):
        return a * b

    def forward(self, a, b):
        n = len(inspect.signature(self.chunk).parameters)
        return self.chunk(a, b) + n


def takes_three(a, b, c=1):
    return a + b + c


def signature_of_function(x):
    params = inspect.signature(takes_three).parameters
    return takes_three(x, x) * len(params) + int(params["c"].default)


def test_signature_of_a_bound_method_and_of_a_function():
    m = Chunked()
    a, b = torch.randn(3), torch.randn(3)
    compiled = ember.compile(m, fullgraph=True)
    torch.testing.assert_close(compiled(a, b), m(a, b))
    f = ember.compile(signature_of_function, fullgraph=True)
    torch.testing.assert_close(f(a), signature_of_function(a))


def signature_of_a_closure(x):
    def inner(p, q):
        return p + q
    return x * len(inspect.signature(inner).parameters)


def test_signature_of_a_function_made_in_the_trace_breaks_and_is_right():
    x = torch.randn(3)
    e = ember.explain(signature_of_a_closure)(x)
    assert any("inspect.signature" in b.reason for b in e.break_reasons), e.break_reasons
    ember.reset()
    torch.testing.assert_close(ember.compile(signature_of_a_closure)(x), signature_of_a_closure(x))


LIBRARY = '''
import torch

REGISTRY = {}
ORDER = []


class Layer(torch.nn.Module):
    def forward(self, x):
        flags = REGISTRY.get(str(self.__class__)) or {}
        return x * (len(flags) + len(ORDER))
'''


def test_plain_dicts_and_lists_of_library_modules_are_guarded(tmp_path, monkeypatch):
    # Library code reached without a source for its function (a module's forward) reads its
    # module's registry dict and list: they are mutable, so their reads are guarded, not folded.
    (tmp_path / "ember_test_registry_lib.py").write_text(LIBRARY)
    monkeypatch.syspath_prepend(str(tmp_path))
    import ember_test_registry_lib as lib
    m = lib.Layer()
    compiled = ember.compile(m, fullgraph=True)
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x), m(x))
    lib.REGISTRY[str(lib.Layer)] = {"hidden_states": 0, "attentions": 1}
    torch.testing.assert_close(compiled(x), m(x))
    lib.ORDER.append("a")
    torch.testing.assert_close(compiled(x), m(x))
    assert ember.stats()["frames_compiled"] == 3
