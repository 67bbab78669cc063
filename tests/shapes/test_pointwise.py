"""Pointwise shape rules against torch: every dtype pair and scalar kind, random broadcasts and
layouts, both grad modes, both default dtypes."""
import pytest
import torch
import torch.nn.functional as F

from .harness import (ALL_DTYPES, T, Stats, broadcastable, check, common_dtype, contiguous_strides, scalars_fit,
                      random_sizes, random_strides, rng)

UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "erf": torch.erf, "reciprocal": torch.reciprocal, "relu": torch.relu, "gelu": F.gelu, "silu": F.silu,
    "logical_not": torch.logical_not, "bitwise_not": torch.bitwise_not,
}
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "floor_divide": torch.floor_divide,
    "remainder": torch.remainder, "pow": torch.pow, "maximum": torch.maximum, "minimum": torch.minimum,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
}
SCALARS = [True, False, 0, 2, -3, 2.5, -0.5, 1j]


def layout_covered(tensors):
    """The layouts the pointwise rules promise to answer: all default strides; or one shared
    layout over tensor operands all of the output's shape, with nonzero strides either
    decreasing outer to inner (ties only between size-1 dims), channels-last, or distinct over dims > 1."""
    if all(t.strides == contiguous_strides(t.sizes) for t in tensors):
        return True
    out = tuple(torch.broadcast_shapes(*[t.sizes for t in tensors])) if tensors else ()
    if not out or any(t.sizes != out or t.strides != tensors[0].strides for t in tensors):
        return False
    s = tensors[0].strides
    if 0 in s or 0 in out:
        return False
    if all(s[d - 1] > s[d] or (s[d - 1] == s[d] and out[d - 1] == 1 and out[d] == 1) for d in range(1, len(s))):
        return True
    if len(out) == 4 and walks(out, s, (1, 3, 2, 0)) and not walks(out, s, (3, 2, 1, 0)):
        return True  # channels-last (a batch of one among them), not row-major too
    return all(n > 1 for n in out) and len(set(s)) == len(s)


def walks(sizes, strides, order):
    """Whether `strides` lay `sizes` out densely in `order` (innermost first), size-1 dims' strides aside."""
    expected = 1
    for d in order:
        if sizes[d] != 1:
            if strides[d] != expected:
                return False
            expected *= sizes[d]
    return True


def laid_out(op, tensors, ref):
    """The operands that decide the result's layout: a 0-d tensor of the result's dtype (torch's
    `ref`) does not, except under floor_divide and remainder (compositions in their meta kernels)."""
    if op in ("floor_divide", "remainder"):
        return tensors
    laid = [t for t in tensors if t.sizes != () or str(t.dtype)[6:] != ref[0][0]]
    return laid or tensors


@pytest.mark.parametrize("op", sorted(BINARY))
def test_zero_dim_operand_next_to_a_permuted_tensor(op):
    """`q / scale` with q permuted (attention) and scale a 0-d tensor: q's order is the result's."""
    stats = Stats()
    q = T((2, 4, 16, 8), (512, 8, 32, 1))
    for dt in (torch.float32, torch.float64, torch.int64, torch.bool):
        s = T((), dtype=dt)
        for args in ([q, s], [s, q]):
            check(op, BINARY[op], args, covered=lambda ref, args=args: layout_covered(laid_out(op, args, ref)),
                  stats=stats)
    assert stats.answered > 0 or op in ("floor_divide", "remainder", "bitwise_and", "bitwise_or", "bitwise_xor"), stats


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_every_dtype(op):
    stats = Stats()
    for default in (torch.float32, torch.float64):
        for dt in ALL_DTYPES:
            for sizes in [(), (3,), (2, 3)]:
                x = T(sizes, dtype=dt, requires_grad=True)
                # Complex silu has no derivative: declined rather than made to depend on grad mode.
                covered = not (op == "silu" and dt.is_complex)
                check(op, UNARY[op], [x], covered=covered, default_dtype=default, stats=stats)
    assert stats.answered > 0, stats


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_random_layouts(op):
    r = rng("unary " + op)
    stats = Stats()
    for _ in range(150):
        sizes = random_sizes(r)
        x = T(sizes, random_strides(r, sizes), r.choice([torch.float32, torch.float16, torch.int64, torch.bool]),
              r.random() < 0.5)
        kwargs = {}
        if op == "gelu" and r.random() < 0.5:
            kwargs["approximate"] = r.choice(["none", "tanh"])
        check(op, UNARY[op], [x], kwargs, covered=layout_covered([x]) and not (op == "silu" and x.dtype.is_complex),
              seed=r.seed_value, stats=stats)
    assert stats.answered > 0, stats


