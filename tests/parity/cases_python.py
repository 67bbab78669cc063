"""Parity cases for Python constructs: locals, globals, closures, calls, arithmetic and builtins on
Python values (cases_python_flow.py has containers, control flow, comprehensions, generators and objects).
Every program here must be captured in one graph (counters "strict") unless noted.
"""
import math

import torch

from ember.testing import DEVICE, Call, randint, randn

from .registry import case


def x34(g):
    return (randn(g, 3, 4),)


def x34_y34(g):
    return (randn(g, 3, 4), randn(g, 3, 4))


# ---------------------------------------------------------------------------------------------
# Locals, globals, closures and cells

@case(inputs=x34)
def locals_chain(x):
    y = x + 1
    z = y * y
    return z - x


@case(inputs=x34)
def locals_reassign(x):
    x = x * 2
    x = x + 1
    return x


@case(inputs=x34)
def locals_delete(x):
    tmp = x.exp()
    y = tmp * 2
    del tmp
    return y


@case(inputs=x34)
def locals_swap(x):
    a, b = x, x * 3
    a, b = b, a
    return a - b


GLOBAL_TENSOR = torch.linspace(-1.0, 1.0, 4, device=DEVICE)  # globals live where the inputs do
GLOBAL_SCALE = 2.5
GLOBAL_NAMES = ("alpha", "beta")


@case(inputs=x34)
def global_tensor_read(x):
    return x * GLOBAL_TENSOR


@case(inputs=x34)
def global_float_read(x):
    return x * GLOBAL_SCALE + len(GLOBAL_NAMES)


def _global_helper(t, k):
    return t.sin() * k


@case(inputs=x34)
def global_function_call(x):
    return _global_helper(x, 3.0) + _global_helper(x, -1.0)


GLOBAL_LINEAR = torch.nn.Linear(4, 2).to(DEVICE)


@case(inputs=x34)
def global_module_call(x):
    return GLOBAL_LINEAR(x).relu()


@case(inputs=x34)
def global_torch_alias(x):
    fn = torch.tanh
    return fn(x) + torch.nn.functional.relu(x)


def _make_scaler(k):
    def scaler(x):
        return x * k + k
    return scaler


case("closure_float", inputs=x34)(_make_scaler(1.5))


def _make_tensor_closure(bias):
    def add_bias(x):
        return x + bias
    return add_bias


case("closure_tensor", inputs=x34)(_make_tensor_closure(torch.arange(4.0, device=DEVICE)))


def _make_two_level(a):
    def middle(b):
        def inner(x):
            return x * a - b
        return inner
    return middle(0.5)


case("closure_two_levels", inputs=x34)(_make_two_level(3.0))


@case(inputs=x34)
def closure_defined_inside(x):
    scale = x.shape[1]

    def inner(t):
        return t * scale

    return inner(x) + inner(x.cos())


@case(inputs=x34)
def closure_cell_updated_before_call(x):
    y = x

    def read():
        return y * 2

    y = y + 1
    return read()


@case(inputs=x34)
def closure_nonlocal_write(x):
    total = 0

    def bump(k):
        nonlocal total
        total += k

    bump(2)
    bump(5)
    return x * total


@case(inputs=x34)
def closure_tensor_cell_accumulate(x):
    acc = x * 0

    def add(t):
        nonlocal acc
        acc = acc + t

    for k in range(3):
        add(x * k)
    return acc


# ---------------------------------------------------------------------------------------------
# Calls: positional, keyword, defaults, *args, **kwargs

def _affine(x, w, b=0.0, *, scale=1.0):
    return (x * w + b) * scale


@case(inputs=x34)
def call_positional(x):
    return _affine(x, 2.0, 1.0)


@case(inputs=x34)
def call_keyword(x):
    return _affine(w=3.0, x=x, b=-1.0)


@case(inputs=x34)
def call_defaults(x):
    return _affine(x, 0.5)


@case(inputs=x34)
def call_kwonly(x):
    return _affine(x, 2.0, scale=0.25)


def _varargs(*ts):
    out = ts[0]
    for t in ts[1:]:
        out = out + t
    return out, len(ts)


@case(inputs=x34)
def call_varargs(x):
    return _varargs(x, x * 2, x * 3)


def _varkw(x, **opts):
    for key in sorted(opts):
        x = x * opts[key] if key.startswith("m") else x + opts[key]
    return x, tuple(sorted(opts))


@case(inputs=x34)
def call_varkw(x):
    return _varkw(x, m1=2.0, a=1.0, m2=-1.0)


