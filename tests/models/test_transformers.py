"""Real models (issue 4, item 5): transformers GPT-2, BERT, LLaMA and T5 with tiny random-init configs, and
Ember's nanoGPT, compiled by Ember and compared with eager.

Per model: the output matches eager (backend "ember" and "eager"), with and without torch.no_grad(); the
second call is a cache hit; Ember builds at least one graph and no more graphs than torch.compile's Dynamo
on the same call (measured here with torch._dynamo.explain); where Dynamo captures the forward whole, Ember's
break_reasons are empty (no eager fallback of the model's forward).
"""
import pytest
import torch

transformers = pytest.importorskip("transformers")

import ember  # noqa: E402
from ember.bench import models_workloads as mw  # noqa: E402

MODELS = list(mw.MODELS)
TRANSFORMERS_MODELS = [m for m in MODELS if m != "nanogpt"]


def _assert_same(out, ref):
    got, want = mw.tensors_of(out), mw.tensors_of(ref)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    assert type(out) is type(ref)


@pytest.fixture(autouse=True)
def _fresh():
    ember.reset()
    yield
    ember.reset()


_dynamo_counts = {}


def _dynamo_graph_count(name):
    """torch._dynamo.explain's graph count for the model's call (memoized: Dynamo is slow to trace)."""
    if name not in _dynamo_counts:
        import torch._dynamo
        w = mw.build(name)
        torch._dynamo.reset()
        with torch.no_grad():
            e = torch._dynamo.explain(w.model)(*w.args, **w.kwargs)
        torch._dynamo.reset()
        _dynamo_counts[name] = (e.graph_count, e.graph_break_count)
    return _dynamo_counts[name]


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("backend", ["eager", "ember"])
def test_matches_eager_under_no_grad(name, backend):
    w = mw.build(name)
    with torch.no_grad():
        ref = w.model(*w.args, **w.kwargs)
        compiled = ember.compile(w.model, backend=backend)
        out = compiled(*w.args, **w.kwargs)
        _assert_same(out, ref)
        before = ember.stats()
        again = compiled(*w.args, **w.kwargs)
        after = ember.stats()
    _assert_same(again, ref)
    assert after["cache_hits"] > before["cache_hits"], "the second call must be a cache hit"
    assert after["frames_compiled"] == before["frames_compiled"], "the second call must not compile again"


@pytest.mark.parametrize("name", MODELS)
def test_matches_eager_with_grad_enabled(name):
    w = mw.build(name)
    ref = w.model(*w.args, **w.kwargs)
    out = ember.compile(w.model, backend="eager")(*w.args, **w.kwargs)
    _assert_same(out, ref)


@pytest.mark.parametrize("name", MODELS)
def test_graph_count_against_dynamo(name):
    dynamo_graphs, dynamo_breaks = _dynamo_graph_count(name)
    w = mw.build(name)
    with torch.no_grad():
        e = ember.explain(w.model)(*w.args, **w.kwargs)
    reasons = [f"{r.reason} ({r.filename}:{r.lineno})" for r in e.break_reasons]
    assert e.graph_count > 0, f"{name}: the forward ran eagerly: {reasons}"
    assert e.graph_count <= dynamo_graphs, f"{name}: {e.graph_count} graphs, Dynamo {dynamo_graphs}: {reasons}"
    if dynamo_breaks == 0:
        assert reasons == [], f"{name}: Dynamo captures the forward whole; Ember fell back: {reasons}"
    assert e.op_count >= 20, f"{name}: only {e.op_count} ops captured"


@pytest.mark.parametrize("name", TRANSFORMERS_MODELS)
def test_default_call_and_tuple_output(name):
    """`model(input_ids)` as users call it (the decoders then build and return a cache object: compared
    by their first output), and return_dict=False (a tuple output)."""
    w = mw.build(name)
    args, kwargs = w.args, dict(w.kwargs)
    if name == "t5":  # T5 needs its decoder inputs; the rest are defaults
        kwargs = {"decoder_input_ids": kwargs["decoder_input_ids"]}
    else:
        kwargs = {}
    with torch.no_grad():
        compiled = ember.compile(w.model, backend="eager")
        torch.testing.assert_close(compiled(*args, **kwargs)[0], w.model(*args, **kwargs)[0], rtol=1e-4, atol=1e-5)
        ref = w.model(*args, return_dict=False, **kwargs)
        out = compiled(*args, return_dict=False, **kwargs)
    assert isinstance(out, tuple) and len(out) == len(ref)
    torch.testing.assert_close(out[0], ref[0], rtol=1e-4, atol=1e-5)
