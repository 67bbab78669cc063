"""Kernels with run-time sizes (dynamic shapes, issue 14): loop IR programs with shape symbols,
compiled once and run for every value in SIZES against torch. Covers a pointwise chain with a
constant inner dimension and a symbolic outer one, softmax over a symbolic last dimension, a
reduction over a symbolic dimension, a matmul extern with symbolic M and K and its fused epilogue,
temporaries planned per call (the arena kept across sizes), a view with a symbolic offset, and the
runtime's refusal of inputs that disagree with the program's expressions."""
import pytest
import torch

from cpp_harness import compile_loop, needs_cxx

pytestmark = needs_cxx

SIZES = [2, 3, 7, 16, 17, 64, 65, 1000]


POINTWISE = """program @pointwise {
  symbol s0 hint=8
  buffer %b0 : f32[s0, 64]{64, 1} input 0
  buffer %b1 : f32[64]{1} input 1
  buffer %b2 : f32[s0, 64]{64, 1} output 0
  kernel @k0 [i0 < s0, i1 < 64] {
    loop {
      %t0 = load %b0[i0, i1] : f32
      %t1 = load %b1[i1] : f32
      %t2 = mul %t0, %t1 : f32
      %t3 = constant 0.0 : f32
      %t4 = maximum %t2, %t3 : f32
      %t5 = exp %t4 : f32
      store %b2[i0, i1] = %t5
    }
  }
  return (%b2)
}
"""


def test_pointwise_with_a_constant_inner_dim_keeps_its_vector_loop(cache_dir):
    prog = compile_loop(POINTWISE, cache_dir, parallel_threshold=4096)
    src = prog.source
    assert "const int64_t s0 = ctx->sym[0];" in src
    assert "i0 < s0" in src and "c < 64 / ev::VecF::kSize" in src  # the inner loop stays constant
    assert "if(64*s0 >= 4096)" in src  # the parallel threshold, tested at run time
    w = torch.randn(64)
    for n in SIZES:
        x = torch.randn(n, 64)
        got, = prog.run([x, w])
        torch.testing.assert_close(got, torch.exp(torch.relu(x * w)))


WIDE_ROWS = """program @wide_rows {
  symbol s0 hint=16
  buffer %b0 : f32[2, s0, 1024]{1024*s0, 1024, 1} input 0
  buffer %b1 : f32[2, s0, 1024]{1024*s0, 1024, 1} output 0
  kernel @k0 [i0 < 2, i1 < 1024*s0] {
    loop {
      %t0 = load %b0[i0, i1 // 1024, i1 % 1024] : f32
      %t1 = sigmoid %t0 : f32
      store %b1[i0, i1 // 1024, i1 % 1024] = %t1
    }
  }
  return (%b1)
}
"""


def test_few_rows_of_a_symbolic_length_split_their_vector_chunks(cache_dir):
    # Two rows of 1024*s0 (an MLP's GELU over [B, T, 4d] with B = 2): parallel over the two rows would
    # keep all but two threads idle however long T grows.
    prog = compile_loop(WIDE_ROWS, cache_dir)
    assert "parallel over the vector chunks of i1, when 2048*s0 >= 32768" in prog.source
    for n in (2, 17, 40):
        x = torch.randn(2, n, 1024)
        got, = prog.run([x])
        torch.testing.assert_close(got, torch.sigmoid(x))


SOFTMAX = """program @softmax {
  symbol s0 hint=16
  buffer %b0 : f32[3, s0]{s0, 1} input 0
  buffer %b1 : f32[3, s0]{s0, 1} output 0
  kernel @k0 [i0 < 3] {
    loop [r0 < s0] {
      %t0 = load %b0[i0, r0] : f32
      %t1 = reduce_max %t0 : f32
    }
    loop [r0 < s0] {
      %t2 = load %b0[i0, r0] : f32
      %t3 = sub %t2, %t1 : f32
      %t4 = exp %t3 : f32
      %t5 = reduce_sum %t4 : f32
    }
    loop [r0 < s0] {
      %t6 = load %b0[i0, r0] : f32
      %t7 = sub %t6, %t1 : f32
      %t8 = exp %t7 : f32
      %t9 = div %t8, %t5 : f32
      store %b1[i0, r0] = %t9
    }
  }
  return (%b1)
}
"""


def test_softmax_over_a_symbolic_last_dim_has_a_masked_tail(cache_dir):
    prog = compile_loop(SOFTMAX, cache_dir)
    src = prog.source
    assert "(const float* __restrict p0, float* __restrict p1, const int64_t s0)" in src
    assert "if (s0 % ev::VecF::kSize != 0) {" in src  # the tail, for any value
    for n in SIZES:
        x = torch.randn(3, n) * 4
        got, = prog.run([x])
        torch.testing.assert_close(got, torch.softmax(x, -1))


