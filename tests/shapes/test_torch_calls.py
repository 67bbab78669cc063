"""Shape rules of torch calls that are not core ops (shape_rules_torch.cpp, shape_rules_nn.cpp)
against torch's meta kernels, on random cases; plus var_mean, the core op they share code with.

Each rule is named by the callable's qualified name, as capture names the node."""
import pytest
import torch
import torch.nn.functional as F

from ember import ops
from ember._C import shapes

from .harness import ALL_DTYPES, FLOATS, T, Stats, check, contiguous_strides, random_sizes, random_strides, rng


def _default(t):
    return t.strides == contiguous_strides(t.sizes)


def _dense(t):
    """torch's is_non_overlapping_and_dense(), written out for the test."""
    dims = sorted((d for d in range(len(t.sizes)) if t.sizes[d] >= 2), key=lambda d: t.strides[d])
    expected = 1
    for d in dims:
        if t.strides[d] != expected:
            return False
        expected *= t.sizes[d]
    return True


def _float(r):
    return r.choice(FLOATS + [torch.float32] * 3)


def _layout(r, sizes):
    return random_strides(r, sizes, r.choice(["default"] * 4 + ["permuted", "sliced", "odd1", "broadcast"]))


def test_every_name_resolves_to_its_callable():
    # The table names callables by ops.qualname(); a misspelled name would never match.
    names = shapes.torch_call_rule_names()
    assert names == sorted(names)
    for name in names:
        fn = ops.python_table.resolve_path(name)
        assert ops.qualname(fn) == name, name
        # Torch callables, and the operator functions the interpreter records as torch nodes (`1.0 - x`).
        assert ops.classify(fn) in (("torch", ""), ("operator", name.rsplit(".", 1)[1])), name


def test_unknown_name_is_an_error():
    with pytest.raises(ValueError, match="no core op or torch callable"):
        shapes.infer_result_types("torch.nn.functional.no_such_op", (torch.empty(2, device="meta"),), {}, True, "float32")


def test_activations():
    r = rng("torch activations")
    stats = Stats()
    calls = [("torch.nn.functional.relu", F.relu), ("torch.nn.functional.mish", F.mish),
             ("torch.nn.functional.hardswish", F.hardswish), ("torch.nn.functional.sigmoid", F.sigmoid),
             ("torch.nn.functional.tanh", F.tanh)]
    for _ in range(400):
        name, fn = r.choice(calls)
        sizes = random_sizes(r)
        x = T(sizes, random_strides(r, sizes), r.choice(ALL_DTYPES + [torch.float32] * 4), r.random() < 0.5)
        args, kwargs = [x], {}
        if name.endswith(("relu", "mish", "hardswish")) and r.random() < 0.4:
            kwargs["inplace"] = False
        floating = x.dtype.is_floating_point
        if name.endswith("relu"):
            covered = x.dtype not in (torch.bool, torch.complex64, torch.complex128)
        elif name.endswith(("sigmoid", "tanh")):
            covered = True
        else:
            covered = floating
        # Layouts follow the pointwise rules (test_pointwise checks which are covered).
        check(name, fn, args, kwargs, covered=covered and _default(x), seed=r.seed_value, stats=stats)
    assert stats.answered > 150, stats


def test_functional_softmax():
    r = rng("functional softmax")
    stats = Stats()
    for _ in range(300):
        name, fn = r.choice([("torch.nn.functional.softmax", F.softmax), ("torch.nn.functional.log_softmax", F.log_softmax)])
        sizes = random_sizes(r, min_dim=1)
        x = T(sizes, _layout(r, sizes), r.choice(FLOATS + [torch.int64, torch.complex64]), r.random() < 0.5)
        dim = r.randint(-len(sizes) - 1, len(sizes))
        args, kwargs = [x], {}
        if r.random() < 0.5:
            args.append(dim)
        else:
            kwargs["dim"] = dim
        if r.random() < 0.3:
            kwargs["dtype"] = r.choice([torch.float32, torch.float64, None])
        covered = (-len(sizes) <= dim < len(sizes) and x.dtype.is_floating_point and
                   (_default(x) or all(s > 1 for s in x.sizes)))
        check(name, fn, args, kwargs, covered=covered, seed=r.seed_value, stats=stats)
    assert stats.answered > 80, stats


