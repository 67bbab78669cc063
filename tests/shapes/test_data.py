"""Rules of cat, stack, gather, index_select, embedding, tril/triu, dropout and arange against torch."""
import torch
import torch.nn.functional as F

from .harness import ALL_DTYPES, T, Stats, check, contiguous_strides, random_sizes, random_strides, rng


def _default(t):
    return t.strides == contiguous_strides(t.sizes)


def _suggests_channels_last(t):
    from torch._prims_common import suggest_memory_format
    return suggest_memory_format(t.meta()) != torch.contiguous_format


def test_cat_stack():
    r = rng("cat_stack")
    stats = Stats()
    for _ in range(500):
        base = random_sizes(r, min_dim=0, max_dim=5)
        n = len(base)
        op = r.choice(["cat", "stack"])
        dim = r.randint(-n - 2, n + 1)
        tensors = []
        for _ in range(r.randint(1, 3)):
            sizes = list(base)
            if op == "cat" and n and -n <= dim < n and r.random() < 0.7:
                sizes[dim] = r.choice([0, 1, 2, 3])
            if r.random() < 0.05 and sizes:
                sizes[0] += 1  # mismatch: torch refuses (or skips a legacy empty tensor)
            dt = r.choice([torch.float32] * 6 + ALL_DTYPES)
            tensors.append(T(sizes, random_strides(r, sizes, "channels_last" if r.random() < 0.3 else None), dt,
                             r.random() < 0.5))
        if r.random() < 0.05:
            tensors.append(T((0,)))  # a legacy empty tensor: declined
        out_dim = n if op == "cat" else n + 1
        # A 4-D or 5-D result takes its inputs' common suggested memory format: served for cat unless all
        # suggest channels-last in 5-D or with an empty dim, and for stack (whose inputs torch unsqueezes
        # first) over default strides.
        all_channels_last = all(_suggests_channels_last(t) for t in tensors)
        empty = any(0 in t.sizes for t in tensors)
        covered = len({len(t.sizes) for t in tensors}) == 1 and not any(t.sizes == (0,) for t in tensors) and (
            out_dim not in (4, 5) or (not (all_channels_last and (out_dim == 5 or empty)) if op == "cat"
                                      else all(_default(t) for t in tensors)))
        seq = tensors if r.random() < 0.5 else tuple(tensors)
        kwargs = {"dim": dim} if r.random() < 0.5 else {}
        args = [seq] if kwargs else [seq, dim]
        check(op, getattr(torch, op), args, kwargs, covered=covered, seed=r.seed_value, stats=stats)
    assert stats.answered > 200, stats


def test_gather_index_select():
    r = rng("gather_index_select")
    stats = Stats()
    for _ in range(400):
        sizes = random_sizes(r, min_dim=1)
        n = len(sizes)
        x = T(sizes, random_strides(r, sizes), r.choice([torch.float32] * 4 + ALL_DTYPES), r.random() < 0.5)
        dim = r.randint(-n - 1, n)
        idx_sizes = [r.randint(0, s) if r.random() < 0.8 else s + 1 for s in sizes]
        if -n <= dim < n:
            idx_sizes[dim] = r.choice([0, 1, 2, 4])
        if r.random() < 0.1:
            idx_sizes = idx_sizes[1:]  # rank mismatch: torch refuses
        idx_dtype = torch.int64 if r.random() < 0.9 else torch.int32
        index = T(idx_sizes, random_strides(r, idx_sizes), idx_dtype, index=True)
        kwargs = {"sparse_grad": False} if r.random() < 0.2 else {}
        check("gather", r.choice([torch.gather, torch.Tensor.gather]), [x, dim, index], kwargs,
              covered=_default(index) and 0 not in idx_sizes and len(idx_sizes) == n, seed=r.seed_value, stats=stats)
        isizes = r.choice([(), (0,), (1,), (3,), (2, 2)])
        index = T(isizes, random_strides(r, isizes), idx_dtype if r.random() < 0.9 else torch.float32, index=True)
        check("index_select", r.choice([torch.index_select, torch.Tensor.index_select]), [x, dim, index],
              covered=True, seed=r.seed_value, stats=stats)
    assert stats.answered > 200, stats