COLUMN_SUM = """program @column_sum {
  symbol s0 hint=100
  buffer %b0 : f32[s0, 5]{5, 1} input 0
  buffer %b1 : f32[5]{1} output 0
  kernel @k0 [i0 < 5] {
    loop [r0 < s0] {
      %t0 = load %b0[r0, i0] : f32
      %t1 = reduce_sum %t0 : f32
    }
    loop {
      store %b1[i0] = %t1
    }
  }
  return (%b1)
}
"""


def test_a_reduction_over_a_symbolic_dim(cache_dir):
    prog = compile_loop(COLUMN_SUM, cache_dir)
    for n in SIZES:
        x = torch.randn(n, 5)
        got, = prog.run([x])
        torch.testing.assert_close(got, x.sum(0), rtol=1e-5, atol=1e-4)


MATMUL = """program @matmul {
  symbol s0 hint=8
  symbol s1 hint=32
  buffer %b0 : f32[s0, s1]{s1, 1} input 0
  buffer %b1 : f32[s1, 24]{24, 1} input 1
  buffer %b2 : f32[24]{1} input 2
  buffer %b3 : f32[s0, 24]{24, 1} extern
  buffer %b4 : f32[s0, 24]{24, 1} output 0
  extern (%b3) = "torch.matmul"(%b0, %b1)
  kernel @k0 [i0 < s0, i1 < 24] {
    loop {
      %t0 = load %b3[i0, i1] : f32
      %t1 = load %b2[i1] : f32
      %t2 = add %t0, %t1 : f32
      %t3 = tanh %t2 : f32
      store %b4[i0, i1] = %t3
    }
  }
  return (%b4)
}
"""


def test_matmul_with_symbolic_m_and_k(cache_dir):
    prog = compile_loop(MATMUL, cache_dir, [torch.matmul])
    b = torch.randn(24)
    for m, k in [(2, 3), (7, 64), (17, 2), (65, 1000), (1000, 16)]:
        x, w = torch.randn(m, k), torch.randn(k, 24)
        got, = prog.run([x, w, b])
        torch.testing.assert_close(got, torch.tanh(x @ w + b), rtol=1e-4, atol=1e-4)


TEMPS = """program @temps {
  symbol s0 hint=16
  buffer %b0 : f32[2, s0]{s0, 1} input 0
  buffer %b1 : f32[2, s0]{s0, 1} temp
  buffer %b2 : f32[2]{1} temp
  buffer %b3 : f32[2, s0 + -1]{s0, 1} view %b0 + 1
  buffer %b4 : f32[2, s0 + -1]{s0 + -1, 1} output 0
  kernel @k0 [i0 < 2, i1 < s0] {
    loop {
      %t0 = load %b0[i0, i1] : f32
      %t1 = exp %t0 : f32
      store %b1[i0, i1] = %t1
    }
  }
  kernel @k1 [i0 < 2] {
    loop [r0 < s0] {
      %t0 = load %b1[i0, r0] : f32
      %t1 = reduce_sum %t0 : f32
    }
    loop {
      store %b2[i0] = %t1
    }
  }
  kernel @k2 [i0 < 2, i1 < s0 + -1] {
    loop {
      %t0 = load %b3[i0, i1] : f32
      %t1 = load %b2[i0] : f32
      %t2 = mul %t0, %t1 : f32
      store %b4[i0, i1] = %t2
    }
  }
  return (%b4)
}
"""


def test_temporaries_are_planned_per_call_and_views_take_symbolic_sizes(cache_dir):
    prog = compile_loop(TEMPS, cache_dir)
    assert "planned per call" in prog.source
    # Sizes up and down and back again: plans come from the cache, the arena grows to the largest.
    for n in SIZES + list(reversed(SIZES)) + [16, 1000, 16]:
        x = torch.randn(2, n)
        got, = prog.run([x])
        torch.testing.assert_close(got, x[:, 1:] * torch.exp(x).sum(1, keepdim=True), rtol=1e-5, atol=1e-5)


def test_inputs_that_disagree_with_the_expressions_raise(cache_dir):
    prog = compile_loop(MATMUL, cache_dir, [torch.matmul])
    b = torch.randn(24)
    with pytest.raises(RuntimeError, match=r"input 1 .*dimension 0: expected size s1 = 5, got 6"):
        prog.run([torch.randn(3, 5), torch.randn(6, 24), b])
    with pytest.raises(RuntimeError, match=r"s0 is 1, outside \[2, inf\]"):
        prog.run([torch.randn(1, 5), torch.randn(5, 24), b])
    with pytest.raises(RuntimeError, match=r"input 0 .*dimension 0: expected stride s1 = 5, got 1"):
        prog.run([torch.randn(5, 3).t(), torch.randn(5, 24), b])


