#!/usr/bin/env python3
"""The layering check: Ember's source folders form one order (the pipeline's), and a folder
includes only folders below it (DESIGN.md, "Layout"; docs/layering.md). It reads every
`#include "..."` under src/ and fails, naming the file, the line and the two folders, when a folder
includes one above it, when a backend stage (passes to runtime) includes the frontend, or when a
folder outside pybridge, frontend, runtime, driver and python includes <Python.h> or nanobind. A
subfolder belongs to its top folder (src/codegen/cpp is codegen).

It also checks that the Python package (python/ember) has no import cycle between its modules,
counting imports inside functions too: a lazy import hides a cycle from Python's import machinery,
not from a reader.

Usage: check_layering.py [ROOT]   (ROOT defaults to the repository this script lives in)
Exit status: 0 when the tree keeps the order, 1 with one line per violation otherwise.
"""
import ast
import os
import re
import sys

# Bottom to top. DESIGN.md lists lowering before loop_ir; lowering produces loop IR, so loop_ir
# sits below it. `driver` joins the frontend (which traces frames) to the runtime (which runs
# graphs): the compiler of a frame, its compiled entry and the backend choice live there.
ORDER = [
    "support", "sym", "ir", "shapes", "pybridge", "frontend", "passes", "autograd", "loop_ir", "lowering",
    "scheduler", "memory", "codegen", "pipeline", "runtime", "driver", "python",
]
RANK = {name: i for i, name in enumerate(ORDER)}
# The frontend and the backend stages above it are two sides that meet only in driver and python:
# nothing from passes to runtime includes the frontend, although the order alone would allow it.
FRONTEND_FREE = ORDER[RANK["passes"]:RANK["runtime"] + 1]
# The folders that touch Python objects; the rest of the core builds without an interpreter.
PYTHON_FOLDERS = {"pybridge", "frontend", "runtime", "driver", "python"}
PYTHON_HEADER = re.compile(r'^\s*#\s*include\s+<(Python\.h|nanobind/[^>]+)>')
SOURCE_SUFFIXES = (".h", ".hpp", ".c", ".cc", ".cpp", ".def", ".inc")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
PACKAGE = "ember"


def _resolve(src, path, include):
    """The file `include` (as written in `path`) names, or None: first from src/ (the include
    directory of every target), then from the including file's folder and each folder above it
    up to src/ (the generated code's own include directory is src/codegen/cpp/include)."""
    candidate = os.path.join(src, include)
    if os.path.isfile(candidate):
        return candidate
    folder = os.path.dirname(path)
    while True:
        candidate = os.path.join(folder, include)
        if os.path.isfile(candidate):
            return candidate
        if os.path.samefile(folder, src):
            return None
        folder = os.path.dirname(folder)


def _top_folder(src, path):
    return os.path.relpath(path, src).split(os.sep)[0]


def _line_problems(src, path, rel, lineno, line):
    """What is wrong with one line of `path` (its top folder's rules), as messages."""
    here = _top_folder(src, path)
    python = PYTHON_HEADER.match(line)
    if python and here not in PYTHON_FOLDERS:
        return [f"{rel}:{lineno}: {here} includes <{python.group(1)}>: only "
                f"{', '.join(sorted(PYTHON_FOLDERS))} touch Python objects"]
    m = INCLUDE.match(line)
    target = _resolve(src, path, m.group(1)) if m else None
    if target is None:
        return []  # not an include of one of Ember's files (a header of the system or a wheel)
    there = _top_folder(src, target)
    where = f"{rel}:{lineno}: {here} includes {there} (\"{m.group(1)}\")"
    if there in RANK and RANK[there] > RANK[here]:
        return [f"{where}, a folder above it"]
    if there == "frontend" and here in FRONTEND_FREE:
        return [f"{where}: the backend stages include nothing from the frontend"]
    return []


def include_violations(root):
    """One message per include that breaks the order, and per source folder the order does not
    name."""
    src = os.path.join(root, "src")
    if not os.path.isdir(src):
        return []
    problems = [f"src/{folder}: a folder the layering order does not name (add it to ORDER)"
                for folder in sorted(os.listdir(src))
                if os.path.isdir(os.path.join(src, folder)) and folder not in RANK]
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if not name.endswith(SOURCE_SUFFIXES) or _top_folder(src, path) not in RANK:
                continue
            rel = os.path.relpath(path, root)
            with open(path, encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    problems += _line_problems(src, path, rel, lineno, line)
    return problems


def _module_name(package_dir, path):
    rel = os.path.relpath(path, package_dir)[:-len(".py")].split(os.sep)
    if rel[-1] == "__init__":
        rel = rel[:-1]
    return ".".join([PACKAGE] + rel)


def _imports(module, is_package, tree, modules):
    """The package's modules that `module` imports anywhere in its body (functions included)."""
    package = module if is_package else module.rpartition(".")[0]
    found = set()

    def add(name):
        # `from .x import y` may name a module x.y or an attribute y of x: the longest module wins.
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            if base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                add(f"{base}.{alias.name}")
    return found


def _cycles(graph):
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def import_cycles(root):
    """One message per import cycle between modules of python/ember. A package's __init__ is left
    out: importing a submodule runs its package first, so every submodule 'imports' it, and an
    __init__ that re-exports its submodules is the package's surface, not a dependency."""
    package_dir = os.path.join(root, "python", PACKAGE)
    if not os.path.isdir(package_dir):
        return []
    trees = {}
    for dirpath, dirnames, filenames in os.walk(package_dir):
        dirnames[:] = sorted(d for d in dirnames if os.path.isfile(os.path.join(dirpath, d, "__init__.py")))
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    trees[_module_name(package_dir, path)] = (name == "__init__.py", ast.parse(f.read(), path))
    modules = set(trees)
    graph = {m: set() for m in modules if not trees[m][0]}
    for m in graph:
        is_package, tree = trees[m]
        graph[m] = {d for d in _imports(m, is_package, tree, modules) if d in graph}
    return [f"python/{PACKAGE}: import cycle between " + ", ".join(c) for c in _cycles(graph)]


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    problems = include_violations(root) + import_cycles(root)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
