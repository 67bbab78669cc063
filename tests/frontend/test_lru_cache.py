"""functools.lru_cache wrappers of Python code inside compiled frames (interp_lru_cache.cpp), and torch.nn
layers built inside them (interp_instances.cpp). An unbounded cache called with arguments the guards pin is
called at trace time and its value folded (a miss runs the body then, once, as eager's first call does); any
other call is traced through __wrapped__ (torch.compile's way: the body runs on every call). Each is a note in
ember.explain and EMBER_LOGS=graph_breaks, never a break. Every result is compared with eager."""
import functools
import logging

import pytest
import torch
from torch import nn

import ember


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


BODY_RUNS = []


@functools.lru_cache(None)
def warn_once(logger, message):
    """As transformers' logger.warning_once: a side effect meant to happen once per message."""
    BODY_RUNS.append(message)
    logger.info(message)


class Logger(logging.Logger):
    """Hashed by identity; warn_once binds to it as a method (transformers sets logging.Logger.warning_once)."""

    warn_once = warn_once


LOG = Logger("ember.test_lru_cache")


def warns_then_computes(x):
    LOG.warn_once("slow path")
    return x.sin() * 2


@functools.lru_cache(None)
def table(n):
    return tuple(i * i for i in range(n))


def uses_a_cached_table(x):
    return x * table(4)[3]


@functools.lru_cache(maxsize=2)
def bounded(x, k):
    return x * k + 1


def calls_a_bounded_cache(x):
    return bounded(x, 3).cos()


@functools.lru_cache(None)
def on_tensors(x):
    return x.exp()


def calls_with_a_tensor(x):
    return on_tensors(x) + 1


@pytest.mark.parametrize("fn", [warns_then_computes, uses_a_cached_table, calls_a_bounded_cache,
                                calls_with_a_tensor], ids=lambda f: f.__name__)
def test_one_graph_no_break_and_eager_results(fn):
    warn_once.cache_clear()
    x = torch.randn(8)
    e = ember.explain(fn, backend="eager")(x)
    assert (e.graph_count, e.graph_break_count) == (1, 0), e
    assert any("lru_cache" in n for n in e.notes), e.notes
    compiled = ember.compile(fn, fullgraph=True, backend="eager")
    for _ in range(3):
        x = torch.randn(8)
        torch.testing.assert_close(compiled(x), fn(x))


def test_a_miss_runs_the_body_once_as_eager_does():
    warn_once.cache_clear()
    BODY_RUNS.clear()
    compiled = ember.compile(warns_then_computes, fullgraph=True, backend="eager")
    for _ in range(3):
        compiled(torch.randn(4))
    assert BODY_RUNS == ["slow path"]  # eager: the first call's miss, then hits
    assert ember.stats()["frames_compiled"] == 1


def test_the_note_says_what_was_done():
    warn_once.cache_clear()
    e = ember.explain(warns_then_computes, backend="eager")(torch.randn(4))
    assert any("lru_cache folded" in n and "a miss" in n for n in e.notes), e.notes
    e = ember.explain(calls_a_bounded_cache, backend="eager")(torch.randn(4))
    assert any("lru_cache bypassed" in n and "bounded" in n for n in e.notes), e.notes


def test_notes_are_logged(monkeypatch, caplog):
    monkeypatch.setenv("EMBER_LOGS", "graph_breaks")
    warn_once.cache_clear()
    with caplog.at_level(logging.INFO, logger="ember"):
        ember.compile(warns_then_computes, backend="eager")(torch.randn(4))
    assert any("lru_cache folded" in r.getMessage() for r in caplog.records), caplog.text


def test_another_object_as_argument_is_a_new_key():
    """The folded call's object argument is guarded by identity: another logger is another cache key."""
    other = Logger("ember.test_lru_cache.other")

    def fn(logger, x):
        logger.warn_once("m")
        return x + 1

    warn_once.cache_clear()
    BODY_RUNS.clear()
    compiled = ember.compile(fn, fullgraph=True, backend="eager")
    compiled(LOG, torch.randn(2))
    compiled(LOG, torch.randn(2))
    compiled(other, torch.randn(2))
    assert BODY_RUNS == ["m", "m"]


def loss_built_in_forward(logits, labels):
    loss_fct = nn.CrossEntropyLoss(ignore_index=-100)
    return loss_fct(logits.view(-1, logits.shape[-1]), labels.view(-1))


def test_a_stateless_torch_layer_built_inside_the_frame():
    logits = torch.randn(2, 5, 7, requires_grad=True)
    labels = torch.randint(0, 7, (2, 5))
    e = ember.explain(loss_built_in_forward, backend="eager")(logits, labels)
    assert (e.graph_count, e.graph_break_count) == (1, 0), e
    compiled = ember.compile(loss_built_in_forward, fullgraph=True, backend="eager")
    ref_logits = logits.detach().clone().requires_grad_()
    out, ref = compiled(logits, labels), loss_built_in_forward(ref_logits, labels)
    torch.testing.assert_close(out, ref)
    out.backward()
    ref.backward()
    torch.testing.assert_close(logits.grad, ref_logits.grad)


def test_a_torch_layer_with_parameters_is_still_a_break():
    def fn(x):
        return nn.Linear(4, 4)(x)

    e = ember.explain(fn, backend="eager")(torch.randn(2, 4))
    assert any("holds parameters" in r.reason for r in e.break_reasons), e.break_reasons
