"""emit_triton's contract beyond the goldens: refusals name the buffer or node, kernel text and names
depend on content only, options change kinds and config lists as documented, and the signature
lists constexpr blocks last."""
import pytest

from ember._C import codegen

COPY = """program @p {{
  buffer %b0 : {dt}[4, 8]{{8, 1}} input 0
  buffer %b1 : {dt}[4, 8]{{8, 1}} output 0
  kernel @k0 [i0 < 4, i1 < 8] {{
    loop {{
      %t0 = load %b0[i0, i1] : {dt}
      store %b1[i0, i1] = %t0
    }}
  }}
  return (%b1)
}}
"""

ROWSUM = """program @p {{
  buffer %b0 : f32[4, {n}]{{{n}, 1}} input 0
  buffer %b1 : f32[4]{{1}} output 0
  kernel @k0 [i0 < 4] {{
    loop [r0 < {n}] {{
      %t0 = load %b0[i0, r0] : f32
      %t1 = reduce_sum %t0 : f32
    }}
    loop {{
      store %b1[i0] = %t1
    }}
  }}
  return (%b1)
}}
"""


@pytest.mark.parametrize("dt", ["c64", "f8e4m3fn"])
def test_refuses_unsupported_dtypes(dt):
    with pytest.raises(codegen.CodegenError, match=r"%b0.*does not support dtype"):
        codegen.emit_triton(COPY.format(dt=dt))


def test_refuses_a_view_that_changes_dtype():
    text = """program @p {
  buffer %b0 : f32[8]{1} input 0
  buffer %b1 : i32[8]{1} view %b0 + 0
  buffer %b2 : i32[8]{1} output 0
  kernel @k0 [i0 < 8] {
    loop {
      %t0 = load %b1[i0] : i32
      store %b2[i0] = %t0
    }
  }
  return (%b2)
}
"""
    with pytest.raises(codegen.CodegenError, match=r"view %b1 .* changes dtype"):
        codegen.emit_triton(text)


def test_names_and_text_depend_on_content_only():
    one = codegen.emit_triton(COPY.format(dt="f32"))["kernels"][0]
    # The same kernel as the second of two, under another kernel name and other buffer ids.
    two = """program @q {
  buffer %b0 : f32[2]{1} input 0
  buffer %b1 : f32[2]{1} output 0
  buffer %b2 : f32[4, 8]{8, 1} input 1
  buffer %b3 : f32[4, 8]{8, 1} output 1
  kernel @k0 [i0 < 2] {
    loop {
      %t0 = load %b0[i0] : f32
      store %b1[i0] = %t0
    }
  }
  kernel @k1 [i0 < 4, i1 < 8] {
    loop {
      %t0 = load %b2[i0, i1] : f32
      store %b3[i0, i1] = %t0
    }
  }
  return (%b1, %b3)
}
"""
    other = codegen.emit_triton(two)["kernels"][1]
    assert other["name"] == one["name"] and other["source"] == one["source"]
    assert one["name"].startswith("ember_poi_copy_")
    assert [p["buffer"] for p in other["params"] if "buffer" in p] == [2, 3]


def test_kinds_follow_persistent_max_rnumel():
    assert codegen.emit_triton(ROWSUM.format(n=1000))["kernels"][0]["kind"] == "persistent_reduction"
    assert codegen.emit_triton(ROWSUM.format(n=1025))["kernels"][0]["kind"] == "looped_reduction"
    k = codegen.emit_triton(ROWSUM.format(n=1000), persistent_max_rnumel=512)["kernels"][0]
    assert k["kind"] == "looped_reduction"
    assert "for roffset in range(0, 1000, RBLOCK):" in k["source"]


def test_max_configs_lists_candidates_best_first():
    one = codegen.emit_triton(ROWSUM.format(n=3000))["kernels"][0]
    many = codegen.emit_triton(ROWSUM.format(n=3000), max_configs=4)["kernels"][0]
    assert len(one["configs"]) == 1 and len(many["configs"]) == 4
    assert many["configs"][0] == one["configs"][0]
    # Masks must hold for every candidate: 3000 divides none of the RBLOCKs.
    assert "rmask = rindex < 3000" in many["source"]


def test_signature_and_params():
    k = codegen.emit_triton(ROWSUM.format(n=8))["kernels"][0]
    assert k["signature"] == [("in_ptr0", "*fp32"), ("out_ptr0", "*fp32"), ("xnumel", "i32"), ("rnumel", "i32"),
                              ("XBLOCK", "constexpr"), ("RBLOCK", "constexpr")]
    assert [p.get("value") for p in k["params"]] == [None, None, 4, 8]
    assert k["xnumel"] == 4 and k["rnumel"] == 8


