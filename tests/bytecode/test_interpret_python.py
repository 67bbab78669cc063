"""The symbolic interpreter on pure-Python frames, on every supported CPython (3.12 and 3.13 run
this without torch, through ember.python_table): each program is compiled, run three times and
compared with plain Python; a frame made only of Python values compiles once and then hits the
cache."""
import math

import pytest

import ember

G_SCALE = 3
G_WRITES = {"n": 0}


def arith(a, b):
    return (a + b) * 2 - a // 3 + b % 5, a / 4, -a, +b, ~a, a ** 2, a & b, a | b, a ^ b, a << 1, b >> 1


def compare(a, b):
    return a < b, a <= b, a == b, a != b, a > b, a >= b, 1 < a < 100, a is b, a is not None


def builtins_(xs):
    return len(xs), min(xs), max(xs), sum(xs), abs(-xs[0]), sorted(xs, reverse=True), list(reversed(xs)), \
        any(x > 3 for x in xs), all(x > 0 for x in xs), round(2.5), divmod(7, 2), isinstance(xs, list)


def math_(x):
    return math.sqrt(x), math.floor(x / 3), math.log2(x), math.pi * x, math.isclose(x, x + 1e-12)


def containers(a, b):
    t = (a, b, a + b)
    l = [a, b]
    l.append(a * b)
    l.extend([1, 2])
    l.insert(0, -1)
    l.pop()
    d = {"a": a, "b": b}
    d["c"] = a - b
    d.update(e=5)
    del d["a"]
    x, *rest = t
    (p, q), r = (a, b), t[-1]
    return t[1:], l[::2], d, x, rest, p + q + r, len(d), "b" in d, d.get("z", 9), list(d.items())


def control(n):
    total = 0
    for i in range(n):
        if i % 2 == 0:
            continue
        total += i
        if total > 40:
            break
    while n > 0:
        n -= 3
    for k, v in {"x": 1, "y": 2}.items():
        total += v * len(k)
    for i, (u, w) in enumerate(zip([1, 2, 3], "abc")):
        total += u * i
    return total, n


def comprehensions(n):
    return [i * i for i in range(n)], {i: str(i) for i in range(3)}, [j for i in range(3) for j in range(i)], \
        tuple(x + 1 for x in range(n))


def closures(n):
    k = n + 1

    def add(x, y=2, *rest, scale=1, **extra):
        return (x + y + k + sum(rest) + len(extra)) * scale

    mul = lambda x: x * k  # noqa: E731
    return add(1), add(1, 3, 4, 5, scale=2, flag=True), mul(3), list(map(mul, [1, 2])), add(*[1, 2], **{"scale": 3})


def nonlocal_counter(n):
    count = 0

    def bump():
        nonlocal count
        count += n

    bump()
    bump()
    return count


def strings(name, n):
    s = f"{name}:{n:03d}:{n!r}:{n / 3:.2f}"
    return s, s.upper(), "-".join([name, str(n)]), name.startswith("e"), s.split(":"), f"{name=}"


def asserts(n):
    assert n > 0, "n must be positive"
    assert isinstance(n, int)
    return n + 1


def globals_(n):
    G_WRITES["seen"] = n  # a dict of the module: traced, and written back after the frame
    return n * G_SCALE


def unknown_builtin(n):
    table = globals()  # a C function Ember does not know: the frame breaks here
    return n * table["G_SCALE"]


class Point:
    dims = 2

    def __init__(self, x, y):
        self.x, self.y = x, y

    def norm2(self):
        return self.x * self.x + self.y * self.y

    @property
    def total(self):
        return self.x + self.y

    @staticmethod
    def origin_distance(a, b):
        return abs(a) + abs(b)

    @classmethod
    def kind(cls):
        return cls.__name__


class Point3(Point):
    dims = 3

    def norm2(self):
        return super().norm2() + 1


def objects(p):
    return p.norm2(), p.total, p.origin_distance(p.x, -p.y), p.kind(), p.dims, type(p).__name__, \
        isinstance(p, Point), getattr(p, "missing", 7), hasattr(p, "x")


def generators(n):
    def evens(limit):
        for i in range(limit):
            if i % 2 == 0:
                yield i

    return list(evens(n)), sum(evens(n)), next(iter(evens(n)))


def writes_attribute(p, n):
    p.x = p.x + n
    p.y += 1
    return p.x


PROGRAMS = [
    (arith, (17, 6)),
    (compare, (3, 7)),
    (builtins_, ([4, 1, 3],)),
    (math_, (16.0,)),
    (containers, (5, 2)),
    (control, (20,)),
    (comprehensions, (4,)),
    (closures, (3,)),
    (nonlocal_counter, (4,)),
    (strings, ("ember", 7)),
    (asserts, (3,)),
    (objects, (Point3(3, 4),)),
    (generators, (7,)),
]


@pytest.mark.parametrize("fn,args", PROGRAMS, ids=[p[0].__name__ for p in PROGRAMS])
def test_pure_python_frame_matches_python_and_is_cached(fn, args):
    ember.reset()
    compiled = ember.compile(fn)
    expected = fn(*args)
    for _ in range(3):
        assert compiled(*args) == expected
    s = ember.stats()
    reasons = [r.reason for r in ember.explain(fn)(*args).break_reasons]
    assert (s["frames_compiled"], s["cache_hits"], s["eager_frames"]) == (1, 2, 0), (s, reasons)


def test_new_argument_values_recompile_and_stay_correct():
    ember.reset()
    compiled = ember.compile(arith)
    for a, b in [(1, 2), (5, 9), (1, 2)]:
        assert compiled(a, b) == arith(a, b)
    s = ember.stats()
    assert (s["frames_compiled"], s["recompiles"], s["cache_hits"]) == (2, 1, 1), s


def test_attribute_writes_are_replayed():
    ember.reset()
    compiled = ember.compile(writes_attribute)
    p, q = Point(1, 2), Point(1, 2)
    for _ in range(3):
        assert compiled(p, 5) == writes_attribute(q, 5)
    assert (p.x, p.y) == (q.x, q.y) == (16, 5)


def test_a_global_dict_write_is_replayed():
    ember.reset()
    compiled = ember.compile(globals_)
    assert compiled(2) == 2 * G_SCALE and G_WRITES["seen"] == 2
    assert compiled(5) == 5 * G_SCALE and G_WRITES["seen"] == 5
    assert ember.explain(globals_)(3).graph_break_count == 0


def test_unsupported_python_breaks_with_a_reason():
    ember.reset()
    compiled = ember.compile(unknown_builtin)
    assert compiled(2) == 2 * G_SCALE
    out = ember.explain(unknown_builtin)(3)
    assert out.graph_break_count == 1 and "globals" in out.break_reasons[0].reason
    assert out.break_reasons[0].lineno == unknown_builtin.__code__.co_firstlineno + 1


def test_failing_assert_raises_from_the_user_line():
    compiled = ember.compile(asserts)
    with pytest.raises(AssertionError, match="n must be positive") as info:
        compiled(-1)
    assert info.traceback[-1].lineno + 1 == asserts.__code__.co_firstlineno + 1
