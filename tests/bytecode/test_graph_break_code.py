"""Graph breaks on pure-Python frames, on every supported CPython (3.12 and 3.13 run this without
torch): the glue and resume functions the compiler generates (docs/graph-breaks.md) are real
bytecode built from the user's code, so these programs check the prologues, epilogues, jumps,
exception tables, cells and the NULLs of call sequences on each version. Every program is compiled,
run three times and compared with plain Python, output included."""
import contextlib
import functools
import io
import os
import zlib

import pytest

import ember


class Box:
    pass


def first_statement(a):
    print("start", a)
    return a * 2


def between(a, b):
    c = a + b
    print("c is", c)
    d = c * 3
    return d - a


def null_below(a):
    # The break (print) happens while [NULL, max, a] sits on the stack below it.
    return max(a, len(str(print("inner") or a)))


def keyword_call(a):
    print("x", a, sep="|", end="!\n")
    return a + 1


def loop_body(n):
    total = 0
    for i in range(n):
        total += i
        print("i", i, total)
    return total


def while_loop(n):
    out = []
    while n > 0:
        out.append(n)
        print(n)
        n -= 2
    return out


def cells(a):
    k = a + 1

    def g(t):
        return t * k

    print("k", k)
    k += 10
    return g(2), k


def free_vars(a):
    scale = 3

    def inner(b):
        print("inner sees", scale)
        return b * scale + a

    return inner(a + 1)


def late_local(a):
    print("before")
    b = a + 1
    return b


def deleted(a):
    b = a * 2
    del a
    print("b", b)
    return b


def caught(a):
    try:
        print("in try")
        b = zlib.crc32(b"x") + a
        raise ValueError(b)
    except ValueError as e:
        b = e.args[0] + 1
    return b


def uncaught(a):
    print("about to fail")
    return {}["missing"] + a


def star_args(*args, **kwargs):
    print("args", args, sorted(kwargs))
    return sum(args) + len(kwargs)


def attribute_writes(box, a):
    box.x = a
    print("wrote", box.x)
    box.y = box.x + 1
    return box.y


def unknown_c_call(a):
    c = zlib.crc32(b"ember") % 7
    return a + c


def branches(a):
    if zlib.crc32(bytes([a % 256])) % 2:
        r = "odd"
    else:
        r = "even"
    return r, a


def nested_calls(a):
    return helper_print(a) + helper_print(a + 1)


def helper_print(a):
    print("helper", a)
    return a * 10


class Item:
    def __init__(self, k):
        self.k = k


ITEM_TYPES = {"a": Item}


def comprehension_that_breaks(names, kw):
    # Constructing an instance breaks inside the comprehension (inlined on 3.12+): the list under
    # construction then continues in resume functions, where it is a real object.
    items = [ITEM_TYPES[n](**kw) for n in names]
    squares = {n: len(n) ** 2 for n in names if print(n) is None}
    return [i.k for i in items], squares


def comprehension(n):
    xs = [i * 2 for i in range(n)]
    print(xs)
    return sum(x for x in xs)


def closure_counter(a):
    # A closure made before the break, called on both sides: one cell for `count`.
    count = a

    def bump(k=1):
        nonlocal count
        count += k
        return count

    bump()
    print("count", count)
    count *= 2
    return bump(3), count


def closure_annotated(a):
    def f(t: int, u: int = 2, *, v: int = 5) -> int:
        return t * u + v + a

    print("made", f.__qualname__)
    return f(a), f.__defaults__, f.__kwdefaults__, f.__annotations__, f.__name__, f.__qualname__


def closure_to_c_call(a):
    calls = []
    n = 0

    def add(acc, v):
        nonlocal n
        n += 1
        calls.append(v)
        return acc + v * a

    total = functools.reduce(add, [1, 2, 3], 0)
    return total, n, calls


