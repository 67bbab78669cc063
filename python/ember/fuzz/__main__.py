"""python -m ember.fuzz --count N --seed S [--minimize] [--out DIR] [--variants a,b] [--budget B]

Runs programs S, S+1, ..., S+N-1 (generator.generate) eagerly and through Ember (runner.VARIANTS;
ember-triton only under TRITON_INTERPRET=1), prints each failure with its seed as it is found, then a
summary: programs run, failures by kind and variant, time. With --minimize each failure is shrunk
(minimizer.minimize); with --out each (minimized) failure is written to DIR as a ready-to-paste
regression test, test_fuzz_<seed>.py.
"""
import argparse
import collections
import os
import sys
import time

from .generator import generate, load
from .minimizer import minimize
from .runner import VARIANTS, check, default_variants


def regression_test(prog, failure):
    """A pytest module that fails while the bug is there: the program, its inputs and one test."""
    first = failure.message.splitlines()[0] if failure.message else ""
    return "\n".join([
        f'"""Fuzz regression (python -m ember.fuzz --seed {prog.seed} --count 1): {failure.kind} under '
        f'{failure.variant}.',
        f"",
        f"{first}",
        f'"""',
        prog.source().rstrip("\n"),
        "",
        "",
        f"def test_fuzz_{prog.seed}_{failure.variant.replace('-', '_')}():",
        "    from ember.fuzz.runner import check_or_skip",
        f"    assert check_or_skip(program, inputs, {[failure.variant]!r}) == []",
        "",
    ])


def run(count, seed, variants, minimize_failures, out, budget, stream=sys.stdout):
    """Runs the programs; returns (programs run, [(program, failure)]) after printing a summary."""
    start = time.time()
    found = []
    for s in range(seed, seed + count):
        if s > seed and (s - seed) % 100 == 0:
            print(f"... {s - seed} programs, {len(found)} failures, {time.time() - start:.0f} s", file=stream, flush=True)
        prog = generate(s)
        ns = load(prog.source())
        for failure in check(ns["program"], ns["inputs"], variants):
            print(f"seed {s}: {failure.kind} under {failure.variant}: {failure.message[:300]}", file=stream)
            if minimize_failures:
                prog_min = minimize(prog, failure, budget)
                print(f"  minimized from {len(prog.stmts)} to {len(prog_min.stmts)} statements:\n"
                      + prog_min.source(), file=stream)
            else:
                prog_min = prog
            found.append((prog_min, failure))
            if out:
                os.makedirs(out, exist_ok=True)
                with open(os.path.join(out, f"test_fuzz_{s}_{failure.variant.replace('-', '_')}.py"), "w") as f:
                    f.write(regression_test(prog_min, failure))
    by_kind = collections.Counter(f"{f.kind} ({f.variant})" for _, f in found)
    print(f"ember.fuzz: {count} programs (seeds {seed}..{seed + count - 1}), variants {', '.join(variants)}, "
          f"{time.time() - start:.0f} s; {len(found)} failures", file=stream)
    for kind, n in sorted(by_kind.items()):
        print(f"  {n:5d}  {kind}", file=stream)
    return count, found


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m ember.fuzz", description=__doc__.split("\n\n")[1])
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--minimize", action="store_true")
    p.add_argument("--out", default=None, help="folder for the regression tests of the failures")
    p.add_argument("--variants", default=None, help=f"comma-separated subset of {', '.join(VARIANTS)}")
    p.add_argument("--budget", type=int, default=150, help="minimizer trials per failure")
    args = p.parse_args(argv)
    variants = args.variants.split(",") if args.variants else default_variants()
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        p.error(f"unknown variants {sorted(unknown)}")
    _, found = run(args.count, args.seed, variants, args.minimize, args.out, args.budget)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
