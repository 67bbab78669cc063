"""torch._assert and torch._check*: traced, not graph breaks (issue 15). A condition the guards fix
(shapes, flags, Python values) is checked at trace time and a false one raises what eager raises; a
tensor condition of torch._assert is checked by the graph when it runs. The modules below follow the
patterns of timm's norm-act layers and patch embeddings (written here, not copied)."""
import pytest
import torch
import torch.nn as nn

import ember


@pytest.fixture(autouse=True)
def _fresh():
    ember.reset()
    yield
    ember.reset()


class NormAct(nn.Module):
    """BatchNorm + activation that asserts its input's channel count first."""

    def __init__(self, channels):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        torch._assert(x.ndim == 4, f"expected 4D input (got {x.ndim}D input)")
        torch._assert(x.shape[1] == self.bn.num_features, "channels do not match")
        return self.act(self.bn(x))


class PatchEmbed(nn.Module):
    """Conv patch embedding that asserts the image size it was built for."""

    def __init__(self, img_size=16, patch=4, dim=8):
        super().__init__()
        self.img_size = (img_size, img_size)
        self.proj = nn.Conv2d(3, dim, patch, stride=patch)

    def forward(self, x):
        B, C, H, W = x.shape
        torch._assert(H == self.img_size[0], f"Input height ({H}) doesn't match model ({self.img_size[0]}).")
        torch._assert(W == self.img_size[1], f"Input width ({W}) doesn't match model ({self.img_size[1]}).")
        return self.proj(x).flatten(2).transpose(1, 2)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = PatchEmbed()
        self.norm = NormAct(8)

    def forward(self, x):
        y = self.embed(x)
        B, N, C = y.shape
        return self.norm(y.transpose(1, 2).reshape(B, C, 4, 4))


def _counts(fn, *args):
    out = ember.explain(fn)(*args)
    return out.graph_count, out.graph_break_count, [r.reason for r in out.break_reasons]


@pytest.mark.parametrize("backend", ["eager", "ember"])
def test_shape_asserts_capture_whole(backend):
    torch.manual_seed(0)
    model = Net().eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        expected = model(x)
        assert _counts(model, x)[:2] == (1, 0)
        ember.reset()
        compiled = ember.compile(model, backend=backend, fullgraph=True)
        torch.testing.assert_close(compiled(x), expected)
        torch.testing.assert_close(compiled(x), expected)
    assert ember.stats()["frames_compiled"] == 1


def _raises_as_eager(fn, *args):
    with pytest.raises(Exception) as eager:
        fn(*args)
    ember.reset()
    with pytest.raises(Exception) as compiled:
        ember.compile(fn)(*args)
    assert type(compiled.value) is type(eager.value)
    assert str(compiled.value) == str(eager.value)
    return compiled.value


def test_a_false_shape_assert_raises_what_eager_raises():
    model = Net().eval()
    with torch.no_grad():
        e = _raises_as_eager(model, torch.randn(2, 3, 12, 16))
    assert isinstance(e, AssertionError) and "Input height (12)" in str(e)


def test_a_false_shape_assert_in_a_later_call_traces_again():
    model = NormAct(4).eval()
    compiled = ember.compile(model)
    with torch.no_grad():
        compiled(torch.randn(1, 4, 2, 2))
        with pytest.raises(AssertionError, match="channels do not match"):
            compiled(torch.randn(1, 3, 2, 2))


def checks(x, n):
    torch._check(x.shape[0] == n, lambda: f"expected {n} rows")
    torch._check_index(n > 0, lambda: "n must be positive")
    torch._check_value(x.dim() == 2)
    torch._check_type(x.is_floating_point(), lambda: "floating input")
    torch._check_not_implemented(x.shape[1] < 100, lambda: "too wide")
    torch._check_with(AssertionError, x.shape[1] != 7, lambda: f"{x.shape[1]} columns")
    return x * n


def test_checks_capture_whole():
    x = torch.randn(3, 4)
    assert _counts(checks, x, 3)[:2] == (1, 0)
    ember.reset()
    torch.testing.assert_close(ember.compile(checks, fullgraph=True)(x, 3), checks(x, 3))


@pytest.mark.parametrize("args, error", [
    ((torch.randn(3, 4), 2), RuntimeError),         # torch._check, with its message
    ((torch.randn(0, 4), 0), IndexError),           # _check_index
    ((torch.randn(3, 4, 1), 3), ValueError),        # _check_value: torch's default message
    ((torch.randint(0, 2, (3, 4)), 3), TypeError),  # _check_type
    ((torch.randn(3, 200), 3), NotImplementedError),
    ((torch.randn(3, 7), 3), AssertionError),       # _check_with: the class is its first argument
])
def test_a_false_check_raises_what_eager_raises(args, error):
    e = _raises_as_eager(checks, *args)
    assert type(e) is error


def check_a_tensor(x):
    torch._check(x > 0)  # eager: TypeError, a tensor is not a bool
    return x


def test_check_of_a_tensor_raises_what_eager_raises():
    assert type(_raises_as_eager(check_a_tensor, torch.ones(2))) is TypeError


def check_keywords(x):
    torch._check(cond=x.shape[0] == 2, message=lambda: "two rows")
    torch._assert(condition=x.shape[1] == 3, message="three columns")
    torch._check_with(cond=x.dim() == 2, message=lambda: "a matrix", error_type=ValueError)
    return x + 1


def test_checks_with_keyword_arguments():
    x = torch.randn(2, 3)
    assert _counts(check_keywords, x)[:2] == (1, 0)
    _raises_as_eager(check_keywords, torch.randn(2, 4))


def assert_positive(x):
    y = x * 2
    torch._assert((y > 0).all(), "all positive")
    return y + 1


@pytest.mark.parametrize("backend", ["eager", "ember"])
def test_a_tensor_assert_is_checked_when_the_graph_runs(backend):
    assert _counts(assert_positive, torch.ones(3))[:2] == (1, 0)
    ember.reset()
    compiled = ember.compile(assert_positive, backend=backend, fullgraph=True)
    torch.testing.assert_close(compiled(torch.ones(3)), assert_positive(torch.ones(3)))
    bad = torch.tensor([1.0, -1.0, 2.0])
    with pytest.raises(AssertionError, match="all positive"):
        assert_positive(bad)
    with pytest.raises(AssertionError, match="all positive"):
        compiled(bad)
    assert ember.stats()["frames_compiled"] == 1


class Reason:
    """A message that is neither a literal nor a tensor: a graph node cannot take it."""


REASON = Reason()


def assert_with_an_object_message(x):
    torch._assert((x > 0).all(), REASON)
    return x + 1


def test_a_tensor_assert_whose_message_cannot_be_a_graph_argument_breaks():
    graphs, breaks, reasons = _counts(assert_with_an_object_message, torch.ones(3))
    assert breaks == 1 and "cannot be passed to a graph op" in reasons[0]
    torch.testing.assert_close(ember.compile(assert_with_an_object_message)(torch.ones(3)), torch.ones(3) + 1)
    with pytest.raises(AssertionError) as e:
        ember.compile(assert_with_an_object_message)(-torch.ones(3))
    assert e.value.args == (REASON,)
