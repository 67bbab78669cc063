"""Rules that used to pin sizes under dynamic=True (issue 14's probe of transformers models,
`python -m ember.bench dynamic --probe`): gather and index_select (stand-ins), embedding of expanded
indices (any layout), in-place `x += y` (operator.iadd ...), Tensor.repeat (over expressions). Each
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
