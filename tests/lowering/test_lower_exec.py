"""Lowering executed: random primitive graphs, lowered and run by the loop IR reference
interpreter, must give what eager torch gives (values, dtypes, and aliasing of inputs).

Each random case prints its seed on failure (pytest shows the parameter).
"""
import random

import pytest
import torch

from ember._C import lowering
from ember.testing import loop_interp

from graphgen import GraphBuilder, Ref

UNARY = ["neg", "abs", "exp", "tanh", "sigmoid", "relu", "sin", "cos", "erf", "floor", "ceil", "sign", "expm1",
         "log1p_abs"]
BINARY = ["add", "sub", "mul", "maximum", "minimum", "div_pos"]
COMPARE = ["lt", "le", "gt", "ge", "eq", "ne"]


def run_both(b, inputs):
    text, _ = lowering.lower(b.text())
    outs = loop_interp.run(text, inputs)
    return text, outs


def check(b, inputs, atol=1e-5, rtol=1.3e-6):
    text, outs = run_both(b, [t.clone() for t in inputs])
    assert len(outs) == len(b.outputs)
    for got, ref in zip(outs, b.outputs):
        want = b.values[ref.id]
        assert got.dtype == want.dtype, text
        assert got.shape == want.shape, text
        torch.testing.assert_close(got, want, atol=atol, rtol=rtol, equal_nan=True, msg=lambda m: m + "\n" + b.text() + text)
    return text


def random_shape(rng, rank=None):
    rank = rng.randint(1, 3) if rank is None else rank
    return [rng.randint(1, 4) for _ in range(rank)]


