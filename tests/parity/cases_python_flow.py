"""Parity cases for Python constructs, continued (cases_python.py has locals, globals, closures, calls
and builtins): containers and unpacking, control flow, comprehensions and lambdas, generators, and objects
changed through object.__setattr__. Every program here must be captured in one graph (counters "strict")
unless noted.
"""
import dataclasses

import torch

from ember.testing import randint, randn

from .cases_python import x34, x34_y34
from .registry import case


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
