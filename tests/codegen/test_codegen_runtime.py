"""Compiled graphs end to end: extern calls through torch (matmul with a fused epilogue, a temporary
handed to torch, literals and kwargs, a result with other strides, an in-place extern), masked
loads (cat), indirect loads with check_index and its IndexError, accumulating stores in vector code, errors (compiler, code
generation, inputs), determinism and the code cache, ember-opt --pass plan --pass emit."""
import math
import os
import subprocess

import pytest
import torch

from cpp_harness import INCLUDE, ISA_ORDER, REPO, Program, compile_loop, needs_cxx, skip_unless_this_cpu_runs
from ember._C import codecache, codegen

pytestmark = needs_cxx


def gelu_tanh(p, x):
    """Appends gelu(x, approximate="tanh") nodes; returns the result node."""
    half, one = p.node("constant 0.5 : f32"), p.node("constant 1.0 : f32")
    k, a = p.node(f"constant {math.sqrt(2 / math.pi)} : f32"), p.node("constant 0.044715 : f32")
    x2 = p.node(f"mul {x}, {x} : f32")
    x3 = p.node(f"mul {x2}, {x} : f32")
    inner = p.node(f"add {x}, {p.node(f'mul {a}, {x3} : f32')} : f32")
    t = p.node(f"tanh {p.node(f'mul {k}, {inner} : f32')} : f32")
    hx = p.node(f"mul {half}, {x} : f32")
    return p.node(f"mul {hx}, {p.node(f'add {one}, {t} : f32')} : f32")