VIEW = """program @view {
  symbol s0 hint=4
  buffer %b0 : f32[s0, 6]{6, 1} input 0
  buffer %b1 : f32[2*s0, 3]{3, 1} extern
  buffer %b2 : f32[2*s0, 3]{3, 1} output 0
  extern (%b1) = "torch.Tensor.view"(%b0, sym(2*s0), 3)
  kernel @k0 [i0 < 2*s0, i1 < 3] {
    loop {
      %t0 = load %b1[i0, i1] : f32
      %t1 = neg %t0 : f32
      store %b2[i0, i1] = %t1
    }
  }
  return (%b2)
}
"""


def test_extern_arguments_over_symbols_are_evaluated_per_call(cache_dir):
    prog = compile_loop(VIEW, cache_dir, [torch.Tensor.view])
    for n in [2, 7, 65, 7]:
        x = torch.randn(n, 6)
        got, = prog.run([x])
        torch.testing.assert_close(got, -x.view(2 * n, 3))


def test_triton_takes_the_symbols_as_kernel_arguments():
    # The same symbolic program through the Triton backend (docs/codegen-triton.md, "Symbolic sizes"): the
    # extent is a kernel parameter (xnumel; s0 itself is none, as the body never reads it), masked, and an
    # unbounded s0 indexes in 32 bits under the guard the kernel asks for (its points fit int32 at the hint).
    from ember._C import codegen
    kernel, = codegen.emit_triton(POINTWISE)["kernels"]
    assert "xnumel, XBLOCK: tl.constexpr)" in kernel["source"]
    assert "xmask = xindex < xnumel" in kernel["source"] and "tl.int64" not in kernel["source"]
    assert kernel["assumptions"] == ["64*s0 <= 2147483647"], kernel["assumptions"]


EMBEDDING = """program @embedding {
  symbol s0 hint=5
  symbol s1 hint=10
  buffer %b0 : i64[s0]{1} input 0
  buffer %b1 : f32[s1, 8]{8, 1} input 1
  buffer %b2 : f32[s0, 8]{8, 1} output 0
  kernel @k0 [i0 < s0] {
    loop {
      %t0 = load %b0[i0] : i64
      %t1 = check_index %t0 < s1 : i64
    }
    loop [r0 < 8] {
      %t2 = load %b1[t1, r0] : f32
      store %b2[i0, r0] = %t2
    }
  }
  return (%b2)
}
"""


def test_index_checks_against_a_symbolic_bound(cache_dir):
    prog = compile_loop(EMBEDDING, cache_dir)
    assert "if (t1 < 0 || t1 >= s1) {" in prog.source
    for rows, vocab in [(2, 3), (17, 65), (1000, 7)]:
        idx, table = torch.randint(0, vocab, (rows,)), torch.randn(vocab, 8)
        got, = prog.run([idx, table])
        torch.testing.assert_close(got, table[idx])
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension with size 7"):
        prog.run([torch.tensor([1, 7, 2]), torch.randn(7, 8)])


def test_lowered_gpt_block_with_symbolic_t_and_b(cache_dir):
    """tests/lowering's GPT block (symbolic T = s0, B = s1: layer_norm, linears, views to heads,
    q @ k^T, a causal mask, softmax over T, gelu, arange(T), a mean over T), lowered, scheduled and
    compiled once, against eager for several T and B."""
    import functools
    import re
    import subprocess
    from cpp_harness import REPO
    import importlib.util
    spec = importlib.util.spec_from_file_location("block", f"{REPO}/tests/lowering/test_lower_symbolic.py")
    block = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(block)
    from ember._C import lowering, passes

    text = block.graph_text()
    for name in ("canonicalize", "decompose"):
        text = passes.run_pass(text, name)
    program, _ = lowering.lower(text)
    tool = f"{REPO}/build/py311/ember-opt"
    program = subprocess.run([tool, "--loop", "--pass", "schedule", "-"], input=program, capture_output=True,
                             text=True, check=True).stdout
    program = "\n".join(line for line in program.splitlines() if not line.startswith("//")) + "\n"
    names = re.findall(r'extern \(.*?\) = "([\w.]+)"', program)
    callables = [functools.reduce(getattr, n.split(".")[1:], torch) for n in names]
    prog = compile_loop(program, cache_dir, callables)
    assert "ctx->sym[0]" in prog.source
    for b, t in [(2, 2), (3, 3), (3, 17), (2, 64), (2, 65)]:
        g = torch.Generator().manual_seed(t)
        x = torch.randn(b, t, block.C, generator=g)
        w = [torch.randn(block.C, generator=g) * 0.1 + 1, torch.randn(block.C, generator=g) * 0.1,
             *(torch.randn(block.C, block.C, generator=g) / block.C ** 0.5 for _ in range(4)),
             torch.randn(block.C, generator=g) * 0.1]
        got = prog.run([x, *w])
        for a, e in zip(got, block.reference(x, w)):
            torch.testing.assert_close(a, e, atol=2e-5, rtol=1e-5)
