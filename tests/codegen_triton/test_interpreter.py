"""Numerics of generated Triton kernels, run by Triton's interpreter on CPU tensors against eager
torch (interp_runner.py says how). The interpreter needs TRITON_INTERPRET=1 before triton's
decorators run, and a process that has it cannot compile real kernels (test_cubin.py), so all cases
run in one subprocess and each case reads its line of the report."""
import json
import os
import subprocess
import sys

import pytest

from interp_cases import CASES, LOOP_CASES, SPLIT_CASES

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


@pytest.fixture(scope="module")
def report():
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join([os.path.join(REPO, "python"), HERE]))
    proc = subprocess.run([sys.executable, os.path.join(HERE, "interp_runner.py")], capture_output=True, text=True,
                          env=env, timeout=600)
    results = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            results[r["case"]] = r
    assert results, f"the interpreter runner reported nothing:\n{proc.stdout}\n{proc.stderr}"
    return results


@pytest.mark.parametrize("case", sorted([*CASES, *LOOP_CASES]))
def test_interpreter(report, case):
    r = report.get(case)
    assert r is not None, f"{case}: no report (the runner stopped early?)"
    assert r["ok"], f"{case} ({', '.join(r['kernels'])}): {r['message']}"


@pytest.mark.parametrize("case", sorted(SPLIT_CASES))
def test_split_cases_ran_as_two_kernels(report, case):
    # Numerics alone would pass unsplit: each of these must have run a partials and a combining kernel.
    r = report.get(case)
    assert r is not None and len(r["kernels"]) >= 2, r