def test_convert_random_layouts():
    # prims.convert_element_type, decompose's cast: a dense input keeps its layout (a permuted
    # bf16 tensor converted to float32 stays permuted, as Tensor.to keeps it).
    r = rng("convert")
    stats = Stats()
    for _ in range(150):
        sizes = random_sizes(r)
        x = T(sizes, random_strides(r, sizes), r.choice([torch.float32, torch.bfloat16, torch.int64, torch.bool]),
              r.random() < 0.5)
        dt = r.choice([torch.float32, torch.float64, torch.bfloat16, torch.int32])
        # The rule declines size-1 dims with non-default strides: the meta kernel keeps those.
        unit_default = all(n != 1 or s == c for n, s, c in zip(x.sizes, x.strides, contiguous_strides(x.sizes)))
        check("convert", torch.ops.prims.convert_element_type, [x, dt], covered=layout_covered([x]) and unit_default,
              seed=r.seed_value, stats=stats)
    assert stats.answered > 0, stats


def _fits(x, y, *values):
    """The rules decline Python ints outside the computation dtype's range."""
    dt = common_dtype(x, y)
    return dt is None or (dt != torch.complex32 and scalars_fit(dt, y, *values))


def _operand(r, sizes):
    kind = r.random()
    if kind < 0.2:
        return r.choice(SCALARS)
    if kind < 0.35:
        return T((), dtype=r.choice(ALL_DTYPES), requires_grad=r.random() < 0.5)
    shape = broadcastable(r, sizes) if r.random() < 0.6 else sizes
    return T(shape, random_strides(r, shape), r.choice(ALL_DTYPES + [torch.float32] * 4), r.random() < 0.5)


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_every_dtype_pair(op):
    stats = Stats()
    for default in (torch.float32, torch.float64):
        for a in ALL_DTYPES:
            # The default dtype matters for tensor pairs only through true division.
            for b in ALL_DTYPES if default == torch.float32 or op == "div" else []:
                for xs, ys in [((3,), (3,)), ((2, 3), ()), ((), (2, 1))]:
                    x, y = T(xs, dtype=a, requires_grad=True), T(ys, dtype=b)
                    check(op, BINARY[op], [x, y], covered=_fits(x, y), default_dtype=default, stats=stats,
                          grad_modes=(True,))
            for s in SCALARS:
                for xs in [(2, 3), ()]:
                    x = T(xs, dtype=a, requires_grad=True)
                    check(op, BINARY[op], [x, s], covered=_fits(x, s), default_dtype=default, stats=stats,
                          grad_modes=(True,))
    assert stats.answered > 0, stats


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_random_broadcasts(op):
    r = rng("binary " + op)
    stats = Stats()
    for _ in range(200):
        out = random_sizes(r)
        x = _operand(r, out)
        if not isinstance(x, T):
            x = T(out, dtype=torch.float32)
        y = _operand(r, out)
        tensors = [t for t in (x, y) if isinstance(t, T)]
        check(op, BINARY[op], [x, y], covered=lambda ref, tensors=tensors: layout_covered(laid_out(op, tensors, ref))
              and _fits(x, y), seed=r.seed_value, stats=stats)
    assert stats.answered > 0, stats


def test_add_sub_alpha():
    stats = Stats()
    for fn, op in ((torch.add, "add"), (torch.sub, "sub")):
        for a in ALL_DTYPES:
            for b in [torch.int64, torch.float32, torch.complex64, True, 3, 1.5]:
                y = T((2, 3), dtype=b) if isinstance(b, torch.dtype) else b
                for alpha in [2, -1, 0.5, True, 1j, 300]:
                    x = T((2, 3), dtype=a, requires_grad=True)
                    check(op, fn, [x, y], {"alpha": alpha}, covered=_fits(x, y, alpha), stats=stats)
    assert stats.answered > 0, stats


def test_div_rounding_modes():
    stats = Stats()
    for a in ALL_DTYPES:
        for b in ALL_DTYPES + [2, 2.5, True]:
            y = T((3,), dtype=b) if isinstance(b, torch.dtype) else b
            for mode in [None, "trunc", "floor"]:
                x = T((2, 3), dtype=a, requires_grad=True)
                check("div", torch.div, [x, y], {"rounding_mode": mode}, covered=_fits(x, y), stats=stats)
    assert stats.answered > 0, stats


def test_where():
    r = rng("where")
    stats = Stats()
    for _ in range(400):
        out = random_sizes(r)
        cond = T(broadcastable(r, out) if r.random() < 0.5 else out,
                 dtype=torch.bool if r.random() < 0.9 else torch.uint8)
        cond.strides = random_strides(r, cond.sizes)
        x, y = _operand(r, out), _operand(r, out)
        tensors = [t for t in (cond, x, y) if isinstance(t, T)]
        covered = layout_covered(tensors) and _fits(x, y, x)
        check("where", torch.where, [cond, x, y], covered=covered, seed=r.seed_value, stats=stats)
    assert stats.answered > 0, stats


