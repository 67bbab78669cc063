"""Parity cases for Python constructs: locals, globals, closures, calls, builtins, containers,
control flow, comprehensions, lambdas, f-strings, assert, grad-mode blocks and side effects on
Python state. Every program here must be captured in one graph (counters "strict") unless noted.
"""
import dataclasses
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


# ---------------------------------------------------------------------------------------------
# Tuples, lists, dicts, slices and unpacking

@case(inputs=x34_y34)
def tuple_pack_unpack(x, y):
    pair = (x, y)
    a, b = pair
    (c, d), e = (a * 2, b), a - b
    return c + d + e, pair


@case(inputs=x34)
def star_unpack_list(x):
    first, *rest = [x, x * 2, x * 3, x * 4]
    return first, len(rest), sum(rest)


@case(inputs=x34)
def star_unpack_middle(x):
    a, *mid, b = (1, 2, 3, 4, 5)
    head, *_ = x.shape
    return x * (a + sum(mid) + b) + head, mid


@case(inputs=x34)
def unpack_tensor_rows(x):
    r0, r1, r2 = x
    return r0 + r1 * r2


@case(inputs=x34)
def unpack_shape(x):
    rows, cols = x.shape
    *batch, last = x.shape
    return x.reshape(cols, rows) * last, batch


@case(inputs=x34)
def list_methods(x):
    items = []
    items.append(x)
    items.append(x * 2)
    items.extend([x * 3, x * 4])
    items.insert(0, x - 1)
    last = items.pop()
    first = items.pop(0)
    items.reverse()
    return last + first, items, len(items)


@case(inputs=x34)
def list_index_and_slices(x):
    items = [x * i for i in range(5)]
    return items[1] + items[-1], items[1:3], items[::-2], items[:-3], [1, 2, 3].index(2), [1, 1, 2].count(1)


@case(inputs=x34)
def list_setitem_and_slice_assign(x):
    items = [x, x, x, x]
    items[0] = x * 5
    items[-1] = items[0] - 1
    items[1:3] = [x.sin()]
    del items[1]
    return items


@case(inputs=x34_y34)
def dict_build_and_read(x, y):
    d = {"x": x, "y": y, "n": x.shape[0]}
    return d["x"] * d["n"] + d["y"], d


@case(inputs=x34)
def dict_setitem_update_pop(x):
    d = {}
    d["a"] = x
    d["b"] = x * 2
    d.update(c=x * 3)
    d.update({"a": x - 1})
    b = d.pop("b")
    d.setdefault("z", x.cos())
    d.setdefault("a", x * 100)
    return b, d


@case(inputs=x34)
def dict_get_default(x):
    cfg = {"scale": 2.0, "act": "relu"}
    s = cfg.get("scale", 1.0)
    shift = cfg.get("shift", 0.5)
    act = cfg.get("act")
    y = x * s + shift
    return y.relu() if act == "relu" else y


@case(inputs=x34)
def dict_keys_values_items(x):
    d = {"a": 1.0, "b": 2.0, "c": 3.0}
    out = x
    for k in d.keys():
        out = out + len(k)
    for v in d.values():
        out = out * v
    for k, v in d.items():
        out = out - v
    return out, list(d), list(d.values()), len(d)


@case(inputs=x34)
def dict_comprehension(x):
    d = {f"p{i}": x * i for i in range(3)}
    inv = {v: k for k, v in {"a": 1, "b": 2}.items()}
    return d, inv


@case(inputs=x34)
def dict_merge_operators(x):
    a = {"x": x, "k": 1}
    b = {"k": 2, "y": x * 2}
    merged = {**a, **b}
    merged2 = a | b
    return merged, list(merged2)


@case(inputs=lambda g: (randn(g, 3, 4), randn(g, 3, 4), randn(g, 3, 4)))
def tuple_slices_and_concat(a, b, c):
    t = (a, b, c)
    u = t[1:] + (a * 2,)
    v = list(t[:-1]) + [c]
    w = (1, 2) * 2
    return u, v, w, t[::-1]


@case(inputs=lambda g: ([randn(g, 2, 3), randn(g, 2, 3), randn(g, 2, 3)],))
def list_input(xs):
    total = xs[0]
    for t in xs[1:]:
        total = total * t
    return total, len(xs)


