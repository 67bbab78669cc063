"""Functions whose bytecode the decoder tests compare against `dis` on CPython 3.11, 3.12 and 3.13.

Each covers one construct the symbolic interpreter must handle (or must refuse cleanly). The
functions are compiled, never called by the decode tests; `LOOPS` are also run under a tracer to
check where FOR_ITER really continues. No torch: these tests run on interpreters without it.
"""
import os
import os.path as osp_alias  # noqa: F401  (module-level IMPORT_NAME with a dotted name)

G = 3
items = [1, 2, 3]


def helper(*args, **kwargs):
    return args, kwargs


# ---- calls -------------------------------------------------------------------------------------

def call_positional(a, b):
    return helper(a, b, 1)


def call_kwargs(a, b):
    return helper(a, key=b, other=1)


def call_star_args(a, xs):
    return helper(a, *xs)


def call_star_kwargs(a, kw):
    return helper(a, **kw)


def call_star_both(xs, kw):
    return helper(*xs, 1, *xs, k=2, **kw)


def call_method(xs, v):
    xs.append(v)
    return xs.index(v, 0)


def call_method_kwargs(d):
    return d.get("a", None), sorted(d, key=len, reverse=True)


def call_builtin_chain(x):
    return len(str(abs(int(x))))


def call_nested_attrs(o):
    return o.a.b.c(o.d, e=o.f.g)


# ---- globals, closures, lambdas ----------------------------------------------------------------

def read_global(x):
    return x + G


def write_global(x):
    global G
    G = x
    return G


def closure_reader(a):
    def inner(b):
        return a + b
    return inner


def closure_writer(a):
    def inner():
        nonlocal a
        a += 1
        return a
    return inner


def closure_over_arg_and_local(a, b):
    c = a * b
    return lambda x, y=1, *, z=2: x + a + c + y + z


def lambda_defaults(k):
    return sorted([3, 1, 2], key=lambda v, k=k: (v - k) ** 2)


def nested_with_annotations(x: int) -> int:
    def f(a: int, b: "str" = "q", *, c: float = 1.0) -> list:
        return [a, b, c]
    return f(x)


# ---- comprehensions (inlined on 3.12+) ---------------------------------------------------------

def list_comp(xs):
    return [x * 2 for x in xs if x > 0]


def dict_comp(xs):
    return {k: v for k, v in zip(xs, range(len(xs)))}


def set_comp(xs):
    return {x % 3 for x in xs}


def nested_comp(m):
    return [[c + 1 for c in row] for row in m]


def comp_shadowing(x):
    y = [x for x in range(x)]
    return x, y


def gen_expr_sum(xs):
    return sum(x * x for x in xs)


# ---- loops -------------------------------------------------------------------------------------

def loop_range(n):
    t = 0
    for i in range(n):
        t += i
    return t


def loop_list(xs):
    out = []
    for x in xs:
        out.append(x)
    return out


def loop_dict_items(d):
    t = 0
    for k, v in d.items():
        t += k * v
    return t


def loop_enumerate(xs):
    t = 0
    for i, x in enumerate(xs):
        t += i * x
    return t


def loop_zip(a, b):
    t = 0
    for x, y in zip(a, b):
        t += x * y
    return t


def loop_break_continue(xs):
    t = 0
    for x in xs:
        if x < 0:
            continue
        if x > 100:
            break
        t += x
    else:
        t = -t
    return t


def loop_while(n):
    i = 0
    while i < n:
        i += 2
    return i


def loop_nested(n):
    t = 0
    for i in range(n):
        for j in range(i):
            t += i * j
    return t


def loop_while_true(xs):
    it = iter(xs)
    while True:
        try:
            v = next(it)
        except StopIteration:
            break
        if v is None:
            return -1
    return 0


# ---- with, try ---------------------------------------------------------------------------------

def with_block(cm, x):
    with cm:
        x = x + 1
    return x


def with_as(cm):
    with cm as v, cm as w:
        return v, w


def try_except(x):
    try:
        return 1 / x
    except ZeroDivisionError:
        return 0


def try_except_as(x):
    try:
        y = int(x)
    except (ValueError, TypeError) as e:
        y = str(e)
    return y


def try_finally(x):
    try:
        x.append(1)
    finally:
        x.append(2)
    return x


def try_except_else_finally(f):
    r = 0
    try:
        f()
    except KeyError:
        r = 1
    except Exception:
        r = 2
    else:
        r = 3
    finally:
        r += 10
    return r


def raise_forms(x):
    if x == 1:
        raise ValueError("one")
    if x == 2:
        raise ValueError("two") from None
    try:
        x.foo()
    except AttributeError:
        raise
    raise RuntimeError


def try_star(f):
    r = 0
    try:
        f()
    except* ValueError:
        r = 1
    return r


# ---- f-strings, asserts, comparisons -----------------------------------------------------------

def fstring_plain(x):
    return f"{x}"


def fstring_conversions(x, y):
    return f"{x!r} {y!s} {x!a}"


def fstring_specs(x, w):
    return f"{x:>10} {x!r:^{w}} {x:.{w}f}"


def assert_plain(x):
    assert x


def assert_message(x, y):
    assert x < y, f"{x} !< {y}"
    return x


def chained_compare(a, b, c):
    return a < b <= c != 3


def compare_ops(a, b):
    return (a == b, a != b, a < b, a <= b, a > b, a >= b, a is b, a is not b, a in b, a not in b)


def bool_ops(a, b, c):
    return (a and b) or c


def conditional_expr(a):
    return 1 if a else (2 if a is None else 3)


def if_chain(x):
    if x is None:
        return 0
    elif not x:
        return 1
    elif x is not None and x > 3:
        return 2
    return 3