def test_pointer_params_say_how_the_kernel_uses_them():
    # The runtime saves exactly the load_store buffers around autotuning's trials: it reads this
    # field, never the parameter's name.
    inplace = """program @p {
  buffer %b0 : f32[4, 8]{8, 1} input 0
  buffer %b1 : f32[4, 8]{8, 1} input 1
  buffer %b2 : f32[4, 8]{8, 1} output 0
  kernel @k0 [i0 < 4, i1 < 8] {
    loop {
      %t0 = load %b0[i0, i1] : f32
      %t1 = load %b1[i0, i1] : f32
      %t2 = add %t0, %t1 : f32
      store %b1[i0, i1] = %t2
      store %b2[i0, i1] = %t2
    }
  }
  return (%b2)
}
"""
    k = codegen.emit_triton(inplace)["kernels"][0]
    uses = [(p["name"], p["use"]) for p in k["params"] if "buffer" in p]
    assert uses == [("in_ptr0", "load"), ("in_out_ptr0", "load_store"), ("out_ptr0", "store")]


def test_printed_form_lists_params_and_configs():
    text = codegen.emit_triton(ROWSUM.format(n=8), printed=True)
    assert text.startswith("# kernel 0: ember_per_sum_")
    assert "#   in_ptr0: *fp32 = %b0\n" in text and "#   config: XBLOCK=" in text


SYMBOLIC_ROWSUM = """
program @f {{
  symbol s0 hint=8
  symbol s1 hint=100{range}
  buffer %b0 : f32[s0, s1]{{s1, 1}} input 0
  buffer %b1 : f32[s0]{{1}} output 0
  kernel @k0 [i0 < s0] {{
    loop [r0 < s1] {{
      %t0 = load %b0[i0, r0] : f32
      %t1 = reduce_sum %t0 : f32
    }}
    loop {{
      store %b1[i0] = %t1
    }}
  }}
  return (%b1)
}}
"""


def test_symbolic_sizes_are_parameters_valid_over_the_ranges():
    # Unbounded s1: a looped reduction (any row length), every extent masked; int32 indexing under guards on
    # the points and the span (both fit at the hints), as Inductor guards its 32-bit indexing.
    k = codegen.emit_triton(SYMBOLIC_ROWSUM.format(range=""))["kernels"][0]
    assert k["kind"] == "looped_reduction"
    sizes = [(p["name"], p["type"], p["value"], p["hint"]) for p in k["params"] if "buffer" not in p]
    # s0 only sizes the rows (xnumel): no parameter of its own; s1 is the body's loop bound.
    assert sizes == [("xnumel", "i32", "s0", 8), ("rnumel", "i32", "s1", 100), ("s1", "i32", "s1", 100)]
    assert k["assumptions"] == ["s0*s1 <= 2147483647"], k["assumptions"]
    assert k["xnumel"] == "s0" and "rmask = rindex < s1" in k["source"] and "range(0, s1, RBLOCK)" in k["source"]
    # Past INT32_MAX at the hints: int64, nothing assumed.
    k = codegen.emit_triton(SYMBOLIC_ROWSUM.format(range="").replace("hint=100", "hint=300000000"))["kernels"][0]
    assert all(p["type"] == "i64" for p in k["params"] if "buffer" not in p) and k["assumptions"] == []
    # Bounded s1 <= 1000: persistent over RBLOCK 1024 (the largest row), int32 indexing.
    k = codegen.emit_triton(SYMBOLIC_ROWSUM.format(range=" range=[2, 1000]").replace("symbol s0 hint=8",
                                                                                     "symbol s0 hint=8 range=[2, 4096]"))["kernels"][0]
    assert k["kind"] == "persistent_reduction"
    assert k["configs"][0]["blocks"]["RBLOCK"] == 1024
    assert all(p["type"] == "i32" for p in k["params"] if "buffer" not in p)
    # One row a program (XBLOCK=1 for rows of >= 256): every x index is a row, no x mask.
    assert k["configs"][0]["blocks"]["XBLOCK"] == 1
    assert "xmask" not in k["source"] and "rmask = rindex < s1" in k["source"]


def test_symbolic_divisor_drops_the_mask():
    # s1 a multiple of 256 (guarded): the looped loop over s1 in RBLOCK=256 chunks needs no rmask.
    text = SYMBOLIC_ROWSUM.format(range=" range=[256, 8192] divisor=256").replace("hint=100", "hint=256")
    k = codegen.emit_triton(text)["kernels"][0]
    assert k["kind"] == "looped_reduction" and k["configs"][0]["blocks"]["RBLOCK"] == 256
    assert "rmask" not in k["source"], k["source"]
