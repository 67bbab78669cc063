"""ember.stats() and ember.reset(): the counters the issue names, and what reset forgets."""
import torch

import ember

KEYS = ("frames_compiled", "cache_hits", "recompiles", "graph_breaks", "eager_frames", "graphs", "ops_captured",
        "kernels_compiled", "codegen_failures", "backend_errors", "cuda_graph_records",
        "cuda_graph_replays", "aliased_input_calls")


def f(x):
    return (x + 1).relu() * 2


def test_keys_present_and_zero_after_reset():
    s = ember.stats()
    for key in KEYS:
        assert key in s, key
        assert s[key] == 0, (key, s[key])


def test_stats_returns_a_copy():
    s = ember.stats()
    s["frames_compiled"] = 99
    assert ember.stats()["frames_compiled"] == 0


def test_counters_after_compile_and_hits():
    g = ember.compile(f)
    x = torch.randn(3)
    for _ in range(4):
        g(x)
    s = ember.stats()
    assert s["frames_compiled"] == 1
    assert s["cache_hits"] == 3
    assert s["recompiles"] == 0
    assert s["eager_frames"] == 0
    assert s["graph_breaks"] == 0
    assert s["graphs"] == 1
    assert s["ops_captured"] >= 3


def test_reset_zeroes_counters_and_forgets_compiled_frames():
    g = ember.compile(f)
    x = torch.randn(3)
    g(x)
    g(x)
    ember.reset()
    assert all(ember.stats()[k] == 0 for k in KEYS)
    torch.testing.assert_close(g(x), f(x))
    s = ember.stats()
    assert s["frames_compiled"] == 1 and s["cache_hits"] == 0 and s["recompiles"] == 0


def test_reset_forgets_cache_limit():
    import warnings
    g = ember.compile(f, options={"cache_limit": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g(torch.randn(2))
        g(torch.randn(3))
    ember.reset()
    g(torch.randn(4))
    assert ember.stats()["frames_compiled"] == 1


def test_eager_frames_counted():
    class Holder:
        attr = 1

    def h(x, obj):
        del obj.attr  # a frame cannot be split at DELETE_ATTR: it runs eagerly
        return x

    g = ember.compile(h)
    holder = Holder()
    holder.attr = 2
    g(torch.randn(2), holder)
    assert ember.stats()["eager_frames"] >= 1
    assert ember.stats()["frames_compiled"] == 0


def test_graph_breaks_counted():
    def h(x):
        print("ember api test", end="")
        return x + 1

    g = ember.compile(h)
    g(torch.randn(2))
    g(torch.randn(2))
    s = ember.stats()
    assert s["graph_breaks"] == 1 and s["frames_compiled"] == 2 and s["eager_frames"] == 0