class Gen:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.g = torch.Generator().manual_seed(seed)
        self.b = GraphBuilder()
        self.pool = []  # float tensors (Ref)
        self.inputs = []

    def t(self, ref):
        return self.b.values[ref.id]

    def new_input(self, shape, dtype=torch.float32):
        t = torch.randn(shape, generator=self.g).to(dtype)
        if self.rng.random() < 0.2 and len(shape) >= 2:  # a non-contiguous input
            t = t.transpose(0, 1).contiguous().transpose(0, 1)
        self.inputs.append(t)
        ref = self.b.input(t)
        return ref

    def pick(self):
        return self.rng.choice(self.pool)

    def step(self):
        rng, b = self.rng, self.b
        kind = rng.choice(["unary", "binary", "scalar", "where", "reduce", "var_mean", "view", "view", "cat",
                           "index", "tril", "convert", "clamp", "contiguous", "full", "matmul"])
        x = self.pick()
        xt = self.t(x)
        if xt.dim() == 0 and kind not in ("unary", "scalar", "convert", "clamp", "contiguous", "binary", "where"):
            kind = "unary"
        if kind == "unary":
            op = rng.choice(UNARY)
            if op == "log1p_abs":
                a = b.node("abs", xt.abs(), x)
                r = b.node("log1p", torch.log1p(self.t(a)), a)
            else:
                r = b.node(op, getattr(torch, op)(xt), x)
        elif kind in ("binary", "where"):
            # a broadcast partner: x's shape with some dims set to 1, maybe fewer leading dims
            shape = [1 if rng.random() < 0.3 else s for s in xt.shape]
            shape = shape[rng.randint(0, max(0, len(shape) - 1)):] if rng.random() < 0.3 else shape
            y = self.new_input(shape)
            yt = self.t(y)
            if kind == "where":
                op = rng.choice(COMPARE)
                c = b.node(op, getattr(torch, op)(xt, yt), x, y)
                r = b.node("where", torch.where(self.t(c), xt, yt), c, x, y)
            else:
                op = rng.choice(BINARY)
                if op == "div_pos":
                    yt2 = yt.abs() + 1
                    y2 = b.node("add", yt2, b.node("abs", yt.abs(), y), 1.0)
                    r = b.node("div", xt / yt2, x, y2)
                else:
                    r = b.node(op, getattr(torch, op)(xt, yt), x, y)
        elif kind == "scalar":
            op = rng.choice(["add", "mul", "sub", "pow2"])
            if op == "pow2":
                r = b.node("pow", torch.pow(xt, 2.0), x, 2.0)
            else:
                r = b.node(op, getattr(torch, op)(xt, 1.5), x, 1.5)
        elif kind == "reduce":
            op = rng.choice(["sum", "amax", "amin"])
            dims = sorted(rng.sample(range(xt.dim()), rng.randint(1, xt.dim())))
            keep = rng.random() < 0.5
            r = b.node(op, getattr(torch, op)(xt, dims, keep), x, dims, keep)
        elif kind == "var_mean":
            dims = sorted(rng.sample(range(xt.dim()), rng.randint(1, xt.dim())))
            keep, corr = rng.random() < 0.5, rng.choice([0, 1])
            v, m = torch.var_mean(xt, dims, correction=corr, keepdim=keep)
            r = rng.choice(b.node("var_mean", (v, m), x, dims, correction=corr, keepdim=keep))
        elif kind == "view":
            r = self.random_view(x)
        elif kind == "cat":
            dim = rng.randrange(xt.dim())
            shape = list(xt.shape)
            shape[dim] = rng.randint(1, 3)
            y = self.new_input(shape)
            parts = [x, y] if rng.random() < 0.5 else [y, x, y]
            r = b.node("cat", torch.cat([self.t(p) for p in parts], dim), parts, dim)
        elif kind == "index":
            dim = rng.randrange(xt.dim())
            if rng.random() < 0.5:
                idx_shape = [rng.randint(1, s) for s in xt.shape]
                idx = torch.randint(0, xt.shape[dim], idx_shape, generator=self.g)
                self.inputs.append(idx)
                i = b.input(idx)
                r = b.node("gather", torch.gather(xt, dim, idx), x, dim, i)
            else:
                idx = torch.randint(0, xt.shape[dim], (rng.randint(1, 5),), generator=self.g)
                self.inputs.append(idx)
                i = b.input(idx)
                r = b.node("index_select", torch.index_select(xt, dim, idx), x, dim, i)
        elif kind == "tril":
            if xt.dim() < 2:
                return
            k = rng.randint(-1, 1)
            op = rng.choice(["tril", "triu"])
            r = b.node(op, getattr(torch, op)(xt, k), x, k)
        elif kind == "convert":
            dt = rng.choice([torch.bfloat16, torch.float16, torch.float64])
            c = b.node("convert", xt.to(dt), x, dt)
            ct = self.t(c)
            d = b.node("mul", ct * ct, c, c)  # computed in f32, rounded on store
            r = b.node("convert", self.t(d).float(), d, torch.float32)
        elif kind == "clamp":
            r = b.node("clamp", torch.clamp(xt, -0.5, 0.5), x, -0.5, 0.5)
        elif kind == "contiguous":
            r = b.node("contiguous", xt.contiguous(), x)
        elif kind == "full":
            f = b.node("full", torch.full(list(xt.shape), 0.25), list(xt.shape), 0.25, dtype=torch.float32)
            r = b.node("add", xt + self.t(f), x, f)
        elif kind == "matmul":
            if xt.dim() != 2:
                return
            w = self.new_input([xt.shape[1], rng.randint(1, 4)])
            m = b.node("matmul", xt @ self.t(w), x, w)
            r = b.node("relu", torch.relu(self.t(m)), m)
        self.pool.append(r)

    def random_view(self, x):
        rng, b, xt = self.rng, self.b, self.t(x)
        kind = rng.choice(["permute", "reshape", "expand", "slice", "select"])
        if kind == "permute":
            dims = list(range(xt.dim()))
            rng.shuffle(dims)
            return b.node("permute", xt.permute(dims), x, dims)
        if kind == "reshape":
            n = xt.numel()
            shapes = [[n], [1, n]] + [[a, n // a] for a in range(2, n) if n % a == 0]
            shapes += [[a, 1, n // a] for a in range(2, n) if n % a == 0]
            shape = rng.choice(shapes)
            return b.node("reshape", xt.reshape(shape), x, shape)
        if kind == "expand":
            shape = [rng.randint(2, 3) if s == 1 else s for s in xt.shape]
            if rng.random() < 0.5:
                ref = b.node("reshape", xt.reshape([1] + list(xt.shape)), x, [1] + list(xt.shape))
                return b.node("expand", xt.expand([2] + shape), ref, [2] + shape)
            return b.node("expand", xt.expand(shape), x, shape)
        if kind == "slice":
            dim = rng.randrange(xt.dim())
            size = xt.shape[dim]
            start = rng.randint(0, size - 1)
            end = rng.randint(start + 1, size)
            step = rng.randint(1, 2)
            return b.node("slice", torch.ops.aten.slice(xt, dim, start, end, step), x, dim, start, end, step)
        if xt.dim() < 2:
            return x
        dim = rng.randrange(xt.dim())
        index = rng.randrange(xt.shape[dim])
        return b.node("select", torch.select(xt, dim, index), x, dim, index)


@pytest.mark.parametrize("seed", range(120))
def test_random_graph(seed):
    gen = Gen(seed)
    gen.pool.append(gen.new_input(random_shape(gen.rng)))
    for _ in range(gen.rng.randint(2, 6)):
        gen.step()
    # Outputs: the last value, and one other at random (views of inputs included).
    gen.b.outputs = [gen.pool[-1], gen.rng.choice(gen.pool)]
    check(gen.b, gen.inputs)


def test_outputs_alias_inputs():
    b = GraphBuilder()
    x = torch.randn(3, 4)
    r = b.input(x)
    p = b.node("permute", x.permute(1, 0), r, [1, 0])
    s = b.node("select", torch.select(x, 0, 1), r, 0, 1)
    b.outputs = [r, p, r, s]
    text, outs = run_both(b, [x])
    assert outs[0] is x and outs[2] is x
    assert outs[1].data_ptr() == x.data_ptr() and outs[1].stride() == (1, 4)
    assert outs[3].storage_offset() == 4 and outs[3].untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def test_inplace_extern_on_input_is_seen_by_later_reads():
    b = GraphBuilder()
    x = torch.randn(2, 3)
    r = b.input(x)
    before = b.node("mul", x * 2, r, 2.0)
    v = b.node("reshape", x.reshape(6), r, [6])  # a view: sees the mutation, as in eager
    b.effect("torch.Tensor.add_", r, 1.0)
    after = b.node("mul", (x + 1) * 2, r, 2.0)
    b.values[v.id] = (x + 1).reshape(6)
    b.outputs = [before, after, v]
    xin = x.clone()
    text, outs = run_both(b, [xin])
    torch.testing.assert_close(outs[0], x * 2)
    torch.testing.assert_close(outs[1], (x + 1) * 2)
    torch.testing.assert_close(outs[2], (x + 1).reshape(6))
    torch.testing.assert_close(xin, x + 1)  # the caller sees the mutation


def test_copying_reshape_does_not_see_a_later_mutation():
    b = GraphBuilder()
    x = torch.randn(2, 3)
    r = b.input(x)
    p = b.node("permute", x.t(), r, [1, 0])
    v = b.node("reshape", x.t().reshape(6), p, [6])  # torch copies: not viewable
    b.effect("torch.Tensor.add_", r, 1.0)
    b.outputs = [v]
    text, outs = run_both(b, [x.clone()])
    torch.testing.assert_close(outs[0], x.t().reshape(6))


def test_gather_out_of_range_raises():
    b = GraphBuilder()
    x, idx = torch.randn(4), torch.tensor([0, 3])
    rx, ri = b.input(x), b.input(idx)
    b.outputs = [b.node("gather", torch.gather(x, 0, idx), rx, 0, ri)]
    text, _ = lowering.lower(b.text())
    with pytest.raises(IndexError):
        loop_interp.run(text, [x, torch.tensor([0, 4])])


def test_var_mean_without_degrees_of_freedom_matches_eager():
    b = GraphBuilder()
    for x in (torch.tensor([1.0, 2.0]), torch.tensor([3.0, 3.0])):
        b = GraphBuilder()
        r = b.input(x)
        v, m = torch.var_mean(x, [0], correction=2)
        b.outputs = b.node("var_mean", (v, m), r, [0], correction=2, keepdim=False)
        check(b, [x])


def test_bf16_pointwise_rounds_on_store():
    b = GraphBuilder()
    x = torch.randn(5).bfloat16()
    r = b.input(x)
    e = b.node("exp", torch.exp(x), r)
    s = b.node("add", torch.exp(x) + 1.0, e, 1.0)
    b.outputs = [s]
    check(b, [x], atol=0, rtol=0)


def test_integer_and_bool_ops():
    b = GraphBuilder()
    x, y = torch.randint(-5, 5, (3, 4)), torch.randint(1, 5, (4,))
    rx, ry = b.input(x), b.input(y)
    fd = b.node("floor_divide", torch.floor_divide(x, 3), rx, 3)
    md = b.node("remainder", torch.remainder(x, 3), rx, 3)
    c = b.node("lt", x < y, rx, ry)
    n = b.node("logical_not", torch.logical_not(x < y), c)
    cv = b.node("convert", (x < y).long(), c, torch.int64)
    sm = b.node("sum", cv.__class__ and (x < y).long().sum([1]), cv, [1], False)
    ar = b.node("arange", torch.arange(2, 11, 3), 2, 11, 3, dtype=torch.int64)
    af = b.node("arange", torch.arange(0.0, 1.0, 0.25), 0.0, 1.0, 0.25, dtype=torch.float32)
    b.outputs = [fd, md, n, sm, ar, af]
    check(b, [x, y])


def test_refused_forms_become_externs():
    b = GraphBuilder()
    x, y = torch.randint(-5, 5, (3,)), torch.randint(1, 5, (3,))
    rx, ry = b.input(x), b.input(y)
    b.outputs = [b.node("floor_divide", torch.floor_divide(x, y), rx, ry)]
    text, refusals = lowering.lower(b.text())
    assert '"torch.floor_divide"' in text and len(refusals) == 1 and "integer division" in refusals[0]
    check(b, [x, y])


@pytest.mark.parametrize("op", ["sum", "amax", "amin"])
@pytest.mark.parametrize("count", [1, 3, 8, 9])
def test_small_reductions_are_unrolled(op, count):
    """sum/amax/amin over at most 8 elements of dims other than the last: a pointwise kernel combining them one
    by one (no reduction loop), NaN-propagating for max and min; 9 elements, or the last dim, keep the loop.
    Run by the loop IR interpreter, and compiled (C++ on the CPU, Triton under EMBER_TEST_DEVICE=cuda)."""
    import ember
    from ember.testing import DEVICE
    torch.manual_seed(count)
    x = torch.randn(2, count, 5)
    x[1, count - 1, 2] = float("nan")
    for dims, dtype in (([1], torch.float32), ([0, 1], torch.float32), ([1], torch.bfloat16), ([2], torch.float32)):
        if op == "sum" and dtype == torch.float32 and dims == [1]:
            xs = (x, torch.randint(-9, 9, (2, count, 5)))
        else:
            xs = (x.to(dtype),)
        for xi in xs:
            b = GraphBuilder()
            r = b.input(xi)
            want = getattr(torch, op)(xi, dims, keepdim=True)
            b.outputs = [b.node(op, want, r, dims, True)]
            text = check(b, [xi], atol=1e-2 if dtype == torch.bfloat16 else 1e-5)
            unrolled = 2 * count <= 8 if dims == [0, 1] else count <= 8 and dims != [2]
            assert ("loop [" not in text) == unrolled, text
            ember.reset()
            got = ember.compile(lambda t: getattr(torch, op)(t, dims, keepdim=True) * 2)(xi.to(DEVICE))
            torch.testing.assert_close(got.cpu(), want * 2, equal_nan=True, atol=1e-2, rtol=1e-2)
            assert ember.stats()["kernels_compiled"] >= 1
