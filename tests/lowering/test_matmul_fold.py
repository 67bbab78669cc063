"""Matmuls of a [B, M, K] operand fold their batch dims into one torch.mm (docs/lowering.md, fold_matmul_batch_dims);
a result the program returns comes back as eager's matmul returns it: the same values, not a view, and writable in
place under autograd (a view made inside the compiled forward would make autograd refuse the write)."""
import torch

import ember


def project(x, w, v):
    h = x @ w
    return h, torch.relu(x @ v)


def test_a_returned_product_is_not_a_view_and_matches_eager():
    torch.manual_seed(0)
    x, w, v = torch.randn(2, 3, 4), torch.randn(4, 5), torch.randn(4, 6)
    f = ember.compile(project)
    with torch.no_grad():
        got = f(x, w, v)
    want = project(x, w, v)
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)
    assert got[0]._base is None and want[0]._base is None
    assert got[0].is_contiguous() and got[0].shape == (2, 3, 5)


def test_a_returned_product_of_a_training_graph_takes_in_place_writes():
    torch.manual_seed(1)
    lin = torch.nn.Linear(8, 16, bias=False)
    twin = torch.nn.Linear(8, 16, bias=False)
    twin.load_state_dict(lin.state_dict())
    x = torch.randn(2, 5, 8)
    out = ember.compile(lin)(x)
    ref = twin(x)
    assert out._base is None and ember.stats()["backward_graphs_compiled"] >= 1
    out.mul_(2)  # eager allows it: matmul's result is no view
    ref.mul_(2)
    out.square().sum().backward()
    ref.square().sum().backward()
    torch.testing.assert_close(lin.weight.grad, twin.weight.grad)


def project_time_major(x, w):
    # [B=1, T, C] -> [T, 1, C] (wav2vec2 / WavLM attention): the size-1 dim's stride is T*C, so torch.matmul does
    # not fold and runs bmm over T views of w; size-1 dims walk no memory, and Ember folds it into one mm.
    return torch.relu(x.transpose(0, 1) @ w)


def test_a_size_one_dim_with_any_stride_folds(monkeypatch, caplog):
    import logging
    torch.manual_seed(2)
    x, w = torch.randn(1, 7, 4), torch.randn(4, 5)
    ember.reset()
    monkeypatch.setenv("EMBER_LOGS", "schedule")
    caplog.set_level(logging.INFO, logger="ember")
    with torch.no_grad():
        got = ember.compile(project_time_major)(x, w)
    torch.testing.assert_close(got, project_time_major(x, w))
    schedule = "\n".join(r.getMessage() for r in caplog.records)
    assert 'extern () = "torch.mm"' in schedule and '"torch.matmul"' not in schedule, schedule
