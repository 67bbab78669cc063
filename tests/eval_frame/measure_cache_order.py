"""Measures the cost per call of cache lookups under a few hit patterns (docs/frame-hook.md).

Not a test: run it with an interpreter that has the extension built, e.g.
    ../../.venv/bin/python measure_cache_order.py
Guards are Python lambdas here (about 90 ns each), so the numbers show how many guards a lookup
evaluates rather than what Ember's C++ guards cost.
"""
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from ember._C import eval_frame as E  # noqa: E402


def target(x):
    return x


def equals(value):
    return lambda a: a[0] == value


def decide(code, args):
    if code.co_name == "target":
        return (lambda a: a[0], equals(args[0]))
    return None


def loop(values):
    for v in values:
        target(v)


def scenario(name, warm, calls):
    compiler = E.TestCompiler(decide, 16)
    E.call_in_region(compiler, loop, (warm,))
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        E.call_in_region(compiler, loop, (calls,))
        best = min(best, time.perf_counter() - start)
    E.clear_all_caches()
    print(f"{name:40} {best / len(calls) * 1e9:7.0f} ns/call")


def main():
    random.seed(0)
    n = 100_000
    scenario("1 entry", [0], [0] * n)
    scenario("alternating 2", [0, 1], [i % 2 for i in range(n)])
    scenario("8 entries, hot = oldest (90%)", list(range(8)),
             [0 if random.random() < 0.9 else random.randrange(8) for _ in range(n)])
    scenario("8 entries, hot = newest (90%)", list(range(8)),
             [7 if random.random() < 0.9 else random.randrange(8) for _ in range(n)])
    scenario("8 entries, uniform", list(range(8)), [random.randrange(8) for _ in range(n)])


if __name__ == "__main__":
    main()
