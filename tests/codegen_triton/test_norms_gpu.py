"""The memory-bound norms of the GPU benchmark on a GPU (skipped elsewhere; docs/codegen-triton.md,
"Norms at memory bandwidth"): each is one kernel that stores only its output (no bf16 intermediate
written and read back: scheduler.md, "Rounding") and matches eager under the fp64-reference
rule. A few calls on tensors of 16 MB at most."""
import logging
import re

import pytest
import torch
import torch.nn.functional as F

import ember

pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def llama_rms_norm(x, w):
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
    return w * h.to(x.dtype)


CASES = {
    "softmax": (lambda x: torch.softmax(x, -1), [(2048, 1024)], torch.float32),
    "layer_norm_residual": (lambda x, r, w, b: F.layer_norm(x + r, (4096,), w, b),
                            [(1024, 4096), (1024, 4096), (4096,), (4096,)], torch.bfloat16),
    "rms_norm": (lambda x, w: F.rms_norm(x, (4096,), w, eps=1e-6), [(1024, 4096), (4096,)], torch.bfloat16),
    "llama_rms_norm": (llama_rms_norm, [(1024, 4096), (4096,)], torch.bfloat16),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_norm_is_one_kernel_matching_eager(name, monkeypatch, caplog):
    fn, shapes, dtype = CASES[name]
    monkeypatch.setenv("EMBER_LOGS", "output_code")
    caplog.set_level(logging.INFO, logger="ember")
    ember.reset()
    g = torch.Generator(device="cuda").manual_seed(0)
    args = [torch.randn(s, device="cuda", generator=g).to(dtype) for s in shapes]
    compiled = ember.compile(fn)
    with torch.no_grad():
        for _ in range(2):
            got, expected = compiled(*args), fn(*args)
    reference = fn(*(a.double() for a in args))
    ulp = torch.finfo(dtype).eps * reference.abs().max().item()
    err = (got.double() - reference).abs().max().item()
    assert err <= 2 * (expected.double() - reference).abs().max().item() + 1e-6 + ulp, err
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert len(re.findall(r"^# kernel \d+:", text, re.M)) == 1, text
    assert "in_out_ptr" not in text and "out_ptr1" not in text, text  # only the output is stored
    s = ember.stats()
    assert s["codegen_failures"] == 0 and s["backend_errors"] == 0, s


def test_max_min_keep_nan():
    # On the GPU eh.reduce_max/min is one tl.reduce with a NaN-keeping combine (helpers.py); the
    # interpreter runs another form, so only a GPU checks this one.
    ember.reset()
    x = torch.randn(64, 1000, device="cuda")
    x[::3, ::7] = float("nan")

    def fn(t):
        return t.amax(-1), t.amin(-1), torch.softmax(t, -1), (t.nan_to_num() * 10).int().amin(-1)

    got, expected = ember.compile(fn)(x), fn(x)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, equal_nan=True)
