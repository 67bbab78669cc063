"""The philox_rand loop op: C++ scalar and vector code on every ISA this CPU runs, the loop IR
reference interpreter and Triton's kernels under its interpreter all draw python/ember/rng.py's
numbers bit for bit (which are Triton's tl.rand: the runner checks that too)."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from ember import rng
from ember.testing import loop_interp

from cpp_harness import ISA_ORDER, Program, compile_loop, needs_cxx, skip_unless_this_cpu_runs

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ISA_ORDER = ["scalar", "avx2", "avx512"]
ROWS, N, OFFSET = 3, 203, (5 << 32) + 7  # 203: unrolled vectors and a masked tail; the offset sets the high word
SEEDS = [0, 1234567, -3, 2**62 + 11]


def philox_program(column_major=False):
    """out[i0, r0] = philox_rand(seed, OFFSET + N*i0 + r0); a column-major output keeps the loop scalar."""
    p = Program("philox")
    seed = p.buffer("i64[]{} input 0")
    out = p.output(f"f32[{ROWS}, {N}]{{{1}, {ROWS}}}" if column_major else f"f32[{ROWS}, {N}]{{{N}, 1}}")
    p.kernel(f"@k0 [i0 < {ROWS}]")
    p.loop(f"[r0 < {N}]")
    s = p.node(f"load {seed}[] : i64")
    c = p.node(f"index {OFFSET} + {N}*i0 + r0 : i64")
    p.store(out, "i0, r0", p.node(f"philox_rand {s}, {c} : f32"))
    p.end()
    p.end()
    return p.text()


def reference(seed):
    return torch.from_numpy(rng.philox_uniform(seed, OFFSET + np.arange(ROWS * N)).reshape(ROWS, N))


@needs_cxx
@pytest.mark.parametrize("isa", ISA_ORDER)
def test_vector_code_draws_the_reference_numbers(cache_dir, isa):
    prog = compile_loop(philox_program(), cache_dir, isa=isa)
    assert "vector over r0" in prog.source and "ev::philox_uniform(" in prog.source
    skip_unless_this_cpu_runs(isa)
    for seed in SEEDS:
        (got,) = prog.run([torch.tensor(seed, dtype=torch.int64)])
        assert torch.equal(got, reference(seed)), seed


@needs_cxx
def test_scalar_code_draws_the_reference_numbers(cache_dir):
    prog = compile_loop(philox_program(column_major=True), cache_dir)
    assert "ember::rt::philox_uniform(" in prog.source and "ev::philox_uniform(" not in prog.source
    for seed in SEEDS:
        (got,) = prog.run([torch.tensor(seed, dtype=torch.int64)])
        assert torch.equal(got, reference(seed)), seed


def test_loop_interpreter_and_eager_target_draw_the_reference_numbers():
    seed = torch.tensor(SEEDS[2], dtype=torch.int64)
    (got,) = loop_interp.run(philox_program(), [seed])
    assert torch.equal(got, reference(SEEDS[2]))
    assert torch.equal(rng.philox_rand(seed, OFFSET, [ROWS, N]), reference(SEEDS[2]))
    u = rng.philox_uniform(7, np.arange(1 << 16))
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.01


TRITON_SCRIPT = r"""
import sys, numpy as np, torch, triton, triton.language as tl
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from ember import rng
from ember._C import codegen
from interp_runner import run_program
from test_philox import philox_program, reference, SEEDS, OFFSET

@triton.jit
def direct(out, seed_ptr, offset, n: tl.constexpr):
    i = tl.arange(0, n)
    tl.store(out + i, tl.rand(tl.load(seed_ptr), (offset + i).to(tl.int64)))

for seed in SEEDS:
    s = torch.tensor(seed, dtype=torch.int64)
    (got,) = run_program(codegen.emit_triton(philox_program()), [s])
    assert torch.equal(got, reference(seed)), ("emitted", seed)
    out = torch.empty(64)
    direct[(1,)](out, s, OFFSET, n=64)
    assert np.array_equal(out.numpy(), rng.philox_uniform(seed, OFFSET + np.arange(64))), ("tl.rand", seed)
print("ok")
"""


def test_triton_kernels_draw_the_reference_numbers():
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.path.join(REPO, "python"))
    proc = subprocess.run([sys.executable, "-c", TRITON_SCRIPT, os.path.join(REPO, "tests", "codegen_triton"), HERE],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout + proc.stderr
