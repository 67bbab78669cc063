"""Differential testing of Ember's shape rules against torch.

A case is a call of a core op on tensor specs (dtype, sizes, strides, requires_grad) and Python
constants. `check` asks the rule (ember._C.shapes.infer_result_types, given meta tensors) and
torch (the same callable on the same meta tensors, under the same grad mode and default dtype),
and also runs the call on real CPU tensors of the same layout:

- a rule that answers must equal torch's meta result exactly (dtype, sizes, strides,
  requires_grad, device), and the call must succeed on CPU;
- a case marked `covered` must get an answer whenever torch accepts it (meta and CPU agree);
  `covered` may be a function of torch's result (a list of (dtype, sizes, strides, ...)).

Random cases come from `rng(name)`, seeded from EMBER_SHAPES_SEED (default 0) and the test's
name; failures print the seed and the case.
"""
import math
import os
import random
import zlib

import torch

from ember._C import shapes

BASE_SEED = int(os.environ.get("EMBER_SHAPES_SEED", "0"))

ALL_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
              torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
UNMODELED = {"complex32"}  # dtypes Ember's IR has no name for
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def rng(name):
    seed = BASE_SEED * 1000003 + zlib.crc32(name.encode())
    r = random.Random(seed)
    r.seed_value = seed
    return r


def contiguous_strides(sizes):
    strides, acc = [], 1
    for s in reversed(sizes):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


class T:
    """A tensor spec: materialized as a meta tensor (for the rule and torch's meta kernel) and
    as a CPU tensor of the same layout (to check that the call really runs)."""

    def __init__(self, sizes, strides=None, dtype=torch.float32, requires_grad=False, index=False):
        self.sizes = tuple(sizes)
        self.strides = tuple(strides) if strides is not None else contiguous_strides(self.sizes)
        self.dtype = dtype
        self.requires_grad = requires_grad and (dtype.is_floating_point or dtype.is_complex)
        self.index = index  # filled with zeros on CPU, so it is a valid index

    def meta(self):
        t = torch.empty_strided(self.sizes, self.strides, dtype=self.dtype, device="meta")
        return t.requires_grad_(True) if self.requires_grad else t

    def cpu(self):
        extent = 1 + sum((s - 1) * abs(st) for s, st in zip(self.sizes, self.strides)) if all(self.sizes) else 0
        base = torch.zeros(max(extent, 1), dtype=self.dtype) if self.index else torch.ones(max(extent, 1), dtype=self.dtype)
        return base.as_strided(self.sizes, self.strides)

    def __repr__(self):
        rg = " grad" if self.requires_grad else ""
        return f"T({list(self.sizes)}{{{','.join(map(str, self.strides))}}} {str(self.dtype)[6:]}{rg})"


def _map(x, f):
    if isinstance(x, T):
        return f(x)
    if isinstance(x, (list, tuple)) and any(isinstance(i, (T, list, tuple)) for i in x):
        return type(x)(_map(i, f) for i in x)
    return x


def _describe(result):
    if isinstance(result, torch.Tensor):
        return [(str(result.dtype)[6:], tuple(result.shape), result.stride(), result.requires_grad, str(result.device))]
    return [_describe(r)[0] for r in result]


class _Mode:
    def __init__(self, grad, default_dtype):
        self.grad, self.default_dtype = grad, default_dtype

    def __enter__(self):
        self.saved = (torch.is_grad_enabled(), torch.get_default_dtype())
        torch.set_grad_enabled(self.grad)
        torch.set_default_dtype(self.default_dtype)

    def __exit__(self, *exc):
        torch.set_grad_enabled(self.saved[0])
        torch.set_default_dtype(self.saved[1])


class Stats:
    def __init__(self):
        self.answered = self.declined = self.refused = 0

    def __repr__(self):
        return f"answered {self.answered}, declined {self.declined}, refused by torch {self.refused}"


def check(op, fn, args, kwargs=None, *, covered, seed=None, default_dtype=torch.float32, stats=None,
          grad_modes=(True, False)):
    """Compares the rule with torch for one call, under each grad mode; see the module doc."""
    kwargs = kwargs or {}
    for grad in grad_modes:
        meta_args = _map(list(args), T.meta)
        meta_kwargs = {k: _map(v, T.meta) for k, v in kwargs.items()}
        got = shapes.infer_result_types(op, tuple(meta_args), meta_kwargs, grad, str(default_dtype)[6:])
        with _Mode(grad, default_dtype):
            try:
                ref = _describe(fn(*meta_args, **meta_kwargs))
            except Exception as e:  # torch refuses the call
                ref, meta_error = None, e
            try:
                real = _describe(fn(*_map(list(args), T.cpu), **{k: _map(v, T.cpu) for k, v in kwargs.items()}))
                # Where the CPU kernel disagrees with the meta kernel, torch has no one answer.
                cpu_ok = ref is not None and [r[:2] for r in real] == [r[:2] for r in ref]
            except Exception as e:
                cpu_ok = str(e) == "ZeroDivisionError"  # a value error of the CPU data, not a type error
        where = f"seed {seed}: {op}{tuple(args)!r} {kwargs!r} grad={grad} default={default_dtype}"
        if got is not None:
            got = [tuple(g) for g in got]
            assert ref is not None, f"{where}: rule answered {got} but torch's meta kernel raised {meta_error!r}"
            assert cpu_ok, f"{where}: rule answered {got} but the call fails on CPU"
            assert got == ref, f"{where}: rule {got} != torch {ref}"
        elif ref is not None and cpu_ok and not any(r[0] in UNMODELED for r in ref) and (
                covered(ref) if callable(covered) else covered):
            raise AssertionError(f"{where}: rule declined a covered case (torch gives {ref})")
        if stats is not None:
            if ref is None or not cpu_ok:
                stats.refused += 1
            elif got is None:
                stats.declined += 1
            else:
                stats.answered += 1
    return stats


