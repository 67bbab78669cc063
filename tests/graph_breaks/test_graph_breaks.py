"""Runs the graph-break corpus (corpus.py): every program, compiled with ember.compile, must match
eager PyTorch — result, stdout, mutated arguments and side effects — on two consecutive calls, the
second a cache hit for every segment; `ember.explain` must report the program's graph and break
counts (its own test, so a miscount never hides a wrong result); each break reason must point at a
line marked `# BREAK` (with its source text); and fullgraph=True must raise ember.Unsupported at the
first break.
"""
import linecache
import os
import re

import pytest
import torch

import ember
from ember.testing import TreeMismatch, assert_tree_close, clone_tree

from . import corpus
from .registry import PROGRAMS

N_CALLS = 2
# The counters that move only when something is compiled (traced, recompiled, generated).
COMPILE_COUNTERS = ("frames_compiled", "recompiles", "graph_breaks", "eager_frames", "graphs",
                    "kernels_compiled", "codegen_failures")
MARKER = re.compile(r"#\s*BREAK\b\s*(\w+)?")
CORPUS_DIR = os.path.dirname(os.path.realpath(corpus.__file__))


def params(programs):
    return [pytest.param(p, id=p.name) for p in programs]


ALL = list(PROGRAMS.values())
WITH_BREAKS = [p for p in ALL if p.breaks > 0]


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


def run_calls(program, callable_, target, capsys, stats=False):
    """Calls `callable_` N_CALLS times on fresh arguments; per call: output (or error), stdout, the
    arguments afterwards, the side-effect snapshot, and (stats=True) ember.stats() after the call."""
    records = []
    for _ in range(N_CALLS):
        if program.reset is not None:
            program.reset(target if program.module else None)
        args = program.inputs()
        capsys.readouterr()
        try:
            out, error = callable_(*args), None
        except Exception as e:  # recorded so the comparison can say which side raised
            out, error = None, e
        printed = capsys.readouterr().out
        state = clone_tree(program.state(target if program.module else None)) if program.state else None
        if program.module:
            state = {"case": state, "state_dict": clone_tree(dict(target.state_dict()))}
        records.append({"out": out, "error": error, "stdout": printed, "args": args, "state": state,
                        "stats": ember.stats() if stats else None})
    return records


def compare(program, expected, actual):
    for i, (e, a) in enumerate(zip(expected, actual)):
        if e["error"] is not None or a["error"] is not None:
            if type(e["error"]) is not type(a["error"]):
                raise AssertionError(f"call {i}: eager raised {e['error']!r}, compiled raised {a['error']!r}")
            continue
        assert a["stdout"] == e["stdout"], f"call {i}: stdout differs\neager:\n{e['stdout']}\ncompiled:\n{a['stdout']}"
        try:
            kwargs = {"rtol": program.rtol, "atol": program.atol}
            grads = assert_tree_close(e["out"], a["out"], path=f"call{i}.out", **kwargs)
            grads += assert_tree_close(e["args"], a["args"], path=f"call{i}.args_after", **kwargs)
            grads += assert_tree_close(e["state"], a["state"], path=f"call{i}.state", **kwargs)
        except TreeMismatch as err:
            raise AssertionError(f"WRONG RESULT: {err}") from None
        assert not grads, f"call {i}: requires_grad differs: {grads}"


@pytest.mark.parametrize("program", params(ALL))
def test_matches_eager(program, capsys):
    eager_target = program.make_target()
    expected = run_calls(program, eager_target, eager_target, capsys)
    target = program.make_target()
    compiled = ember.compile(target)
    actual = run_calls(program, compiled, target, capsys, stats=True)
    compare(program, expected, actual)
    first, second = (r["stats"] for r in actual)
    if program.recompiles_per_call:
        return  # a value guarded by value changes per call (registry.Program.recompiles_per_call)
    moved = {k: (first[k], second[k]) for k in COMPILE_COUNTERS if first[k] != second[k]}
    assert not moved, f"the second call compiled something (counter: (after call 1, after call 2)): {moved}"
    assert second["cache_hits"] > first["cache_hits"], f"the second call hit no cache entry: {first} -> {second}"


def explain(program, capsys, **kwargs):
    target = program.make_target()
    if program.reset is not None:
        program.reset(target if program.module else None)
    out = ember.explain(target, **kwargs)(*program.inputs())
    capsys.readouterr()
    return out


def describe(out):
    return "\n".join(f"  {r.reason} ({os.path.basename(r.filename)}:{r.lineno})" for r in out.break_reasons)


