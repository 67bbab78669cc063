"""Loads whose offset is not affine along the vector variable, computed from loop variables alone
(docs/codegen-cpp.md, "Loads fixed in a chunk and lane by lane"): a channels-last GroupNorm's
per-group statistics `mean[c // G]` read along the channels, a nearest upsample's `x[w // 2]`.
With G a multiple of 16 the offset is fixed within every aligned chunk and vector code broadcasts
one element; otherwise each lane loads its own element. Either way the kernel stays vector code and
its results equal the scalar program's bit for bit, tails included, on every vector layer."""
import pytest
import torch

from cpp_harness import ISA_ORDER, Program, compile_loop, needs_cxx, skip_unless_this_cpu_runs

pytestmark = needs_cxx


def group_scale_program(rows, cols, group):
    """out[i0, i1] = x[i0, i1] * scale[i1 // group] + shift[i0, i1 // group]."""
    groups = -(-cols // group)
    p = Program("group_scale")
    x = p.buffer(f"f32[{rows}, {cols}]{{{cols}, 1}} input 0")
    scale = p.buffer(f"f32[{groups}]{{1}} input 1")
    shift = p.buffer(f"f32[{rows}, {groups}]{{{groups}, 1}} input 2")
    out = p.output(f"f32[{rows}, {cols}]{{{cols}, 1}}")
    p.kernel(f"@k0 [i0 < {rows}, i1 < {cols}]")
    p.loop()
    xv = p.node(f"load {x}[i0, i1] : f32")
    s = p.node(f"load {scale}[i1 // {group}] : f32")
    b = p.node(f"load {shift}[i0, i1 // {group}] : f32")
    p.store(out, "i0, i1", p.node(f"add {p.node(f'mul {xv}, {s} : f32')}, {b} : f32"))
    p.end()
    p.end()
    return p.text()


def transposed_sum_program(rows, a, b):
    """out[i0] = sum over r0 < a*b of x[i0, r0 % a, r0 // a]: x's [a, b] rows summed column by column."""
    p = Program("transposed_sum")
    x = p.buffer(f"f32[{rows}, {a}, {b}]{{{a * b}, {b}, 1}} input 0")
    out = p.output(f"f32[{rows}]{{1}}")
    p.kernel(f"@k0 [i0 < {rows}]")
    p.loop(f"[r0 < {a * b}]")
    acc = p.node(f"reduce_sum {p.node(f'load {x}[i0, r0 % {a}, r0 // {a}] : f32')} : f32")
    p.end()
    p.loop()
    p.store(out, "i0", acc)
    p.end()
    p.end()
    return p.text()


@pytest.mark.parametrize("isa", ISA_ORDER)
@pytest.mark.parametrize("cols,group,form", [(64, 16, "chunk"), (96, 32, "chunk"), (40, 4, "lanes"),
                                             (37, 3, "lanes"), (20, 16, "chunk")])
def test_group_loads(cache_dir, isa, cols, group, form):
    prog = compile_loop(group_scale_program(3, cols, group), cache_dir, isa=isa)
    if isa != "scalar":
        assert "pointwise: vector over i1" in prog.source, prog.source[:3000]
        assert ("_lanes[l] = [&](const int64_t i1)" in prog.source) == (form == "lanes"), prog.source[:3000]
    skip_unless_this_cpu_runs(isa)
    g = torch.Generator().manual_seed(4)
    groups = -(-cols // group)
    x, scale, shift = torch.randn(3, cols, generator=g), torch.randn(groups, generator=g), torch.randn(3, groups, generator=g)
    (got,) = prog.run([x, scale, shift])
    index = torch.arange(cols) // group
    assert torch.equal(got, x * scale[index] + shift[:, index])


@pytest.mark.parametrize("isa", ISA_ORDER)
@pytest.mark.parametrize("a,b", [(8, 5), (3, 7)])
def test_reduction_loads_lane_by_lane(cache_dir, isa, a, b):
    prog = compile_loop(transposed_sum_program(4, a, b), cache_dir, isa=isa)
    if isa != "scalar":
        assert "vector over r0" in prog.source, prog.source[:3000]
    skip_unless_this_cpu_runs(isa)
    x = torch.randn(4, a, b, generator=torch.Generator().manual_seed(5))
    (got,) = prog.run([x])
    torch.testing.assert_close(got, x.transpose(1, 2).reshape(4, -1).sum(1))
