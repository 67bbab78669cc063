"""Frames with constructs Ember leaves to CPython (a graph break, or the frame run eagerly): the
result is eager's, explain() names the reason with the right file and line (for a break caused inside
an inlined call: the call's line, with the inner line named in the reason), EMBER_LOGS=graph_breaks
logs it once, and fullgraph=True raises ember.Unsupported naming that line.
"""
import inspect
import logging
import os

import pytest
import torch

import ember
from ember.testing import Call

from . import cases_fallback, other_file
from .harness import case_params
from .registry import CASES

FALLBACK_CASES = [c for c in CASES.values() if c.counters == "eager"]


def marker_location(case):
    """(filename, lineno) of the `# FALLBACK <marker>` comment for the case."""
    # The case's own file (cases_torch.py holds some), and other_file.py, where a case's callee may fall back.
    for path in (inspect.getsourcefile(inspect.unwrap(case.fn)), inspect.getsourcefile(other_file)):
        with open(path) as f:
            for lineno, line in enumerate(f, start=1):
                if line.rstrip().endswith(f"# FALLBACK {case.fallback_marker}"):
                    return os.path.realpath(path), lineno
    raise AssertionError(f"no '# FALLBACK {case.fallback_marker}' line for case {case.name}")


def first_inputs(case):
    g = torch.Generator()
    g.manual_seed(1000)
    return Call.of(case.inputs(g))


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


def test_there_are_fallback_cases():
    assert len(FALLBACK_CASES) >= 10


@pytest.mark.parametrize("case", case_params(FALLBACK_CASES))
def test_explain_names_file_and_line(case, capsys):
    call = first_inputs(case)
    out = ember.explain(case.fn)(*call.args, **call.kwargs)
    filename, lineno = marker_location(case)
    locations = [(os.path.realpath(r.filename), r.lineno) for r in out.break_reasons]
    inner = [r for r in out.break_reasons if f"{filename}:{lineno}" in r.reason]
    assert (filename, lineno) in locations or inner, f"expected a break reason at {filename}:{lineno}, got {out.break_reasons}"
    assert out.graph_break_count >= 1
    assert all(r.reason for r in out.break_reasons)


@pytest.mark.parametrize("case", case_params(FALLBACK_CASES))
def test_fullgraph_raises_unsupported_naming_line(case, capsys):
    call = first_inputs(case)
    f = ember.compile(case.fn, fullgraph=True)
    with pytest.raises(ember.Unsupported) as info:
        f(*call.args, **call.kwargs)
    filename, lineno = marker_location(case)
    message = str(info.value)
    assert f"{os.path.basename(filename)}:{lineno}" in message, message


@pytest.mark.parametrize("case", case_params(FALLBACK_CASES))
def test_fallback_logged_once(case, monkeypatch, caplog, capsys):
    monkeypatch.setenv("EMBER_LOGS", "graph_breaks")
    caplog.set_level(logging.INFO, logger="ember")
    f = ember.compile(case.fn)
    for _ in range(3):
        call = first_inputs(case)
        f(*call.args, **call.kwargs)
    filename, lineno = marker_location(case)
    # Records located at the marker: a break there, or the frame that runs eagerly because of it.
    hits = [r for r in caplog.records if r.name.startswith("ember") and lineno in r.args and
            any(isinstance(a, str) and os.path.realpath(a) == filename for a in r.args)]
    if not hits:  # a break at a call, caused at the marker inside the callee (a generator: never compiled alone)
        hits = [r for r in caplog.records if r.name.startswith("ember") and f"{filename}:{lineno}" in r.getMessage()]
    assert len(hits) == 1, [r.getMessage() for r in caplog.records]


def test_print_runs_once_per_call(capsys):
    f = ember.compile(cases_fallback.print_call)
    x = torch.randn(3, 4)
    for _ in range(3):
        torch.testing.assert_close(f(x), x * 2 + 1)
    printed = capsys.readouterr().out
    assert printed.count("ember parity: y has shape (3, 4)") == 3, printed


def _capturable_callee(x):
    return x.exp() * 2


class _Holder:
    attr = 0


def eager_caller(x, holder):
    del holder.attr  # a frame cannot be split at DELETE_ATTR: this frame runs eagerly
    return _capturable_callee(x) + 1


def test_frames_called_from_an_eager_frame_are_compiled(capsys):
    f = ember.compile(eager_caller)
    x = torch.randn(3, 4)
    for _ in range(3):
        holder = _Holder()
        holder.attr = 1
        torch.testing.assert_close(f(x, holder), x.exp() * 2 + 1)
    s = ember.stats()
    assert s["eager_frames"] >= 1
    assert s["frames_compiled"] == 1, s
    assert s["cache_hits"] >= 2, s


def test_fallback_result_unchanged_on_repeated_calls_with_new_values(capsys):
    f = ember.compile(cases_fallback.item_in_if)
    for sign in (1.0, -1.0, 1.0, -1.0):
        x = torch.rand(3, 4) * sign
        torch.testing.assert_close(f(x), cases_fallback.item_in_if(x))
