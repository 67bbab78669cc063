"""The CI-sized fuzz run: programs 0..EMBER_FUZZ_COUNT-1 (seed 0), in chunks so that a failure names
its seeds; each program runs eagerly and through every variant this process can run (ember.fuzz.runner),
or those EMBER_FUZZ_VARIANTS lists (comma-separated: make test's TRITON_INTERPRET=1 run picks
ember-triton alone, on fewer programs, since the interpreter takes about 2 s a program).
A failure prints the program; `python -m ember.fuzz --seed S --count 1 --minimize --out DIR` shrinks it
and writes its regression test (tests/fuzz/regressions)."""
import os

import pytest

from ember.fuzz.generator import generate, load
from ember.fuzz.runner import check, default_variants

COUNT = int(os.environ.get("EMBER_FUZZ_COUNT", "500"))
CHUNK = 50
VARIANTS = os.environ["EMBER_FUZZ_VARIANTS"].split(",") if os.environ.get("EMBER_FUZZ_VARIANTS") else None


@pytest.mark.parametrize("start", range(0, COUNT, CHUNK), ids=lambda s: f"seeds{s}-{min(s + CHUNK, COUNT) - 1}")
def test_fuzz_programs(start):
    problems = []
    for seed in range(start, min(start + CHUNK, COUNT)):
        prog = generate(seed)
        ns = load(prog.source())
        for f in check(ns["program"], ns["inputs"], VARIANTS or default_variants()):
            problems.append(f"seed {seed}: {f.kind} under {f.variant}: {f.message}\n{prog.source()}")
    assert not problems, "\n\n".join(problems)