@case(inputs=lambda g: ({"w": randn(g, 3, 3), "b": randn(g, 3), "x": randn(g, 2, 3)},))
def dict_input(params):
    return params["x"] @ params["w"] + params["b"]


@case(inputs=lambda g: ((randn(g, 2, 3), (randn(g, 3), 2)),))
def nested_tuple_input(arg):
    x, (b, k) = arg
    return x * k + b


@case(inputs=x34_y34)
def return_nested_structure(x, y):
    return {"a": [x, (y, x + y)], "b": None, "n": 3, "s": "text", "t": (1.5, True)}


@case(inputs=lambda g: (randn(g, 6, 5),))
def slice_objects(x):
    s = slice(1, 4)
    t = slice(None, None, 2)
    return x[s], x[:, t], x[s, t], s.start + s.stop


# ---------------------------------------------------------------------------------------------
# Control flow on Python values and tensor metadata

@case(inputs=lambda g: (randn(g, 3, 4), True))
def if_on_python_bool(x, flag):
    if flag:
        return x + 1
    return x - 1


@case(inputs=lambda g: (randn(g, 3, 4), 2))
def if_elif_else_on_int(x, mode):
    if mode == 0:
        y = x.relu()
    elif mode == 1:
        y = x.sigmoid()
    elif mode == 2:
        y = x.tanh()
    else:
        y = x
    return y


@case(inputs=lambda g: (randn(g, 5, 4),))
def if_on_shape(x):
    if x.shape[0] > 4:
        x = x[:4]
    if x.size(1) == 4 and x.shape[-1] % 2 == 0:
        x = x.reshape(-1, 2)
    return x


@case(inputs=lambda g: (randn(g, 3, 4, dtype=torch.float16),))
def if_on_dtype(x):
    if x.dtype == torch.float16:
        x = x.float()
    if x.dtype is torch.float32:
        x = x * 2
    if x.dtype in (torch.int32, torch.int64):
        x = x * 100
    return x


@case(inputs=lambda g: (randn(g, 2, 3, 4),))
def if_on_ndim(x):
    if x.ndim == 3:
        x = x.flatten(0, 1)
    if x.dim() == 2:
        x = x.t()
    return x


@case(inputs=x34)
def if_on_device(x):
    if x.device.type == "cpu":
        x = x + 1
    if x.device == torch.device("cpu"):
        x = x * 2
    if x.is_cuda:
        x = x * 100
    return x


