"""Exceptions raised in user code propagate unchanged through compiled callables, with the user's
line in the traceback; a compiled callable stays usable after an exception."""
import traceback

import pytest
import torch
import torch.nn as nn

import ember

from . import user_code


def _line_of(marker, path=__file__):
    for i, text in enumerate(open(path), start=1):
        if text.rstrip().endswith(marker):
            return i
    raise AssertionError(marker)


def _frames(exc):
    return [(f.filename, f.lineno) for f in traceback.extract_tb(exc.__traceback__)]


class RaisesInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        if x.shape[0] > 3:
            raise ValueError(f"batch too large: {x.shape[0]}")  # raise-in-forward
        return y


@pytest.mark.parametrize("backend", ["ember", "eager"])
def test_value_error_in_forward_propagates(backend):
    m = RaisesInForward()
    cm = ember.compile(m, backend=backend)
    x = torch.randn(2, 4)
    torch.testing.assert_close(cm(x), m(x))
    with pytest.raises(ValueError) as info:
        cm(torch.randn(5, 4))
    assert type(info.value) is ValueError
    assert str(info.value) == "batch too large: 5"
    assert (__file__, _line_of("# raise-in-forward")) in _frames(info.value)
    torch.testing.assert_close(cm(x), m(x))


def helper_raises(t):
    if t.dim() != 2:
        raise TypeError("need a matrix")  # raise-in-helper
    return t.t()


def calls_helper(x):
    return helper_raises(x * 2) + 1


@pytest.mark.parametrize("backend", ["ember", "eager"])
def test_error_in_inlined_helper_propagates(backend):
    f = ember.compile(calls_helper, backend=backend)
    torch.testing.assert_close(f(torch.ones(2, 3)), torch.ones(2, 3).mul(2).t() + 1)
    with pytest.raises(TypeError, match="need a matrix") as info:
        f(torch.ones(3))
    assert (__file__, _line_of("# raise-in-helper")) in _frames(info.value)


class CustomError(Exception):
    def __init__(self, payload):
        super().__init__("custom")
        self.payload = payload


def raises_custom(x):
    raise CustomError({"shape": tuple(x.shape)})  # raise-custom


def test_custom_exception_object_unchanged():
    f = ember.compile(raises_custom)
    with pytest.raises(CustomError) as info:
        f(torch.randn(2, 2))
    assert info.value.payload == {"shape": (2, 2)}
    assert (__file__, _line_of("# raise-custom")) in _frames(info.value)


def shape_mismatch(a, b):
    return a @ b  # matmul-mismatch


def test_torch_error_propagates_with_same_type():
    f = ember.compile(shape_mismatch)
    a, b = torch.randn(2, 3), torch.randn(4, 5)
    with pytest.raises(RuntimeError) as eager_info:
        shape_mismatch(a, b)
    with pytest.raises(RuntimeError) as info:
        f(a, b)
    assert type(info.value) is type(eager_info.value)
    assert str(info.value) == str(eager_info.value)
    assert (__file__, _line_of("# matmul-mismatch")) in _frames(info.value)
    good = torch.randn(3, 5)
    torch.testing.assert_close(f(a, good), a @ good)


def test_assertion_error_propagates():
    f = ember.compile(user_code.assert_fails)
    torch.testing.assert_close(f(torch.zeros(3)), torch.ones(3))
    with pytest.raises(AssertionError, match="got 4 rows") as info:
        f(torch.zeros(4))
    assert (user_code.__file__, _line_of("# assert-line", user_code.__file__)) in _frames(info.value)


def test_keyboard_interrupt_like_base_exception_propagates():
    def boom(x):
        raise SystemExit(3)

    f = ember.compile(boom)
    with pytest.raises(SystemExit):
        f(torch.randn(1))


def test_wrong_argument_count_is_a_type_error():
    f = ember.compile(shape_mismatch)
    with pytest.raises(TypeError):
        f(torch.randn(2))
    with pytest.raises(TypeError):
        f(torch.randn(2), torch.randn(2), torch.randn(2))
    with pytest.raises(TypeError):
        f(torch.randn(2), c=torch.randn(2))


def test_hook_uninstalled_after_exception():
    from ember import _C
    if not hasattr(_C, "hook_installed") and not hasattr(getattr(_C, "eval_frame", None), "hook_installed"):
        pytest.skip("no hook_installed diagnostic exposed")
    installed = getattr(_C, "hook_installed", None) or _C.eval_frame.hook_installed
    f = ember.compile(raises_custom)
    with pytest.raises(CustomError):
        f(torch.randn(1))
    assert not installed()


# Errors raised by a torch op while a compiled graph runs (the graph has no Python frame): the
# traceback names the user's file and the line of the op, and the error is eager's.
def dtype_mismatch_in_graph(a, b):
    return (a * 2) @ b  # graph-dtype-mismatch


def index_out_of_range_in_graph(x, i):
    return x[i] + 1  # graph-index


def two_lines_in_graph(a, b):
    c = a.sin() * 2  # graph-first-line
    return c @ b


@pytest.mark.parametrize("fn,args,marker", [
    (dtype_mismatch_in_graph, (torch.randn(2, 3), torch.randn(3, 5, dtype=torch.float64)), "# graph-dtype-mismatch"),
    (index_out_of_range_in_graph, (torch.randn(4, 5), torch.tensor([7])), "# graph-index"),
    # Several lines' ops in one graph: the entry is at the first, its name gives the range.
    (two_lines_in_graph, (torch.randn(2, 3), torch.randn(3, 5, dtype=torch.float64)), "# graph-first-line"),
], ids=["dtype", "index", "two-lines"])
def test_error_raised_inside_a_graph_names_the_users_line(fn, args, marker):
    with pytest.raises(Exception) as eager_info:
        fn(*args)
    f = ember.compile(fn)
    with pytest.raises(type(eager_info.value)) as info:
        f(*args)
    assert type(info.value) is type(eager_info.value)
    assert str(info.value) == str(eager_info.value)
    assert (__file__, _line_of(marker)) in _frames(info.value)
    assert ember.stats()["graph_breaks"] == 0


def error_after_break(x):
    y = x * 2
    print("", end="")  # a graph break: the rest runs as a resume function
    return y + undefined_name  # noqa: F821  # name-error-after-break


def test_python_error_after_a_graph_break_names_the_users_line():
    f = ember.compile(error_after_break)
    with pytest.raises(NameError, match="undefined_name") as info:
        f(torch.randn(2))
    assert (__file__, _line_of("# name-error-after-break")) in _frames(info.value)
