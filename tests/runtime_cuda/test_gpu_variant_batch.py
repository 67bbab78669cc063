"""On a GPU (skipped without one): a symbolic graph meeting a new divisibility class of its sizes
builds that class's cubins for all its kernels in one parallel batch at the first launch that needs
one (runtime/triton_code.h, "Shape symbols"), not one compile per kernel as each launch reaches its
own; results stay eager's. Two small kernels: seconds."""
import pytest
import torch
import torch.nn.functional as F

import ember

pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

from ember._triton import compile as triton_compile  # noqa: E402


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    ember.reset()
    yield
    ember.reset()


def norm_then_epilogue(x, w):
    # A layer-norm kernel over rows (xnumel = rows) and a pointwise epilogue (xnumel = rows * 24):
    # rows 32 and 33 put both in different classes.
    return torch.relu(F.layer_norm(x, (64,)) @ w) * 2


def test_a_new_class_is_built_for_every_kernel_in_one_batch():
    w = torch.randn(64, 24, device="cuda")
    fn = ember.compile(norm_then_epilogue, dynamic=True)
    x = torch.randn(32, 64, device="cuda")
    torch.testing.assert_close(fn(x, w), norm_then_epilogue(x, w), rtol=1e-4, atol=1e-4)
    assert ember.stats()["graphs"] == 1
    triton_compile.reset_stats()
    x = torch.randn(33, 64, device="cuda")
    torch.testing.assert_close(fn(x, w), norm_then_epilogue(x, w), rtol=1e-4, atol=1e-4)
    stats = triton_compile.stats()
    assert stats["batches"] == 1 and stats["jobs"] >= 2, stats
    assert ember.stats()["graphs"] == 1
