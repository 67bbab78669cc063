"""The CI-sized fuzz run: programs 0..EMBER_FUZZ_COUNT-1 (seed 0), in chunks so that a failure names
its seeds; each program runs eagerly and through every variant this process can run (ember.fuzz.runner),
or those EMBER_FUZZ_VARIANTS lists (comma-separated: make test's TRITON_INTERPRET=1 run picks
ember-triton alone, on fewer programs, since the interpreter takes about 2 s a program).
A failure prints the program; `python -m ember.fuzz --seed S --count 1 --minimize --out DIR` shrinks it
and writes its regression test (tests/fuzz/regressions).

The chunks run in EMBER_FUZZ_JOBS worker processes (default: one per core), all submitted when the
first chunk's test starts; each test waits for its own chunk. A program's time is mostly the system
C++ compiler, a single-threaded subprocess, so one process leaves the other cores idle. Workers
inherit the environment: the test session's EMBER_CACHE_DIR and EMBER_STRICT."""
import concurrent.futures
import multiprocessing
import os

import pytest

from ember.fuzz.runner import check_seeds

COUNT = int(os.environ.get("EMBER_FUZZ_COUNT", "1000"))
CHUNK = 50
VARIANTS = os.environ["EMBER_FUZZ_VARIANTS"].split(",") if os.environ.get("EMBER_FUZZ_VARIANTS") else None
JOBS = int(os.environ.get("EMBER_FUZZ_JOBS", "0")) or os.cpu_count() or 1
STARTS = range(0, COUNT, CHUNK)
# Seeds that fail for a known bug not fixed yet, each tracked by its strict-xfail regression test in
# tests/fuzz/regressions/ (which starts passing when the bug is fixed: then the seed leaves this list).
KNOWN_FAILURES = {}


@pytest.fixture(scope="module")
def chunk_results(request):
    selected = [item.callspec.params["start"] for item in request.session.items
                if getattr(item, "originalname", None) == "test_fuzz_programs"]
    # spawn: a fork of a process that has run torch's thread pools can hang.
    with concurrent.futures.ProcessPoolExecutor(JOBS, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield {start: pool.submit(check_seeds, start, min(start + CHUNK, COUNT), VARIANTS,
                                   set(KNOWN_FAILURES)) for start in selected}


@pytest.mark.parametrize("start", STARTS, ids=lambda s: f"seeds{s}-{min(s + CHUNK, COUNT) - 1}")
def test_fuzz_programs(start, chunk_results):
    problems = chunk_results[start].result()
    assert not problems, "\n\n".join(problems)
