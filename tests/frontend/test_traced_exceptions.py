"""Exceptions and iteration protocols inside traced code (docs/interpreter.md, "Exceptions").

A `raise` and the exceptions of operations the interpreter models (a missing attribute, an index
out of range, a missing key, an exhausted iterator) propagate through the exception tables of the
traced code to its handlers: caught ones stay in the graph. An exception no traced handler catches
makes the frame break where it came from, so CPython raises exactly the eager exception. Each
program is compared with eager on two calls, with its graph and break counts.
"""
import sys

import pytest
import torch

import ember


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


def _counts(fn, *args):
    out = ember.explain(fn)(*args)
    return out.graph_count, len(out.break_reasons)


def _same(fn, *args, graphs=1, breaks=0):
    """fn compiled: results equal to eager on two calls; explain's counts as given."""
    expected = fn(*args)
    compiled = ember.compile(fn)
    for _ in range(2):
        torch.testing.assert_close(compiled(*args), expected)
    ember.reset()
    assert _counts(fn, *args) == (graphs, breaks)


def _raises_like_eager(fn, *args):
    """The compiled call raises the eager exception: same type, same message."""
    with pytest.raises(Exception) as eager:
        fn(*args)
    compiled = ember.compile(fn)
    for _ in range(2):
        with pytest.raises(type(eager.value)) as got:
            compiled(*args)
        assert str(got.value) == str(eager.value)
    return eager.value


# ---------------------------------------------------------------------------------------------
# raise and catch

def raise_caught_here(x):
    y = x * 2
    try:
        raise ValueError("boom")
    except ValueError as e:
        y = y + len(str(e))
    return y


def test_raise_caught_in_the_same_frame():
    _same(raise_caught_here, torch.randn(3, 4))


def _checked(y, limit):
    if y.shape[0] > limit:
        raise IndexError(f"too many rows: {y.shape[0]}")
    return y + 1


def raise_in_callee_caught_by_caller(x):
    y = x.sin()  # a tensor computed in the graph before the exception
    try:
        y = _checked(y, 2)
    except (KeyError, IndexError) as e:
        y = y * 10 + len(e.args)
    return y


def test_raise_in_an_inlined_callee_caught_by_the_caller():
    _same(raise_in_callee_caught_by_caller, torch.randn(3, 4))


def finally_runs(x):
    y = x + 1
    try:
        y = y * 2
        {}["missing"]
    except KeyError:
        y = y - 1
    finally:
        y = y * 3
    try:
        y = y + 1
    finally:
        y = y / 2
    return y


def test_finally_and_a_modelled_key_error():
    _same(finally_runs, torch.randn(3))


class MyError(Exception):
    pass


class CodedError(MyError):
    def __init__(self, code):
        super().__init__(f"code {code}")
        self.code = code


def _deep(y):
    try:
        raise CodedError(7)
    except KeyError:
        return y * 0  # not taken: the class does not match


def user_classes_and_reraise(x):
    y = x * 3
    try:
        try:
            y = _deep(y)
        except MyError:
            y = y + 1
            raise  # bare re-raise to the outer handler
    except CodedError as e:
        y = y * e.code
    try:
        raise MyError("from") from ValueError("cause")
    except MyError as e:
        y = y + (2 if isinstance(e.__cause__, ValueError) else 100)
    return y


def test_user_exception_classes_reraise_and_cause():
    _same(user_classes_and_reraise, torch.randn(2, 2))


def nested_handler_raises_new(x):
    y = x + 2
    try:
        try:
            [1, 2][5]
        except IndexError:
            raise KeyError("inner")
    except KeyError as e:
        y = y * (3 if isinstance(e.__context__, IndexError) else 100)
    return y


def test_exception_raised_in_a_handler_links_its_context():
    _same(nested_handler_raises_new, torch.randn(4))


class Recorder:
    def __init__(self):
        self.exits = 0

    def __enter__(self):
        return self

    def __exit__(self, typ, value, tb):
        self.exits += 1
        return False


def with_block_exception(x):
    r = Recorder()
    y = x * 2
    try:
        with r:
            with torch.no_grad():
                y = y + 1
                raise RuntimeError("inside with")
    except RuntimeError:
        y = y * 2
    return y, r.exits, torch.is_grad_enabled()


def test_exception_through_with_blocks_runs_their_exits():
    _same(with_block_exception, torch.randn(3))


def exc_info_not_leaked(x):
    y = x + 1
    try:
        raise ValueError("handled")
    except ValueError:
        y = y * 2
    # After the handler, no exception is being handled: a bare raise is an error in eager too.
    if y.shape[0] == 1000:
        raise
    return y, sys.exc_info()[0] is None


def test_current_exception_does_not_leak_out_of_the_handler():
    _same(exc_info_not_leaked, torch.randn(3), graphs=1, breaks=1)


def handler_with_print(x):
    y = x * 2
    try:
        raise ValueError("v")
    except ValueError:
        print("handling")  # runs in CPython: the frame is split at the raise
        y = y + 1
    return y