def scalars_fit(dtype, *values):
    """Whether the Python scalars among `values` convert to `dtype` without overflow (the rules
    decline the others: torch wraps or refuses them depending on the op): ints within an integer
    dtype's range or a floating dtype's finite range, floats only into floating or complex
    dtypes and within range (inf and nan fit), complex numbers only into complex dtypes."""
    limit = {torch.float16: 65504.0, torch.bfloat16: torch.finfo(torch.bfloat16).max,
             torch.float32: torch.finfo(torch.float32).max, torch.complex64: torch.finfo(torch.float32).max}.get(dtype)

    def real_fits(v):
        return limit is None or not math.isfinite(v) or abs(v) <= limit

    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float, complex)):
            continue
        if isinstance(v, complex):
            if not (dtype.is_complex and real_fits(v.real) and real_fits(v.imag)):
                return False
        elif isinstance(v, float):
            if not ((dtype.is_floating_point or dtype.is_complex) and real_fits(v)):
                return False
        elif dtype.is_floating_point or dtype.is_complex:
            if not real_fits(v):
                return False
        else:
            info = torch.iinfo(dtype) if dtype != torch.bool else None
            lo, hi = (info.min, info.max) if info else (0, 1)
            if not lo <= v <= hi:
                return False
    return True


def common_dtype(*operands):
    """torch.result_type of specs and scalars (meta tensors), or None where torch refuses."""
    try:
        items = [o.meta() if isinstance(o, T) else o for o in operands if o is not None]
        return torch.result_type(*items) if len(items) == 2 else None
    except Exception:
        return None


def rule(op, *args, grad=True, default_dtype="float32", **kwargs):
    """The rule's answer for a call on meta tensors built from specs."""
    return shapes.infer_result_types(op, tuple(_map(list(args), T.meta)), {k: _map(v, T.meta) for k, v in kwargs.items()},
                                     grad, default_dtype)


# ---- Random layouts ----------------------------------------------------------------------------

def random_sizes(r, min_dim=0, max_dim=4, sizes=(1, 2, 3, 4, 5), zero=0.03):
    n = r.randint(min_dim, max_dim)
    return tuple(0 if r.random() < zero else r.choice(sizes) for _ in range(n))


def random_strides(r, sizes, layout=None):
    """Strides for `sizes`: default, permuted (dense), gapped or sliced (a slice of something
    bigger, perhaps permuted), broadcast (stride 0 on some dims), channels-last (4-d; perhaps odd strides on
    size-1 dims), or default with odd strides on size-1 dims."""
    layout = layout or r.choice(["default", "default", "permuted", "gapped", "broadcast", "odd1", "sliced"])
    n = len(sizes)
    if layout == "default" or n == 0:
        return contiguous_strides(sizes)
    if layout == "permuted":
        order = list(range(n))
        r.shuffle(order)
        inner = contiguous_strides([sizes[d] for d in order])
        strides = [0] * n
        for pos, d in enumerate(order):
            strides[d] = inner[pos]
        return tuple(strides)
    if layout == "sliced":  # a slice of a bigger tensor, perhaps permuted, perhaps with odd size-1 strides
        bigger = [s + r.choice([0, 1, 3]) for s in sizes]
        strides = list(random_strides(r, bigger, r.choice(["default", "permuted"])))
        for i, s in enumerate(sizes):
            if s == 1 and r.random() < 0.3:
                strides[i] = r.choice([1, 5, 1000])
        return tuple(strides)
    if layout == "gapped":
        bigger = [s + r.choice([0, 0, 1, 2]) for s in sizes]
        step = r.choice([1, 1, 2])
        return tuple(st * (step if i == n - 1 else 1) for i, st in enumerate(contiguous_strides(bigger)))
    if layout == "broadcast":
        return tuple(0 if r.random() < 0.4 else st for st in contiguous_strides(sizes))
    if layout == "channels_last" and n == 4:  # perhaps a batch of one (or other size-1 dims) with odd strides
        c, h, w = sizes[1], sizes[2], sizes[3]
        strides = [h * w * c, 1, w * c, c]
        for i, s in enumerate(sizes):
            if s == 1 and r.random() < 0.5:
                strides[i] = r.choice([1, 3, 1000])
        return tuple(strides)
    strides = list(contiguous_strides(sizes))
    for i, s in enumerate(sizes):
        if s == 1 and r.random() < 0.7:
            strides[i] = r.choice([1, 2, 7, 100])
    return tuple(strides)


def random_tensor(r, sizes=None, dtype=None, layout=None, grad=None, **kw):
    sizes = random_sizes(r, **kw) if sizes is None else tuple(sizes)
    dtype = dtype or r.choice([torch.float32, torch.float32] + ALL_DTYPES)
    grad = r.random() < 0.5 if grad is None else grad
    return T(sizes, random_strides(r, sizes, layout), dtype, grad)


def broadcastable(r, sizes):
    """A shape that broadcasts to `sizes`: a suffix with some dims set to 1."""
    k = r.randint(0, len(sizes))
    return tuple(1 if r.random() < 0.3 else s for s in sizes[len(sizes) - k:])
