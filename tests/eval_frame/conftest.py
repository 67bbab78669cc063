"""Shared helpers for the frame-hook tests: a recording TestCompiler and cleanup between tests."""
import gc
import os

import pytest

from ember._C import eval_frame as E


class Recorder:
    """Drives an E.TestCompiler: `decide` answers per function name through `rules`, and every
    code object offered to the compiler is recorded in `seen` (names, in order)."""

    def __init__(self, rules=None, cache_limit=8):
        self.rules = dict(rules or {})
        self.seen = []
        self.compiler = E.TestCompiler(self._decide, cache_limit)

    def _decide(self, code, args):
        self.seen.append(code.co_name)
        rule = self.rules.get(code.co_name)
        return rule(code, args) if rule is not None else None

    def call(self, fn, *args, **kwargs):
        return E.call_in_region(self.compiler, fn, args, kwargs)


@pytest.fixture(autouse=True)
def clean_state():
    assert not E.hook_installed()
    yield
    E.clear_all_caches()
    gc.collect()
    assert not E.hook_installed()


def pytest_collection_modifyitems(items):
    # Errors raised in finalizers during frame release are "unraisable": make them fail the test.
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        if os.path.dirname(str(item.fspath)) == here:
            item.add_marker(pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning"))
