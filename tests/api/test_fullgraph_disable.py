"""fullgraph=True and ember.disable."""
import os

import pytest
import torch

import ember


def capturable(x):
    return x.cos() * 2


def has_print(x):
    y = x + 1
    print("ember fullgraph test", end="")  # unsupported here
    return y


def test_unsupported_is_a_runtime_error():
    assert issubclass(ember.Unsupported, RuntimeError)


def test_fullgraph_capturable_runs():
    f = ember.compile(capturable, fullgraph=True)
    x = torch.randn(3)
    for _ in range(2):
        torch.testing.assert_close(f(x), x.cos() * 2)
    assert ember.stats()["frames_compiled"] == 1


@pytest.mark.parametrize("backend", ["ember", "eager"])
def test_fullgraph_unsupported_names_file_line_and_reason(backend, capsys):
    f = ember.compile(has_print, fullgraph=True, backend=backend)
    with pytest.raises(ember.Unsupported) as info:
        f(torch.randn(3))
    line = [i for i, t in enumerate(open(__file__), start=1) if t.rstrip().endswith("# unsupported here")][0]
    msg = str(info.value)
    assert f"{os.path.basename(__file__)}:{line}" in msg, msg
    assert "print" in msg, msg
    assert capsys.readouterr().out == "", "under fullgraph=True the frame must not have run"


def test_fullgraph_false_same_function_runs():
    f = ember.compile(has_print)
    x = torch.randn(3)
    torch.testing.assert_close(f(x), x + 1)


def helper(x):
    return x.exp()


def test_disable_wrapper_metadata_and_result():
    d = ember.disable(helper)
    assert d.__name__ == "helper" and d.__wrapped__ is helper
    x = torch.randn(3)
    torch.testing.assert_close(d(x), x.exp())


def test_compiling_a_disabled_function_compiles_nothing():
    f = ember.compile(ember.disable(helper))
    x = torch.randn(3)
    for _ in range(2):
        torch.testing.assert_close(f(x), x.exp())
    assert ember.stats()["frames_compiled"] == 0


DISABLED = ember.disable(helper)


def calls_disabled(x):
    return DISABLED(x) + 1


def test_disabled_callee_of_compiled_function():
    f = ember.compile(calls_disabled)
    x = torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(f(x), x.exp() + 1)
    s = ember.stats()
    # The call breaks the graph: calls_disabled and the code after the call compile, helper never.
    assert s["frames_compiled"] == 2 and s["graph_breaks"] == 1
    assert s["recompiles"] == 0
    out = ember.explain(calls_disabled)(x)
    assert out.graph_count == 1 and all("exp" not in g for g in out.graphs), "helper itself must never be compiled"