@case(inputs=x34)
def call_star_args_at_site(x):
    args = (x, 4.0)
    return _affine(*args, b=1.0)


@case(inputs=x34)
def call_star_kwargs_at_site(x):
    kw = {"b": 2.0, "scale": 3.0}
    return _affine(x, 1.0, **kw)


def _mixed(a, b=2, *rest, c, d=4, **extra):
    return a * b + sum(rest) + c * d + sum(extra.values())


@case(inputs=x34)
def call_mixed_signature(x):
    return _mixed(x, 3, 1, 2, c=5, e=7), _mixed(x, c=1)


def _posonly(a, b, /, c=1):
    return a - b * c


@case(inputs=x34_y34)
def call_positional_only(x, y):
    return _posonly(x, y, c=2), _posonly(y, x)


@case(inputs=lambda g: Call(randn(g, 3, 4), bias=randn(g, 4)))
def compiled_called_with_kwargs(x, bias=None, scale=2.0):
    return x * scale + bias


@case(inputs=x34)
def compiled_with_defaults_unused(x, k=3, offset=0.5):
    return x * k + offset


@case(inputs=lambda g: (randn(g, 2, 3), randn(g, 2, 3), randn(g, 2, 3)))
def compiled_varargs(*xs):
    return sum(xs), len(xs)


@case(inputs=lambda g: Call(randn(g, 2, 3), a=randn(g, 2, 3), b=randn(g, 3)))
def compiled_varkw(x, **tensors):
    for name, t in tensors.items():
        x = x + t
    return x, list(tensors)


def _depth(x, n):
    if n == 0:
        return x
    return _depth(x * 2 + n, n - 1)


@case(inputs=x34)
def call_recursive(x):
    return _depth(x, 3)


def _level3(t):
    return t.relu() + 1


def _level2(t):
    return _level3(t * 2) - _level3(-t)


def _level1(t):
    return _level2(t).sum(dim=0)


@case(inputs=x34)
def call_nested_three_deep(x):
    return _level1(x)


class _Scaler:
    def __init__(self, k):
        self.k = k
        self.shift = 0.5

    def apply(self, x):
        return x * self.k + self.shift

    def twice(self, x):
        return self.apply(self.apply(x))


GLOBAL_SCALER = _Scaler(1.5)


@case(inputs=x34)
def call_method_on_python_object(x):
    return GLOBAL_SCALER.twice(x)


@case(inputs=x34)
def call_bound_method_as_value(x):
    f = GLOBAL_SCALER.apply
    return f(x) - f(x * 0)


def _apply_fn(f, x):
    return f(x) * 2


@case(inputs=x34)
def call_higher_order(x):
    return _apply_fn(torch.sigmoid, x) + _apply_fn(_level3, x)


# ---------------------------------------------------------------------------------------------
# Arithmetic, comparisons and builtins on Python values

