"""Dynamic shapes on CUDA (skipped without a GPU): symbolic graphs run the Triton backend's symbolic
kernels (docs/dynamic-shapes.md, "Triton") with the same graph counts as on the CPU, results equal to
eager's, sizes of several divisibility classes (multiples of 16 and odd ones) through one graph, and
reduce-overhead refusing CUDA graphs for them with its reason. Small tensors: seconds."""
import pytest
import torch
import torch.nn.functional as F

import ember

import test_dynamic_models  # the CPU file's model and runner, on CUDA

pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


def small_gpt():
    return test_dynamic_models.small_gpt("cuda")


def run(model, cfg, shapes, **compile_kwargs):
    return test_dynamic_models.run(model, cfg, shapes, device="cuda", tolerance=1e-4, **compile_kwargs)


def test_nanogpt_over_sequence_lengths_compiles_twice():
    model, cfg = small_gpt()
    stats = run(model, cfg, [(2, t) for t in (8, 16, 17, 31, 32, 64, 100)])
    assert stats["frames_compiled"] == 2 and stats["backend_errors"] == 0, stats


def test_nanogpt_dynamic_true_compiles_once():
    model, cfg = small_gpt()
    stats = run(model, cfg, [(2, 8), (3, 17), (5, 64), (2, 33)], dynamic=True)
    assert stats["frames_compiled"] == 1 and stats["backend_errors"] == 0, stats


@pytest.mark.parametrize("name, fn, shapes", [
    ("pointwise", lambda a, b: torch.relu(a * b + 1), [((33, 65), (65,)), ((16, 64), (64,)), ((7, 3), (3,))]),
    ("softmax", lambda a: torch.softmax(a, -1), [((8, 100),), ((32, 64),), ((3, 5000),)]),
    ("layer_norm", lambda a: F.layer_norm(a, (100,)), [((8, 100),), ((48, 100),), ((5, 100),)]),
])
def test_symbolic_kernels_over_divisibility_classes(name, fn, shapes):
    compiled = ember.compile(fn, dynamic=True)
    for shape in shapes:
        args = [torch.randn(*s, device="cuda") for s in shape]
        with torch.no_grad():
            torch.testing.assert_close(compiled(*args), fn(*args), rtol=1e-5, atol=1e-5)
    s = ember.stats()
    assert s["frames_compiled"] == 1 and s["codegen_failures"] == 0 and s["backend_errors"] == 0, s


def test_reduce_overhead_refuses_cuda_graphs_for_symbolic_graphs():
    fn = lambda a: torch.softmax(a * 2, -1) + 1  # noqa: E731
    compiled = ember.compile(fn, dynamic=True, mode="reduce-overhead")
    for rows in (8, 9, 16):
        x = torch.randn(rows, 40, device="cuda")
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), fn(x), rtol=1e-5, atol=1e-5)
    s = ember.stats()
    assert s["frames_compiled"] == 1 and s["cuda_graph_records"] == 0, s
