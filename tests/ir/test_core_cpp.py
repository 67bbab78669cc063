"""Builds tests/ir/cpp/{core,sym}_test.cpp against the built core library and runs them (C++-only checks)."""
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "build" / "py311" / "libember_core.a"


@pytest.mark.parametrize("name", ["core_test", "sym_test"])
def test_core_cpp(tmp_path, name):
    assert LIBRARY.exists(), f"{LIBRARY} is missing: run `make build` first"
    compiler = shutil.which("g++") or shutil.which("c++")
    assert compiler, "no C++ compiler on PATH"
    binary = tmp_path / name
    build = subprocess.run(
        [compiler, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Wno-unused-parameter",
         f"-I{REPO / 'src'}", str(Path(__file__).parent / "cpp" / f"{name}.cpp"), str(LIBRARY), "-o", str(binary)],
        capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "all checks passed" in run.stdout
