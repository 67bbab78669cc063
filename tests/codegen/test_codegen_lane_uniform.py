"""Integer values fixed along the vector variable (emit_ops.cpp, lane_uniform): a row's int64 label or
length read once per vector as a scalar, compared with the lanes' int32 indices after a clamp that keeps
every comparison's result. Cross-entropy's backward (`where(arange == label, g, 0)` per row) ran scalar
before: "%t1 loads from i64 buffer"."""

import pytest
import torch

from cpp_harness import ISA_ORDER, Program, compile_loop, needs_cxx, skip_unless_this_cpu_runs

pytestmark = needs_cxx

ROWS, N = 12, 37  # 37: full vectors and a masked tail on every layer
# Labels and lengths around the lanes' range [0, N) and past it: -100 (ignored), the ends, one past,
# a tail lane's index past N, and values whose low 32 bits fall inside the range (2^40 + 3 must not
# match lane 3; a clamp-free int32 cast would make it).
ROW_VALUES = [-100, 0, 3, N - 1, N, N + 10, 2**40 + 3, -(2**40) + 5, -1, 2**31 + 1, -(2**31), 17]


def one_hot_program():
    """out0[i, r] = where(r == (label[i] != -100 ? label[i] : 0), -g, 0) + x[i, r] (the ignored label reads
    as 0, as cross_entropy's backward does); out1[i, r] = where(r < length[i], x[i, r], 0)."""
    p = Program("one_hot")
    x = p.buffer(f"f32[{ROWS}, {N}]{{{N}, 1}} input 0")
    label = p.buffer(f"i64[{ROWS}]{{1}} input 1")
    g = p.buffer("f32[]{} input 2")
    out = p.output(f"f32[{ROWS}, {N}]{{{N}, 1}}")
    out_len = p.output(f"f32[{ROWS}, {N}]{{{N}, 1}}")
    p.kernel(f"@k0 [i0 < {ROWS}]")
    p.loop(f"[r0 < {N}]")
    r = p.node("index r0 : i64")
    lab = p.node(f"load {label}[i0] : i64")
    keep = p.node(f"ne {lab}, {p.node('constant -100 : i64')} : b8")
    target = p.node(f"where {keep}, {lab}, {p.node('constant 0 : i64')} : i64")
    hit = p.node(f"eq {r}, {target} : b8")
    zero = p.node("constant 0.0 : f32")
    gv = p.node(f"load {g}[] : f32")
    scaled = p.node(f"neg {p.node(f'where {keep}, {gv}, {zero} : f32')} : f32")
    xv = p.node(f"load {x}[i0, r0] : f32")
    p.store(out, "i0, r0", p.node(f"add {p.node(f'where {hit}, {scaled}, {zero} : f32')}, {xv} : f32"))
    inside = p.node(f"lt {r}, {lab} : b8")
    p.store(out_len, "i0, r0", p.node(f"where {inside}, {xv}, {zero} : f32"))
    p.end()
    p.end()
    return p.text()


@pytest.mark.parametrize("isa", ISA_ORDER)
def test_row_labels_compare_with_vector_lanes_on_every_isa(cache_dir, isa):
    prog = compile_loop(one_hot_program(), cache_dir, isa=isa)
    if isa != "scalar":
        assert "vector over r0" in prog.source and "loads from i64" not in prog.source
    skip_unless_this_cpu_runs(isa)
    x = torch.randn(ROWS, N)
    label = torch.tensor(ROW_VALUES, dtype=torch.int64)
    g = torch.tensor(0.25)
    got, got_len = prog.run([x, label, g])
    target = torch.where(label != -100, label, 0)
    scaled = torch.where(label != -100, -g, 0.0)
    r = torch.arange(N)
    want = torch.where(r[None, :] == target[:, None], scaled[:, None], 0.0) + x
    assert torch.equal(got, want)
    assert torch.equal(got_len, torch.where(r[None, :] < label[:, None], x, 0.0))


def test_a_fixed_integer_in_lane_arithmetic_stays_scalar_with_its_reason(cache_dir):
    """r + label has no int32 lanes (label's range is unknown): the loop stays scalar, and says why."""
    p = Program("uniform_add")
    label = p.buffer(f"i64[{ROWS}]{{1}} input 0")
    out = p.output(f"f32[{ROWS}, {N}]{{{N}, 1}}")
    p.kernel(f"@k0 [i0 < {ROWS}]")
    p.loop(f"[r0 < {N}]")
    total = p.node(f"add {p.node('index r0 : i64')}, {p.node(f'load {label}[i0] : i64')} : i64")
    p.store(out, "i0, r0", p.node(f"cast {total} : f32"))
    p.end()
    p.end()
    prog = compile_loop(p.text(), cache_dir)
    assert "scalar (%t2 uses %t1, an i64 value fixed along r0 that vector code broadcasts only into a " \
           "comparison with int32 lanes)" in prog.source
    label = torch.tensor(ROW_VALUES, dtype=torch.int64)
    assert torch.equal(prog.run([label])[0], (torch.arange(N)[None, :] + label[:, None]).float())