def test_matmul_extern_with_a_fused_epilogue(cache_dir):
    m, k, n = 9, 16, 21
    p = Program("mlp")
    x = p.buffer(f"f32[{m}, {k}]{{{k}, 1}} input 0")
    w = p.buffer(f"f32[{k}, {n}]{{{n}, 1}} input 1")
    b = p.buffer(f"f32[{n}]{{1}} input 2")
    r = p.buffer(f"f32[{m}, {n}]{{{n}, 1}} input 3")
    mm = p.buffer(f"f32[{m}, {n}]{{{n}, 1}} extern")
    out = p.output(f"f32[{m}, {n}]{{{n}, 1}}")
    p.body.append(f'  extern ({mm}) = "torch.matmul"({x}, {w})')
    p.kernel(f"@k0 [i0 < {m}, i1 < {n}]")
    p.loop()
    v = p.node(f"add {p.node(f'load {mm}[i0, i1] : f32')}, {p.node(f'load {b}[i1] : f32')} : f32")
    g = gelu_tanh(p, v)
    p.store(out, "i0, i1", p.node(f"add {g}, {p.node(f'load {r}[i0, i1] : f32')} : f32"))
    p.end()
    p.end()
    prog = compile_loop(p.text(), cache_dir, [torch.matmul])
    assert "if (ctx->call_extern(ctx, 0) != 0) return 1;" in prog.source
    args = [torch.randn(m, k), torch.randn(k, n), torch.randn(n), torch.randn(m, n)]
    got, = prog.run(args)
    ref = torch.nn.functional.gelu(args[0] @ args[1] + args[2], approximate="tanh") + args[3]
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_temporaries_reach_torch_and_results_get_the_planned_strides(cache_dir):
    m, k, n = 6, 5, 7
    p = Program("temps")
    x = p.buffer(f"f32[{m}, {k}]{{{k}, 1}} input 0")
    w = p.buffer(f"f32[{k}, {n}]{{{n}, 1}} input 1")
    t = p.buffer(f"f32[{m}, {k}]{{{k}, 1}} temp")
    mm = p.buffer(f"f32[{m}, {n}]{{1, {m}}} extern")  # column-major: torch returns row-major
    s = p.buffer(f"f32[{m}, 1]{{1, 1}} extern")
    out = p.output(f"f32[{m}, {n}]{{{n}, 1}}")
    p.kernel(f"@k0 [i0 < {m}, i1 < {k}]")
    p.loop()
    two = p.node("constant 2 : f32")
    p.store(t, "i0, i1", p.node(f"mul {p.node(f'load {x}[i0, i1] : f32')}, {two} : f32"))
    p.end()
    p.end()
    p.body.append(f'  extern ({mm}) = "torch.matmul"({t}, {w})')
    p.body.append(f'  extern ({s}) = "torch.sum"({t}, [1], keepdim=True)')
    p.kernel(f"@k1 [i0 < {m}, i1 < {n}]")
    p.loop()
    v = p.node(f"add {p.node(f'load {mm}[i0, i1] : f32')}, {p.node(f'load {s}[i0, 0] : f32')} : f32")
    p.store(out, "i0, i1", v)
    p.end()
    p.end()
    p.body.append(f'  extern () = "torch.Tensor.mul_"({out}, 3.0) mutates')
    text = p.text()
    # An explicit plan: the temporary at byte 128 of a 512-byte arena.
    plan = (512, [-1, -1, 128, -1, -1, -1])
    prog = compile_loop(text, cache_dir, [torch.matmul, torch.sum, torch.Tensor.mul_], plan=plan)
    assert "ctx->arena + 128" in prog.source
    X, W = torch.randn(m, k), torch.randn(k, n)
    got, = prog.run([X, W])
    ref = ((2 * X) @ W + (2 * X).sum(1, keepdim=True)) * 3.0
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_cat_through_masked_loads(cache_dir):
    rows, a_cols, b_cols = 4, 3, 5
    cols = a_cols + b_cols
    p = Program("cat")
    a = p.buffer(f"f32[{rows}, {a_cols}]{{{a_cols}, 1}} input 0")
    b = p.buffer(f"f32[{rows}, {b_cols}]{{{b_cols}, 1}} input 1")
    out = p.output(f"f32[{rows}, {cols}]{{{cols}, 1}}")
    p.kernel(f"@k0 [i0 < {rows}, i1 < {cols}]")
    p.loop()
    i = p.node("index i1 : i64")
    split = p.node(f"constant {a_cols} : i64")
    in_a = p.node(f"lt {i}, {split} : b8")
    in_b = p.node(f"ge {i}, {split} : b8")
    va = p.node(f"load {a}[i0, i1] if {in_a} else 0 : f32")
    vb = p.node(f"load {b}[i0, i1 + -{a_cols}] if {in_b} else 0 : f32")
    p.store(out, "i0, i1", p.node(f"where {in_a}, {va}, {vb} : f32"))
    p.end()
    p.end()
    prog = compile_loop(p.text(), cache_dir)
    A, B = torch.randn(rows, a_cols), torch.randn(rows, b_cols)
    got, = prog.run([A, B])
    assert torch.equal(got, torch.cat([A, B], 1))


def embedding_program(vocab, dim, count):
    p = Program("embedding")
    idx = p.buffer(f"i64[{count}]{{1}} input 0")
    table = p.buffer(f"f32[{vocab}, {dim}]{{{dim}, 1}} input 1")
    out = p.output(f"f32[{count}, {dim}]{{{dim}, 1}}")
    p.kernel(f"@k0 [i0 < {count}]")
    p.loop()
    checked = p.node(f"check_index {p.node(f'load {idx}[i0] : i64')} < {vocab} : i64")
    p.end()
    p.loop(f"[r0 < {dim}]")
    p.store(out, "i0, r0", p.node(f"load {table}[{checked.lstrip('%')}, r0] : f32"))
    p.end()
    p.end()
    return p.text()


def test_indirect_loads_and_index_errors(cache_dir):
    vocab, dim, count = 10, 19, 6
    prog = compile_loop(embedding_program(vocab, dim, count), cache_dir)
    assert "loop 1 [r0 < 19]: vector over r0" in prog.source
    table = torch.randn(vocab, dim)
    idx = torch.tensor([3, 0, 9, 3, 7, 1])
    got, = prog.run([idx, table])
    assert torch.equal(got, table[idx])
    for bad in (12, -1):
        idx_bad = idx.clone()
        idx_bad[4] = bad
        with pytest.raises(IndexError, match=rf"index {bad} is out of bounds for dimension with size {vocab} "
                                              r"\(ember kernel k0 %t1\)"):
            prog.run([idx_bad, table])


