"""Prints what torch._dynamo.explain reports for every program of the graph-break corpus, next to
Ember's expected counts, for the `dynamo=(graphs, breaks)` annotations in the corpus files. Dynamo
is only a point of comparison, and the tests never import it. Its rules differ: it runs a frame
without any graph when a break falls inside a loop, a `try` block or a user context manager
(reported as (0, -1)); it traces NumPy calls, `struct`, `random.Random`, `hash`, `eval` and tensor
`assert`s into the graph; and in this torch version explain()'s graph_break_count is simply
graph_count - 1 (a break in a segment without ops is not counted, and an op-less resume graph
sometimes is: the recursion program's second graph is empty). Compare graph counts, not breaks.

    cd tests && ../.venv/bin/python -m graph_breaks.dynamo_counts [--write]

--write rewrites the `dynamo=...` argument of each `@program("name", ...)` line in place.
"""
import contextlib
import io
import os
import re
import sys

import torch
import torch._dynamo

from .registry import PROGRAMS
from . import corpus  # noqa: F401  (registers the programs)

FILES = ("corpus.py", "corpus_flow.py", "corpus_calls.py", "corpus_closures.py", "corpus_mutations.py")


def dynamo_counts(program):
    torch._dynamo.reset()
    target = program.make_target()
    if program.reset is not None:
        program.reset(target if program.module else None)
    with contextlib.redirect_stdout(io.StringIO()):
        out = torch._dynamo.explain(target)(*program.inputs())
    return out.graph_count, out.graph_break_count


def write(counts):
    here = os.path.dirname(os.path.abspath(__file__))
    for name in FILES:
        path = os.path.join(here, name)
        with open(path) as f:
            text = f.read()
        for prog, value in counts.items():
            pattern = re.compile(r'(@program\("' + re.escape(prog) + r'",[^\n]*?dynamo=)(None|\([^)]*\)|"[^"]*")')
            text = pattern.sub(lambda m: m.group(1) + value, text)
        with open(path, "w") as f:
            f.write(text)


def main(argv):
    counts = {}
    for name, program in PROGRAMS.items():
        try:
            g, b = dynamo_counts(program)
            value = f"({g}, {b})"
        except Exception as e:  # reported, not fatal: one program's failure says nothing of the rest
            value = f'"{type(e).__name__}"'
        counts[name] = value
        print(f"{name:45s} ember expects ({program.graphs}, {program.breaks})  dynamo {value}", flush=True)
    if "--write" in argv:
        write(counts)


if __name__ == "__main__":
    main(sys.argv[1:])
