"""A compiled graph's memory over extern calls stays near eager's (issue 12's GPT-2 peak memory).

Extern results (matmul outputs) are torch tensors the runtime drops after their last reader, and
temporaries passed to a matmul die there (ir::returns_new_tensors): a chain of layers needs a few
activations at a time, as in eager, not one per layer. Measured as the process's resident-set peak
(ember.bench.memory) around one call, with activations of 8 MiB so that glibc maps and unmaps each.
"""
import pytest
import torch

import ember
from ember.bench import memory

ROWS, FEATURES, LAYERS = 2048, 1024, 8


def chain(x, ws):
    for w in ws:
        x = torch.relu(torch.mm(x, w)) * 0.5
    return x


def test_chain_of_matmuls_peaks_near_eager():
    torch.manual_seed(0)
    x = torch.randn(ROWS, FEATURES)
    ws = [torch.randn(FEATURES, FEATURES) / FEATURES ** 0.5 for _ in range(LAYERS)]
    compiled = ember.compile(chain)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, ws), chain(x, ws))
        eager = memory.peak_delta(lambda: chain(x, ws), 1)
        if eager["method"] != "VmHWM - VmRSS":
            pytest.skip("needs Linux's resettable resident-set peak (VmHWM)")
        eager = eager["bytes"]
        ember_peak = memory.peak_delta(lambda: compiled(x, ws), 1)["bytes"]
    activation = ROWS * FEATURES * 4
    # Eager holds about three activations at once; holding one per layer would be 2 * LAYERS.
    assert ember_peak <= eager + 2 * activation, (ember_peak / activation, eager / activation)
