"""Builds tests/loop_ir/cpp/loop_ir_test.cpp against the built core library and runs it."""
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "build" / "py311" / "libember_core.a"


def test_loop_ir_cpp(tmp_path):
    assert LIBRARY.exists(), f"{LIBRARY} is missing: run `make build` first"
    compiler = shutil.which("g++") or shutil.which("c++")
    assert compiler, "no C++ compiler on PATH"
    binary = tmp_path / "loop_ir_test"
    build = subprocess.run(
        [compiler, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Wno-unused-parameter", f"-I{REPO / 'src'}",
         str(Path(__file__).parent / "cpp" / "loop_ir_test.cpp"), str(LIBRARY), "-o", str(binary)],
        capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "all checks passed" in run.stdout
