"""In-place writes on intermediates in inference graphs (src/passes/functional_writes.cpp, docs/lowering.md
"In-place ops"): a write nothing else can see becomes a functional op that fuses (no torch call left); a write
another name can see (a view taken before it) or a write to an input stays a write; a view taken after the last write
aliases the written value. Each case is
compared with eager, with its kernel count and the torch calls lowering kept (EMBER_LOGS=schedule)."""
import inspect
import logging
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ember


@pytest.fixture
def compiled(monkeypatch, caplog):
    """compiled(fn, *args) -> (outputs, kernel count, callables of the extern calls lowering kept), after
    checking outputs and mutated arguments against eager on copies."""
    def run(fn, *args):
        monkeypatch.setenv("EMBER_LOGS", "schedule")
        caplog.set_level(logging.INFO, logger="ember")
        caplog.clear()
        ember.reset()
        eager_args = [a.clone() for a in args]
        with torch.no_grad():
            want = fn(*eager_args)
            got = ember.compile(fn)(*args)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(list(args), eager_args)  # inputs written as eager writes them
        text = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("ember"))
        kernels = sum(int(k) for k in re.findall(r"\((\d+) kernels\)", text))
        externs = re.findall(r"^extern: %\d+ (\S+):", text, re.M)
        ember.reset()
        return got, kernels, externs
    return run


def x_():
    return torch.randn(4, 8, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("name", ["method", "flag", "operator"])
def test_write_on_an_intermediate_is_one_kernel(compiled, name):
    def f(x):
        y = x * 2
        if name == "method":
            y.sigmoid_()
        elif name == "flag":
            F.hardswish(y, inplace=True)  # result dropped: the read below sees the write
        else:
            y += x
        return y - 1

    _, kernels, externs = compiled(f, x_())
    assert (kernels, externs) == (1, [])


def test_chained_writes_through_results_and_the_old_name(compiled):
    def f(x):
        y = x * 2
        F.relu(y, inplace=True)
        y.mul_(3).add_(x)
        y /= 2
        return y

    _, kernels, externs = compiled(f, x_())
    assert (kernels, externs) == (1, [])


def test_written_intermediate_also_returned_with_a_read_before_the_write(compiled):
    def f(x):
        y = x * 2
        before = y + 1
        z = y.tanh_()
        return y, before, z * 2

    _, kernels, externs = compiled(f, x_())
    assert externs == [] and kernels <= 2


def test_write_through_a_view_stays_a_write(compiled):
    def f(x):
        y = x * 2
        y[1:3].relu_()
        return y + 1

    _, _, externs = compiled(f, x_())
    assert "torch.Tensor.relu_" in externs


def test_view_taken_before_the_write_and_read_after_sees_it(compiled):
    def f(x):
        y = x * 2
        v = y.view(32)
        y.relu_()
        return v * 3

    _, _, externs = compiled(f, x_())
    assert "torch.Tensor.relu_" in externs


def test_view_taken_after_the_last_write_aliases_the_written_value(compiled):
    def f(x):
        y = x * 2
        F.hardswish(y, inplace=True)  # nn.Hardswish(inplace=True) then flatten: timm's MobileNetV3 head
        return y.flatten(), y.view(2, 16) * 3

    _, _, externs = compiled(f, x_())
    assert externs == []


def test_view_after_the_last_write_keeps_a_training_graph_differentiable():
    def f(x):
        y = x * 2
        F.hardswish(y, inplace=True)
        return y.flatten(1)

    ember.reset()
    x, x_eager = x_().requires_grad_(), x_().requires_grad_()
    ember.compile(f)(x).sum().backward()
    f(x_eager).sum().backward()
    torch.testing.assert_close(x.grad, x_eager.grad)
    s = ember.stats()
    ember.reset()
    assert (s["graphs"], s["backward_graphs_compiled"], s["autograd_islands"]) == (1, 1, 0)


def test_write_with_another_dtype_stays_a_write(compiled):
    def f(x, n):
        y = x * 2
        y.add_(n)  # an int64 operand: out of place would promote
        return y.relu()

    _, _, externs = compiled(f, x_(), torch.arange(8))
    assert "torch.Tensor.add_" in externs


def test_write_to_an_input_still_writes_the_input(compiled):
    def f(x):
        x.mul_(2)
        return x + 1

    _, _, externs = compiled(f, x_())  # `compiled` checks x against eager's written copy
    assert "torch.Tensor.mul_" not in externs  # lowered as a kernel storing into x (in_place.cpp)


class Block(nn.Module):
    """torchvision's BasicBlock: conv -> BN -> ReLU(inplace) -> conv -> BN -> `out += identity` -> ReLU(inplace)."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4)
        self.conv2, self.bn2 = nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x
        return self.relu(out)


def test_residual_block_epilogue_is_one_kernel_after_each_conv(compiled):
    torch.manual_seed(0)
    block = Block().eval()
    for bn in (block.bn1, block.bn2):  # statistics that are not the identity
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
    _, kernels, externs = compiled(block, torch.randn(2, 4, 8, 8))
    assert externs == ["torch.conv2d", "torch.conv2d"]
    # one kernel after each conv, and the channels_last step's copies of the input and the two 3x3 weights
    assert kernels == 2 + 3


def _inplace_functionals():
    """torch.nn.functional's functions with an `inplace` parameter, as this torch has them."""
    out = []
    for name in sorted(dir(F)):
        fn = getattr(F, name)
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            continue
        if "inplace" in params and not name.startswith("_"):
            out.append(name)
    return out


@pytest.mark.parametrize("name", _inplace_functionals())
def test_inplace_flag_passed_by_position_in_a_training_graph(name):
    """`F.celu(x, 1.0, True)`: the flag by position (as torch's own modules pass it) is a write like
    `inplace=True`; the step's result and gradients are eager's, whether Ember differentiates or breaks."""
    fn = getattr(F, name)
    params = list(inspect.signature(fn).parameters.values())[1:]
    chosen = {"threshold": 0.1, "value": -1.0, "p": 0.0, "inplace": True}
    args = [chosen.get(p.name, p.default) for p in params]
    shape = {"dropout1d": (2, 3, 4), "dropout3d": (2, 3, 2, 2, 2)}.get(name, (2, 3, 4, 4))

    def f(x, w):
        y = x * w
        fn(y, *args)
        return y.flatten(1) * 2

    def run(call):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
        w = torch.full((), 1.5, requires_grad=True)
        out = call(x, w)
        out.sum().backward()
        return out.detach(), w.grad

    ember.reset()
    want = run(f)
    got = run(ember.compile(f))
    ember.reset()
    torch.testing.assert_close(got, want)
