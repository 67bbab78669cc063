"""Shared helpers of the C++ code generation tests: loop IR text → parse → plan → emit → compile
(through the code cache, in a per-session temporary directory) → run on torch tensors."""
import os
import shutil

import pytest

from ember._C import codecache, codegen

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDE = os.path.join(REPO, "src", "codegen", "cpp", "include")
CXX = shutil.which(os.environ.get("CXX", "g++"))
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler on PATH")
CODE_CACHE = codecache.CodeCache()  # the compile context of the codegen tests (one `--version` run)
ISA_ORDER = ["scalar", "avx2", "avx512"]  # each runs where the next one does


def skip_unless_this_cpu_runs(isa):
    """Skips the rest of a test whose program was compiled for `isa` when this CPU cannot run it (the
    compile itself is tested on every machine)."""
    if ISA_ORDER.index(isa) > ISA_ORDER.index(codecache.detect_isa()):
        pytest.skip(f"compiled for {isa}; this CPU cannot run it")


def compile_loop(text, cache_dir, callables=(), **kw):
    """A codegen.CompiledProgram for loop IR `text`; `kw`: isa, openmp, parallel_threshold, plan."""
    return codegen.compile_program(text, list(callables), [INCLUDE], str(cache_dir), compiler=CXX,
                                   code_cache=CODE_CACHE, **kw)


class Program:
    """Builds loop IR text: node ids are dense and a store takes an id of its own."""

    def __init__(self, name):
        self.name = name
        self.buffers = []
        self.body = []
        self.next_id = 0
        self.outputs = []

    def buffer(self, spec):
        self.buffers.append(f"  buffer %b{len(self.buffers)} : {spec}")
        return f"%b{len(self.buffers) - 1}"

    def output(self, spec):
        b = self.buffer(f"{spec} output {len(self.outputs)}")
        self.outputs.append(b)
        return b

    def kernel(self, header):
        self.next_id = 0  # node ids are per kernel
        self.body.append(f"  kernel {header} {{")

    def loop(self, ranges=""):
        self.body.append(f"    loop {ranges}{' ' if ranges else ''}{{")

    def end(self):
        self.body.append("    }" if self.body[-1].startswith("      ") else "  }")

    def node(self, text):
        t = f"%t{self.next_id}"
        self.next_id += 1
        self.body.append(f"      {t} = {text}")
        return t

    def store(self, buffer, index, value, accumulate=False):
        self.next_id += 1
        self.body.append(f"      store {buffer}[{index}] {'+=' if accumulate else '='} {value}")

    def text(self):
        return "\n".join([f"program @{self.name} {{", *self.buffers, *self.body,
                          f"  return ({', '.join(self.outputs)})", "}"]) + "\n"
