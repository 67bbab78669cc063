"""Kernels identical up to their buffers are one function per graph; a kernel compiled for one graph
is reused by the next through the code cache (docs/code-cache.md, "Kernels across graphs"); a
graph's kernels compile in parallel units with the same results as one unit; a damaged index
entry or unit is rebuilt."""
import glob
import os
import subprocess
import sys

import torch

from cpp_harness import CXX, INCLUDE, REPO, Program, needs_cxx
from ember._C import codecache, codegen

pytestmark = needs_cxx


def blocks_program(ops, name, n):
    """x -> op(x * w_k) for each op in `ops`, one kernel per block, each block's result an output.
    Each test has its own `n`: loaded libraries are memoized per process by key, whatever the cache
    directory, so a kernel of another test would be found loaded."""
    p = Program(name)
    prev = p.buffer(f"f32[{n}]{{1}} input 0")
    for k, op in enumerate(ops):
        w = p.buffer(f"f32[{n}]{{1}} input {k + 1}")
        out = p.output(f"f32[{n}]{{1}}")
        p.kernel(f"@k{k} [i0 < {n}]")
        p.loop()
        v = p.node(f"mul {p.node(f'load {prev}[i0] : f32')}, {p.node(f'load {w}[i0] : f32')} : f32")
        p.store(out, "i0", p.node(f"{op} {v} : f32"))
        p.end()
        p.end()
        prev = out
    return p.text()


def reference(ops, args):
    x, outs = args[0], []
    for op, w in zip(ops, args[1:]):
        x = getattr(torch, op)(x * w)
        outs.append(x)
    return outs


def build(text, cache_dir, jobs=0, code_cache=None):
    return codegen.compile_program(text, [], [INCLUDE], str(cache_dir), compiler=CXX, jobs=jobs,
                                   code_cache=code_cache or codecache.CodeCache())


def check(prog, ops, n):
    args = [torch.randn(n) for _ in range(len(ops) + 1)]
    for got, want in zip(prog.run(args), reference(ops, args)):
        torch.testing.assert_close(got, want)


def test_identical_blocks_are_one_function_and_a_later_graph_reuses_it(tmp_path):
    ops = ["tanh"] * 4
    text = blocks_program(ops, "blocks", 40)
    source = codegen.emit_cpp(text)
    assert source.count('extern "C" void ember_k_') == 1  # four kernels, one function
    assert source.count("// step ") == 4
    first = build(text, tmp_path)
    assert (first.kernel_functions, first.kernels_compiled, first.kernels_reused) == (1, 1, 0)
    check(first, ops, 40)
    # Another graph: the tanh block again (reused from the cache), and an exp block (compiled).
    ops2 = ["exp", "tanh"]
    second = build(blocks_program(ops2, "other", 40), tmp_path)
    assert (second.kernel_functions, second.kernels_compiled, second.kernels_reused) == (2, 1, 1)
    assert not second.cache_hit
    check(second, ops2, 40)


def test_parallel_units_and_one_unit_give_the_same_results(tmp_path):
    ops = ["tanh", "exp", "sigmoid", "tanh", "exp"]
    text = blocks_program(ops, "par", 41)
    one = build(text, tmp_path / "one", jobs=1)
    many = build(text, tmp_path / "many", jobs=3)
    assert (one.units, many.units) == (1, 3)
    assert one.kernel_functions == many.kernel_functions == 3
    args = [torch.randn(41) for _ in range(len(ops) + 1)]
    for a, b in zip(one.run(args), many.run(args)):
        assert torch.equal(a, b)
    check(many, ops, 41)


def test_damaged_index_entries_and_units_are_rebuilt(tmp_path):
    ops = ["tanh", "exp"]
    text = blocks_program(ops, "damaged", 42)
    build(text, tmp_path, jobs=2)
    entries = sorted(glob.glob(str(tmp_path / "kernels" / "*" / "*.unit")))
    assert len(entries) == 3  # two kernels and the entry
    assert all(os.stat(os.path.dirname(e)).st_mode & 0o777 == 0o700 for e in entries)
    units = {open(e).read() for e in entries}
    assert len(units) == 2
    for e in entries:
        with open(e, "w") as f:
            f.write("not a key")
    for unit in units:
        with open(tmp_path / "cpp" / unit[:2] / (unit + ".so"), "r+b") as f:
            f.seek(100)
            f.write(b"\0" * 16)
    # A fresh process (this one keeps its loaded libraries): no index entry is usable, the same two
    # units form again, their corrupt libraries are rebuilt, and every function is indexed again.
    script = (f"import sys, torch; sys.path.insert(0, {os.path.join(REPO, 'tests', 'codegen')!r})\n"
              "import test_kernel_reuse as t\n"
              f"p = t.build({text!r}, {str(tmp_path)!r}, jobs=2)\n"
              f"t.check(p, {ops!r}, 42)\n"
              "print(p.kernels_compiled, p.kernels_reused, p.units)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "python")))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "0", "2"]
    assert {open(e).read() for e in entries} == units


def offsets_program(count, name, n):
    """x + c_k for k < count: one kernel (a distinct function) per constant, each result an output."""
    p = Program(name)
    x = p.buffer(f"f32[{n}]{{1}} input 0")
    for k in range(count):
        out = p.output(f"f32[{n}]{{1}}")
        p.kernel(f"@k{k} [i0 < {n}]")
        p.loop()
        p.store(out, "i0", p.node(f"add {p.node(f'load {x}[i0] : f32')}, {p.node(f'constant {k + 0.5} : f32')} : f32"))
        p.end()
        p.end()
    return p.text()


def test_automatic_units_split_only_what_pays_off(tmp_path):
    # jobs=0 (the driver's): one unit per kMinUnitBytes (16 KB) of definitions, up to one per core. A small
    # graph is one compiler process (a second would cost as much again for nothing).
    small = build(blocks_program(["tanh", "exp"], "auto_small", 42), tmp_path)
    assert (small.kernel_functions, small.units) == (2, 1)
    check(small, ["tanh", "exp"], 42)
    # Built again (another graph object): every function reused, no unit compiled (not even an empty one).
    again = build(blocks_program(["tanh", "exp"], "auto_small", 42), tmp_path)
    assert (again.kernels_reused, again.units) == (2, 0)
    text = offsets_program(60, "auto_big", 43)
    assert len(codegen.emit_cpp(text)) > 2 * 16384
    big = build(text, tmp_path)
    cores = len(os.sched_getaffinity(0))
    assert big.units == 1 if cores == 1 else 2 <= big.units <= cores
    x = torch.randn(43)
    for k, got in enumerate(big.run([x])):
        torch.testing.assert_close(got, x + (k + 0.5))
