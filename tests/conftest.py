import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

# Compiled kernels go to a cache of this test session, not the user's ~/.cache/ember: tests see
# cold compiles, and a run never depends on what an earlier one left behind.
if "EMBER_CACHE_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    _cache = tempfile.mkdtemp(prefix="ember-test-cache-")
    os.environ["EMBER_CACHE_DIR"] = _cache
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)

# Strict: an internal error of a backend stage raises ember.InternalError in every test instead of
# silently running the graph eagerly (python/ember/options.py). A test of the fallback itself
# passes options={"strict": False}.
os.environ.setdefault("EMBER_STRICT", "1")

# torchvision's PyPI wheel needs a CUDA torch; on this CPU torch its import (and so transformers' and timm's,
# which import it when it is installed) fails unless a stand-in module comes first (ember/bench/zoo_imports.py).
import importlib.util  # noqa: E402

if importlib.util.find_spec("torchvision") is not None:
    import ember.bench  # noqa: E402,F401 -- importing the package puts the stand-in in place


import pytest  # noqa: E402


@pytest.fixture
def compiled_source(monkeypatch, caplog):
    """compiled_source(fn, *args) -> (ember.compile(fn)(*args) under no_grad after ember.reset(), the code
    EMBER_LOGS=output_code logged for it): for tests that check what the backend generated."""
    import logging

    import torch

    import ember

    def run(fn, *args):
        monkeypatch.setenv("EMBER_LOGS", "output_code")
        caplog.set_level(logging.INFO, logger="ember")
        caplog.clear()
        ember.reset()
        with torch.no_grad():
            out = ember.compile(fn)(*args)
        return out, "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("ember"))
    return run


# Work in background processes from the session's start: a test module that defines
# start_in_background(items) and stop_background() (tests/fuzz/test_fuzz_run.py: the fuzz programs, at the
# lowest CPU priority, on the cores the other tests leave idle) has its tests run last, to collect what
# that work found; start_in_background gets its selected tests once collection is done.
def _background_module(item):
    module = getattr(item, "module", None)
    return module if hasattr(module, "start_in_background") else None


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: _background_module(item) is not None)  # stable: the order otherwise kept


def pytest_collection_finish(session):
    selected = {}
    for item in session.items:
        if (module := _background_module(item)) is not None:
            selected.setdefault(module, []).append(item)
    session.config._ember_background = list(selected)
    for module, items in selected.items():
        module.start_in_background(items)


def pytest_sessionfinish(session):
    for module in getattr(session.config, "_ember_background", ()):
        module.stop_background()
