"""Rules that used to pin sizes under dynamic=True (issue 14's probe of transformers models,
`python -m ember.bench dynamic --probe`): gather and index_select (stand-ins), embedding of expanded
indices (any layout), in-place `x += y` (operator.iadd ...), Tensor.repeat and repeat_interleave (over expressions), narrow. Each
symbolic answer, with s0 replaced by a value, must be torch's meta result for that value."""
import pytest
import torch

from ember._C import shapes

from .test_symbolic import evaluate


def meta_result(fn, *args):
    out = fn(*args)
    return [(str(out.dtype).replace("torch.", ""), tuple(out.shape), tuple(out.stride()), out.requires_grad, "meta")]


def check(name, fn, args, symbolic, n, kwargs=None):
    got = shapes.infer_result_types(name, tuple(args), kwargs or {}, True, "float32", symbolic)
    assert got is not None, (name, args)
    assert any(isinstance(s, str) for _, sizes, _, _, _ in got for s in sizes), got  # still symbolic
    return got, evaluate(got, n)


@pytest.mark.parametrize("n", [2, 7])
def test_gather_by_a_buffer_slice(n):
    # BERT: torch.gather(token_type_ids[1, 64], 1, position_ids[:, :T]): the index's length is symbolic.
    x = torch.zeros(1, 64, dtype=torch.long, device="meta")
    index = torch.empty(1, n, dtype=torch.long, device="meta")
    got, at_n = check("gather", torch.gather, [x, 1, index], [(2, 1)], n)
    assert got[0][1] == (1, "s0")
    assert at_n == meta_result(torch.gather, x, 1, index)


def test_gather_declines_sizes_only_some_values_admit():
    # index.size(0) <= input.size(0) would hold for the stand-ins (about 1000) but not for every s0.
    x = torch.empty(2048, 3, device="meta")
    index = torch.empty(4, 3, dtype=torch.long, device="meta")
    assert shapes.infer_result_types("gather", (x, 1, index), {}, True, "float32", [(2, 0)]) is None
    assert shapes.infer_result_types("gather", (index.float(), 1, index), {}, True, "float32", [(0, 0)]) is None


@pytest.mark.parametrize("n", [2, 5])
def test_index_select_and_embedding_of_expanded_indices(n):
    w = torch.empty(10, 4, device="meta")
    ids = torch.empty(1, n, dtype=torch.long, device="meta").expand(3, n)  # strides (0, 1): not dense
    got, at_n = check("embedding", torch.nn.functional.embedding, [ids, w], [(0, 1)], n)
    assert at_n == meta_result(torch.nn.functional.embedding, ids, w)
    flat = torch.empty(n, dtype=torch.long, device="meta")
    got, at_n = check("index_select", torch.index_select, [w, 0, flat], [(2, 0)], n)
    assert at_n == meta_result(torch.index_select, w, 0, flat)


@pytest.mark.parametrize("n", [2, 6])
def test_in_place_operators_keep_the_target(n):
    import operator
    x = torch.empty(n, 3, dtype=torch.long, device="meta")
    y = torch.empty(n, 3, dtype=torch.long, device="meta")
    for name in ("operator.iadd", "operator.isub", "operator.imul"):
        fn = getattr(operator, name.split(".")[1])
        got, at_n = check(name, fn, [x, y], [(0, 0), (1, 0)], n)
        assert at_n == meta_result(lambda a, b: fn(a.clone(), b), x, y)
    f = torch.empty(n, 3, device="meta")
    got, at_n = check("operator.itruediv", operator.itruediv, [f, 2], [(0, 0)], n)
    assert at_n == meta_result(lambda a, b: operator.itruediv(a.clone(), b), f, 2)
    # A result the target cannot hold (int /= int is float), a larger broadcast, a leaf that requires grad.
    assert shapes.infer_result_types("operator.itruediv", (x, 2), {}, True, "float32", [(0, 0)]) is None
    assert shapes.infer_result_types("operator.iadd", (torch.empty(1, 3, device="meta"), f), {}, True, "float32",
                                     [(1, 0)]) is None
    leaf = torch.empty(n, 3, device="meta", requires_grad=True)
    assert shapes.infer_result_types("operator.iadd", (leaf, f), {}, True, "float32", [(0, 0), (1, 0)]) is None


