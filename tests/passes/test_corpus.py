"""Property test over the parity corpus: every captured graph, canonicalized and decomposed,
verifies and computes what the captured graph computes.

Each case is captured with ember.explain on its first inputs; each graph is then run on the
eager executor before and after `canonicalize` + `decompose`, on inputs made from the graph's
input types (harness.py), with torch's RNG seeded identically (random ops stay extern and keep
their order). A graph whose original form raises a torch error on those random inputs (an index
out of range, an integer division by zero) is skipped; one the passes break fails, and so does any
other error (a program eager runs that Ember cannot capture, a graph node that does not resolve).
"""
import pytest
import torch

import ember
from parity import (cases_fallback, cases_modules, cases_mutation, cases_python,  # noqa: F401 (register)
                    cases_semantics, cases_torch)
from parity.harness import _generator, build_targets
from parity.registry import CASES
from ember.testing import Call

from .harness import compare, graph_inputs, lower, make_inputs, run


def captured_graphs(case):
    eager_target, target = build_targets(case)
    for run_it in (eager_target, ember.explain(target)):
        if case.reset is not None:
            case.reset()
        call = Call.of(case.inputs(_generator(0)))
        try:
            out = run_it(*call.args, **call.kwargs)
        except Exception:
            if run_it is eager_target:  # the program itself raises (a case about errors): nothing to compare
                return []
            raise
    return out.graphs


@pytest.mark.parametrize("name", sorted(CASES))
def test_passes_preserve_corpus_graph(name):
    case = CASES[name]
    for text in captured_graphs(case):
        canonical = lower(text, ("canonicalize",))  # run_pass verifies after each pass
        after = lower(canonical, ("decompose",))
        spec = graph_inputs(text)
        if spec is None:
            continue
        inputs = make_inputs(spec, seed=7)
        try:
            run(text, inputs)
        except (RuntimeError, IndexError):
            continue  # random inputs the captured program itself rejects
        # Decompositions reorder float arithmetic (softmax, norms): a few float32 ulps.
        tol = {"rtol": 1e-4, "atol": 1e-4}
        if case.rtol is not None:
            tol = {"rtol": case.rtol, "atol": case.atol or 0.0}
        elif any(f"{d}[" in text for d in ("bf16", "f16")):
            tol = {"rtol": 2e-2, "atol": 2e-2}
        compare(text, canonical, inputs, **tol)
        compare(text, after, inputs, **tol)