def test_std_var_mean():
    r = rng("std var_mean")
    stats = Stats()
    calls = [("torch.std", torch.std), ("torch.Tensor.std", torch.Tensor.std), ("torch.std_mean", torch.std_mean),
             ("var_mean", torch.var_mean)]
    for _ in range(400):
        name, fn = r.choice(calls)
        sizes = random_sizes(r)
        x = T(sizes, random_strides(r, sizes), r.choice(FLOATS + [torch.complex64, torch.int64]), r.random() < 0.5)
        args, kwargs = [x], {}
        if sizes and r.random() < 0.7:
            dim = r.randint(-len(sizes), len(sizes) - 1)
            args.append(dim if r.random() < 0.5 else [dim])
        if r.random() < 0.4:
            kwargs["keepdim"] = r.random() < 0.5
        if r.random() < 0.3:
            kwargs["correction"] = r.choice([0, 1, 2])
        if "keepdim" in kwargs and len(args) == 1:
            kwargs["dim"] = None
        covered = _default(x) and 0 not in sizes and (x.dtype.is_floating_point or x.dtype.is_complex)
        check(name, fn, args, kwargs, covered=covered, seed=r.seed_value, stats=stats)
    assert stats.answered > 120, stats


def test_conversions():
    r = rng("conversions")
    stats = Stats()
    methods = [("torch.Tensor.float", torch.Tensor.float, torch.float32),
               ("torch.Tensor.double", torch.Tensor.double, torch.float64),
               ("torch.Tensor.half", torch.Tensor.half, torch.float16),
               ("torch.Tensor.bfloat16", torch.Tensor.bfloat16, torch.bfloat16),
               ("torch.Tensor.int", torch.Tensor.int, torch.int32),
               ("torch.Tensor.long", torch.Tensor.long, torch.int64)]
    for _ in range(500):
        sizes = random_sizes(r)
        x = T(sizes, random_strides(r, sizes), r.choice(ALL_DTYPES + [torch.float32] * 3), r.random() < 0.5)
        form = r.random()
        if form < 0.4:
            name, fn, target = r.choice(methods)
            args, kwargs = [x], {}
        elif form < 0.8:
            name, fn = "torch.Tensor.to", torch.Tensor.to
            target = r.choice(ALL_DTYPES)
            args, kwargs = ([x, target], {}) if r.random() < 0.6 else ([x], {"dtype": target})
            if r.random() < 0.2:
                kwargs["non_blocking"] = r.random() < 0.5
            if r.random() < 0.2:
                kwargs["copy"] = False
        else:
            other = T((2,), None, r.choice(ALL_DTYPES))
            target = other.dtype
            name, fn = r.choice([("torch.Tensor.to", torch.Tensor.to), ("torch.Tensor.type_as", torch.Tensor.type_as)])
            args, kwargs = [x, other], {}
        covered = target == x.dtype or _dense(x)
        check(name, fn, args, kwargs, covered=covered, seed=r.seed_value, stats=stats)
    assert stats.answered > 200, stats