def test_embedding():
    r = rng("embedding")
    stats = Stats()
    for _ in range(300):
        isizes = random_sizes(r, max_dim=3)
        index = T(isizes, random_strides(r, isizes), r.choice([torch.int64, torch.int64, torch.int32, torch.float32]),
                  index=True)
        wsizes = (r.choice([1, 3, 10]), r.choice([0, 1, 4]))
        weight = T(wsizes, random_strides(r, wsizes), r.choice([torch.float32, torch.float16, torch.bfloat16,
                                                                torch.float64]), r.random() < 0.5)
        kwargs = {}
        if r.random() < 0.3:
            kwargs["padding_idx"] = r.randint(-wsizes[0] - 1, wsizes[0])
        if r.random() < 0.2:
            kwargs["scale_grad_by_freq"] = True
        covered = True
        if r.random() < 0.1:
            kwargs["max_norm"] = 1.0  # renormalizes the weight in place: declined
            covered = False
        check("embedding", F.embedding, [index, weight], kwargs, covered=covered, seed=r.seed_value, stats=stats)
    assert stats.answered > 100, stats


def test_tril_triu():
    r = rng("tril_triu")
    stats = Stats()
    for _ in range(300):
        sizes = random_sizes(r, min_dim=1)
        x = T(sizes, random_strides(r, sizes), r.choice([torch.float32] * 4 + ALL_DTYPES), r.random() < 0.5)
        op = r.choice(["tril", "triu"])
        args = [x] if r.random() < 0.5 else [x, r.randint(-3, 3)]
        like_default = _default(x) or all(s > 1 for s in sizes)
        check(op, r.choice([getattr(torch, op), getattr(torch.Tensor, op)]), args, covered=like_default,
              seed=r.seed_value, stats=stats)
    assert stats.answered > 100, stats


def test_dropout():
    r = rng("dropout")
    stats = Stats()
    for _ in range(300):
        sizes = random_sizes(r)
        x = T(sizes, random_strides(r, sizes), r.choice([torch.float32] * 4 + [torch.float16, torch.int64]),
              r.random() < 0.5)
        p = r.choice([0.0, 0.1, 0.5, 1.0, 1.5])
        training = r.random() < 0.7
        args, kwargs = [x], {}
        if r.random() < 0.5:
            args += [p, training]
        else:
            kwargs = {"p": p, "training": training}
        noop = p == 0.0 or not training or 0 in sizes
        # A real dropout keeps the layout the pointwise rules model (default or dense with no size-1 dim).
        dense = _default(x) or (all(s > 1 for s in sizes) and sorted(x.strides) == sorted(contiguous_strides(
            [sizes[d] for d in sorted(range(len(sizes)), key=lambda d: -x.strides[d])])))
        covered = noop or (dense and x.dtype.is_floating_point)
        check("dropout", F.dropout, args, kwargs, covered=covered, seed=r.seed_value, stats=stats)
    assert stats.answered > 100, stats


def test_arange():
    # Int bounds (either step sign), the dtype asked for, requires_grad: answered; float bounds and bounds
    # out of order for the step's sign (torch raises): declined.
    r = rng("arange")
    stats = Stats()
    for _ in range(400):
        n = r.randint(1, 3)
        bounds = [r.randint(-6, 12) for _ in range(n)]
        if n == 3 and r.random() < 0.3:
            bounds[2] = r.choice([-3, -1, 0])
        floats = r.random() < 0.1
        if floats:
            bounds[0] += 0.5
        kwargs = {}
        if r.random() < 0.4:
            kwargs["dtype"] = r.choice([torch.int64, torch.int32, torch.float32, torch.float64, torch.bfloat16])
        if r.random() < 0.2:
            kwargs["requires_grad"] = r.random() < 0.5
        if r.random() < 0.1:
            kwargs["device"] = "cpu"
        check("arange", torch.arange, bounds, kwargs, covered=not floats, seed=r.seed_value, stats=stats)
    assert stats.answered > 150, stats