def test_break_inside_a_handler_splits_where_the_exception_came_from(capsys):
    x = torch.randn(3)
    expected = handler_with_print(x)
    assert capsys.readouterr().out == "handling\n"
    got = ember.compile(handler_with_print)(x)
    torch.testing.assert_close(got, expected)
    assert capsys.readouterr().out == "handling\n"
    ember.reset()
    out = ember.explain(handler_with_print)(x)
    assert out.graph_count == 1 and len(out.break_reasons) == 1
    assert out.break_reasons[0].lineno == handler_with_print.__code__.co_firstlineno + 3  # the raise


# ---------------------------------------------------------------------------------------------
# Uncaught: eager's exception, eager's side effects

LOG = []


def uncaught_raise(x):
    y = x * 2
    LOG.append("before")
    if y.shape[0] == 3:
        raise ValueError(f"bad rows {y.shape[0]}")
    return y


def _fails(y):
    return y + {"a": 1}["b"]


def uncaught_in_callee(x):
    y = x + 1
    LOG.append("callee")
    return _fails(y)


def uncaught_through_handler(x):
    try:
        return [x][3]
    except KeyError:
        return x


def test_uncaught_exceptions_are_eagers():
    x = torch.randn(3)
    for fn in (uncaught_raise, uncaught_in_callee, uncaught_through_handler):
        LOG.clear()
        exc = _raises_like_eager(fn, x)
        assert isinstance(exc, (ValueError, KeyError, IndexError))
        assert len(LOG) == (0 if fn is uncaught_through_handler else 3)  # once per call, eager included
        ember.reset()
        with pytest.raises(ember.Unsupported, match="not caught"):
            ember.compile(fn, fullgraph=True)(x)


# ---------------------------------------------------------------------------------------------
# Attribute lookups that raise

class Settings:
    def __init__(self):
        self.scale = 2.0

    def __getattr__(self, name):
        if name.startswith("opt_"):
            return 5.0
        raise AttributeError(f"{type(self).__name__} has no setting {name!r}")


SETTINGS = Settings()


class Strict:
    def __init__(self):
        self.a = 1

    def __getattribute__(self, name):
        if name == "hidden":
            raise AttributeError("hidden")
        return object.__getattribute__(self, name)


STRICT = Strict()


def attribute_defaults(x):
    y = x * SETTINGS.scale
    y = y + getattr(SETTINGS, "window", 1.0)
    y = y + getattr(SETTINGS, "opt_bias", 0.0)
    has = (hasattr(SETTINGS, "window"), hasattr(SETTINGS, "scale"), hasattr(STRICT, "hidden"), hasattr(STRICT, "a"))
    y = y + getattr(STRICT, "hidden", 3) + getattr(STRICT, "nope", 4)
    try:
        y = y + STRICT.missing
    except AttributeError:
        y = y - 1
    return y, has, hasattr(x, "no_such_tensor_attr"), getattr(torch, "no_such_fn", None)


def test_getattr_default_and_hasattr_through_python_lookups():
    _same(attribute_defaults, torch.randn(3))


def test_missing_attribute_is_guarded():
    s = Settings()

    def f(x):
        return x + getattr(s, "window", 1.0)

    compiled = ember.compile(f)
    x = torch.zeros(2)
    torch.testing.assert_close(compiled(x), x + 1.0)
    s.window = 10.0  # now present: the guard on the missing name fails and the code is traced again
    torch.testing.assert_close(compiled(x), x + 10.0)
    del s.window
    torch.testing.assert_close(compiled(x), x + 1.0)


def test_uncaught_attribute_error_is_eagers():
    def f(x):
        return x * SETTINGS.window

    _raises_like_eager(f, torch.randn(2))


# ---------------------------------------------------------------------------------------------
# Iteration protocols and generators

class OldSequence:
    """Iterated through __getitem__ until IndexError (no __iter__)."""

    def __init__(self, *items):
        self.items = list(items)

    def __getitem__(self, i):
        if i >= len(self.items):
            raise IndexError(i)
        return self.items[i] * 2


