"""mode="reduce-overhead" without a GPU: the option reaches the backend, graphs on the CPU run the
normal compiled graph, and the reason they are not CUDA graphs is visible (explain, EMBER_LOGS)."""
import logging

import pytest
import torch

import ember

# Each compile with the mode warns once per process that CPU graphs get the default code: expected here.
pytestmark = pytest.mark.filterwarnings("ignore:ember.compile\\(mode='(reduce-overhead|max-autotune[a-z-]*)'\\)")


def two_steps(x, y):
    a = (x * y).sum(dim=-1, keepdim=True)
    return torch.relu(x - a) + y


def test_cpu_graphs_run_the_normal_compiled_graph():
    ember.reset()
    f = ember.compile(two_steps, mode="reduce-overhead")
    for step in range(4):
        x, y = torch.randn(4, 8), torch.randn(4, 8)
        torch.testing.assert_close(f(x, y), two_steps(x, y))
    s = ember.stats()
    assert s["kernels_compiled"] >= 1
    assert (s["cuda_graph_records"], s["cuda_graph_replays"]) == (0, 0)


def test_explain_says_why_a_graph_is_not_a_cuda_graph():
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    out = ember.explain(two_steps, mode="reduce-overhead")(x, y)
    assert out.cuda_graph_skips == ["the graph runs on cpu: CUDA graphs need CUDA"]
    assert "Runs without CUDA graphs: the graph runs on cpu" in str(out)
    # Other modes do not ask.
    assert ember.explain(two_steps)(x, y).cuda_graph_skips == [""]


@pytest.mark.parametrize("mode, graphs", [("max-autotune", True), ("max-autotune-no-cudagraphs", False)])
def test_max_autotune_replays_cuda_graphs_as_torch_compiles_does(mode, graphs):
    # torch.compile's modes: "max-autotune" searches configs and replays CUDA graphs, its
    # "-no-cudagraphs" variant only searches (pipeline/target.cpp, driver/backend.cpp).
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    out = ember.explain(two_steps, mode=mode)(x, y)
    assert out.cuda_graph_skips == (["the graph runs on cpu: CUDA graphs need CUDA"] if graphs else [""])


def test_the_reason_is_logged_on_the_fallbacks_channel(monkeypatch, caplog):
    monkeypatch.setenv("EMBER_LOGS", "fallbacks")
    ember.reset()
    with caplog.at_level(logging.INFO, logger="ember"):
        f = ember.compile(two_steps, mode="reduce-overhead")
        f(torch.randn(4, 8), torch.randn(4, 8))
    assert any("runs without CUDA graphs: the graph runs on cpu" in r.getMessage() for r in caplog.records)


def test_the_counters_reset():
    ember.reset()
    assert ember.stats()["cuda_graph_records"] == 0 and ember.stats()["cuda_graph_replays"] == 0
