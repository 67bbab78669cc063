"""Through ember.compile: repeated blocks of one graph share kernel functions, and a later graph
finds its kernel compiled already (ember.stats()["kernels_reused"]; docs/code-cache.md)."""
import logging

import torch

import ember


def block(x, w):
    return torch.tanh(x @ w) * 2  # an extern matmul, then one kernel


def three_blocks(x, w1, w2, w3):
    return block(block(block(x, w1), w2), w3)


def test_repeated_blocks_share_functions_and_a_later_graph_reuses_them(monkeypatch, caplog):
    monkeypatch.setenv("EMBER_LOGS", "output_code")
    caplog.set_level(logging.INFO, logger="ember")
    ember.reset()
    x, w1, w2, w3 = (torch.randn(23, 23) for _ in range(4))
    with torch.no_grad():
        torch.testing.assert_close(ember.compile(three_blocks)(x, w1, w2, w3), three_blocks(x, w1, w2, w3))
        code = "\n".join(r.getMessage() for r in caplog.records if r.name == "ember.output_code")
        s = ember.stats()
        # Three kernels; the first two (writing temporaries handed to matmul) are one function.
        assert s["kernels_compiled"] == 3, s
        assert code.count('extern "C" void ember_k_') == 2, code
        ember.reset()
        # A graph of one block: its kernel is the last block's (an output, same shapes): reused.
        torch.testing.assert_close(ember.compile(block)(x, w1), block(x, w1))
        s = ember.stats()
    assert s["kernels_compiled"] == 1 and s["kernels_reused"] == 1, s