def lambdas_in_loop(a):
    fs = []
    for i in range(3):
        fs.append(lambda t, j=i: t * j + i)
        print("made", i)
    return [f(a) for f in fs]


def recursive_closure(a):
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    print("fact defined")
    return fact(a)


def closure_made_in_callee(a):
    # The closure is made by an inlined callee: its cells are the callee's, made in the trace.
    inc, get = make_pair(a)
    inc()
    print("pair made")
    inc()
    return get()


def make_pair(start):
    value = start

    def inc():
        nonlocal value
        value += 1

    def get():
        return value

    return inc, get


def deleted_first_then_closure(a, b):
    k = a + b
    del a
    g = lambda t: t + k  # noqa: E731
    print("a deleted")
    return g(b)


class Base:
    def value(self, x):
        return x + 100


class CapturesSelf(Base):
    def __init__(self):
        self.k = 3

    def value(self, x):
        scale = lambda t: t * self.k  # noqa: E731
        print("self captured")
        return super().value(scale(x)), scale(1)

    def deleted(self, x):
        del self
        print("self deleted")
        return super().value(x)


PROGRAMS = [
    (first_statement, (3,)),
    (between, (2, 5)),
    (null_below, (7,)),
    (keyword_call, (1,)),
    (loop_body, (3,)),
    (while_loop, (5,)),
    (cells, (4,)),
    (free_vars, (2,)),
    (late_local, (9,)),
    (deleted, (6,)),
    (caught, (1,)),
    (star_args, (1, 2, 3)),
    (unknown_c_call, (5,)),
    (branches, (4,)),
    (branches, (5,)),
    (nested_calls, (3,)),
    (comprehension, (4,)),
    (comprehension_that_breaks, (["a", "a", "a"], {"k": 7})),
    (closure_counter, (4,)),
    (closure_annotated, (3,)),
    (closure_to_c_call, (2,)),
    (lambdas_in_loop, (5,)),
    (recursive_closure, (5,)),
    (closure_made_in_callee, (10,)),
    (deleted_first_then_closure, (1, 2)),
    (CapturesSelf().value, (4,)),
]

CLOSURE_PROGRAMS = PROGRAMS[-8:]


def run_printing(fn, *args):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        result = fn(*args)
    return result, buf.getvalue()


@pytest.mark.parametrize("fn,args", PROGRAMS, ids=lambda p: getattr(p, "__name__", None))
def test_program_matches_python(fn, args):
    expected = run_printing(fn, *args)
    compiled = ember.compile(fn, backend="eager")
    for _ in range(3):
        assert run_printing(compiled, *args) == expected


def test_program_breaks_once_per_location():
    ember.reset()
    compiled = ember.compile(between, backend="eager")
    for _ in range(3):
        run_printing(compiled, 2, 5)
    s = ember.stats()
    assert s["graph_breaks"] == 1 and s["eager_frames"] == 0
    assert s["frames_compiled"] == 2  # the frame, and the code after the print


def test_loop_resumes_from_the_original_code():
    # One resume code per location: the break in the resume function maps back to the
    # original, so every iteration's break is reported at the same line of `loop_body`.
    out = ember.explain(loop_body, backend="eager")
    with contextlib.redirect_stdout(io.StringIO()):
        report = out(3)
    lines = {r.lineno for r in report.break_reasons}
    assert len(report.break_reasons) == 3 and len(lines) == 1
    assert all(r.source == 'print("i", i, total)' for r in report.break_reasons)


def test_uncaught_exception_propagates_like_python():
    compiled = ember.compile(uncaught, backend="eager")
    with contextlib.redirect_stdout(io.StringIO()) as buf:
        with pytest.raises(KeyError, match="missing"):
            compiled(1)
    assert buf.getvalue() == "about to fail\n"


def test_attribute_writes_before_and_after_a_break():
    expected_box, box = Box(), Box()
    expected = run_printing(attribute_writes, expected_box, 4)
    assert run_printing(ember.compile(attribute_writes, backend="eager"), box, 4) == expected
    assert vars(box) == vars(expected_box)


