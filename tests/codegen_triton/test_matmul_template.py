"""max-autotune's matmul template (src/codegen/triton/matmul_template.cpp): numerics through Triton's
interpreter (matmul_interp_runner.py, one subprocess for every case: TRITON_INTERPRET=1 must be set
before triton's decorators run), an sm_90 cubin for every candidate config without a GPU, and the
cases that keep the extern call (each with its reason)."""
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from ember._C import codegen

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from interp_cases import lower  # noqa: E402
from matmul_cases import CASES  # noqa: E402


@pytest.fixture(scope="module")
def report():
    # Triton 3.6's interpreter runs tl.dot through numpy, which from numpy 2.4 refuses to convert its
    # 1-element arrays to scalars (docs/codegen-triton.md); `make setup` pins numpy < 2.4, the GPU host
    # has a newer one.
    numpy = pytest.importorskip("numpy")
    if tuple(int(p) for p in numpy.__version__.split(".")[:2]) >= (2, 4):
        pytest.skip(f"Triton's interpreter needs numpy < 2.4 for tl.dot (numpy {numpy.__version__} here)")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join([os.path.join(REPO, "python"), HERE]))
    proc = subprocess.run([sys.executable, os.path.join(HERE, "matmul_interp_runner.py")], capture_output=True,
                          text=True, env=env, timeout=600)
    results = {json.loads(line)["case"]: json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")}
    assert results, f"the interpreter runner reported nothing:\n{proc.stdout}\n{proc.stderr}"
    return results


@pytest.mark.parametrize("case", sorted(CASES))
def test_template_numerics_in_interpreter(report, case):
    r = report.get(case)
    assert r is not None, f"{case}: no report (the runner stopped early?)"
    assert r["ok"], f"{case}: {r['message']}"
    assert r["configs"] == 2, "the first config and the smallest tiles ran"


GOLDEN = os.path.join(os.path.dirname(HERE), "golden")


def golden(name):
    with open(os.path.join(GOLDEN, name)) as f:
        return f.read()


def mm_program(epilogue, result="f32[16, 16]{16, 1}", ranges="i0 < 16, i1 < 16", extra_buffers="", returns="%b3"):
    """An mm extern of two 16x16 f32 inputs into %b2 and one kernel after it (its loop body given)."""
    return f"""program @p {{
  buffer %b0 : f32[16, 16]{{16, 1}} input 0
  buffer %b1 : f32[16, 16]{{16, 1}} input 1
  buffer %b2 : {result} extern
  buffer %b3 : f32[16, 16]{{16, 1}} output 0
{extra_buffers}  extern (%b2) = "torch.mm"(%b0, %b1)
  kernel @k0 [{ranges}] {{
{epilogue}
  }}
  return ({returns})
}}
"""


def test_no_template_outside_max_autotune():
    emitted = codegen.emit_triton(golden("emit_triton_matmul_seed_bf16.loop"))
    assert emitted["matmul_templates"] == [] and emitted["matmul_refusals"] == []


def test_the_seed_block_gets_one_template():
    emitted = codegen.emit_triton(golden("emit_triton_matmul_seed_bf16.loop"), matmul_templates=True, max_configs=8)
    (t,) = emitted["matmul_templates"]
    kernel = t["kernel"]
    assert (t["extern"], t["epilogue"], t["batch"], t["m"], t["n"], t["k"]) == (0, 0, 1, 64, 256, 128)
    assert kernel["kind"] == "matmul" and kernel["name"].startswith("ember_mm_mul_add_tanh_")
    assert [p["name"] for p in kernel["params"]] == ["a_ptr", "b_ptr", "bias_ptr", "in_ptr0", "out_ptr0"]
    assert [p["buffer"] for p in kernel["params"]] == [0, 1, 2, 3, 5]
    # F.linear's weight [N, K] is read as B[k, n] = w[n, k]; sizes are literals; bf16 rounding of acc.
    src = kernel["source"]
    assert "b_ptrs = b_ptr + (0 + rk[:, None] + rbn[None, :]*128)" in src
    assert 'acc = acc.to(tl.bfloat16, fp_downcast_rounding="rtne").to(tl.float32)' in src
    assert "t0 = acc" in src and "xmask" not in src  # 64 and 256 divide every block
    assert all(c["blocks"]["BLOCK_M"] <= 64 and c["blocks"]["GROUP_M"] == 8 for c in kernel["configs"])
    assert len(kernel["configs"]) >= 4
    # Deterministic: the same text and name again.
    again = codegen.emit_triton(golden("emit_triton_matmul_seed_bf16.loop"), matmul_templates=True, max_configs=8)
    assert again["matmul_templates"][0]["kernel"]["source"] == src


def test_allow_tf32_is_in_the_text():
    body = """    loop {
      %t0 = load %b2[i0, i1] : f32
      %t1 = relu %t0 : f32
      store %b3[i0, i1] = %t1
    }"""
    texts = [codegen.emit_triton(mm_program(body), matmul_templates=True, allow_tf32=tf32)["matmul_templates"][0]
             ["kernel"] for tf32 in (False, True)]
    assert 'input_precision="ieee"' in texts[0]["source"] and 'input_precision="tf32"' in texts[1]["source"]
    assert texts[0]["name"] != texts[1]["name"]


@pytest.mark.parametrize("body, ranges, why", [
    ("""    loop {
      %t0 = load %b2[i1, i0] : f32
      store %b3[i0, i1] = %t0
    }""", "i0 < 16, i1 < 16", "not at the tile's own element"),
    ("""    loop [r0 < 16] {
      %t0 = load %b2[i0, r0] : f32
      %t1 = reduce_sum %t0 : f32
    }
    loop {
      store %b3[i0, 0] = %t1
    }""", "i0 < 16", "a reduction"),
    ("""    loop {
      %t0 = load %b0[i0, i1] : f32
      store %b3[i0, i1] = %t0
    }""", "i0 < 16, i1 < 16", "does not read the matmul's result"),
])
def test_epilogues_that_do_not_match_the_tile_keep_the_extern(body, ranges, why):
    emitted = codegen.emit_triton(mm_program(body, ranges=ranges, returns="%b3, %b2" if "b2" not in body else "%b3"),
                                  matmul_templates=True)
    assert emitted["matmul_templates"] == []
    (refusal,) = emitted["matmul_refusals"]
    assert refusal.startswith("extern 0 (torch.mm): ") and why in refusal, refusal


def test_a_result_something_else_reads_keeps_the_extern():
    emitted = codegen.emit_triton(golden("emit_triton_matmul_bmm_tails.loop"), matmul_templates=True)
    assert [t["extern"] for t in emitted["matmul_templates"]] == [0]
    assert emitted["matmul_refusals"] == ["extern 1 (torch.bmm): no kernel step follows it"]


def test_the_gpu_benchmarks_matmuls_get_templates():
    """The bench's seed_bf16 (x @ W + b, gelu, + r) and mlp (bf16 Linear, GELU, Linear), small: the
    seed's matmul and fc1 + GELU get a template; fc2's result is the graph's output (no epilogue)."""
    bf16 = torch.bfloat16

    def seed(x, w, b, r):
        return F.gelu(x @ w + b, approximate="tanh") + r

    args = [torch.randn(64, 128).to(bf16), torch.randn(128, 128).to(bf16), torch.randn(128).to(bf16),
            torch.randn(64, 128).to(bf16)]
    emitted = codegen.emit_triton(lower(seed, args), schedule=True, matmul_templates=True)
    assert [t["kernel"]["name"][:22] for t in emitted["matmul_templates"]] == ["ember_mm_add_mul_tanh_"]
    assert emitted["matmul_refusals"] == []
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)).to(bf16).eval()
    with torch.no_grad():
        emitted = codegen.emit_triton(lower(mlp, [torch.randn(2, 16, 64).to(bf16)]), schedule=True,
                                      matmul_templates=True)
    (t,) = emitted["matmul_templates"]
    assert t["kernel"]["name"].startswith("ember_mm_mul_erf_add_") and (t["m"], t["n"], t["k"]) == (32, 256, 64)
    assert emitted["matmul_refusals"] == ["extern 1 (torch.nn.functional.linear): no kernel step follows it"]
