"""Shape rules of reductions, softmax, layer_norm and the matmuls against torch."""
import torch
import torch.nn.functional as F

from .harness import ALL_DTYPES, FLOATS, T, Stats, check, contiguous_strides, random_sizes, random_strides, rng


def _default(t):
    return t.strides == contiguous_strides(t.sizes)


def _reducible(t):
    """Inputs the reduction rules answer for: any strides (torch's results have default strides), no empty dim."""
    return 0 not in t.sizes


def _like_default(t):
    return _default(t) or all(s > 1 for s in t.sizes)


def _dims(r, ndim):
    form = r.random()
    if form < 0.2:
        return None
    if form < 0.5:
        return r.randint(-ndim - 1, ndim) if ndim else r.choice([0, -1, 1])
    k = r.randint(0, ndim)
    dims = r.sample(range(ndim), k) if ndim else []
    dims = [d - ndim if r.random() < 0.3 else d for d in dims]
    if r.random() < 0.1 and dims:
        dims.append(dims[0])  # repeated: torch refuses
    return tuple(dims) if r.random() < 0.5 else list(dims)


def test_sum_mean():
    r = rng("sum_mean")
    stats = Stats()
    for _ in range(500):
        sizes = random_sizes(r)
        x = T(sizes, random_strides(r, sizes), r.choice(ALL_DTYPES + [torch.float32] * 3), r.random() < 0.5)
        op, fn = r.choice([("sum", torch.sum), ("mean", torch.mean), ("sum", torch.Tensor.sum), ("mean", torch.Tensor.mean)])
        dims = _dims(r, len(sizes))
        args, kwargs = [x], {}
        if dims is not None or r.random() < 0.3:
            if r.random() < 0.5:
                args.append(dims)
            else:
                kwargs["dim"] = dims
        if r.random() < 0.4:
            kwargs["keepdim"] = r.random() < 0.5
        if r.random() < 0.3:
            kwargs["dtype"] = r.choice([torch.float32, torch.float64, torch.int64, torch.float16, torch.complex64])
        if dims is None and "dim" not in kwargs and len(args) == 1 and "keepdim" in kwargs:
            kwargs["dim"] = None
        covered = _reducible(x)
        if "dtype" in kwargs:
            # An explicit dtype is answered when it does not narrow the input's.
            covered = covered and torch.promote_types(x.dtype, kwargs["dtype"]) == kwargs["dtype"]
        check(op, fn, args, kwargs, covered=covered, seed=r.seed_value, stats=stats)
    assert stats.answered > 100, stats


def test_amax_amin():
    r = rng("amax_amin")
    stats = Stats()
    for _ in range(300):
        sizes = random_sizes(r)
        x = T(sizes, random_strides(r, sizes), r.choice(ALL_DTYPES + [torch.float32] * 3), r.random() < 0.5)
        op, fn = r.choice([("amax", torch.amax), ("amin", torch.amin), ("amax", torch.Tensor.amax)])
        dims = _dims(r, len(sizes))
        args, kwargs = [x], {}
        if dims is not None:
            args.append(dims)
        if r.random() < 0.4:
            kwargs["keepdim"] = r.random() < 0.5
        check(op, fn, args, kwargs, covered=_reducible(x), seed=r.seed_value, stats=stats)
    assert stats.answered > 50, stats


def test_var():
    r = rng("var")
    stats = Stats()
    for _ in range(300):
        sizes = random_sizes(r, min_dim=1)
        x = T(sizes, random_strides(r, sizes), r.choice([torch.float32, torch.float64, torch.float16, torch.complex64,
                                                         torch.int64, torch.bfloat16]), r.random() < 0.5)
        dims = _dims(r, len(sizes))
        form = r.randint(0, 4)
        if form == 0:
            args, kwargs = [x], {}
        elif form == 1:
            args, kwargs = [x, r.random() < 0.5], {}  # var(x, unbiased)
        elif form == 2:
            args, kwargs = [x, dims, r.random() < 0.5, r.random() < 0.5], {}  # var(x, dim, unbiased, keepdim)
        elif form == 3:
            args, kwargs = [x], {"dim": dims, "correction": r.choice([0, 1, 2, 0.5, None])}
        else:
            args, kwargs = [x, dims], {"keepdim": True, "unbiased": False}
        check("var", r.choice([torch.var, torch.Tensor.var]), args, kwargs, covered=_reducible(x), seed=r.seed_value,
              stats=stats)
    assert stats.answered > 50, stats


def test_softmax():
    r = rng("softmax")
    stats = Stats()
    for _ in range(300):
        sizes = random_sizes(r)
        x = T(sizes, random_strides(r, sizes), r.choice(ALL_DTYPES + FLOATS * 2), r.random() < 0.5)
        op, fn = r.choice([("softmax", torch.softmax), ("log_softmax", torch.log_softmax),
                           ("softmax", torch.Tensor.softmax), ("log_softmax", torch.Tensor.log_softmax)])
        dim = r.randint(-len(sizes) - 1, len(sizes))
        args, kwargs = [x, dim], {}
        if r.random() < 0.3:
            kwargs["dtype"] = r.choice([torch.float32, torch.float64, torch.float16, torch.int64])
        # The result must be floating (bool and integer inputs need an explicit floating dtype);
        # complex inputs are declined.
        covered = _like_default(x) and not x.dtype.is_complex and kwargs.get("dtype", x.dtype).is_floating_point
        check(op, fn, args, kwargs, covered=covered, seed=r.seed_value, stats=stats)
    assert stats.answered > 50, stats


