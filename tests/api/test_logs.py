"""EMBER_LOGS channels through Python logging (caught with caplog)."""
import logging

import pytest
import torch

import ember


def f(x):
    return x.sin() + 1


def with_print(x):
    print("ember log test", end="")
    return x


class Holder:
    attr = 1


def deletes_attribute(x, obj):
    del obj.attr  # no graph break can split a frame at DELETE_ATTR: the frame runs eagerly
    return x


@pytest.fixture
def logs(monkeypatch, caplog):
    def enable(channels):
        monkeypatch.setenv("EMBER_LOGS", channels)
        caplog.set_level(logging.INFO, logger="ember")
        return caplog
    return enable


def messages(caplog):
    return [r.getMessage() for r in caplog.records if r.name.startswith("ember")]


def test_no_logs_by_default(monkeypatch, caplog):
    monkeypatch.delenv("EMBER_LOGS", raising=False)
    caplog.set_level(logging.DEBUG, logger="ember")
    ember.compile(f)(torch.randn(3))
    assert messages(caplog) == []


def test_graph_channel(logs):
    caplog = logs("graph")
    ember.compile(f)(torch.randn(3))
    msgs = messages(caplog)
    assert len(msgs) == 1 and "graph for" in msgs[0] and "f" in msgs[0]


def test_guards_channel(logs):
    caplog = logs("guards")
    ember.compile(f)(torch.randn(3))
    msgs = messages(caplog)
    assert any("L['x']" in m for m in msgs), msgs


def test_recompiles_channel_names_failing_guard(logs):
    caplog = logs("recompiles")
    g = ember.compile(f)
    g(torch.randn(3))
    g(torch.randn(3))
    assert messages(caplog) == []
    g(torch.randn(5))
    msgs = messages(caplog)
    assert len(msgs) == 1 and "L['x']" in msgs[0], msgs


def test_fallbacks_channel(logs, capsys):
    caplog = logs("fallbacks")
    g = ember.compile(deletes_attribute)
    for _ in range(3):
        h = Holder()
        h.attr = 2
        g(torch.randn(3), h)
    msgs = messages(caplog)
    assert len(msgs) == 1 and "runs eagerly" in msgs[0] and "test_logs.py" in msgs[0], msgs


def test_graph_breaks_channel_logs_each_location_once(logs, capsys):
    caplog = logs("graph_breaks")
    g = ember.compile(with_print)
    for _ in range(3):
        g(torch.randn(3))
    msgs = messages(caplog)
    assert len(msgs) == 1, msgs
    assert "graph break" in msgs[0] and "print()" in msgs[0] and "test_logs.py:15" in msgs[0], msgs
    assert 'print("ember log test", end="")' in msgs[0], msgs


def test_graph_breaks_channel_also_reports_fallbacks(logs, capsys):
    caplog = logs("graph_breaks")
    h = Holder()
    h.attr = 2
    ember.compile(deletes_attribute)(torch.randn(3), h)
    assert len(messages(caplog)) == 1


def test_perf_channel(logs):
    caplog = logs("perf")
    ember.compile(f)(torch.randn(3))
    assert any("traced" in m for m in messages(caplog))


def test_all_channel(logs):
    caplog = logs("all")
    ember.compile(f)(torch.randn(3))
    text = "\n".join(messages(caplog))
    assert "graph for" in text and "guards for" in text


def test_channels_agree_with_the_cpp_enum():
    # options.LOG_CHANNELS[i] is bit i of LogChannel (src/support/options.h, bound in bind_compiler.cpp).
    from ember import _C
    from ember.options import LOG_CHANNELS
    assert [(c.name, c.value) for c in _C.LogChannel] == [(n, 1 << i) for i, n in enumerate(LOG_CHANNELS)]
    assert ember.options.parse_logs("passes,perf")[0] == _C.LogChannel.passes.value | _C.LogChannel.perf.value


def test_unknown_channel_is_an_error(monkeypatch):
    monkeypatch.setenv("EMBER_LOGS", "graph,bogus")
    with pytest.raises(ValueError, match="bogus"):
        ember.compile(f)
