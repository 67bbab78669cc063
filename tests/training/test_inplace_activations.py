"""In-place calls on intermediates in training graphs (passes/functional_writes.cpp): `nn.ReLU(inplace=True)`
after a convolution and BatchNorm, as most CNNs write it, is differentiated ahead of time (a backward graph,
no eager fallback) with eager's gradients and running statistics; a write that something else can see (a graph
input, a view) still makes the graph run eagerly, with eager's results."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ember

pytestmark = pytest.mark.usefixtures("fresh")


def step(fn, model, x):
    model.zero_grad(set_to_none=True)
    loss = fn(x).mean()
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters()}


def check(model, x):
    """Eager and Ember steps on copies -> ember.explain's backend fallbacks; asserts loss, grads and buffers."""
    eager, compiled = copy.deepcopy(model), copy.deepcopy(model)
    want = step(eager, eager, x)
    info = ember.explain(copy.deepcopy(model))(x)
    ember.reset()
    got = step(ember.compile(compiled), compiled, x)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(dict(compiled.named_buffers()), dict(eager.named_buffers()))
    return [f for f in info.backend_fallbacks if f]


def check_grads_of_x_and_w(f, x_shape, backward_graphs):
    """f(x, w) -> a loss, x of x_shape and w 4x4: Ember's gradients equal eager's; `backward_graphs` compiled
    (0: the graph ran eagerly)."""
    def grads(fn):
        torch.manual_seed(0)
        x, w = torch.randn(*x_shape, requires_grad=True), torch.randn(4, 4, requires_grad=True)
        fn(x, w).backward()
        return x.grad, w.grad

    want = grads(f)
    got = grads(ember.compile(f))
    torch.testing.assert_close(got, want)
    assert ember.stats()["backward_graphs_compiled"] == backward_graphs


class ConvBnRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.act, self.act2 = nn.ReLU(inplace=True), nn.Hardswish(inplace=True)

    def forward(self, x):
        y = self.act(self.bn(self.conv(x)))
        return self.act2(y + 1)


def test_inplace_activations_after_conv_bn_differentiate_ahead_of_time():
    x = torch.randn(2, 3, 8, 8)
    assert check(ConvBnRelu().train(), x) == []
    assert ember.stats()["backward_graphs_compiled"] == 1


class AfterLinear(nn.Module):
    """A linear layer, then `then` on its output: the write under test."""

    def __init__(self, then):
        super().__init__()
        self.lin, self.then = nn.Linear(4, 4), then

    def forward(self, x):
        return self.then(self.lin(x))


def test_write_read_through_the_old_name_sees_the_new_value():
    def then(y):
        F.silu(y, inplace=True)  # result dropped: later reads of y see the write
        return y * 2

    assert check(AfterLinear(then), torch.randn(3, 4)) == []


def test_write_that_a_view_can_see_still_runs_eagerly():
    def then(y):
        v = y[:, :2]
        F.relu(y, inplace=True)
        return v * 3 + y.sum()

    fallbacks = check(AfterLinear(then), torch.randn(3, 4))
    assert fallbacks and "in place" in fallbacks[0]


def test_write_of_a_value_that_requires_grad_into_a_view_runs_eagerly():
    """`m.diagonal().copy_(x)` into a fresh tensor: eager's autograd records the write, so x's gradient and
    the gradient through m flow; the joint would drop them, so the graph runs eagerly, with eager's gradients."""
    def f(x, w):
        m = torch.zeros(4, 4)
        m.diagonal().copy_(x)
        return (m @ w).sum() * 2

    check_grads_of_x_and_w(f, (4,), backward_graphs=0)


def test_a_factory_written_through_a_torch_view_is_saved_not_recomputed():
    """`m.diagonal().fill_(3)` into zeros: the backward needs m as written; recomputing the cheap factory would
    give zeros (the partitioner treats results of calls not known to return new tensors as views)."""
    def f(x, w):
        m = torch.zeros(4, 4)
        m.diagonal().fill_(3.0)
        return ((m + x) @ w).sum() * 2

    check_grads_of_x_and_w(f, (4, 4), backward_graphs=1)


def test_inplace_arithmetic_on_intermediates_differentiates_ahead_of_time():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.gate = nn.Linear(4, 4), nn.Linear(4, 4)

        def forward(self, x):
            y = self.lin(x)
            y += self.gate(x)
            y.mul_(torch.sigmoid(x))
            y.sub_(0.5, alpha=2)
            y /= 3
            return y

    assert check(M(), torch.randn(3, 4)) == []
    assert ember.stats()["backward_graphs_compiled"] == 1


def test_inplace_add_on_a_sum_of_branches():
    class M(nn.Module):  # timm's fastvit: a sum() over branch outputs (0 + a + b), then += another branch
        def __init__(self):
            super().__init__()
            self.branches = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

        def forward(self, x):
            y = sum(b(x) for b in self.branches[:2])
            y += self.branches[2](x)
            return F.relu(y, inplace=True)

    assert check(M(), torch.randn(3, 4)) == []


def test_writes_into_a_view_of_a_dead_intermediate_differentiate_ahead_of_time():
    class M(nn.Module):  # timm's GhostNet: cat(...)[:, :k] += shortcut; torchvision's EfficientNet:
        def __init__(self):  # Dropout(inplace=True) on flatten(pool(x))
            super().__init__()
            self.lin, self.lin2, self.drop = nn.Linear(4, 3), nn.Linear(4, 3), nn.Dropout(0.0, inplace=True)

        def forward(self, x):
            y = torch.cat([self.lin(x), self.lin2(x)], 1)[:, :4]
            y += x
            y.mul_(2)
            z = self.drop(y.flatten())
            return z.view(3, 4) * 3

    assert check(M(), torch.randn(3, 4)) == []
    assert ember.stats()["backward_graphs_compiled"] == 1


def test_write_into_a_view_whose_storage_is_read_later_still_runs_eagerly():
    def then(y):
        v = y[:, :2]
        v += 1  # eager's y sees it
        return y * 3

    fallbacks = check(AfterLinear(then), torch.randn(3, 4))
    assert fallbacks and "in place" in fallbacks[0]


def test_write_into_the_values_of_topk():
    def then(y):  # transformers' Mixtral router: topk's values normalized in place
        w, _ = torch.topk(y.softmax(-1), 2, dim=-1)
        w /= w.sum(-1, keepdim=True)
        return w

    assert check(AfterLinear(then), torch.randn(3, 4)) == []
