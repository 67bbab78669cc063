"""python -m ember.fuzz --count N --seed S [--seconds T] [--minimize] [--out DIR] [--variants a,b] [--budget B]

Runs programs S, S+1, ..., S+N-1 (generator.generate) eagerly and through Ember (runner.VARIANTS;
ember-triton only under TRITON_INTERPRET=1), prints each failure with its seed as it is found, then a
summary: programs run, failures by kind and variant, time. With --minimize each failure is shrunk
(minimizer.minimize); with --out each (minimized) failure is written to DIR as a ready-to-paste
regression test, test_fuzz_<seed>.py, checking every variant that failed (the program is shrunk
for the first). With --seconds the run stops starting programs after T seconds (a long run split over
processes or a lent machine's time); the summary counts the programs that ran.
"""
import argparse
import collections
import os
import sys
import time

from .generator import generate, load
from .minimizer import minimize
from .runner import VARIANTS, check, default_variants


def regression_test(prog, failures):
    """A pytest module that fails while the bug is there: the program, its inputs and one test over
    every variant the program failed under."""
    first = failures[0]
    variants = [f.variant for f in failures]
    message = first.message.splitlines()[0] if first.message else ""
    return "\n".join([
        f'"""Fuzz regression (python -m ember.fuzz --seed {prog.seed} --count 1): {first.kind} under '
        f'{", ".join(variants)}.',
        "",
        message,
        '"""',
        prog.source().rstrip("\n"),
        "",
        "",
        f"def test_fuzz_{prog.seed}():",
        "    from ember.fuzz.runner import check_or_skip",
        f"    assert check_or_skip(program, inputs, {variants!r}) == []",
        "",
    ])


def run(count, seed, variants, minimize_failures, out, budget, stream=sys.stdout, seconds=None):
    """Runs the programs (those started within `seconds`, when given); returns (programs run,
    [(program, failure)]) after printing a summary."""
    start = time.time()
    found = []
    ran = 0
    for s in range(seed, seed + count):
        if seconds is not None and time.time() - start >= seconds:
            break
        ran += 1
        if s > seed and (s - seed) % 100 == 0:
            print(f"... {s - seed} programs, {len(found)} failures, {time.time() - start:.0f} s", file=stream, flush=True)
        prog = generate(s)
        ns = load(prog.source())
        failures = check(ns["program"], ns["inputs"], variants)
        for failure in failures:
            print(f"seed {s}: {failure.kind} under {failure.variant}: {failure.message[:300]}", file=stream)
            found.append((prog, failure))
        if not failures:
            continue
        if minimize_failures:  # shrunk for its first failure; the test checks every failing variant
            small = minimize(prog, failures[0], budget)
            print(f"  minimized from {len(prog.stmts)} to {len(small.stmts)} statements:\n" + small.source(),
                  file=stream)
            prog = small
        if out:
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, f"test_fuzz_{s}.py"), "w") as f:
                f.write(regression_test(prog, failures))
    by_kind = collections.Counter(f"{f.kind} ({f.variant})" for _, f in found)
    seeds = f" (seeds {seed}..{seed + ran - 1})" if ran else ""
    print(f"ember.fuzz: {ran} programs{seeds}, variants {', '.join(variants)}, "
          f"{time.time() - start:.0f} s; {len(found)} failures", file=stream)
    for kind, n in sorted(by_kind.items()):
        print(f"  {n:5d}  {kind}", file=stream)
    return ran, found


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m ember.fuzz", description=__doc__.split("\n\n")[1])
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--minimize", action="store_true")
    p.add_argument("--out", default=None, help="folder for the regression tests of the failures")
    p.add_argument("--variants", default=None, help=f"comma-separated subset of {', '.join(VARIANTS)}")
    p.add_argument("--budget", type=int, default=150, help="minimizer trials per failure")
    p.add_argument("--seconds", type=float, default=None, help="start no program after this many seconds")
    args = p.parse_args(argv)
    variants = args.variants.split(",") if args.variants else default_variants()
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        p.error(f"unknown variants {sorted(unknown)}")
    _, found = run(args.count, args.seed, variants, args.minimize, args.out, args.budget, seconds=args.seconds)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