@case(inputs=lambda g: (randn(g, 3), randint(g, 0, 5, 3)))
def if_on_is_floating_point(x, i):
    out = []
    for t in (x, i):
        if t.is_floating_point():
            out.append(t * 0.5)
        else:
            out.append(t // 2)
    return out


@case(inputs=lambda g: (randn(g, 3, requires_grad=True), randn(g, 3)))
def if_on_requires_grad(x, y):
    a = x * 2 if x.requires_grad else x
    b = y * 2 if y.requires_grad else y * 3
    return a, b


@case(inputs=lambda g: (randn(g, 3, 4),))
def if_on_numel_and_contiguity(x):
    t = x.t()
    if not t.is_contiguous():
        t = t.contiguous()
    if x.numel() > 10:
        t = t * 2
    return t


@case(inputs=x34)
def while_loop_on_int(x):
    i = 0
    while i < 3:
        x = x * 2 + i
        i += 1
    return x


@case(inputs=x34)
def for_range(x):
    for i in range(3):
        x = x + i
    return x


@case(inputs=x34)
def for_range_step_negative(x):
    acc = x
    for i in range(10, 0, -3):
        acc = acc * 0.5 + i
    return acc


@case(inputs=x34)
def for_over_tuple(x):
    for k in (1.0, -2.0, 0.5):
        x = x * k
    return x


@case(inputs=x34)
def for_over_list_of_tensors(x):
    outs = []
    for t in [x, x.sin(), x.cos()]:
        outs.append(t.sum(dim=1))
    return torch.stack(outs)


@case(inputs=x34)
def for_dict_items(x):
    weights = {"a": 1.0, "b": 2.0}
    for name, w in weights.items():
        x = x * w if name == "a" else x + w
    return x


@case(inputs=x34)
def for_enumerate(x):
    acc = x * 0
    for i, row in enumerate(x):
        acc[i] = row * i
    for i, k in enumerate([2.0, 3.0], start=1):
        acc = acc + i * k
    return acc


@case(inputs=x34_y34)
def for_zip(x, y):
    out = []
    for a, b, k in zip(x, y, range(10)):
        out.append(a * b + k)
    return torch.stack(out)


@case(inputs=x34)
def for_break_continue(x):
    for i in range(10):
        if i % 2 == 0:
            continue
        if i > 5:
            break
        x = x + i
    return x


@case(inputs=x34)
def for_else(x):
    for i in range(3):
        if i == 7:
            break
    else:
        x = x * 10
    return x


@case(inputs=lambda g: (randn(g, 2, 3, 4),))
def for_over_shape(x):
    total = 1
    for d in x.shape:
        total *= d
    return x.reshape(total), total


@case(inputs=x34)
def for_reversed_and_nested(x):
    out = x
    for i in reversed(range(3)):
        for j in range(i):
            out = out + i * j
    return out


# ---------------------------------------------------------------------------------------------
# Comprehensions and lambdas

@case(inputs=x34)
def list_comprehension(x):
    return [x * i for i in range(4)]


@case(inputs=x34)
def list_comprehension_filter(x):
    odd = [i for i in range(8) if i % 2]
    return [x + i for i in odd], odd


@case(inputs=x34)
def nested_comprehension(x):
    grid = [[i * j for j in range(3)] for i in range(2)]
    return [[x * v for v in row] for row in grid], grid


@case(inputs=x34)
def comprehension_over_tensor_rows(x):
    return torch.stack([r.sum() for r in x]), [t.shape for t in x.split(2, dim=1)]


@case(inputs=x34)
def lambda_local(x):
    double = lambda t: t * 2  # noqa: E731
    return double(x) + double(1.5)


@case(inputs=x34)
def lambda_with_default(x):
    f = lambda t, k=3.0: t + k  # noqa: E731
    return f(x), f(x, k=-1.0)


@case(inputs=x34)
def lambda_closure(x):
    k = x.shape[1]
    f = lambda t: t * k  # noqa: E731
    return f(x)


@case(inputs=x34)
def lambda_higher_order(x):
    fs = [lambda t: t + 1, lambda t: t * 2, torch.neg]
    for f in fs:
        x = f(x)
    return x


@case(inputs=x34)
def builtin_map_filter(x):
    parts = list(map(lambda t: t * 2, [x, x + 1]))
    keep = list(filter(lambda i: i > 1, [0, 1, 2, 3]))
    return parts, keep


@case(inputs=x34)
def sorted_with_key(x):
    items = [("b", 2), ("a", 3), ("c", 1)]
    order = sorted(items, key=lambda kv: kv[1])
    return x * order[0][1], [k for k, _ in order]


# ---------------------------------------------------------------------------------------------
# assert, f-strings in errors, grad mode, super()

@case(inputs=x34)
def assert_on_shape(x):
    assert x.shape[-1] == 4, f"expected 4 features, got {x.shape}"
    assert x.ndim == 2
    return x * 2


@case(inputs=x34)
def assert_isinstance(x):
    assert isinstance(x, torch.Tensor), "not a tensor"
    assert x.dtype == torch.float32
    return x.relu()


@case(inputs=lambda g: (randn(g, 3, 4, requires_grad=True),), sets_grad_mode=True)
def with_no_grad(x):
    with torch.no_grad():
        y = x * 2
    z = x * 3
    return y, z, y.requires_grad


@case(inputs=lambda g: (randn(g, 3, 4, requires_grad=True),), sets_grad_mode=True)
def with_enable_grad_inside_no_grad(x):
    with torch.no_grad():
        a = x + 1
        with torch.enable_grad():
            b = x * 2
        c = x - 1
    return a, b, c


@case(inputs=lambda g: (randn(g, 3, 4, requires_grad=True),), sets_grad_mode=True)
def with_set_grad_enabled(x):
    with torch.set_grad_enabled(False):
        a = x.exp()
    with torch.set_grad_enabled(True):
        b = x.exp()
    return a, b


@case(inputs=lambda g: (randn(g, 3, 4, requires_grad=True),), sets_grad_mode=True)
def is_grad_enabled_branch(x):
    outs = []
    if torch.is_grad_enabled():
        outs.append(x * 2)
    with torch.no_grad():
        if not torch.is_grad_enabled():
            outs.append(x * 3)
    return outs


@torch.no_grad()
def _no_grad_helper(t):
    return t * 4


@case(inputs=lambda g: (randn(g, 3, 4, requires_grad=True),), sets_grad_mode=True,
      note="torch.no_grad() used as a decorator (not named by the issue)")
def no_grad_decorated_helper(x):
    return _no_grad_helper(x) + x


@case(inputs=lambda g: (randn(g, 3, 4, requires_grad=True),))
def detach_and_requires_grad_queries(x):
    d = x.detach()
    return d * 2, x * 2, d.requires_grad, x.requires_grad


class _Base:
    def transform(self, x):
        return x * 2

    def describe(self):
        return "base"


class _Child(_Base):
    def transform(self, x):
        return super().transform(x) + 1

    def describe(self):
        return "child<" + super().describe() + ">"


class _GrandChild(_Child):
    def transform(self, x):
        return super().transform(x).relu()


GLOBAL_CHILD = _GrandChild()


@case(inputs=x34)
def super_method_chain(x):
    return GLOBAL_CHILD.transform(x), GLOBAL_CHILD.describe()


class _Ops:
    factor = 3

    @staticmethod
    def double(t):
        return t * 2

    @classmethod
    def scale(cls, t):
        return t * cls.factor

    @property
    def offset(self):
        return 0.5


GLOBAL_OPS = _Ops()


@case(inputs=x34)
def staticmethod_classmethod_property(x):
    return _Ops.double(x) + GLOBAL_OPS.double(x) + _Ops.scale(x) + GLOBAL_OPS.scale(x) + GLOBAL_OPS.offset


# ---------------------------------------------------------------------------------------------
# Generators consumed whole and try blocks that raise nothing: the interpreter follows them

def _doubled_rows(x):
    for r in x:
        yield r * 2


@case(inputs=x34)
def generator_function_consumed(x):
    return torch.stack(list(_doubled_rows(x))), sum(_doubled_rows(x))


@case(inputs=x34)
def generator_expression_consumed(x):
    return sum(t * 2 for t in x.unbind(0)), tuple(d * 2 for d in x.shape), max(i for i in range(4))


@case(inputs=x34)
def try_except_no_exception(x):
    try:
        y = x.reshape(2, -1)
    except RuntimeError:
        y = x.t()
    return y


@case(inputs=x34)
def try_finally_no_exception(x):
    out = []
    try:
        out.append(x * 2)
    finally:
        out.append(x + 1)
    return out


# ---------------------------------------------------------------------------------------------
# Objects built or changed through object.__setattr__ (frozen dataclasses do this in __init__)

class _Holder:
    pass


@case(inputs=lambda g: (randn(g, 3, 4), _Holder()), counters="any",
      note="object.__setattr__ on a caller's object: the write must happen on every call, not only when tracing")
def object_setattr_on_input(x, holder):
    object.__setattr__(holder, "value", 7)
    object.__setattr__(holder, "tensor", x * 2)
    return x + holder.value


@dataclasses.dataclass(frozen=True)
class _FrozenConfig:
    scale: float
    shift: float = 0.5


@case(inputs=x34, counters="any", note="a frozen dataclass is built with object.__setattr__ in its __init__")
def frozen_dataclass_built_in_frame(x):
    cfg = _FrozenConfig(scale=2.0)
    return x * cfg.scale + cfg.shift, cfg


@dataclasses.dataclass
class _PlainConfig:
    scale: float
    shift: float = 0.5


@case(inputs=x34, note="plain dataclass construction")
def dataclass_built_in_frame(x):
    cfg = _PlainConfig(3.0)
    return x * cfg.scale + cfg.shift, cfg.scale