def test_masked_fill():
    r = rng("masked_fill")
    stats = Stats()
    for _ in range(400):
        out = random_sizes(r, min_dim=1)
        x = T(out, random_strides(r, out), r.choice(ALL_DTYPES), r.random() < 0.5)
        mask = T(broadcastable(r, out), dtype=torch.bool if r.random() < 0.9 else torch.uint8)
        mask.strides = random_strides(r, mask.sizes)
        if r.random() < 0.7:
            value = r.choice(SCALARS + [1000, 1e10])
        else:
            value = T(() if r.random() < 0.9 else (1,), dtype=r.choice(ALL_DTYPES), requires_grad=r.random() < 0.5)
        out = torch.broadcast_shapes(x.sizes, mask.sizes)
        covered = (1 not in out or layout_covered([x, mask])) and scalars_fit(x.dtype, value) and not (
            isinstance(value, T) and value.requires_grad and not (x.dtype.is_floating_point or x.dtype.is_complex)) and not (
            isinstance(value, T) and value.dtype.is_complex and not x.dtype.is_complex)
        check("masked_fill", torch.masked_fill, [x, mask, value], covered=covered, seed=r.seed_value, stats=stats)
    assert stats.answered > 0, stats


def test_clamp():
    r = rng("clamp")
    stats = Stats()
    for _ in range(400):
        out = random_sizes(r)
        x = T(out, random_strides(r, out), r.choice(ALL_DTYPES + [torch.float32] * 3), r.random() < 0.5)
        form = r.random()
        if form < 0.5:
            lo, hi = r.choice([None, 0, -1, 0.5, True]), r.choice([None, 1, 2.5])
        else:
            lo = None if r.random() < 0.3 else T(broadcastable(r, out), dtype=r.choice(ALL_DTYPES), requires_grad=True)
            hi = None if r.random() < 0.3 else T(broadcastable(r, out), dtype=r.choice(ALL_DTYPES))
        tensors = [t for t in (x, lo, hi) if isinstance(t, T)]
        kwargs = {"min": lo, "max": hi} if r.random() < 0.5 else {}
        args = [x] if kwargs else [x, lo, hi]
        layout_ok = layout_covered(tensors)

        def covered(ref, lo=lo, hi=hi, layout_ok=layout_ok):
            # Bool results are declined (torch accepts bool bounds only as tensors).
            return layout_ok and ref[0][0] != "bool" and scalars_fit(getattr(torch, ref[0][0]), lo, hi)
        check("clamp", torch.clamp, args, kwargs, covered=covered, seed=r.seed_value, stats=stats)
    assert stats.answered > 0, stats


def test_tensor_methods_and_keywords():
    x = T((2, 3), requires_grad=True)
    for op, fn, args, kwargs in [
        ("add", torch.Tensor.add, [x, T((3,))], {"alpha": 2}),
        ("add", torch.add, [x], {"other": 1.5}),
        ("mul", torch.Tensor.mul, [x, 3], {}),
        ("pow", torch.Tensor.pow, [x, 2], {}),
        ("pow", torch.pow, [x], {"exponent": T((3,))}),
        ("gelu", F.gelu, [x], {"approximate": "tanh"}),
        ("silu", F.silu, [x], {"inplace": False}),
        ("clamp", torch.Tensor.clamp, [x], {"min": 0}),
        ("where", torch.where, [T((2, 3), dtype=torch.bool)], {"input": x, "other": 0.0}),
    ]:
        check(op, fn, args, kwargs, covered=True)


def test_shared_layouts():
    """Operands sharing one non-default layout (slices, permutations, channels-last, odd size-1 strides)."""
    r = rng("shared layouts")
    stats = Stats()
    for _ in range(600):
        sizes = random_sizes(r, min_dim=1, max_dim=4, sizes=(1, 2, 3, 4))
        layout = r.choice(["permuted", "gapped", "sliced", "odd1", "broadcast", "channels_last", "channels_last"])
        strides = random_strides(r, sizes, layout)
        dt = r.choice([torch.float32, torch.float32, torch.int64, torch.float16])
        x, y = T(sizes, strides, dt, r.random() < 0.5), T(sizes, strides, dt)
        op = r.choice(["add", "mul", "eq", "where", "sigmoid", "abs"])
        if op == "where":
            args = [T(sizes, strides, torch.bool), x, y]
        elif op in ("sigmoid", "abs"):
            args = [x]
        else:
            args = [x, y]
        fn = {"where": torch.where, **BINARY, **UNARY}[op]
        check(op, fn, args, covered=layout_covered([a for a in args]), seed=r.seed_value, stats=stats)
    assert stats.answered > 200, stats