# ---- operators, slices, unpacking --------------------------------------------------------------

def unary_ops(x):
    return (-x, +x, ~x, not x)


def binary_ops(a, b):
    return (a + b, a - b, a * b, a / b, a // b, a % b, a ** b, a << b, a >> b, a & b, a | b, a ^ b, a @ b)


def inplace_ops(a, b):
    a += b
    a -= b
    a *= b
    a /= b
    a //= b
    a %= b
    a **= b
    a <<= b
    a >>= b
    a &= b
    a |= b
    a ^= b
    a @= b
    return a


def slices(xs, i, j):
    return xs[i:j], xs[i:], xs[:j], xs[::2], xs[i:j:-1], xs[:]


def slice_store_delete(xs, ys):
    xs[1:3] = ys
    xs[::2] = ys
    del xs[0:1]
    del xs[0]
    xs[0] = 5
    return xs


def unpack_plain(t):
    a, b, c = t
    return c, b, a


def unpack_star(t):
    a, *b, c = t
    first, *rest = t
    *init, last = t
    return a, b, c, first, rest, init, last


def unpack_nested(t):
    (a, b), [c, d] = t
    return a + b + c + d


def swap_values(a, b):
    a, b = b, a
    return a, b


def displays(a, b):
    return [a, *b], (a, *b), {a, *b}, {"k": a, **b}, {a: b}, {"x": 1, "y": 2}


def subscripts(d, k):
    d[k] = d[k] + 1
    del d["z"]
    return d[k, 1]


def attributes(o, v):
    o.x = v
    del o.y
    return o.x


def walrus(xs):
    if (n := len(xs)) > 3:
        return n
    return -n


def many_args(a, b, /, c, d=1, *args, e, f=2, **kwargs):
    return a, b, c, d, args, e, f, kwargs


def string_build(a, b):
    s = "x" + a
    s += b * 2
    return s.upper().strip()


def delete_local(x):
    y = x
    del y
    return x


# ---- super, classes, imports -------------------------------------------------------------------

class Base:
    def __init__(self, v):
        self.v = v

    def value(self):
        return self.v


class Derived(Base):
    def __init__(self, v):
        super().__init__(v)
        self.w = super().value()

    def value(self):
        return super().value() + super(Derived, self).value() + super().v


def import_inside():
    import math
    from os import path as p
    import os.path as q
    from collections import OrderedDict, deque
    return math.pi, p.sep, q.sep, OrderedDict, deque


def uses_module(x):
    return os.path.join(x, "y")


# ---- Unsupported constructs: decoded, kinds say Unsupported ------------------------------------

def generator(n):
    for i in range(n):
        yield i


def yield_from(xs):
    yield from xs


async def coroutine(x):
    return await x


def match_statement(x):
    match x:
        case [a, b]:
            return a + b
        case {"k": v}:
            return v
        case int():
            return 0
        case _:
            return None


def class_in_function(v):
    class Local:
        attr = v
    return Local


# ---- EXTENDED_ARG: many constants/locals and jumps longer than 255 code units ------------------

def _big_if_source():
    body = "".join(f"        x = x + {i} * y\n" for i in range(120))
    return f"def big_forward_jump(x, y):\n    if x:\n{body}    return x\n"


def _big_loop_source():
    body = "".join(f"        t = t + i * {i}\n" for i in range(120))
    return f"def big_backward_jump(n):\n    t = 0\n    for i in range(n):\n{body}    return t\n"


def _many_locals_source():
    names = [f"v{i}" for i in range(300)]
    assigns = "".join(f"    {n} = {i}.5\n" for i, n in enumerate(names))
    return f"def many_locals():\n{assigns}    return {names[-1]} + {names[0]}\n"


def _big_while_source():
    body = "".join(f"        if i == {i}:\n            t += {i}\n" for i in range(60))
    return f"def big_while(n):\n    i = 0\n    t = 0\n    while i < n:\n{body}        i += 1\n    return t\n"


def _big_try_source():
    body = "".join(f"        x = x * {i} + y\n" for i in range(150))
    return f"def big_try(x, y):\n    try:\n{body}    except Exception as e:\n        return e\n    return x\n"


_generated = {}
for _src in (_big_if_source(), _big_loop_source(), _many_locals_source(), _big_while_source(), _big_try_source()):
    exec(compile(_src, "<bytecode_corpus generated>", "exec"), globals(), _generated)
big_forward_jump = _generated["big_forward_jump"]
big_backward_jump = _generated["big_backward_jump"]
many_locals = _generated["many_locals"]
big_while = _generated["big_while"]
big_try = _generated["big_try"]


def _collect():
    out = []
    for name, value in list(globals().items()):
        if name.startswith("_") or name in ("helper",):
            continue
        if isinstance(value, type):
            for attr in vars(value).values():
                if callable(attr) and hasattr(attr, "__code__"):
                    out.append(attr)
        elif callable(value) and hasattr(value, "__code__"):
            out.append(value)
    return out


FUNCTIONS = _collect()

# Loops run under a tracer to observe where execution goes when FOR_ITER finds the iterator empty.
LOOPS = [
    (loop_range, (4,)),
    (loop_list, ([1, 2],)),
    (loop_dict_items, ({1: 2, 3: 4},)),
    (loop_enumerate, ([5, 6],)),
    (loop_zip, ([1, 2], [3, 4])),
    (loop_break_continue, ([1, -1, 2],)),
    (loop_nested, (3,)),
    (list_comp, ([1, -2, 3],)),
    (dict_comp, ([1, 2],)),
    (big_backward_jump, (2,)),
]
