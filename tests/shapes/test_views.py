"""View rules (exact strides) and contiguous against torch, on random layouts."""
import torch

from .harness import ALL_DTYPES, T, Stats, check, random_sizes, random_strides, rng


def _tensor(r, min_dim=0, max_dim=4):
    sizes = random_sizes(r, min_dim=min_dim, max_dim=max_dim)
    return T(sizes, random_strides(r, sizes), r.choice([torch.float32] * 3 + ALL_DTYPES + [torch.float8_e4m3fn]),
             r.random() < 0.5)


def _new_shape(r, sizes):
    """A shape with the same element count: dims merged, split, 1s inserted, one -1."""
    shape = list(sizes)
    for _ in range(r.randint(0, 3)):
        move = r.random()
        if move < 0.35 and len(shape) >= 2:
            i = r.randrange(len(shape) - 1)
            shape[i:i + 2] = [shape[i] * shape[i + 1]]
        elif move < 0.7 and shape:
            i = r.randrange(len(shape))
            f = r.choice([d for d in (1, 2, 3, 5) if shape[i] % d == 0] or [1])
            shape[i:i + 1] = [f, shape[i] // f] if shape[i] else [0, r.choice([1, 2])]
        else:
            shape.insert(r.randint(0, len(shape)), 1)
    if shape and r.random() < 0.4:
        shape[r.randrange(len(shape))] = -1
    if r.random() < 0.05 and shape:
        shape[0] += 1  # wrong element count: torch refuses
    return shape


def test_view_and_reshape():
    r = rng("view_reshape")
    stats = Stats()
    for _ in range(800):
        x = _tensor(r)
        shape = _new_shape(r, x.sizes)
        op = r.choice(["view", "reshape"])
        form = r.randint(0, 2)
        if op == "view":
            fn = torch.Tensor.view
            args, kwargs = ([x, *shape], {}) if form == 0 and shape else ([x, tuple(shape)], {}) if form < 2 else ([x], {"size": tuple(shape)})
        else:
            fn = r.choice([torch.reshape, torch.Tensor.reshape])
            args, kwargs = ([x, tuple(shape)], {}) if fn is torch.reshape or form == 1 or not shape else ([x, *shape], {})
        check(op, fn, args, kwargs, covered=True, seed=r.seed_value, stats=stats)
    assert stats.answered > 300, stats


def test_permute_transpose():
    r = rng("permute_transpose")
    stats = Stats()
    for _ in range(400):
        x = _tensor(r)
        n = len(x.sizes)
        dims = list(range(n))
        r.shuffle(dims)
        dims = [d - n if r.random() < 0.3 else d for d in dims]
        if r.random() < 0.05 and n:
            dims[0] = dims[-1]  # not a permutation
        if r.random() < 0.5:
            check("permute", torch.permute, [x, tuple(dims)], covered=True, seed=r.seed_value, stats=stats)
        else:
            check("permute", torch.Tensor.permute, [x, *dims] if dims else [x, ()], covered=True, seed=r.seed_value,
                  stats=stats)
        d0, d1 = r.randint(-n - 1, n), r.randint(-n - 1, n)
        fn = r.choice([torch.transpose, torch.Tensor.transpose])
        check("transpose", fn, [x, d0, d1], covered=True, seed=r.seed_value, stats=stats)
    assert stats.answered > 300, stats


def test_expand():
    r = rng("expand")
    stats = Stats()
    for _ in range(400):
        x = _tensor(r, max_dim=3)
        target = [s if s != 1 or r.random() < 0.3 else r.choice([0, 1, 3]) for s in x.sizes]
        target = [-1 if r.random() < 0.2 else s for s in target]
        target = [r.choice([1, 2, 0]) for _ in range(r.randint(0, 2))] + target
        new_minus_one = r.random() < 0.05
        if new_minus_one:
            target = [-1] + target  # -1 for a new dim: some torch paths make a size -1; declined
        if r.random() < 0.5:
            args, kwargs = [x, *target] if target else [x, ()], {}
        else:
            args, kwargs = [x], {"size": tuple(target)}
        check("expand", torch.Tensor.expand, args, kwargs, covered=not new_minus_one, seed=r.seed_value, stats=stats)
    assert stats.answered > 200, stats


def test_unsqueeze_squeeze_flatten():
    r = rng("unsqueeze_squeeze_flatten")
    stats = Stats()
    for _ in range(400):
        x = _tensor(r)
        n = len(x.sizes)
        check("unsqueeze", r.choice([torch.unsqueeze, torch.Tensor.unsqueeze]), [x, r.randint(-n - 2, n + 1)],
              covered=True, seed=r.seed_value, stats=stats)
        form = r.random()
        if form < 0.3:
            args = [x]
        elif form < 0.7:
            args = [x, r.randint(-n - 1, n)]
        else:
            args = [x, tuple(r.sample(range(n), r.randint(0, n))) if n else (0,)]
        check("squeeze", r.choice([torch.squeeze, torch.Tensor.squeeze]), args, covered=True, seed=r.seed_value,
              stats=stats)
        start, end = r.randint(-n - 1, n), r.randint(-n - 1, n)
        kwargs = r.choice([{}, {"start_dim": start}, {"end_dim": end}, {"start_dim": start, "end_dim": end}])
        check("flatten", r.choice([torch.flatten, torch.Tensor.flatten]), [x], kwargs, covered=True,
              seed=r.seed_value, stats=stats)
    assert stats.answered > 500, stats


def _index_item(r, size):
    kind = r.random()
    if kind < 0.3:
        return r.randint(-size - 1, size)
    if kind < 0.75:
        part = lambda: None if r.random() < 0.4 else r.randint(-size - 2, size + 2)
        step = r.choice([None, None, 1, 2, 3, -1, 0])
        return slice(part(), part(), step)
    if kind < 0.9:
        return None
    return Ellipsis


def test_getitem():
    r = rng("getitem")
    stats = Stats()
    for _ in range(800):
        x = _tensor(r)
        items = [_index_item(r, x.sizes[min(i, len(x.sizes) - 1)] if x.sizes else 1) for i in range(r.randint(0, 4))]
        advanced = False
        if r.random() < 0.05:
            items.append(r.choice([True, [0], 1.5]))  # advanced or invalid indexing: declined
            advanced = True
        index = tuple(items) if len(items) != 1 or r.random() < 0.5 else items[0]
        # Declined: advanced indexing, and more than one Ellipsis (which torch accepts).
        covered = not advanced and items.count(Ellipsis) <= 1
        check("getitem", lambda t, i: t[i], [x, index], covered=covered, seed=r.seed_value, stats=stats)
    assert stats.answered > 300, stats


def test_slice_select():
    """aten's slice and select, the primitives decompose makes of basic indexing."""
    r = rng("slice_select")
    stats = Stats()
    for _ in range(400):
        x = _tensor(r)
        n = len(x.sizes)
        dim = r.randint(-n - 1, n)
        size = x.sizes[dim] if -n <= dim < n else 1
        if r.random() < 0.5:
            bound = lambda: r.choice([None, 0, 1, -1, size, size + 2, -size - 2, r.randint(-size, size)])
            step = r.choice([1, 1, 2, 3, 0])
            check("slice", torch.ops.aten.slice.Tensor, [x, dim, bound(), bound(), step],
                  covered=n > 0 and step > 0, seed=r.seed_value, stats=stats)
        else:
            index = r.randint(-size - 1, size)
            check("select", torch.ops.aten.select.int, [x, dim, index], covered=n > 0, seed=r.seed_value, stats=stats)
    assert stats.answered > 200, stats


def test_split_chunk():
    r = rng("split_chunk")
    stats = Stats()
    for _ in range(400):
        x = _tensor(r, min_dim=1)
        n = len(x.sizes)
        dim = r.randint(-n - 1, n)
        size = x.sizes[dim] if -n <= dim < n else 3
        if r.random() < 0.5:
            arg = r.choice([0, 1, 2, 3, 5])
        else:
            arg = [0] * r.randint(0, 1)
            left = size
            while left > 0:
                part = r.randint(1, left)
                arg.append(part)
                left -= part
            if r.random() < 0.1:
                arg.append(1)  # does not sum to the size: torch refuses
        fn = r.choice([torch.split, torch.Tensor.split])
        kwargs = {"dim": dim} if r.random() < 0.5 else {}
        args = [x, arg] if kwargs else [x, arg, dim]
        check("split", fn, args, kwargs, covered=True, seed=r.seed_value, stats=stats)
        chunks = r.choice([1, 2, 3, 4, 0])
        check("chunk", r.choice([torch.chunk, torch.Tensor.chunk]), [x, chunks, dim], covered=True, seed=r.seed_value,
              stats=stats)
    assert stats.answered > 300, stats


def test_contiguous():
    r = rng("contiguous")
    stats = Stats()
    for _ in range(300):
        x = _tensor(r)
        check("contiguous", torch.Tensor.contiguous, [x], covered=True, seed=r.seed_value, stats=stats)
    assert stats.answered > 200, stats