class Countdown:
    """An iterator whose __iter__ returns itself and __next__ raises StopIteration."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return self

    def __next__(self):
        if self.n == 0:
            raise StopIteration
        self.n -= 1
        return self.n


class GenIter:
    def __init__(self, k):
        self.k = k

    def __iter__(self):
        for i in range(self.k):
            yield i + 10


class ListIter:
    def __init__(self):
        self.values = [3, 4]

    def __iter__(self):
        return iter(self.values)


def protocols(x):
    y = x.clone()
    for v in OldSequence(1, 2, 3):
        y = y + v
    y = y * sum(Countdown(4))
    y = y + sum(list(GenIter(3)))
    for a, b in zip(ListIter(), GenIter(2)):
        y = y + a * b
    c = Countdown(2)
    first = next(c)
    second = next(c)
    third = next(c, -1)
    return y, tuple(OldSequence(5)), (first, second, third)


def test_iteration_protocols():
    _same(protocols, torch.randn(3))


def squares(x, n):
    for i in range(n):
        yield x * i


def pairs(x):
    yield x
    yield x + 1


def generators_consumed(x):
    y = x
    for t in squares(x, 3):
        y = y + t
    total = sum(list(pairs(x)), torch.zeros(3)) + tuple(squares(x, 2))[1]
    for a, b in zip(squares(x, 2), pairs(x)):
        y = y + a * b
    return y + total


def test_generators_consumed_inside_the_trace():
    _same(generators_consumed, torch.randn(3))


def generator_escapes(x):
    return squares(x * 2, 2)


def test_generator_that_escapes_runs_like_eager():
    x = torch.randn(3)
    expected = list(generator_escapes(x))
    got = ember.compile(generator_escapes)(x)
    assert type(got).__name__ == "generator"
    for a, b in zip(list(got), expected):
        torch.testing.assert_close(a, b)


def _raising_gen(x):
    yield x
    raise KeyError("gen")


def generator_raises(x):
    y = x
    try:
        for t in _raising_gen(x):
            y = y + t
    except KeyError:
        y = y * 5
    return y


def test_generator_that_raises_runs_like_eager():
    x = torch.randn(3)
    torch.testing.assert_close(ember.compile(generator_raises)(x), generator_raises(x))


def test_sequence_protocol_with_other_exception_is_eagers():
    class Bad:
        def __getitem__(self, i):
            if i == 1:
                raise KeyError("bad item")
            return i

    bad = Bad()

    def f(x):
        for v in bad:
            x = x + v
        return x

    _raises_like_eager(f, torch.randn(2))


# ---------------------------------------------------------------------------------------------
# More handler shapes

class Suppress:
    def __enter__(self):
        return self

    def __exit__(self, typ, value, tb):
        return typ is not None and issubclass(typ, LookupError)


def suppressed_by_exit(x):
    y = x + 1
    with Suppress():
        y = y * 2
        [][0]
        y = y * 100  # skipped: the IndexError leaves the block and __exit__ suppresses it
    return y


def test_context_manager_that_suppresses():
    _same(suppressed_by_exit, torch.randn(3))


def folded_call_raises(x):
    y = x * 2
    try:
        n = int("not a number")
    except ValueError as e:
        n = len(str(e)) % 5
    try:
        y = y / (1 // 0)
    except ZeroDivisionError:
        y = y + n
    return y


def test_constant_calls_and_operators_that_raise():
    _same(folded_call_raises, torch.randn(3))


def exc_info_in_handler(x):
    y = x - 1
    try:
        raise KeyError("k")
    except KeyError:
        kind = sys.exc_info()[0]
    return y * 2, kind is KeyError


def test_sys_exc_info_inside_a_handler_is_cpythons():
    # sys.exc_info() is not traced: the frame is split at the raise and the handler runs in CPython.
    _same(exc_info_in_handler, torch.randn(3), graphs=1, breaks=1)


def test_loop_with_handler_per_iteration():
    def f(x):
        table = {0: 1.0, 2: 3.0}
        y = x
        for i in range(4):
            try:
                y = y + table[i]
            except KeyError:
                y = y * 2
        return y

    _same(f, torch.randn(3))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        if hasattr(self, "extra"):
            y = y + self.extra
        if not hasattr(self, "lin"):
            y = y * 0
        return y + getattr(self, "bias_scale", 2.0)


def test_hasattr_on_a_module_is_guarded():
    torch.manual_seed(0)
    m = Block()
    x = torch.randn(2, 3)
    compiled = ember.compile(m)
    torch.testing.assert_close(compiled(x), m(x))
    m.extra = 5.0  # a new attribute: the guard on the module's attribute names fails, traced again
    torch.testing.assert_close(compiled(x), m(x))
    assert _counts(m, x) == (1, 0)


def uncaught_in_no_grad(x):
    with torch.no_grad():
        y = x * 2
        raise RuntimeError("inside no_grad")
    return y


def test_uncaught_inside_a_with_block_restores_like_eager():
    x = torch.randn(2, requires_grad=True)
    _raises_like_eager(uncaught_in_no_grad, x)
    assert torch.is_grad_enabled()


def raise_with_tensor_message(x):
    try:
        raise ValueError(x)
    except ValueError as e:
        return e.args[0] * 2


def test_exception_built_from_a_tensor_is_not_traced():
    # Exception instances are made at trace time from constants; a tensor argument stops the trace
    # there (the frame is split at that call) and the result is still eager's.
    x = torch.randn(3)
    torch.testing.assert_close(ember.compile(raise_with_tensor_message)(x), raise_with_tensor_message(x))
    ember.reset()
    with pytest.raises(ember.Unsupported, match="constructing"):
        ember.compile(raise_with_tensor_message, fullgraph=True)(x)


class Bag:
    def __init__(self, t):
        self.t = t
        self.tmp = 1


def in_and_del(x):
    b = Bag(x)
    del b.tmp
    try:
        del b.tmp  # already gone: AttributeError in the trace
    except AttributeError:
        b.t = b.t + 1
    return b.t, hasattr(b, "tmp"), 2 in OldSequence(1, 3), 3 in OldSequence(1, 3), 1 in GenIter(2)


def test_in_through_iteration_and_del_of_attributes():
    _same(in_and_del, torch.randn(3))
