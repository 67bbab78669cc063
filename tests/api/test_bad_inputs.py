"""Bad inputs to a compiled function -- wrong dtype, device, shape, rank, or not a tensor -- raise
what eager raises: the same exception type and message, on the first call and after good calls
(when a guard fails and the frame is traced again)."""
import pytest
import torch

import ember


def pointwise(a, b):
    return (a.sin() + b).sum()


def matmul(a, b):
    return torch.tanh(a @ b)


def linear(x, w):
    return torch.nn.functional.linear(x.relu(), w)


def reshape(x):
    return (x + 1).view(3, 7)


def concat(a, b):
    return torch.cat([a.exp(), b], dim=0)


def index(x, i):
    return x[i] * 2


GOOD = {
    pointwise: (torch.randn(3), torch.randn(3)),
    matmul: (torch.randn(2, 3), torch.randn(3, 4)),
    linear: (torch.randn(2, 3), torch.randn(4, 3)),
    reshape: (torch.randn(3, 7),),
    concat: (torch.randn(2, 3), torch.randn(1, 3)),
    index: (torch.randn(4, 5), 2),
}

BAD = [
    ("shape", pointwise, (torch.randn(3), torch.randn(4))),
    ("rank", pointwise, (torch.randn(3), torch.randn(2, 4))),
    ("device", pointwise, (torch.randn(3), torch.randn(3, device="meta"))),
    ("not-a-tensor", pointwise, (torch.randn(3), None)),
    ("not-a-tensor-str", pointwise, (torch.randn(3), "x")),
    ("shape", matmul, (torch.randn(2, 3), torch.randn(4, 5))),
    ("dtype", matmul, (torch.randn(2, 3), torch.randn(3, 4, dtype=torch.float64))),
    ("dtype-int", matmul, (torch.randn(2, 3), torch.ones(3, 4, dtype=torch.int64))),
    ("rank", matmul, (torch.randn(2, 3), torch.tensor(1.0))),
    ("shape", linear, (torch.randn(2, 3), torch.randn(4, 5))),
    ("dtype", linear, (torch.randn(2, 3), torch.randn(4, 3, dtype=torch.float16))),
    ("shape", reshape, (torch.randn(4, 5),)),
    ("shape", concat, (torch.randn(2, 3), torch.randn(2, 4))),
    ("rank", concat, (torch.randn(2, 3), torch.randn(3))),
    ("index", index, (torch.randn(4, 5), 7)),
    ("index-tensor", index, (torch.randn(4, 5), torch.tensor([7]))),
]


def _raised(fn, args):
    try:
        fn(*args)
    except Exception as e:  # what eager raised is the expectation
        return e
    raise AssertionError(f"{fn.__name__}{tuple(type(a).__name__ for a in args)} does not raise eagerly")


@pytest.mark.parametrize("after_good_call", [False, True], ids=["first-call", "after-good-call"])
@pytest.mark.parametrize("what,fn,args", BAD, ids=[f"{fn.__name__}-{what}" for what, fn, _ in BAD])
def test_bad_input_raises_eagers_exception(what, fn, args, after_good_call):
    want = _raised(fn, args)
    f = ember.compile(fn)
    if after_good_call:
        torch.testing.assert_close(f(*GOOD[fn]), fn(*GOOD[fn]))
    with pytest.raises(type(want)) as info:
        f(*args)
    assert type(info.value) is type(want)
    assert str(info.value) == str(want)
    # Still usable, and still right, on good inputs.
    torch.testing.assert_close(f(*GOOD[fn]), fn(*GOOD[fn]))
