"""The minimizer on an injected bug: a compiler that adds 1 to the first float output of any program
calling torch.sin. A long failing program must shrink to one or two statements that still call sin,
and the regression test written for it must be a runnable pytest module."""
import torch

import ember
from ember.fuzz import runner
from ember.fuzz.__main__ import regression_test
from ember.fuzz.generator import generate, load
from ember.fuzz.minimizer import fails_like, minimize

VARIANT = ["eager-backend"]  # no C++ compile per trial: the bug is injected above the backend


def _perturb(tree):
    if isinstance(tree, torch.Tensor) and tree.is_floating_point():
        return tree + 1, True
    if isinstance(tree, (list, tuple)):
        done, items = False, []
        for v in tree:
            if not done:
                v, done = _perturb(v)
            items.append(v)
        return type(tree)(items), done
    if isinstance(tree, dict):
        keys, values = list(tree), _perturb(list(tree.values()))
        return dict(zip(keys, values[0])), values[1]
    return tree, False


def _inject(monkeypatch):
    real = ember.compile

    def buggy(fn, **kwargs):
        compiled = real(fn, **kwargs)
        if "sin" not in fn.__code__.co_names:
            return compiled
        return lambda *args: _perturb(compiled(*args))[0]

    monkeypatch.setattr(ember, "compile", buggy)


def test_minimizer_shrinks_an_injected_bug(monkeypatch):
    _inject(monkeypatch)
    for seed in range(200):
        prog = generate(seed)
        ns = load(prog.source())
        if "torch.sin(" not in prog.source() or len(prog.stmts) < 6:
            continue
        failures = runner.check(ns["program"], ns["inputs"], VARIANT)
        if failures and failures[0].kind == "wrong-result":
            break
    else:
        raise AssertionError("no seed below 200 shows the injected bug")
    small = minimize(prog, failures[0], budget=200)
    assert len(small.stmts) <= 2, small.source()
    assert "torch.sin(" in small.source()
    assert fails_like(small, failures[0])
    # The regression test is a pytest module whose test fails while the bug is there.
    ns = load(regression_test(small, failures), "<regression>")
    test = ns[f"test_fuzz_{small.seed}"]
    try:
        test()
    except AssertionError:
        pass
    else:
        raise AssertionError("the regression test passes although the injected bug is there")