@pytest.mark.parametrize("n", [2, 5])
def test_repeat_over_symbolic_sizes_and_repeats(n):
    x = torch.empty(4, 1, n, device="meta")
    got, at_n = check("torch.Tensor.repeat", torch.Tensor.repeat, [x, 3, 1, 1], [(0, 2)], n)
    assert got[0][1] == (12, 1, "s0")
    assert at_n == meta_result(torch.Tensor.repeat, x, 3, 1, 1)
    # A symbolic repeat count (`alibi.repeat(batch_size, 1, 1)`), and a new leading dim.
    got = shapes.infer_result_types("torch.Tensor.repeat", (x, ("$s0", 1, 1)), {}, True, "float32", [(0, 2)])
    assert got[0][1] == ("4*s0", 1, "s0"), got
    assert evaluate(got, n) == meta_result(torch.Tensor.repeat, x, (n, 1, 1))
    got, at_n = check("torch.Tensor.repeat", torch.Tensor.repeat, [x, 2, 1, 2, 1], [(0, 2)], n)
    assert at_n == meta_result(torch.Tensor.repeat, x, 2, 1, 2, 1)
    assert shapes.infer_result_types("torch.Tensor.repeat", (x, 2, 1), {}, True, "float32", [(0, 2)]) is None


@pytest.mark.parametrize("n", [2, 5])
def test_repeat_interleave_over_symbolic_sizes(n):
    x = torch.empty(3, n, device="meta")
    for name, fn in (("torch.Tensor.repeat_interleave", torch.Tensor.repeat_interleave),
                     ("torch.repeat_interleave", torch.repeat_interleave)):
        for args, kwargs in (([x, 2], {"dim": 1}), ([x, 3, 0], {}), ([x, 2], {})):
            got, at_n = check(name, fn, args, [(0, 1)], n, kwargs)
            assert at_n == meta_result(lambda *a: fn(*a, **kwargs), *args)
        # counts in a tensor are data; output_size goes to the meta kernel
        counts = torch.empty(n, dtype=torch.long, device="meta")
        assert shapes.infer_result_types(name, (x, counts), {"dim": 1}, True, "float32", [(0, 1)]) is None


@pytest.mark.parametrize("n", [3, 7])
def test_narrow_by_sizes(n):
    x = torch.empty(4, n, device="meta")
    for name, fn in (("torch.Tensor.narrow", torch.Tensor.narrow), ("torch.narrow", torch.narrow)):
        got, at_n = check(name, fn, [x, 0, 1, 2], [(0, 1)], n)  # a constant slice of a symbolic tensor
        assert at_n == meta_result(fn, x, 0, 1, 2)
        got = shapes.infer_result_types(name, (x, 1, 1, "$s0 + -2"), {}, True, "float32", [(0, 1)])
        assert got[0][1] == (4, "s0 + -2"), got
        assert evaluate(got, n) == meta_result(fn, x, 1, 1, n - 2)
        got = shapes.infer_result_types(name, (x, -1, -2, 2), {}, True, "float32", [(0, 1)])
        assert evaluate(got, n) == meta_result(fn, x, -1, -2, 2)
        # 3 elements fit for s0 >= 3 only: the rule declines (the trace pins or guards)
        assert shapes.infer_result_types(name, (x, 1, 0, 3), {}, True, "float32", [(0, 1)]) is None


@pytest.mark.parametrize("n", [3, 6])
def test_where_of_a_condition_in_its_own_layout(n):
    # where's condition is a bool torch never converts: an expanded or permuted mask orders the result too.
    cond = torch.empty(n, 5, 1, dtype=torch.bool, device="meta").expand(n, 5, 4)
    x = torch.empty(4, 5, n, device="meta").permute(2, 1, 0)
    for c, y in ((cond, x), (cond.permute(1, 0, 2), x.permute(1, 0, 2)), (cond, torch.zeros((), device="meta"))):
        got = shapes.infer_result_types("where", (c, y, -1e9), {}, True, "float32")
        assert got is not None and got == meta_result(torch.where, c, y, -1e9), (c.stride(), y.stride(), got)
    # Symbolic: a permuted condition and operand, dim 0 of both the symbol.
    c = torch.empty(4, n, 5, dtype=torch.bool, device="meta").permute(1, 2, 0)
    y = torch.empty(n, 4, 5, device="meta").permute(0, 2, 1)
    got = shapes.infer_result_types("where", (c, y, -1e9), {}, True, "float32", [(0, 0), (1, 0)])
    assert got is not None and evaluate(got, n) == meta_result(torch.where, c, y, -1e9), got