def test_layer_norm():
    r = rng("layer_norm")
    stats = Stats()
    for _ in range(300):
        sizes = random_sizes(r, min_dim=1)
        dt = r.choice(FLOATS + [torch.float32] * 3 + [torch.int64])
        x = T(sizes, random_strides(r, sizes), dt, r.random() < 0.5)
        k = r.randint(1, len(sizes))
        shape = list(sizes[len(sizes) - k:])
        if r.random() < 0.1:
            shape[0] += 1  # does not match: torch refuses
        wdt = dt if r.random() < 0.85 else r.choice(FLOATS)
        weight = T(shape, dtype=wdt, requires_grad=r.random() < 0.5) if r.random() < 0.7 else None
        bias = T(shape, dtype=wdt, requires_grad=r.random() < 0.5) if r.random() < 0.5 else None
        normalized = tuple(shape) if r.random() < 0.5 else (torch.Size(shape) if r.random() < 0.5 else list(shape))
        if len(shape) == 1 and r.random() < 0.2:
            normalized = shape[0]  # a bare int: torch refuses
        args = [x, normalized, weight, bias]
        kwargs = {"eps": 1e-6} if r.random() < 0.3 else {}
        covered = _like_default(x) and all(t is None or t.dtype == dt for t in (weight, bias))
        check("layer_norm", F.layer_norm, args, kwargs, covered=covered, seed=r.seed_value, stats=stats)
    assert stats.answered > 50, stats


MATMUL_DTYPES = [torch.float32] * 4 + [torch.float64, torch.float16, torch.bfloat16, torch.complex64, torch.int64]


def _mat(r, sizes, dt):
    return T(sizes, random_strides(r, sizes), dt, r.random() < 0.5)


def test_mm_bmm_addmm():
    r = rng("mm")
    stats = Stats()
    for _ in range(300):
        dt = r.choice(MATMUL_DTYPES)
        n, k, p, b = (r.choice([0, 1, 2, 3, 5]) for _ in range(4))
        k2 = k if r.random() < 0.9 else k + 1
        dt2 = dt if r.random() < 0.9 else r.choice(MATMUL_DTYPES)
        covered = dt == dt2 and (dt.is_floating_point or dt.is_complex)
        check("mm", r.choice([torch.mm, torch.Tensor.mm]), [_mat(r, (n, k), dt), _mat(r, (k2, p), dt2)],
              covered=covered, seed=r.seed_value, stats=stats)
        check("bmm", torch.bmm, [_mat(r, (b, n, k), dt), _mat(r, (b, k2, p), dt2)], covered=covered,
              seed=r.seed_value, stats=stats)
        bias = _mat(r, r.choice([(n, p), (p,), (1, p), (n, 1), (), (1,)]), dt)
        kwargs = {}
        if r.random() < 0.3:
            kwargs = {"beta": r.choice([1, 0.5, 2]), "alpha": r.choice([1, 0.5, 3])}
        check("addmm", torch.addmm, [bias, _mat(r, (n, k), dt), _mat(r, (k2, p), dt2)], kwargs, covered=covered,
              seed=r.seed_value, stats=stats)
    assert stats.answered > 100, stats


def test_linear():
    r = rng("linear")
    stats = Stats()
    for _ in range(300):
        dt = r.choice(MATMUL_DTYPES)
        lead = random_sizes(r, min_dim=0, max_dim=3)
        k, out = r.choice([1, 2, 4]), r.choice([0, 1, 3, 5])
        x = _mat(r, lead + (k,), dt)
        w = _mat(r, (out, k if r.random() < 0.95 else k + 1), dt)
        bias = _mat(r, (out,), dt) if r.random() < 0.6 else None
        args = [x, w, bias] if r.random() < 0.5 else [x, w]
        kwargs = {} if len(args) == 3 else ({"bias": bias} if r.random() < 0.5 else {})
        check("linear", F.linear, args, kwargs, covered=dt.is_floating_point or dt.is_complex, seed=r.seed_value,
              stats=stats)
    assert stats.answered > 100, stats


def test_matmul():
    r = rng("matmul")
    stats = Stats()
    for _ in range(500):
        dt = r.choice(MATMUL_DTYPES)
        d1, d2 = r.randint(1, 4), r.randint(1, 4)
        k = r.choice([1, 2, 3])
        batch = random_sizes(r, min_dim=max(d1, d2) - 2, max_dim=max(d1, d2) - 2, sizes=(1, 2, 3), zero=0)

        def shape(d, rows):
            if d == 1:
                return (k,)
            lead = tuple(s if r.random() < 0.7 else 1 for s in batch[len(batch) - (d - 2):]) if d > 2 else ()
            return lead + ((r.choice([1, 2, 3]), k) if rows else (k, r.choice([1, 2, 3])))
        x, y = _mat(r, shape(d1, True), dt), _mat(r, shape(d2, False), dt)
        # Declined: a vector or matrix times a batch (torch computes it transposed), and batch
        # broadcasts with one result row or column (an odd stride on that size-1 dim).
        odd = d1 >= 3 and d2 >= 3 and x.sizes[:-2] != y.sizes[:-2] and 1 in (x.sizes[-2], y.sizes[-1])
        covered = (dt.is_floating_point or dt.is_complex) and not (d1 <= 2 and d2 >= 3) and not odd
        check("matmul", r.choice([torch.matmul, torch.Tensor.matmul]), [x, y], covered=covered, seed=r.seed_value,
              stats=stats)
    assert stats.answered > 100, stats
