"""add(matmul(x, B), bias) lowered as one torch.nn.functional.linear call (src/lowering/linear.cpp,
docs/lowering.md "Bias adds in the GEMM"), which the CPU target then calls as the torch.addmm torch's linear
makes of it (docs/memory.md): eager's bits for 2-, 3- and 4-d inputs, one GEMM call with the bias, and the
decomposed form kept where the product is used elsewhere."""
import pytest
import torch
import torch.nn.functional as F


def _linear_relu(x, w, b):
    return F.relu(F.linear(x, w, b))


def _product_reused(x, w, b):
    y = x @ w.t()
    return y + b, y * 2.0


@pytest.mark.parametrize("shape", [(5, 12), (2, 7, 12), (2, 3, 4, 12)])
def test_linear_bias_is_one_call_with_eager_bits(shape, compiled_source):
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(*shape, generator=g), torch.randn(9, 12, generator=g), torch.randn(9, generator=g)
    out, source = compiled_source(_linear_relu, x, w, b)
    assert torch.equal(out, _linear_relu(x, w, b))
    assert "torch.addmm" in source and "torch.mm" not in source


def test_a_product_used_twice_keeps_its_bias_kernel(compiled_source):
    g = torch.Generator().manual_seed(1)
    x, w, b = torch.randn(6, 12, generator=g), torch.randn(9, 12, generator=g), torch.randn(9, generator=g)
    out, source = compiled_source(_product_reused, x, w, b)
    for got, want in zip(out, _product_reused(x, w, b)):
        torch.testing.assert_close(got, want)
    assert "torch.nn.functional.linear" not in source and "torch.addmm" not in source