def test_fullgraph_raises_at_the_first_break():
    with pytest.raises(ember.Unsupported, match="print"):
        with contextlib.redirect_stdout(io.StringIO()):
            ember.compile(between, backend="eager", fullgraph=True)(1, 2)


def test_glue_code_is_never_traced():
    # The generated glue runs the break instruction in CPython; the hook passes it through.
    seen = []

    def spy(*args):
        import sys
        seen.append(sys._getframe(1).f_code)
        return None

    def calls_spy(a):
        spy(a)
        return a + 1

    # `spy` reads frames, which Ember cannot trace: a break at the call, made by glue.
    assert ember.compile(calls_spy, backend="eager")(1) == 2
    glue = seen[-1]
    assert "<break at line" in glue.co_qualname
    assert ember._C.eval_frame.skip_reason(glue) == "generated"


@pytest.mark.parametrize("fn,args", CLOSURE_PROGRAMS, ids=lambda p: getattr(p, "__name__", None))
def test_closures_split_instead_of_running_eagerly(fn, args):
    # Closures made in the trace cross the break: the frame is split, not run eagerly.
    ember.reset()
    compiled = ember.compile(fn, backend="eager")
    run_printing(compiled, *args)
    s = ember.stats()
    assert s["graph_breaks"] >= 1 and s["eager_frames"] == 0, s


def returns_counter(a):
    count = a

    def inc():
        nonlocal count
        count += 1
        return count

    print("made")
    count += 10
    return inc, (lambda: count)


def test_a_closure_returned_after_a_break_shares_its_cell():
    ember.reset()
    compiled = ember.compile(returns_counter, backend="eager")
    for _ in range(2):
        with contextlib.redirect_stdout(io.StringIO()):
            inc, get = compiled(1)
        assert (get(), inc(), inc(), get()) == (11, 12, 13, 13)
        assert inc.__closure__[0] is get.__closure__[0]
        assert inc.__qualname__ == "returns_counter.<locals>.inc"
    assert ember.stats()["eager_frames"] == 0


def test_zero_argument_super_after_the_first_argument_was_deleted_fails_like_python():
    # 3.11: RuntimeError (super() finds slot 0 empty); 3.12+: UnboundLocalError (LOAD_SUPER_ATTR
    # loads `self` first). The compiled frame must fail the same way after its break.
    obj = CapturesSelf()
    with contextlib.redirect_stdout(io.StringIO()):
        with pytest.raises((RuntimeError, UnboundLocalError)) as expected:
            obj.deleted(1)
        compiled = ember.compile(CapturesSelf.deleted, backend="eager")
        with pytest.raises((RuntimeError, UnboundLocalError)) as got:
            compiled(obj, 1)
    assert type(got.value) is type(expected.value) and str(got.value) == str(expected.value)


def _accumulate_sent():
    total = 0
    while True:
        value = yield total
        total = total + value  # raises when the trace runs the generator ahead, sending None


def sends_to_a_generator(x):
    acc = _accumulate_sent()
    next(acc)
    acc.send(x)
    return acc.send(x * 2)


def test_generator_failing_ahead_of_its_consumer_names_its_own_line():
    # On 3.12+ the generator's body sits under a handler (StopIteration -> RuntimeError) that
    # re-raises: the reason must still name the line that raised, on every version.
    # The break is where the generator is made; its reason names the line inside it.
    report = ember.explain(sends_to_a_generator, backend="eager")(3)
    first = report.break_reasons[0]
    assert first.source == "acc = _accumulate_sent()", report.break_reasons
    line = _accumulate_sent.__code__.co_firstlineno + 4
    assert f"{os.path.basename(__file__)}:{line}" in first.reason, first.reason
    assert ember.compile(sends_to_a_generator, backend="eager")(3) == sends_to_a_generator(3) == 9