@pytest.mark.parametrize("program", params(ALL))
def test_counts(program, capsys):
    out = explain(program, capsys)
    got = (out.graph_count, out.graph_break_count)
    assert got == (program.graphs, program.breaks), (
        f"(graphs, breaks) expected {(program.graphs, program.breaks)}, got {got}; breaks:\n{describe(out)}")


@pytest.mark.parametrize("program", params(WITH_BREAKS))
def test_break_locations(program, capsys):
    out = explain(program, capsys)
    assert out.break_reasons, "explain() reported no break"
    for r in out.break_reasons:
        where = f"{r.reason} ({r.filename}:{r.lineno})"
        if program.module and r.filename == "<ember module call>":
            continue  # the entry frame ember.compile(module) makes: its CALL of the module has no user line
        if any(part in r.filename for part in program.foreign_breaks):
            continue  # a library frame the hook captured on its own (registry.Program.foreign_breaks)
        assert os.path.dirname(os.path.realpath(r.filename)) == CORPUS_DIR, f"break outside the corpus: {where}"
        line = linecache.getline(r.filename, r.lineno)
        marker = MARKER.search(line)
        assert marker, f"break at a line not marked '# BREAK': {where}: {line.strip()!r}"
        if marker.group(1):
            assert marker.group(1).lower() in r.reason.lower(), f"the reason does not name {marker.group(1)!r}: {where}"
        assert getattr(r, "source", None) == line.strip(), f"source text: expected {line.strip()!r}, got {r!r}"


@pytest.mark.parametrize("program", params(WITH_BREAKS))
def test_fullgraph_raises(program, capsys):
    target = program.make_target()
    if program.reset is not None:
        program.reset(target if program.module else None)
    compiled = ember.compile(target, fullgraph=True)
    with pytest.raises(ember.Unsupported) as info:
        compiled(*program.inputs())
    message = str(info.value)
    places = re.findall(r"([\w.]+\.py):(\d+)", message)
    marked = [(f, n) for f, n in places
              if os.path.exists(os.path.join(CORPUS_DIR, f))
              and MARKER.search(linecache.getline(os.path.join(CORPUS_DIR, f), int(n)))]
    assert marked, f"the message names no '# BREAK' line of the corpus: {message}"


@pytest.mark.parametrize("program", params([p for p in ALL if p.breaks == 0]))
def test_fullgraph_without_breaks(program, capsys):
    eager_target = program.make_target()
    expected = run_calls(program, eager_target, eager_target, capsys)
    target = program.make_target()
    actual = run_calls(program, ember.compile(target, fullgraph=True), target, capsys)
    compare(program, expected, actual)


def _branch_groups():
    """Functions registered under several inputs whose counts differ or whose branches differ."""
    groups = {}
    for p in ALL:
        if not p.module:
            groups.setdefault(p.fn, []).append(p)
    return [pytest.param(ps, id=ps[0].fn.__name__) for ps in groups.values() if len(ps) > 1]


@pytest.mark.parametrize("programs", _branch_groups())
def test_inputs_switch_branches(programs, capsys):
    """One compiled function called with each registered input in turn, twice over: every branch
    continues in its own resume function and the results stay eager's."""
    compiled = ember.compile(programs[0].fn)
    for p in programs + programs:
        if p.reset is not None:
            p.reset(None)
        expected = p.fn(*p.inputs())
        eager_stdout = capsys.readouterr().out
        if p.reset is not None:
            p.reset(None)
        actual = compiled(*p.inputs())
        compiled_stdout = capsys.readouterr().out
        assert compiled_stdout == eager_stdout, p.name
        try:
            assert_tree_close(expected, actual, path=p.name)
        except TreeMismatch as err:
            raise AssertionError(f"WRONG RESULT: {err}") from None


def test_corpus_size():
    assert len(PROGRAMS) >= 80, len(PROGRAMS)


class _Token:
    """Hashed by identity: only CPython knows the value, for each object anew."""


def _hash_of(x, token):
    return x * 3, hash(token)


def test_hash_of_an_object_is_not_baked_into_the_trace():
    """hash() of a user object is a break (corpus.builtin_hash): a trace that computes it once and
    guards the object only by type would return the first object's hash for every later object."""
    compiled = ember.compile(_hash_of)
    tokens = [_Token() for _ in range(3)]  # kept alive: distinct objects, distinct hashes
    x = torch.ones(2)
    for token in tokens:
        _, h = compiled(x, token)
        assert h == hash(token)