@pytest.mark.parametrize("n", [3, 6])
def test_where_with_size_one_dims_where_operands_broadcast(n):
    # T5's `where(causal[1, 1, T, T], bias[1, H, T, T], min)` (bias permuted from [T, T, H]) and BLOOM's
    # `where(mask[B, 1, T, T], zeros(()), min)`: results with a size-1 dim, laid out by TensorIterator's
    # general path (a size-1 dim broadcast, or a 0-d operand), which the meta kernels share.
    causal = torch.empty(1, 1, n, n, dtype=torch.bool, device="meta")
    bias = torch.empty(n, n, 4, device="meta").permute(2, 0, 1).unsqueeze(0)
    mask = torch.empty(1, 1, n, n, dtype=torch.bool, device="meta").expand(2, 1, n, n)
    zero = torch.zeros((), device="meta")
    for c, y in ((causal, bias), (mask, zero), (causal.transpose(2, 3), bias), (causal, bias.transpose(2, 3))):
        got = shapes.infer_result_types("where", (c, y, -1e9), {}, True, "float32")
        assert got is not None and got == meta_result(torch.where, c, y, -1e9), (c.stride(), y.stride(), got)
    for a, b in ((bias, torch.empty(1, 4, 1, n, device="meta")), (torch.empty(n, 1, 3, device="meta").transpose(0, 2), zero)):
        got = shapes.infer_result_types("add", (a, b), {}, True, "float32")
        assert got is not None and got == meta_result(torch.add, a, b), (a.stride(), b.stride(), got)
    # Symbolic: T (dims 2 and 3 of both operands) is s0; the result keeps it, laid out as torch lays it out.
    got = shapes.infer_result_types("where", (causal, bias, -1e9), {}, True, "float32",
                                    [(0, 2), (0, 3), (1, 2), (1, 3)])
    assert got is not None and got[0][1] == (1, 4, "s0", "s0"), got
    assert evaluate(got, n) == meta_result(torch.where, causal, bias, -1e9), got


def sizes_at(got, n):
    """infer_result_sizes' size lists with s0 = n."""
    return [tuple(s if isinstance(s, int) else eval(s, {"s0": n}) for s in sizes) for sizes in got[0]]


@pytest.mark.parametrize("n", [23, 40])
def test_conv_sizes_are_floor_divisions_with_their_relations(n):
    # conv's formula lives in src/shapes (infer_result_sizes): each spatial size a floor division of the
    # input's, under `extent <= in + 2*padding` (an assumption the caller guards); channels must be the weight's.
    x, w = torch.empty(2, 3, n, device="meta"), torch.empty(4, 3, 10, device="meta")
    got = shapes.infer_result_sizes("torch.conv1d", (x, w, None, 5), {}, [(0, 2)])
    assert got is not None and got[1] == ["10 <= s0"], got
    assert sizes_at(got, n) == [tuple(torch.conv1d(x, w, None, 5).shape)]
    x2, w2 = torch.empty(2, 3, n, n + 3, device="meta"), torch.empty(5, 3, 4, 4, device="meta")
    got = shapes.infer_result_sizes("torch.conv2d", (x2, w2), {"stride": 2, "padding": 1}, [(0, 2), (0, 0, "s1")])
    assert got is not None and got[1] == ["4 <= s0 + 2"], got
    assert got[0][0][0] == "s1" and eval(got[0][0][2], {"s0": n}) == torch.conv2d(x2, w2, stride=2, padding=1).shape[2]
    # A symbolic channel count is pinned (an equality the caller turns into a specialization), not guessed.
    got = shapes.infer_result_sizes("torch.conv1d", (x, w), {}, [(0, 1)])
    assert got is not None and got[1] == ["s0 == 3: needs its input's channels static"], got
    # Constant sizes: decided here; a kernel larger than its input declines (torch's error then).
    assert shapes.infer_result_sizes("torch.conv1d", (torch.empty(1, 3, 5, device="meta"), w), {}) is None
    assert shapes.infer_result_sizes("torch.conv1d", (x, w), {})[1] == []


