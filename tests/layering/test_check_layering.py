"""tools/check_layering.py: the tree keeps the folder order and has no Python import cycle, and the
check fails on a tree that breaks either (so a green run means something)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tools", "check_layering.py")


def check(root, files=None):
    """Writes `files` (path -> text) under `root`, runs the check there: (exit status, lines)."""
    for path, text in (files or {}).items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
    r = subprocess.run([sys.executable, SCRIPT, str(root)], capture_output=True, text=True)
    return r.returncode, r.stdout.splitlines()


def test_the_tree_keeps_the_order():
    assert check(ROOT) == (0, [])


def test_an_include_of_a_folder_above_fails(tmp_path):
    assert check(tmp_path, {
        "src/runtime/executable.h": "#pragma once\n",
        "src/codegen/cpp/emit.h": "#pragma once\n",
        "src/codegen/cpp/emit.cpp": '#include "codegen/cpp/emit.h"\n#include "runtime/executable.h"\n',
    }) == (1, ['src/codegen/cpp/emit.cpp:2: codegen includes runtime ("runtime/executable.h"), a folder above it'])


def test_a_backend_stage_including_the_frontend_fails(tmp_path):
    code, out = check(tmp_path, {"src/frontend/pyref.h": "", "src/runtime/runner.h": '#include "frontend/pyref.h"\n'})
    assert code == 1 and out[0].startswith("src/runtime/runner.h:1: runtime includes frontend")


def test_python_outside_the_python_folders_fails(tmp_path):
    code, out = check(tmp_path, {"src/ir/graph.cpp": "#include <Python.h>\n"})
    assert code == 1 and out[0].startswith("src/ir/graph.cpp:1: ir includes <Python.h>")


def test_an_unknown_folder_fails(tmp_path):
    assert check(tmp_path, {"src/misc/a.h": ""}) == (
        1, ["src/misc: a folder the layering order does not name (add it to ORDER)"])


def test_a_lazy_import_cycle_fails(tmp_path):
    files = {
        "python/ember/__init__.py": "from . import a\n",
        "python/ember/a.py": "from .b import helper\n",
        "python/ember/b.py": "def helper():\n    from . import a\n    return a\n",
    }
    assert check(tmp_path, files) == (1, ["python/ember: import cycle between ember.a, ember.b"])
    assert check(tmp_path, {"python/ember/b.py": "def helper():\n    return 1\n"}) == (0, [])
