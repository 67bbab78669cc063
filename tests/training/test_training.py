"""Training graphs end to end (docs/autograd.md): compiled forward + backward against eager autograd —
gradients, loss curves, dropout masks, module state, counters, and the fallbacks and errors users meet."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ember
from ember.bench.train import saved_activation_bytes
from ember.models.nanogpt import GPT, GPTConfig, random_tokens
from ember.testing import DEVICE


pytestmark = pytest.mark.usefixtures("fresh")


def grads(model):
    return {n: p.grad for n, p in model.named_parameters()}


def assert_grads_close(got, want, **tol):
    assert set(got) == set(want)
    for name in want:
        if want[name] is None:
            assert got[name] is None, name
            continue
        torch.testing.assert_close(got[name], want[name], msg=lambda m: f"{name}: {m}", **tol)


def step(fn, model, *args, seed=0):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    out = fn(*args)
    loss = out[1] if isinstance(out, tuple) else out.square().mean()
    loss.backward()
    return loss.detach()


def test_mlp_gradients_and_counters():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 4))
    twin = copy.deepcopy(model)
    x = torch.randn(16, 8)
    want = step(model, model, x)
    got = step(ember.compile(twin), twin, x)
    torch.testing.assert_close(got, want)
    assert_grads_close(grads(twin), grads(model))
    s = ember.stats()
    assert s["backward_graphs_compiled"] == 1 and s["autograd_islands"] == 0 and s["kernels_compiled"] > 0
    assert s["eager_frames"] == 0


def test_input_gradients_and_unused_inputs():
    def f(x, w, unused):
        return (torch.tanh(x @ w) * 2).sum(-1), unused.shape[0]

    x = torch.randn(5, 3, requires_grad=True)
    w = torch.randn(3, 4, requires_grad=True)
    unused = torch.randn(2, requires_grad=True)
    out, n = f(x, w, unused)
    out.sum().backward()
    want = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    out2, n2 = ember.compile(f)(x, w, unused)
    out2.sum().backward()
    torch.testing.assert_close((x.grad, w.grad), want)
    assert unused.grad is None and n2 == n
    assert ember.stats()["backward_graphs_compiled"] == 1


def test_nanogpt_loss_curve_matches_eager():
    """Twenty SGD steps of a small nanoGPT: the loss curve and the final weights follow eager's."""
    cfg = GPTConfig(block_size=16, vocab_size=64, n_layer=2, n_head=2, n_embd=32)
    torch.manual_seed(0)
    model = GPT(cfg)
    twin = copy.deepcopy(model)
    compiled = ember.compile(twin)
    x, y = random_tokens(cfg, 2, 16, seed=1, device=DEVICE), random_tokens(cfg, 2, 16, seed=2, device=DEVICE)
    opt_a = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_b = torch.optim.SGD(twin.parameters(), lr=0.1)
    curve_a, curve_b = [], []
    for _ in range(20):
        curve_a.append(step(model, model, x, y).item())
        opt_a.step()
        curve_b.append(step(compiled, twin, x, y).item())
        opt_b.step()
    assert curve_a[-1] < curve_a[0]
    torch.testing.assert_close(torch.tensor(curve_b), torch.tensor(curve_a), rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")
    s = ember.stats()
    assert s["backward_graphs_compiled"] == 1 and s["recompiles"] == 0


def test_dropout_masks_are_eagers():
    """Under fallback_random dropout draws eager's numbers (aten's native_dropout); by default it draws
    Philox streams of its own (tests/training/test_dropout.py)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 4))
    twin = copy.deepcopy(model)
    x = torch.randn(16, 8)
    compiled = ember.compile(twin, options={"fallback_random": True})
    for seed in (5, 6):
        want = step(model, model, x, seed=seed)
        got = step(compiled, twin, x, seed=seed)
        torch.testing.assert_close(got, want)
        assert_grads_close(grads(twin), grads(model))
    assert ember.stats()["backward_graphs_compiled"] == 1


def test_grad_mode_switches_graphs_once():
    model = nn.Linear(4, 4)
    compiled = ember.compile(model)
    x = torch.randn(3, 4)
    compiled(x).sum().backward()
    with torch.no_grad():
        out = compiled(x)
    assert not out.requires_grad
    compiled(x).sum().backward()
    with torch.no_grad():
        compiled(x)
    s = ember.stats()
    assert s["backward_graphs_compiled"] == 1
    assert s["frames_compiled"] + s["recompiles"] <= 3  # a training graph and an inference graph


def test_batch_norm_training_updates_running_stats():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU())
    twin = copy.deepcopy(model)
    x = torch.randn(4, 3, 8, 8)
    compiled = ember.compile(twin)
    for _ in range(2):
        want = step(model, model, x)
        got = step(compiled, twin, x)
        torch.testing.assert_close(got, want)
    assert_grads_close(grads(twin), grads(model), rtol=1e-4, atol=1e-5)
    for key, value in model.state_dict().items():
        torch.testing.assert_close(twin.state_dict()[key], value, rtol=1e-5, atol=1e-6, msg=lambda m: f"{key}: {m}")


def test_ops_without_a_rule_are_islands():
    def f(x):
        return torch.cumsum(x * 2, dim=0).sin()

    x = torch.randn(6, 3, requires_grad=True)
    f(x).sum().backward()
    want = x.grad.clone()
    x.grad = None
    ember.compile(f)(x).sum().backward()
    torch.testing.assert_close(x.grad, want)
    s = ember.stats()
    assert s["backward_graphs_compiled"] == 1 and s["autograd_islands"] == 1
    ember.reset()
    out = ember.explain(f)(x)
    assert out.training == [True] and out.autograd_islands == [["torch.cumsum"]]
    assert "torch.cumsum" in str(out)


def test_in_place_write_of_a_grad_tensor_runs_eagerly_with_the_reason():
    def f(x):  # a view sees the write (one nothing else sees is made out of place: test_inplace_activations.py)
        y = x * 2
        v = y[1:]
        y.add_(1)
        return y.exp() + v.sum()

    x = torch.randn(4, requires_grad=True)
    f(x).sum().backward()
    want = x.grad.clone()
    x.grad = None
    out = ember.explain(f)(x)
    assert any("in place" in r for r in out.backend_fallbacks if r)
    ember.reset()
    ember.compile(f)(x).sum().backward()
    torch.testing.assert_close(x.grad, want)


def test_double_backward_raises_a_clear_error():
    x = torch.randn(4, requires_grad=True)
    y = ember.compile(lambda t: (t.sin() * t).sum())(x)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(y, x, create_graph=True)


def test_backward_after_reset_still_runs():
    model = nn.Linear(4, 2)
    x = torch.randn(3, 4)
    loss = ember.compile(model)(x).sum()
    ember.reset()
    loss.backward()
    assert model.weight.grad is not None


def test_saved_input_modified_in_place_raises_as_eager():
    w = torch.randn(4, 4, requires_grad=True)
    x = torch.randn(3, 4)
    y = ember.compile(lambda a, b: (a @ b).sum())(x, w)
    with torch.no_grad():
        x.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def small_gpt():
    """A 2-layer nanoGPT (d=64) and a batch of token ids and targets on the test device."""
    cfg = GPTConfig(block_size=32, vocab_size=64, n_layer=2, n_head=4, n_embd=64)
    torch.manual_seed(0)
    return GPT(cfg), random_tokens(cfg, 2, 32, seed=1, device=DEVICE), random_tokens(cfg, 2, 32, seed=2, device=DEVICE)


def test_backward_inside_a_compiled_function_is_a_graph_break():
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    twin = copy.deepcopy(model)
    x = torch.randn(3, 4)

    def train_step(m, x):
        loss = m(x).square().mean()
        loss.backward()
        return loss.detach() * 2

    want = train_step(model, x)
    out = ember.explain(train_step)(copy.deepcopy(twin), x)
    assert [r.reason for r in out.break_reasons] == ["Tensor.backward() runs torch's autograd engine on the real tensors"]
    got = ember.compile(train_step)(twin, x)
    torch.testing.assert_close(got, want)
    assert_grads_close(grads(twin), grads(model))


def test_activation_memory_budget_trades_saved_bytes_for_recomputation():
    model, x, y = small_gpt()
    want = step(model, model, x, y)
    want_grads = {n: g.clone() for n, g in grads(model).items()}
    saved = {}
    for budget in (1.0, 0.0):
        ember.reset()
        compiled = ember.compile(model, options={"activation_memory_budget": budget})
        saved[budget] = saved_activation_bytes(compiled, x, y)[0]
        got = step(compiled, model, x, y)
        torch.testing.assert_close(got, want)
        assert_grads_close(grads(model), want_grads, rtol=1e-4, atol=1e-5)
    assert saved[0.0] < saved[1.0]
    with pytest.raises(ValueError, match="activation_memory_budget"):
        ember.compile(model, options={"activation_memory_budget": 2})


def test_transpose_attributes_have_rules_and_unnamed_calls_stay_eager():
    def f(x, w):
        return (x.mT @ w).relu().sum() + (x.T * 2).sum()

    x = torch.randn(4, 3, requires_grad=True)
    w = torch.randn(4, 5, requires_grad=True)
    f(x, w).backward()
    want = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    out = ember.explain(f)(x, w)
    assert out.training == [True] and out.autograd_islands == [[]]
    ember.reset()
    ember.compile(f)(x, w).backward()
    torch.testing.assert_close((x.grad, w.grad), want)


def test_saved_extern_results_laid_out_otherwise_than_their_meta_kernel_said():
    # Eager's 2.0 ** x.t() is dense although the meta kernel says transposed; the backward reads it saved.
    x = torch.randn(3, 4, requires_grad=True, dtype=torch.float64)
    f = lambda t: 2.0 ** t.t()  # noqa: E731
    f(x).sum().backward()
    want = x.grad.clone()
    x.grad = None
    ember.compile(f)(x).sum().backward()
    torch.testing.assert_close(x.grad, want)
