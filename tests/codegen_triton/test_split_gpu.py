"""Split reductions on a GPU (skipped elsewhere; docs/codegen-triton.md, "Split reductions"): long
reductions over few rows run as a partials kernel and a combining kernel, at the Triton target's own
thresholds, and match eager under the fp64-reference rule. A few calls on tensors of 32 MB at most."""
import logging

import pytest
import torch

import ember

pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def close_to_reference(got, expected, reference):
    # Ember's error at most 2x eager's + 1e-6 (partial sums reorder the additions), plus one ulp of the
    # output dtype: both round their result to it, possibly to neighbouring values.
    ulp = torch.finfo(got.dtype).eps * reference.abs().max().item()
    got, expected, reference = (t.double() for t in (got, expected, reference))
    assert (got - reference).abs().max() <= 2 * (expected - reference).abs().max() + 1e-6 + ulp


@pytest.mark.parametrize("name,fn,shape,dtype", [
    ("sum_dim0", lambda t: t.sum(0), (8192, 1024), torch.float32),
    ("sum_all", lambda t: t.sum(), (4096, 2048), torch.float32),
    ("sum_rows_bf16", lambda t: t.sum(-1), (16, 1 << 18), torch.bfloat16),
    ("amax_dim0_keepdim", lambda t: t.amax(0, keepdim=True), (8192, 512), torch.float32),
    ("var_mean_rows", lambda t: torch.var_mean(t, -1), (8, 1 << 20), torch.float32),
])
def test_split_matches_eager(name, fn, shape, dtype, monkeypatch, caplog):
    monkeypatch.setenv("EMBER_LOGS", "schedule")
    caplog.set_level(logging.INFO, logger="ember")
    ember.reset()
    x = (torch.randn(shape, device="cuda") + 1).to(dtype)
    compiled = ember.compile(fn)
    with torch.no_grad():
        for _ in range(2):
            got, expected = compiled(x), fn(x)
    reference = fn(x.double())
    for g, e, r in zip(*(t if isinstance(t, tuple) else (t,) for t in (got, expected, reference))):
        assert g.shape == e.shape and g.dtype == e.dtype
        close_to_reference(g, e, r)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "split k" in text, text
    s = ember.stats()
    assert s["codegen_failures"] == 0 and s["backend_errors"] == 0, s