def test_accumulating_stores(cache_dir):
    # Rows of x added into every third row (contiguous lanes: a vector read-add-write with a masked tail),
    # then into one element per row group (stride 0 along i1: scalar).
    rows, cols = 12, 19
    p = Program("accumulate")
    x = p.buffer(f"f32[{rows}, {cols}]{{{cols}, 1}} input 0")
    by_row = p.output(f"f32[{rows // 3}, {cols}]{{{cols}, 1}}")
    total = p.output(f"f32[{rows // 3}]{{1}}")
    p.kernel(f"@k0 [i0 < {rows // 3}, i1 < {cols}]")
    p.loop()
    zero = p.node("constant 0.0 : f32")
    p.store(by_row, "i0, i1", zero)
    p.store(total, "i0", zero)
    p.end()
    p.end()
    for k, (out, index) in enumerate([(by_row, "i0 // 3, i1"), (total, "i0 // 3")]):
        p.kernel(f"@k{k + 1} [i0 < {rows}, i1 < {cols}]")
        p.loop()
        p.store(out, index, p.node(f"load {x}[i0, i1] : f32"), accumulate=True)
        p.end()
        p.end()
    prog = compile_loop(p.text(), cache_dir)
    kernels = prog.source.split("// kernel ")[1:]
    assert [("serial: %t1 adds into a buffer" in k, "pointwise: vector over i1" in k) for k in kernels[1:]] == \
        [(True, True), (True, False)], prog.source
    assert "(ev::VecF::load(" in kernels[1] and "+= t0;" in kernels[2], prog.source
    X = torch.randn(rows, cols)
    got_rows, got_total = prog.run([X])
    torch.testing.assert_close(got_rows, X.view(rows // 3, 3, cols).sum(1))
    torch.testing.assert_close(got_total, X.view(rows // 3, 3 * cols).sum(1))


def test_a_compiler_failure_is_a_compile_error(tmp_path):
    broken = tmp_path / "include" / "ember"
    broken.mkdir(parents=True)
    (broken / "vec.h").write_text('#error "this vec.h is broken on purpose"\n')
    with open(os.path.join(INCLUDE, "ember", "runtime.h")) as f:
        (broken / "runtime.h").write_text(f.read())
    text = embedding_program(4, 3, 2)
    with pytest.raises(codecache.CompileError) as info:
        codegen.compile_program(text, [], [str(tmp_path / "include")], str(tmp_path / "cache"), compiler="g++")
    assert "broken on purpose" in info.value.compiler_output


def test_programs_code_generation_cannot_handle_raise_codegen_error():
    symbolic = "program @p {\n  buffer %b0 : f32[s0]{1} input 0\n  buffer %b1 : f32[s0]{1} output 0\n" \
               "  kernel @k0 [i0 < s0] {\n    loop {\n      %t0 = load %b0[i0] : f32\n" \
               "      store %b1[i0] = %t0\n    }\n  }\n  return (%b1)\n}\n"
    # A symbol without its `symbol` line (test_codegen_symbolic.py has programs that declare theirs).
    with pytest.raises(ValueError, match="shape symbol s0 is used but not declared"):
        codegen.emit_cpp(symbolic)
    complex_ = symbolic.replace("s0", "4").replace("f32[4]{1} input", "c64[4]{1} input")
    with pytest.raises((codegen.CodegenError, ValueError)):
        codegen.emit_cpp(complex_)


def test_inputs_that_do_not_match_the_program_are_refused(cache_dir):
    prog = compile_loop(embedding_program(10, 19, 6), cache_dir)
    table = torch.randn(10, 19)
    idx = torch.tensor([1, 2, 3, 4, 5, 6])
    with pytest.raises(ValueError, match=r"input 1 of compiled program @embedding must be a cpu tensor "
                                         r"f32\[10, 19\]\{19, 1\}, got f32\[10, 18\]"):
        prog.run([idx, torch.randn(10, 18)])
    with pytest.raises(ValueError, match="input 0"):
        prog.run([idx.int(), table])
    with pytest.raises(ValueError, match=r"\{19, 1\}, got f32\[10, 19\]\{1, 10\}"):
        prog.run([idx, torch.randn(19, 10).t()])
    with pytest.raises(TypeError, match="must be a tensor"):
        prog.run([[1, 2], table])


def test_generated_code_is_deterministic_and_cached(cache_dir):
    text = embedding_program(7, 33, 5)
    assert codegen.emit_cpp(text) == codegen.emit_cpp(text)
    first = compile_loop(text, cache_dir)
    second = compile_loop(text, cache_dir)
    assert second.cache_hit and first.library_path == second.library_path


def test_ember_opt_emits_cpp(tmp_path):
    tool = os.path.join(REPO, "build", "bin", "ember-opt")
    if not os.path.exists(tool):
        pytest.skip("ember-opt is not built (make build)")
    src = tmp_path / "p.loop"
    src.write_text(embedding_program(4, 8, 3))
    done = subprocess.run([tool, "--loop", "--pass", "plan", "--pass", "emit", str(src)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == codegen.emit_cpp(src.read_text())
    assert 'extern "C" int ember_entry(ember_ctx* ctx, void* const* kernels)' in done.stdout
    undeclared = (src.read_text().replace("[3]{1}", "[s0]{1}").replace("[3, 8]{8, 1}", "[s0, 8]{8, 1}")
                  .replace("i0 < 3", "i0 < s0"))
    src.write_text(undeclared)
    done = subprocess.run([tool, "--loop", "--pass", "plan", "--pass", "emit", str(src)], capture_output=True, text=True)
    assert done.returncode == 1 and "shape symbol s0 is used but not declared" in done.stderr
    src.write_text(undeclared.replace("program @embedding {", "program @embedding {\n  symbol s0 hint=3", 1))
    done = subprocess.run([tool, "--loop", "--pass", "plan", "--pass", "emit", str(src)], capture_output=True, text=True)
    assert done.returncode == 0 and "const int64_t s0 = ctx->sym[0];" in done.stdout


@pytest.mark.parametrize("isa", ISA_ORDER)
def test_every_isa_compiles_and_the_supported_ones_agree(cache_dir, isa):
    """The same program for each vector layer: compiled (and loaded) for all three, run where the
    CPU has the instructions; results within float32 rounding of torch (lane counts differ, so the
    reductions' association differs)."""
    rows, n = 3, 37
    p = Program("isa")
    x = p.buffer(f"f32[{rows}, {n}]{{{n}, 1}} input 0")
    out = p.output(f"f32[{rows}, {n}]{{{n}, 1}}")
    p.kernel(f"@k0 [i0 < {rows}]")
    p.loop(f"[r0 < {n}]")
    v = p.node(f"load {x}[i0, r0] : f32")
    mean, m2 = p.node(f"welford_mean {v} : f32"), p.node(f"welford_m2 {v} : f32")
    p.end()
    p.loop(f"[r0 < {n}]")
    v = p.node(f"load {x}[i0, r0] : f32")
    centered = p.node(f"sub {v}, {mean} : f32")
    p.store(out, "i0, r0", p.node(f"mul {p.node(f'erf {centered} : f32')}, {m2} : f32"))
    p.end()
    p.end()
    prog = compile_loop(p.text(), cache_dir, isa=isa)
    skip_unless_this_cpu_runs(isa)
    data = torch.randn(rows, n)
    got, = prog.run([data])
    mu = data.mean(1, keepdim=True)
    ref = torch.erf(data - mu) * ((data - mu) ** 2).sum(1, keepdim=True)
    torch.testing.assert_close(got, ref, rtol=2e-5, atol=2e-5)
