"""The CI-sized fuzz run: programs 0..EMBER_FUZZ_COUNT-1 (seed 0), in chunks so that a failure names
its seeds; each program runs eagerly and through every variant this process can run (ember.fuzz.runner),
or those EMBER_FUZZ_VARIANTS lists (comma-separated: make test's TRITON_INTERPRET=1 run picks
ember-triton alone, on fewer programs, since the interpreter takes about 2 s a program).
A failure prints the program; `python -m ember.fuzz --seed S --count 1 --minimize --out DIR` shrinks it
and writes its regression test (tests/fuzz/regressions).

The chunks run in EMBER_FUZZ_JOBS worker processes (default: one per core) from the start of the test
session, beside the other tests (tests/conftest.py runs this module's tests last): the workers run at the
lowest CPU priority, so they take the time the other tests leave idle -- a test process is mostly one
thread, and a program's time is mostly the system C++ compiler, a single-threaded subprocess -- and
each test here waits for its own chunk. Workers inherit the environment (EMBER_STRICT) but compile into
a code cache of their own, so no test sees their entries."""
import atexit
import concurrent.futures
import multiprocessing
import os
import shutil
import tempfile

import pytest

from ember.fuzz.runner import background_worker, check_seeds

COUNT = int(os.environ.get("EMBER_FUZZ_COUNT", "2000"))
CHUNK = 50
VARIANTS = os.environ["EMBER_FUZZ_VARIANTS"].split(",") if os.environ.get("EMBER_FUZZ_VARIANTS") else None
JOBS = int(os.environ.get("EMBER_FUZZ_JOBS", "0")) or os.cpu_count() or 1
STARTS = range(0, COUNT, CHUNK)
# Seeds that fail for a known bug not fixed yet, each tracked by its strict-xfail regression test in
# tests/fuzz/regressions/ (which starts passing when the bug is fixed: then the seed leaves this list).
KNOWN_FAILURES = {}


_pool = None
_results = {}


def start_in_background(items):
    """Submits the selected chunks (tests/conftest.py calls this once collection is done)."""
    global _pool
    cache = tempfile.mkdtemp(prefix="ember-fuzz-cache-")
    atexit.register(shutil.rmtree, cache, ignore_errors=True)
    # spawn: a fork of a process that has run torch's thread pools can hang.
    _pool = concurrent.futures.ProcessPoolExecutor(JOBS, mp_context=multiprocessing.get_context("spawn"),
                                                   initializer=background_worker, initargs=(cache,))
    for item in items:
        start = item.callspec.params["start"]
        _results[start] = _pool.submit(check_seeds, start, min(start + CHUNK, COUNT), VARIANTS,
                                       set(KNOWN_FAILURES))


def stop_background():
    if _pool is not None:
        _pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("start", STARTS, ids=lambda s: f"seeds{s}-{min(s + CHUNK, COUNT) - 1}")
def test_fuzz_programs(start):
    problems = _results[start].result()
    assert not problems, "\n\n".join(problems)