@pytest.mark.parametrize("n", [2, 9])
def test_max_min_reduction_sizes(n):
    x = torch.empty(3, n, 4, device="meta")
    for name, fn, args, kwargs in (("torch.max", torch.max, (1,), {}), ("torch.Tensor.min", torch.Tensor.min, (), {"dim": -1, "keepdim": True}),
                                   ("torch.max", torch.max, (), {})):
        got = shapes.infer_result_sizes(name, (x, *args), kwargs, [(0, 1)])
        out = fn(x, *args, **kwargs)
        want = [tuple(out.shape)] if isinstance(out, torch.Tensor) else [tuple(out.values.shape)]
        assert got is not None and sizes_at(got, n) == want, (name, got)
    # The elementwise form is maximum's rule, not this formula.
    assert shapes.infer_result_sizes("torch.max", (x, x), {}, [(0, 1), (1, 1)]) is None


@pytest.mark.parametrize("n", [3, 7])
def test_advanced_index_sizes(n):
    # Falcon: fused_qkv[..., [-2], :] of [B, T, H + 2, D]: a list index beside an Ellipsis and a full slice.
    x = torch.empty(2, n, 6, 4, device="meta")
    for index in ((Ellipsis, [-2], slice(None)), (slice(None), slice(None), [0, 5, 1]), [1, 0],
                  (torch.tensor([[0], [1]], device="meta"), slice(None), torch.tensor([1, 2, 3], device="meta")),
                  (slice(None), torch.zeros(5, dtype=torch.long, device="meta"), torch.zeros(1, dtype=torch.long, device="meta"))):
        got = shapes.infer_result_sizes("operator.getitem", (x, index), {}, [(0, 1)])
        assert got is not None and got[1] == [], (index, got)
        assert sizes_at(got, n) == [tuple(x[index].shape)], (index, got)
    # A list index into the symbolic dim: its range is a relation (T > 4) the caller guards; -1 holds for every T >= 1.
    got = shapes.infer_result_sizes("operator.getitem", (x, (slice(None), [4, -1])), {}, [(0, 1)])
    assert got is not None and got[1] == ["4 < s0"] and sizes_at(got, n) == [(2, 2, 6, 4)], got
    # Out of a constant dim, bools, partial slices, a None: declined (torch's error or another rule).
    for index in ((Ellipsis, [6]), [True, False], (slice(1, None), [0]), (None, [0])):
        assert shapes.infer_result_sizes("operator.getitem", (x, index), {}, [(0, 1)]) is None, index


@pytest.mark.parametrize("n", [3, 5])
def test_pointwise_over_a_slice_with_size_one_dims(n):
    # Falcon's rotate_half of its one key head: `-k[..., 2:]` of k [B, 1, T, 4]: a layout that is not dense
    # (so TensorIterator orders the dims), with a size-1 dim. gelu's and clamp's meta kernels (Python) lay
    # size-1 dims out otherwise: declined or equal to meta, never another answer.
    k = torch.empty(2, 1, n, 4, device="meta")
    x = k[..., 2:]
    y = torch.empty(n, 1, 6, device="meta").permute(1, 0, 2)[..., :5]
    for name, fn, args in (("neg", torch.neg, (x,)), ("exp", torch.exp, (y,)), ("add", torch.add, (x, x)),
                           ("mul", torch.mul, (y, torch.empty(1, n, 5, device="meta")))):
        got = shapes.infer_result_types(name, args, {}, True, "float32")
        assert got is not None and got == meta_result(fn, *args), (name, got)
    for name, fn in (("gelu", torch.nn.functional.gelu), ("clamp", lambda a: a.clamp(0, 1))):
        got = shapes.infer_result_types(name, (y,) if name == "gelu" else (y, 0, 1), {}, True, "float32")
        assert got is None or got == meta_result(fn, y), (name, got)


