"""Parity cases for Python semantics an interpreter easily gets subtly wrong: integer division and
modulo signs, banker's rounding, late-binding closures, mutable default arguments, walrus, loop
variables after the loop, string conversions of shapes, dunder calls that mutate the caller's
objects, closure cells written by the compiled function, and outputs that alias each other.
"""
import torch

from ember.testing import randn

from .registry import case


def x34(g):
    return (randn(g, 3, 4),)


@case(inputs=x34)
def int_division_signs(x):
    vals = (-7 // 2, -7 % 3, 7 % -3, divmod(-7, 2), int(-3.7), round(2.5), round(3.5), round(-0.5), 2 ** -1,
            True + True, 10 // 3 * 3 + 10 % 3)
    return x * vals[0], vals


@case(inputs=x34)
def float_formatting(x):
    n = x.shape[0]
    return x, f"{3.14159:.3}", "%d-%s" % (n, "a"), "{}/{}".format(n, x.shape[1]), f"{n / 3:.4f}", repr(0.1 + 0.2)


@case(inputs=x34)
def shape_as_python_values(x):
    s = x.shape
    return (s == (3, 4), s[-1:], list(s), tuple(x.size()), str(s), isinstance(s, tuple), s.numel(), len(s),
            x.size(0) * 2.5)


@case(inputs=x34)
def late_binding_closures(x):
    fs = [lambda t: t * i for i in range(3)]
    gs = [lambda t, i=i: t * i for i in range(3)]
    return [f(x) for f in fs], [g(x) for g in gs]


@case(inputs=x34)
def walrus_and_loop_variable(x):
    total = 0
    for i in range(4):
        if (sq := i * i) > 3:
            total += sq
    return x * total + i, i, sq


@case(inputs=x34)
def dict_order_after_delete(x):
    d = {"a": 1, "b": 2, "c": 3}
    del d["a"]
    d["a"] = 4
    d["b"] = 5
    return x * d["a"], list(d.items())


@case(inputs=x34)
def zip_unequal_and_enumerate_nested(x):
    pairs = list(zip([1, 2, 3], "ab"))
    out = x
    for i, (n, ch) in enumerate(pairs):
        out = out + n * i + len(ch)
    return out, pairs


@case(inputs=lambda g: ([randn(g, 2), randn(g, 2), randn(g, 2)],))
def range_len_indexing(xs):
    out = xs[0] * 0
    for i in range(len(xs)):
        out = out + xs[i] * i
    return out, xs[::-1], xs[-2]


@case(inputs=x34)
def chained_comparison_evaluates_once(x):
    calls = []

    def mid():
        calls.append(1)
        return 2

    ok = 1 < mid() < 3
    return x * ok, len(calls)


@case(inputs=x34)
def short_circuit_skips_calls(x):
    seen = []

    def mark(v):
        seen.append(v)
        return v

    a = mark(0) and mark(1)
    b = mark(2) or mark(3)
    return x + a + b, seen


@case(inputs=x34)
def string_and_tuple_comparisons(x):
    return x, ("a" < "b", (1, 2) < (1, 3), [1, 2] == [1, 2], "ab" * 2, "x" in "xyz", (1, 2) + (3,) == (1, 2, 3))


@case(inputs=x34)
def nested_function_defaults_evaluated_once(x):
    def f(t, k=x.shape[0]):
        return t * k

    return f(x), f(x, 2)


# ---------------------------------------------------------------------------------------------
# Side effects through dunder calls and closure cells

class _Box:
    pass


@case(inputs=lambda g: (randn(g, 2), _Box()), counters="any")
def dunder_object_setattr_constant(x, box):
    object.__setattr__(box, "k", 3)
    return x * 2


@case(inputs=lambda g: (randn(g, 2), []), counters="any")
def dunder_list_iadd(x, items):
    items.__iadd__([3])
    return x * 2


@case(inputs=lambda g: (randn(g, 2), {}))
def dunder_dict_setitem(x, d):
    dict.__setitem__(d, "k", 3)
    return x * 2


@case(inputs=lambda g: (randn(g, 2), _Box()))
def builtin_setattr_on_input(x, box):
    setattr(box, "k", 3)
    box.j = x.shape[0]
    return x * 2


def _make_counter():
    count = 0

    def step(x):
        nonlocal count
        count += 1
        return x * count

    return step


_COUNTER_STEP = _make_counter()


def _reset_counter():
    _COUNTER_STEP.__closure__[0].cell_contents = 0


case("closure_cell_written_by_compiled_function", inputs=x34, counters="captured", reset=_reset_counter,
     state=lambda _: _COUNTER_STEP.__closure__[0].cell_contents)(_COUNTER_STEP)


def _append_default(x, acc=[]):  # noqa: B006 (the shared default is what is tested)
    acc.append(x.shape[0])
    return x * len(acc)


def _reset_default():
    _append_default.__defaults__[0].clear()


case("mutable_default_argument", inputs=x34, counters="any", reset=_reset_default,
     state=lambda _: list(_append_default.__defaults__[0]))(_append_default)


NEW_GLOBAL_NAME = "ember_parity_created_global"


def _reset_created_global():
    globals().pop(NEW_GLOBAL_NAME, None)


def creates_global(x):
    global ember_parity_created_global
    ember_parity_created_global = x.shape[0] * 2
    return x + 1


case("global_created_by_compiled_function", inputs=x34, reset=_reset_created_global,
     state=lambda _: globals().get(NEW_GLOBAL_NAME))(creates_global)


# ---------------------------------------------------------------------------------------------
# Outputs that alias inputs or each other

@case(inputs=x34)
def output_returned_twice(x):
    y = x + 1
    return y, y, [y]


@case(inputs=x34)
def output_views_of_input(x):
    return x, x[0], x.t(), x.view(-1), x.detach()


@case(inputs=x34)
def output_view_of_intermediate_and_base(x):
    y = x * 2
    return y, y[1:], y.unsqueeze(0)
