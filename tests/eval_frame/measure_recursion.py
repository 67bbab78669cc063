"""Measures the deepest recursion that succeeds with Ember's hook installed (docs/frame-hook.md).

Not a test: run it with each interpreter, e.g.
    ../../.venv/bin/python measure_recursion.py
Each trial runs in a subprocess, since running out of C stack crashes the interpreter.
Modes:
  plain     no region, no hook (the interpreter's own limit);
  eager     inside a region, every frame found in the cache as "run eagerly" and evaluated
            through the hook;
  replaced  inside a region, every frame answered by an entry whose run() re-enters the region
            to make the recursive call (as a resume function would).
"""
import os
import subprocess
import sys

CHILD = r"""
import sys
sys.path.insert(0, {python_dir!r})
from ember._C import eval_frame as E
mode, depth, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if limit:
    sys.setrecursionlimit(limit)

def f(n):
    return 0 if n == 0 else f(n - 1) + 1

def always(args):
    return True

if mode == "replaced":
    holder = []
    def run(args):
        n = args[0]
        return 0 if n == 0 else E.call_in_region(holder[0], f, (n - 1,)) + 1
    compiler = E.TestCompiler(lambda code, args: (run, always) if code.co_name == "f" else None)
    holder.append(compiler)
elif mode == "eager":
    compiler = E.TestCompiler(lambda code, args: (None, always) if code.co_name == "f" else None)

try:
    if mode == "plain":
        result = f(depth)
    else:
        result = E.call_in_region(compiler, f, (depth,))
except RecursionError:
    sys.exit(3)
sys.exit(0 if result == depth else 4)
"""


def trial(mode, depth, limit):
    python_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
    code = CHILD.format(python_dir=os.path.abspath(python_dir))
    proc = subprocess.run([sys.executable, "-c", code, mode, str(depth), str(limit)],
                          capture_output=True)
    if proc.returncode == 0:
        return "ok"
    if proc.returncode == 3:
        return "RecursionError"
    if proc.returncode < 0:
        return f"crash (signal {-proc.returncode})"
    return f"exit {proc.returncode}: {proc.stderr.decode()[-300:]}"


def deepest(mode, limit, high):
    """Largest depth <= high that succeeds, by bisection; and how the first failure looks."""
    lo, hi, failure = 0, high, None
    if trial(mode, hi, limit) == "ok":
        return hi, None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        outcome = trial(mode, mid, limit)
        if outcome == "ok":
            lo = mid
        else:
            hi, failure = mid, outcome
    return lo, failure or trial(mode, hi, limit)


def main():
    print(f"Python {sys.version.split()[0]}")
    for limit in (0, 100000):
        for mode in ("plain", "eager", "replaced"):
            depth, failure = deepest(mode, limit, 60000)
            label = "default" if limit == 0 else str(limit)
            print(f"recursionlimit={label:8} {mode:9} deepest={depth:6}  then: {failure}")


if __name__ == "__main__":
    main()
