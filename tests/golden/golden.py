"""Golden IR tests: the file format, shared by tests/ir/test_golden.py and update.py.

A golden file is graph IR text (`*.ir`) or loop IR text (`*.loop`, run with `ember-opt --loop`); its
`//` lines are comments to the parser. Directives:
  // RUN: ember-opt ARGS...   how to run it; the file's path is appended to ARGS.
  // CHECK: LINE              the expected standard output, one line each, compared exactly.
  // ERROR: TEXT              an expected error: ember-opt must exit 1, and each TEXT must occur in
                              its standard error, in order.
"""
import shlex
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GOLDEN_DIR = REPO / "tests" / "golden"
BINARY = REPO / "build" / "py311" / "ember-opt"

RUN, CHECK, ERROR = "// RUN:", "// CHECK:", "// ERROR:"


def directive_text(line, prefix):
    """The text after `prefix` and the one space that follows it."""
    rest = line[len(prefix):]
    return rest[1:] if rest.startswith(" ") else rest


def load(path):
    """Returns (args, check_lines, error_lines) of a golden file."""
    run, checks, errors = None, [], []
    for line in Path(path).read_text().splitlines():
        if line.startswith(RUN):
            if run is not None:
                raise ValueError(f"{path}: more than one RUN line")
            run = shlex.split(directive_text(line, RUN))
        elif line.startswith(CHECK):
            checks.append(directive_text(line, CHECK))
        elif line.startswith(ERROR):
            errors.append(directive_text(line, ERROR))
    if not run or run[0] != "ember-opt":
        raise ValueError(f"{path}: needs a line '// RUN: ember-opt ARGS...'")
    return run[1:], checks, errors


def run(path, args):
    if not BINARY.exists():
        raise FileNotFoundError(f"{BINARY} is missing: run `make build` first")
    return subprocess.run([str(BINARY), *args, str(path)], capture_output=True, text=True, timeout=60)


def golden_files():
    return sorted([*GOLDEN_DIR.glob("*.ir"), *GOLDEN_DIR.glob("*.loop")])