def test_conv():
    r = rng("conv")
    stats = Stats()
    for _ in range(400):
        spatial = r.choice([1, 2])
        name, fn = ("torch.conv1d", F.conv1d) if spatial == 1 else ("torch.conv2d", F.conv2d)
        groups = r.choice([1, 1, 2])
        cin = groups * r.randint(1, 3)
        cout = groups * r.randint(1, 3)
        kernel = [r.randint(1, 3) for _ in range(spatial)]
        batched = r.random() < 0.8
        sizes = ([r.randint(1, 3)] if batched else []) + [cin] + [r.randint(1, 7) for _ in range(spatial)]
        dt = r.choice([torch.float32, torch.float32, torch.float64, torch.bfloat16, torch.float16])
        x = T(sizes, random_strides(r, sizes, r.choice(["default"] * 6 + ["permuted", "sliced"])), dt, r.random() < 0.3)
        w = T([cout, cin // groups] + kernel, None, dt if r.random() < 0.95 else torch.float64, r.random() < 0.5)
        if r.random() < 0.05:
            w = T([cout, cin // groups + 1] + kernel, None, dt)  # wrong channel count: torch refuses
        args = [x, w]
        kwargs = {}
        if r.random() < 0.6:
            args.append(T([cout], None, dt, r.random() < 0.5) if r.random() < 0.7 else None)
        padding = r.choice([0, 1, 2, "same", "valid", tuple(r.randint(0, 2) for _ in range(spatial))])
        stride = r.choice([1, 1, 2, tuple(r.randint(1, 3) for _ in range(spatial))])
        dilation = r.choice([1, 1, 2])
        if r.random() < 0.7:
            kwargs.update(stride=stride, padding=padding, dilation=dilation, groups=groups)
        elif groups != 1:
            kwargs["groups"] = groups
        covered = _default(x) and w.dtype == dt
        check(name, fn, args, kwargs, covered=covered, seed=r.seed_value, stats=stats)
    assert stats.answered > 150, stats


def test_norms():
    r = rng("norms")
    stats = Stats()
    for _ in range(500):
        kind = r.choice(["batch_norm", "group_norm", "rms_norm", "rms_norm_torch"])
        sizes = [r.randint(1, 3), r.choice([1, 2, 4, 6])] + [r.randint(1, 4) for _ in range(r.randint(0, 2))]
        dt = _float(r)
        x = T(sizes, _layout(r, sizes), dt, r.random() < 0.5)
        c = sizes[1]
        pdt = dt if r.random() < 0.8 else r.choice([torch.float32, torch.float64])

        def vec(n=c, grad=None):
            return T([n], None, pdt, r.random() < 0.5 if grad is None else grad)

        if kind == "batch_norm":
            name, fn = "torch.nn.functional.batch_norm", F.batch_norm
            training = r.random() < 0.5
            stats_given = r.random() < 0.8
            args = [x, vec(grad=False) if stats_given else None, vec(grad=False) if stats_given else None]
            kwargs = {}
            if r.random() < 0.7:
                args += [vec() if r.random() < 0.8 else None, vec() if r.random() < 0.8 else None]
            if r.random() < 0.5:
                kwargs["training"] = training
            else:
                args += [training] if len(args) == 5 else []
                if len(args) == 3:
                    kwargs["training"] = training
            if r.random() < 0.3:
                kwargs["eps"] = 1e-3
            if r.random() < 0.3:
                kwargs["momentum"] = r.choice([0.1, None])
            training = kwargs.get("training", args[5] if len(args) > 5 else False)
            low = dt in (torch.float16, torch.bfloat16)
            covered = (_default(x) and (pdt == dt or (low and pdt == torch.float32)) and
                       (stats_given or training) and not (training and x.sizes[0] * torch.Size(x.sizes[2:]).numel() == 1))
        elif kind == "group_norm":
            name, fn = "torch.nn.functional.group_norm", F.group_norm
            groups = r.choice([1, 2, 3])
            args = [x, groups]
            if r.random() < 0.7:
                args += [vec(), vec() if r.random() < 0.8 else None]
            kwargs = {"eps": 1e-5} if r.random() < 0.3 else {}
            covered = (_default(x) and c % groups == 0 and pdt == dt and
                       torch.Size(x.sizes).numel() // groups != 1)  # one value per group: refused
        else:
            name, fn = (("torch.nn.functional.rms_norm", F.rms_norm) if kind == "rms_norm"
                        else ("torch.rms_norm", torch.rms_norm))
            k = r.randint(1, len(sizes))
            shape = list(sizes[len(sizes) - k:])
            if r.random() < 0.05:
                shape[0] += 1  # not the input's trailing shape: torch refuses
            args = [x, shape]
            kwargs = {}
            if r.random() < 0.7:
                args.append(T(shape, None, pdt, r.random() < 0.5) if r.random() < 0.8 else None)
            if r.random() < 0.5:
                kwargs["eps"] = r.choice([1e-6, None])
            covered = _default(x) and (len(args) < 3 or args[2] is None or pdt == dt)
        check(name, fn, args, kwargs, covered=covered, seed=r.seed_value, stats=stats)
    assert stats.answered > 200, stats


def test_scaled_dot_product_attention():
    r = rng("sdpa")
    stats = Stats()
    for _ in range(300):
        batch = [r.randint(1, 3) for _ in range(r.choice([0, 1, 2, 2, 3]))]
        L, S, E, Ev = (r.randint(1, 6) for _ in range(4))
        dt = r.choice([torch.float32, torch.float32, torch.float64, torch.bfloat16, torch.float16])

        def tensor(sizes, dtype=dt):
            return T(sizes, random_strides(r, sizes, r.choice(["default", "default", "permuted", "sliced"])), dtype,
                     r.random() < 0.4)

        q, k, v = tensor(batch + [L, E]), tensor(batch + [S, E]), tensor(batch + [S, Ev])
        kwargs = {}
        if r.random() < 0.3:
            mask_sizes = [1 if r.random() < 0.4 else s for s in (batch + [L, S])[r.randint(0, len(batch)):]]
            kwargs["attn_mask"] = tensor(mask_sizes, r.choice([torch.bool, dt]))
        if r.random() < 0.4:
            kwargs["is_causal"] = r.random() < 0.6
        if r.random() < 0.3:
            kwargs["scale"] = r.choice([0.5, None])
        if r.random() < 0.2:
            kwargs["dropout_p"] = r.choice([0.0, 0.1])
        covered = not (kwargs.get("attn_mask") is not None and kwargs.get("is_causal"))
        check("torch.nn.functional.scaled_dot_product_attention", F.scaled_dot_product_attention, [q, k, v], kwargs,
              covered=covered, seed=r.seed_value, stats=stats)
    assert stats.answered > 100, stats


def test_losses():
    r = rng("losses")
    stats = Stats()
    for _ in range(400):
        name, fn = r.choice([("torch.nn.functional.cross_entropy", F.cross_entropy),
                             ("torch.nn.functional.nll_loss", F.nll_loss)])
        c = r.randint(1, 5)
        shape = r.choice([[c], [r.randint(1, 4), c], [r.randint(1, 3), c, r.randint(1, 3)]])
        dt = _float(r)
        x = T(shape, None, dt, r.random() < 0.5)
        tshape = [] if len(shape) == 1 else [shape[0]] + shape[2:]
        if r.random() < 0.05:
            tshape = tshape + [2]  # the wrong shape: torch refuses
        target = T(tshape, None, torch.int64, index=True)
        kwargs = {}
        if r.random() < 0.3:
            kwargs["weight"] = T([c], None, dt)
        if r.random() < 0.5:
            kwargs["reduction"] = r.choice(["mean", "sum", "none"])
        if r.random() < 0.2:
            kwargs["ignore_index"] = r.choice([-100, 0])
        if name.endswith("cross_entropy") and r.random() < 0.2:
            kwargs["label_smoothing"] = r.choice([0.0, 0.1])
        check(name, fn, [x, target], kwargs, covered=True, seed=r.seed_value, stats=stats)
    assert stats.answered > 150, stats


def test_scalar_on_the_left():
    # `s op x` (operator.sub(1.0, x): the interpreter's node for x.__rsub__) has the type of `x op s`.
    import operator
    r = rng("scalar_on_the_left")
    stats = Stats()
    for _ in range(300):
        name = r.choice(["add", "sub", "mul", "truediv"])
        sizes = random_sizes(r, min_dim=0, max_dim=4)
        x = T(sizes, random_strides(r, sizes), r.choice(ALL_DTYPES), r.random() < 0.5)
        scalar = r.choice([2, -1, 0.5, True, 3.0])
        # Answered wherever `x op s` is: floating x of default layout at least (TensorIterator's other layouts
        # and integer scalars outside an integer dtype's range may decline, as for `x op s`).
        covered = x.dtype.is_floating_point and x.strides == contiguous_strides(x.sizes)
        check(f"operator.{name}", getattr(operator, name), [scalar, x], covered=covered, seed=r.seed_value, stats=stats)
    assert stats.answered > 150, stats
