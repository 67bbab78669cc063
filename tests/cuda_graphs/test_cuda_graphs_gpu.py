"""mode="reduce-overhead" on a GPU (skipped elsewhere): graphs replay as CUDA graphs
(src/runtime/cuda_graph_runner.h) and give eager's results. Cheap: small tensors, a few calls each."""
import pytest
import torch

import ember

pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def graphed(fn):
    return ember.compile(fn, mode="reduce-overhead")


def counts():
    s = ember.stats()
    return s["cuda_graph_records"], s["cuda_graph_replays"]


def two_kernels(x, y):
    # A row softmax, then a column sum: two kernels (one would not be graphed: "one step").
    a = torch.softmax(x, dim=-1) * y
    return a.sum(dim=0) + 1


def test_outputs_equal_eager_as_inputs_change_and_replays_are_counted():
    ember.reset()
    f = graphed(two_kernels)
    for step in range(6):
        x = torch.randn(16, 64, device="cuda")
        y = torch.randn(16, 64, device="cuda")
        torch.testing.assert_close(f(x, y), two_kernels(x, y))
    # Call 1 warms up, call 2 records (and launches), calls 2-6 launch the graph.
    assert counts() == (1, 5)


def test_outputs_kept_by_the_caller_stay_right():
    ember.reset()
    f = graphed(two_kernels)
    kept = []
    for step in range(5):
        x = torch.full((16, 64), float(step), device="cuda")
        y = torch.randn(16, 64, device="cuda")
        kept.append((f(x, y), two_kernels(x, y)))
    for got, want in kept:
        torch.testing.assert_close(got, want)
    assert kept[-1][0].data_ptr() != kept[-2][0].data_ptr()


def test_input_written_in_place_matches_eager():
    def bump(x, y):
        x.add_(y)
        return (x * 2).sum(dim=0) + y.sum(dim=1).sum()

    ember.reset()
    f = graphed(bump)
    for step in range(5):
        x = torch.randn(4, 16, device="cuda")
        y = torch.randn(4, 16, device="cuda")
        xe = x.clone()
        want = bump(xe, y)
        torch.testing.assert_close(f(x, y), want)
        torch.testing.assert_close(x, xe)


def test_a_model_with_a_matmul_inside():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.LayerNorm(128),
                                torch.nn.Linear(128, 32)).cuda().eval()
    ember.reset()
    compiled = ember.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        for step in range(5):
            x = torch.randn(8, 64, device="cuda")
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    records, replays = counts()
    assert records >= 1 and replays >= 3


def test_a_new_address_for_an_in_place_input_records_again():
    ember.reset()
    f = graphed(two_kernels)
    w = torch.randn(16, 64, device="cuda")
    for step in range(3):  # w keeps its address: it is read in place
        x = torch.randn(16, 64, device="cuda")
        torch.testing.assert_close(f(x, w), two_kernels(x, w))
    assert counts()[0] == 1
    w2 = torch.randn(16, 64, device="cuda")
    for step in range(3):
        x = torch.randn(16, 64, device="cuda")
        torch.testing.assert_close(f(x, w2), two_kernels(x, w2))
    assert counts()[0] == 2


def test_replays_on_a_side_stream():
    ember.reset()
    f = graphed(two_kernels)
    side = torch.cuda.Stream()
    results = []
    for step in range(4):
        x = torch.randn(16, 64, device="cuda")
        y = torch.randn(16, 64, device="cuda")
        stream = side if step % 2 else torch.cuda.current_stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            results.append((f(x, y), two_kernels(x, y)))
    torch.cuda.synchronize()
    for got, want in results:
        torch.testing.assert_close(got, want)


def test_one_kernel_graphs_run_plainly_and_say_why():
    def one(x):
        return x * 2 + 1

    out = ember.explain(one, mode="reduce-overhead")(torch.randn(8, device="cuda"))
    assert "one step" in out.cuda_graph_skips[0]
    ember.reset()
    f = graphed(one)
    for step in range(3):
        x = torch.randn(8, device="cuda")
        torch.testing.assert_close(f(x), one(x))
    assert counts() == (0, 0)


@pytest.mark.parametrize("mode, records", [("max-autotune", 1), ("max-autotune-no-cudagraphs", 0)])
def test_max_autotune_replays_its_tuned_kernels_as_cuda_graphs(mode, records, tmp_path, monkeypatch):
    # As torch.compile's modes: the first call tunes (outside any capture), the second records.
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    ember.reset()
    f = ember.compile(two_kernels, mode=mode)
    for step in range(4):
        x = torch.randn(16, 64, device="cuda")
        y = torch.randn(16, 64, device="cuda")
        torch.testing.assert_close(f(x, y), two_kernels(x, y))
    assert counts() == ((1, 3) if records else (0, 0))
