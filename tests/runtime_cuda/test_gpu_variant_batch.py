"""On a GPU (skipped without one): a symbolic graph builds, with its kernels, the divisibility
classes its sizes take when each symbol is an odd multiple of 1, 2, 4, 8 or 16 (runtime/triton_code.h,
ahead_classes), so sizes that meet only those compile nothing more; a size in any other class builds
that class's cubins for all its kernels in one parallel batch at the first launch that needs one, not
one compile per kernel as each launch reaches its own; results stay eager's. Small kernels: seconds."""
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
    # A layer-norm kernel over rows (xnumel = rows) and a pointwise epilogue (xnumel = rows * 24).
    return torch.relu(F.layer_norm(x, (64,)) @ w) * 2


def test_power_of_two_multiples_are_built_with_the_graph():
    w = torch.randn(64, 24, device="cuda")
    fn = ember.compile(norm_then_epilogue, dynamic=True)
    x = torch.randn(32, 64, device="cuda")
    torch.testing.assert_close(fn(x, w), norm_then_epilogue(x, w), rtol=1e-4, atol=1e-4)
    triton_compile.reset_stats()
    for rows in (33, 34, 36, 40, 48, 80, 7):
        x = torch.randn(rows, 64, device="cuda")
        torch.testing.assert_close(fn(x, w), norm_then_epilogue(x, w), rtol=1e-4, atol=1e-4)
    assert triton_compile.stats()["batches"] == 0, triton_compile.stats()
    assert ember.stats()["graphs"] == 1


def one_more_row_twice(x, w):
    # Two row kernels apart (the matmul between them) over rows + 1: xnumel = s + 1 is a multiple of 16
    # at s = 31, which no odd multiple of a power of two up to 16 (17 << v) gives.
    y = F.layer_norm(torch.cat([x, x[:1]]), (64,)) @ w
    return torch.softmax(y, -1)


def test_a_new_class_is_built_for_every_kernel_in_one_batch():
    w = torch.randn(64, 24, device="cuda")
    fn = ember.compile(one_more_row_twice, dynamic=True)
    x = torch.randn(32, 64, device="cuda")
    torch.testing.assert_close(fn(x, w), one_more_row_twice(x, w), rtol=1e-4, atol=1e-4)
    assert ember.stats()["graphs"] == 1
    triton_compile.reset_stats()
    x = torch.randn(31, 64, device="cuda")
    torch.testing.assert_close(fn(x, w), one_more_row_twice(x, w), rtol=1e-4, atol=1e-4)
    stats = triton_compile.stats()
    assert stats["batches"] == 1 and stats["jobs"] >= 2, stats
    assert ember.stats()["graphs"] == 1
