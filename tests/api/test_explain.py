"""ember.explain(fn)(*args): graphs, ops, guards and break reasons of one fresh compilation."""
import os

import torch
import torch.nn as nn

import ember


def two_ops(x, y):
    return torch.relu(x @ y) + 1


def test_explain_capturable_function():
    x, y = torch.randn(3, 4), torch.randn(4, 5)
    out = ember.explain(two_ops)(x, y)
    assert out.graph_count == 1
    assert out.graph_break_count == 0
    assert out.break_reasons == []
    assert out.op_count >= 3
    assert len(out.graphs) == 1 and isinstance(out.graphs[0], str) and out.graphs[0].strip()
    assert len(out.guards) == 1
    guards = out.guards[0]
    assert "L['x']" in guards and "L['y']" in guards, guards
    text = str(out)
    assert "Graph count: 1" in text


def test_explain_guards_name_module_parameters():
    m = nn.Linear(4, 2)
    out = ember.explain(m)(torch.randn(3, 4))
    assert out.graph_count == 1
    assert "weight" in out.guards[0] or "weight" in out.graphs[0]


def test_explain_does_not_touch_existing_caches():
    f = ember.compile(two_ops)
    x, y = torch.randn(3, 4), torch.randn(4, 5)
    f(x, y)
    ember.explain(two_ops)(x, y)
    f(x, y)
    assert ember.stats()["recompiles"] == 0


def test_explain_each_call_is_fresh():
    x, y = torch.randn(3, 4), torch.randn(4, 5)
    first = ember.explain(two_ops)(x, y)
    second = ember.explain(two_ops)(x, y)
    assert first.graph_count == second.graph_count == 1
    assert first.graphs == second.graphs, "IR text must be deterministic"
    assert first.guards == second.guards


def with_print(x):
    y = x * 2
    print("ember explain test", end="")  # the break line
    return y


def test_explain_fallback_reason_points_at_line(capsys):
    out = ember.explain(with_print)(torch.randn(3))
    assert out.graph_break_count >= 1
    lines = [i for i, text in enumerate(open(__file__), start=1) if text.rstrip().endswith("# the break line")]
    locations = [(os.path.realpath(r.filename), r.lineno) for r in out.break_reasons]
    assert (os.path.realpath(__file__), lines[0]) in locations, out.break_reasons
    assert "print" in " ".join(r.reason for r in out.break_reasons)


def test_explain_passes_compile_kwargs():
    out = ember.explain(two_ops, backend="eager")(torch.randn(3, 4), torch.randn(4, 5))
    assert out.graph_count == 1


def test_explain_propagates_user_errors():
    def bad(x):
        raise ValueError("nope")

    import pytest
    with pytest.raises(ValueError, match="nope"):
        ember.explain(bad)(torch.randn(2))
