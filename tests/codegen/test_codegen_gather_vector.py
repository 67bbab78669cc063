"""Gathers in vector code (src/codegen/cpp/emit_ops.cpp, emit_check_index): a row index fixed along the
vectorized variable (an embedding's token id, a position id from arange) is loaded and checked once a vector
step, and the row is read with vector loads; the C++ kernel ran one scalar at a time before (BERT's embeddings
0.64x eager, now faster than eager in the cpu bench). A bad index still raises, from the main body or the tail;
in vector code the failed step reads row 0 instead, so a kernel that writes the caller's memory keeps the scalar
path, and the caller's tensors never see such a row."""
import pytest
import torch
import torch.nn.functional as F

import ember


def _embed(ids, table, pos):
    return F.layer_norm(F.embedding(ids, table) + pos[torch.arange(ids.shape[-1])], table.shape[-1:])


def _args(d, bad=None):
    g = torch.Generator().manual_seed(d)
    ids = torch.randint(0, 50, (3, 7), generator=g)
    if bad is not None:
        ids[2, 5] = bad
    return ids, torch.randn(50, d, generator=g), torch.randn(9, d, generator=g)


@pytest.mark.parametrize("d", [13, 32])
def test_embedding_and_position_rows_are_vector_loads(d, compiled_source):
    args = _args(d)
    out, source = compiled_source(_embed, *args)
    torch.testing.assert_close(out, _embed(*args))
    assert "pointwise: vector over" in source, source[:3000]
    assert "scalar (" not in source, source[:4000]


@pytest.mark.parametrize("d", [13, 32])
@pytest.mark.parametrize("bad", [50, -1])
def test_a_bad_token_id_raises_and_the_next_call_is_right(d, bad):
    ember.reset()
    f = ember.compile(_embed)
    with torch.no_grad():
        with pytest.raises(IndexError):
            _embed(*_args(d, bad))
        with pytest.raises(IndexError):
            f(*_args(d, bad))
        torch.testing.assert_close(f(*_args(d)), _embed(*_args(d)))
    ember.reset()


def _add_rows(x, idx, src):
    x.index_add_(0, idx, src)
    return x


def test_a_bad_index_into_the_callers_tensor_leaves_other_rows_alone():
    ember.reset()
    f = ember.compile(_add_rows)
    x, src = torch.zeros(4, 16), torch.ones(2, 16)
    torch.testing.assert_close(f(x, torch.tensor([1, 2]), src), _add_rows(torch.zeros(4, 16), torch.tensor([1, 2]), src))
    x.zero_()
    with pytest.raises((IndexError, RuntimeError)):
        f(x, torch.tensor([1, 7]), src)
    assert torch.all(x[0] == 0) and torch.all(x[3] == 0), x
    ember.reset()
