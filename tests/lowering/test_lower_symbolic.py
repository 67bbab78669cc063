"""A GPT block with a symbolic sequence length (s0) and batch (s1), from graph IR text through
canonicalize, decompose and lowering, run by the loop IR reference interpreter for several
concrete sizes (the symbols substituted in the lowered program's text) against eager torch.

One lowering serves every size: the program is lowered once, symbolic, and only its text is
specialized per run, as the runtime evaluates the symbols per call.
"""
import math
import os
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from ember._C import lowering, passes
from ember.testing import loop_interp

BLOCK = Path(__file__).resolve().parent.parent / "golden" / "lower_symbolic_gpt_block.ir"
C, NH, HD = 8, 2, 4


def graph_text():
    return "".join(line + "\n" for line in BLOCK.read_text().splitlines() if not line.startswith("//"))


@pytest.fixture(scope="module")
def lowered():
    text = graph_text()
    for name in ("canonicalize", "decompose"):
        text = passes.run_pass(text, name)
    program, refusals = lowering.lower(text)
    return text, program, refusals


def specialize(program, values):
    """The program with each symbol replaced by its value (the symbol lines dropped)."""
    lines = [line for line in program.splitlines() if not line.lstrip().startswith("symbol ")]
    text = "\n".join(lines) + "\n"
    for name, v in values.items():
        text = re.sub(rf"\b{name}\b", str(v), text)
    return text.replace("sym(", "(")


def reference(x, w):
    ln_w, ln_b, wq, wk, wv, wp, bp = w
    B, T, _ = x.shape
    h = F.layer_norm(x, [C], ln_w, ln_b, 1e-5)
    q = F.linear(h, wq).view(B, T, NH, HD).transpose(1, 2)
    k = F.linear(h, wk).view(B, T, NH, HD).transpose(1, 2)
    v = F.linear(h, wv).view(B, T, NH, HD).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * 0.5
    att = att.masked_fill(torch.tril(torch.ones(T, T)) == 0, float("-inf")).softmax(-1)
    y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
    out = F.gelu(x + F.linear(y, wp, bp))
    return out, torch.arange(T), out.mean(1)


def test_the_block_decomposes_and_lowers_symbolically(lowered):
    graph, program, refusals = lowered
    for op in ("layer_norm", "softmax", "masked_fill", "gelu", "mean", "transpose"):
        assert f"= {op}(" not in graph, (op, graph)
    assert "symbol s0 hint=16" in graph and "reshape(" in graph
    # Kernels run over symbolic extents; only the matmuls stay extern calls.
    assert re.search(r"kernel @k\d+ \[i0 < s1, i1 < s0", program), program
    assert all("matmul" in r or "linear" in r for r in refusals), refusals


# T = 64 runs ~15 s in the point-by-point interpreter: opt-in (EMBER_SLOW_TESTS=1).
SIZES = [2, 3, 17] + ([64] if os.environ.get("EMBER_SLOW_TESTS") == "1" else [])


@pytest.mark.parametrize("t", SIZES)
def test_symbolic_block_matches_eager_for_each_size(lowered, t):
    _, program, _ = lowered
    b = 2
    g = torch.Generator().manual_seed(t)
    x = torch.randn(b, t, C, generator=g)
    w = [torch.randn(C, generator=g) * 0.1 + 1, torch.randn(C, generator=g) * 0.1,
         *(torch.randn(C, C, generator=g) / math.sqrt(C) for _ in range(4)), torch.randn(C, generator=g) * 0.1]
    got = loop_interp.run(specialize(program, {"s0": t, "s1": b}), [x, *w])
    want = reference(x, w)
    assert len(got) == 3
    for a, e in zip(got, want):
        assert a.shape == e.shape and a.dtype == e.dtype
        torch.testing.assert_close(a, e, atol=2e-5, rtol=1e-5)


def test_slices_into_symbolic_sizes():
    # Bounds the symbols' facts place inside the size are served (an end equal to it, a constant end
    # below s0's least value, a symbolic start, the step canonicalize leaves out); a constant end that
    # passes the size for some value of s0 stays an extern call (torch clamps it).
    def lower(min_s0):
        text = (f"symbol s0 hint=8 range=[{min_s0}, inf]\n"
                "graph @g(%0: f32[s0, 4]{4, 1} cpu \"L['x']\") {\n"
                "  %1 = slice(%0, 0, 0, sym(s0), 1) : f32[s0, 4]{4, 1} cpu\n"
                "  %2 = slice(%0, 0, 0, 3, 1) : f32[3, 4]{4, 1} cpu\n"
                "  %3 = slice(%0, 0, sym(s0 + -1), sym(s0)) : f32[1, 4]{4, 1} cpu\n"
                "  %4 = neg(%1) : f32[s0, 4]{4, 1} cpu\n"
                "  return (%4, %2, %3)\n}\n")
        return lowering.lower(text)
    _, refusals = lower(2)
    assert len(refusals) == 1 and "bounds not known to lie within the size" in refusals[0], refusals
    program, refusals = lower(3)
    assert refusals == [] and "extern" not in program, (refusals, program)
