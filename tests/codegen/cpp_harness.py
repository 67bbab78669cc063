"""Shared helpers of the C++ code generation tests: loop IR text → parse → plan → emit → compile
(through the code cache, in a per-session temporary directory) → run on torch tensors."""
import os
import shutil

import pytest

from ember._C import codegen

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDE = os.path.join(REPO, "src", "codegen", "cpp", "include")
CXX = shutil.which(os.environ.get("CXX", "g++"))
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler on PATH")


def compile_loop(text, cache_dir, callables=(), **kw):
    """A codegen.CompiledProgram for loop IR `text`; `kw`: isa, openmp, parallel_threshold, plan."""
    return codegen.compile_program(text, list(callables), [INCLUDE], str(cache_dir), compiler=CXX, **kw)