@pytest.mark.parametrize("n", [3, 8])
def test_attention_over_broadcast_batch_dims(n):
    # Falcon's multi-query attention: a key and value of one head against the query's heads.
    q = torch.empty(2, 4, n, 8, device="meta")
    kv = torch.empty(2, 1, n, 8, device="meta")
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for args, kwargs in (((q, kv, kv), {"is_causal": True}), ((kv, q, q), {}),
                         ((q, kv, kv), {"attn_mask": torch.empty(n, n, dtype=torch.bool, device="meta")})):
        got = shapes.infer_result_types("torch.nn.functional.scaled_dot_product_attention", args, kwargs, True, "float32")
        assert got is not None and got == meta_result(lambda *a: sdpa(*a, **kwargs), *args), got
    got = shapes.infer_result_types("torch.nn.functional.scaled_dot_product_attention", (q, kv, kv), {"is_causal": True},
                                    True, "float32", [(0, 2), (1, 2), (2, 2)])
    assert got is not None and got[0][1] == (2, 4, "s0", 8) and evaluate(got, n) == meta_result(
        lambda *a: sdpa(*a, is_causal=True), q, kv, kv), got
    # Batch dims that do not broadcast: torch's error, from the meta kernel.
    assert shapes.infer_result_types("torch.nn.functional.scaled_dot_product_attention",
                                     (q, torch.empty(2, 3, n, 8, device="meta"), kv), {}, True, "float32") is None


@pytest.mark.parametrize("n", [20, 33])
def test_views_of_a_length_that_is_a_floor_division(n):
    # wav2vec2's attention after its conv front end: `x.view(*x.shape[:-1], -1, head_dim)` with the length
    # `(s0 + -10) // 5 + 1`; the view rules take such a factor as one opaque size.
    length = "(s0 + -10) // 5 + 1"
    t = (n - 10) // 5 + 1
    x = torch.empty(2, t, 8, device="meta")
    got = shapes.infer_result_types("view", (x, (2, "$" + length, -1, 4)), {}, True, "float32", [(0, 1, length)])
    assert got is not None and got[0][1] == (2, length, 2, 4), got
    assert evaluate(got, n) == meta_result(lambda a: a.view(2, t, -1, 4), x), got
    got = shapes.infer_result_types("flatten", (x, 0, 1), {}, True, "float32", [(0, 1, length)])
    assert got is not None and evaluate(got, n) == meta_result(lambda a: a.flatten(0, 1), x), got


@pytest.mark.parametrize("n", [3, 9])
def test_baddbmm(n):
    # BLOOM's scores: `alibi.baddbmm(batch1=q, batch2=k, beta=1.0, alpha=0.125)`, alibi [B*H, 1, T] broadcast to
    # [B*H, T, T], k a transposed view.
    alibi = torch.empty(8, 1, n, device="meta")
    q = torch.empty(8, n, 4, device="meta")
    k = torch.empty(8, n, 4, device="meta").transpose(1, 2)
    kwargs = {"batch1": q, "batch2": k, "beta": 1.0, "alpha": 0.125}
    got = shapes.infer_result_types("torch.Tensor.baddbmm", (alibi,), kwargs, True, "float32")
    assert got is not None and got == meta_result(lambda a: a.baddbmm(**kwargs), alibi), got
    got = shapes.infer_result_types("torch.baddbmm", (alibi, q, k), {}, True, "float32", [(0, 2), (1, 1), (2, 2)])
    assert got is not None and got[0][1] == (8, "s0", "s0") and evaluate(got, n) == meta_result(torch.baddbmm, alibi, q, k)
    # Batch sizes that differ, an input that would widen the result: torch's errors.
    assert shapes.infer_result_types("torch.baddbmm", (alibi, q, k[:4]), {}, True, "float32") is None
    assert shapes.infer_result_types("torch.baddbmm", (torch.empty(2, 8, 1, n, device="meta"), q, k), {}, True,
                                     "float32") is None
