"""Golden tests: every tests/golden/*.ir and *.loop through the built ember-opt (format: tests/golden/golden.py).

After an intended change of output, regenerate with tests/golden/update.py and review the diff.
"""
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "golden"))
import golden  # noqa: E402

FILES = golden.golden_files()


def test_there_are_golden_files():
    assert len(FILES) >= 8, [f.name for f in FILES]


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_golden(path):
    args, checks, errors = golden.load(path)
    assert checks or errors, f"{path.name} has no CHECK or ERROR lines (tests/golden/update.py writes them)"
    assert not (checks and errors), f"{path.name} has both CHECK and ERROR lines"
    result = golden.run(path, args)
    if checks:
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == checks
    else:
        assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
        assert result.stdout == ""
        rest = result.stderr
        for text in errors:
            at = rest.find(text)
            assert at >= 0, f"expected error text not found (in order): {text!r}\nstderr:\n{result.stderr}"
            rest = rest[at + len(text):]


def ember_opt(*args, stdin=None):
    return subprocess.run([str(golden.BINARY), *args], input=stdin, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args", [["--pass", "no_such_pass"], ["--frobnicate"], [], ["a.ir", "b.ir"]],
                         ids=["unknown-pass", "unknown-option", "no-input", "two-inputs"])
def test_ember_opt_usage_errors(args):
    result = ember_opt(*args)
    assert result.returncode == 2, result.stderr
    assert "usage: ember-opt" in result.stderr


def test_ember_opt_reads_stdin_and_lists_passes():
    text = (golden.GOLDEN_DIR / "dce_basic.ir").read_text()
    piped = ember_opt("--pass", "dce", "-", stdin=text)
    _, checks, _ = golden.load(golden.GOLDEN_DIR / "dce_basic.ir")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.splitlines() == checks
    listed = ember_opt("--list-passes")
    assert listed.returncode == 0 and listed.stdout.startswith("canonicalize\tgraph\t")


def test_ember_opt_missing_file():
    result = golden.run(golden.GOLDEN_DIR / "no_such_file.ir", [])
    assert result.returncode == 1
    assert "cannot read" in result.stderr