@case(inputs=lambda g: (randn(g, 6, 4),))
def int_arithmetic_from_shape(x):
    n, d = x.shape
    m = n * 2 + 7 // 2 - 10 % 3 + 2 ** 3
    q = -(n // 4) + abs(-d)
    return x * m + q, m, q


@case(inputs=x34)
def float_arithmetic(x):
    a = 7 / 2
    b = 7.5 // 2
    c = -2.5 % 2
    d = 1.5 ** 2
    return x * a + b - c * d, (a, b, c, d)


@case(inputs=lambda g: (randn(g, 2, 16),))
def math_functions(x):
    d = x.shape[-1]
    s = 1.0 / math.sqrt(d)
    t = math.log(d) + math.exp(0.5) + math.cos(math.pi) + math.floor(2.7) + math.ceil(2.1)
    return x * s + t, math.isclose(s, 0.25), math.prod([2, 3])


@case(inputs=x34)
def int_bitwise(x):
    n = x.shape[0]
    return x * ((n & 3) + (n | 4) + (n ^ 1) + (n << 2) + (n >> 1) + ~n)


@case(inputs=x34)
def compare_chained(x):
    n = x.shape[0]
    flags = (1 < n <= 10, n == 3, n != 3, n >= 4, 2 < n < 3)
    return x * sum(flags), flags


@case(inputs=x34)
def bool_operators(x):
    n, m = x.shape
    a = n > 1 and m > 1
    b = n > 5 or m == 4
    c = not (n == m)
    d = (n > 5) or 7
    e = 0 and n
    return x + a + b + c, (a, b, c, d, e)


@case(inputs=lambda g: (randn(g, 5, 2), [1, 2, 3]))
def builtin_len(x, items):
    return x * len(x) + len(items) + len(x.shape), len(x)


@case(inputs=lambda g: (randn(g, 3), 3, 2.0))
def builtin_isinstance(x, n, f):
    out = x
    if isinstance(x, torch.Tensor):
        out = out + 1
    if isinstance(n, int) and not isinstance(n, bool):
        out = out * n
    if isinstance(f, (int, float)):
        out = out - f
    if isinstance(x, (list, tuple)):
        out = out * 100
    return out


@case(inputs=x34)
def builtin_min_max_ints(x):
    n, d = x.shape
    lo = min(n, d)
    hi = max(n, d, 2)
    m = max([n, d, 1]) + min((5, n))
    return x[:lo, :lo] * hi + m, (lo, hi, m)


@case(inputs=x34)
def builtin_abs_round_divmod(x):
    q, r = divmod(17, x.shape[1])
    return x * abs(-3) + round(2.6) + round(1.25, 1) + q - r, (q, r)


@case(inputs=x34)
def builtin_int_float_bool(x):
    a = int(3.9) + int("4") + float(x.shape[0]) + bool(x.shape[1]) + int(True)
    return x * a, a


@case(inputs=lambda g: (randn(g, 3),))
def builtin_sum_tensors(x):
    parts = [x, x * 2, x * 3]
    return sum(parts), sum(parts, x), sum(range(5))


@case(inputs=x34)
def builtin_all_any(x):
    dims = list(x.shape)
    return x * (all([d > 1 for d in [3, 4]]) + any([d > 3 for d in dims]) + all([]) + any(())), all(dims)


@case(inputs=x34)
def builtin_sorted_reversed(x):
    order = sorted([3, 1, 2])
    rev = list(reversed(order))
    return x.permute(*sorted([1, 0], reverse=True)) * rev[0], order, rev


@case(inputs=x34)
def builtin_getattr_hasattr(x):
    k = getattr(GLOBAL_SCALER, "k", 0.0)
    missing = getattr(GLOBAL_SCALER, "missing", 7.0)
    return x * k + missing + hasattr(GLOBAL_SCALER, "shift"), hasattr(GLOBAL_SCALER, "nope")


@case(inputs=lambda g: (randn(g, 3), 2))
def builtin_type_checks(x, n):
    a = type(n) is int
    b = type(x) is torch.Tensor
    c = callable(_level3)
    return x + a + b + c


@case(inputs=x34)
def builtin_str_and_fstring(x):
    n, d = x.shape
    label = f"{n}x{d}"
    spec = f"{GLOBAL_SCALE:.2f}|{n:03d}|{'a'!r}|{d!s}"
    name = "layer" + str(n) + "_" + GLOBAL_NAMES[0].upper()
    return x * len(label), label, spec, name


@case(inputs=x34)
def builtin_str_methods(x):
    name = "  Block.Attn  "
    parts = name.strip().lower().split(".")
    joined = "-".join(parts)
    return x * len(joined) if joined.startswith("block") else x, joined, name.replace(" ", "")


@case(inputs=x34)
def is_none_checks(x, bias=None):
    out = x
    if bias is None:
        out = out + 1
    if bias is not None:
        out = out + bias
    return out, bias is None


@case(inputs=lambda g: (randn(g, 3, 4), randn(g, 4)))
def is_none_with_tensor(x, bias):
    if bias is not None:
        x = x + bias
    return x


@case(inputs=x34)
def contains_checks(x):
    d = {"a": 1, "b": 2}
    n = x.shape[0]
    out = x
    if "a" in d:
        out = out + 1
    if "z" not in d:
        out = out * 2
    if n in (1, 2, 3):
        out = out - 3
    if 4 in [n, x.shape[1]]:
        out = out / 2
    return out, "b" in d


@case(inputs=x34)
def ternary_expression(x):
    n = x.shape[0]
    k = 2.0 if n > 2 else -2.0
    y = x.relu() if n % 2 else x.tanh()
    return y * k


@case(inputs=x34)
def augmented_assign_ints(x):
    n = x.shape[0]
    n += 2
    n *= 3
    n -= 1
    n //= 2
    n **= 2
    n %= 7
    return x * n, n


@case(inputs=x34)
def unary_ops_python(x):
    n = x.shape[0]
    return x * -n + (+n) + (~n) + (not n), -n
