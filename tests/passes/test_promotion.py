"""Type promotion made explicit: binary pointwise ops over every pair of dtypes, with Python
scalars and zero-dim tensors, decomposed and compared with the captured graph (each node one eager
torch call). A combination torch itself rejects (sub of bools, torch.maximum with a Python scalar)
must be rejected by the compiled function the same way (same exception type); any other exception
from Ember fails the test."""
import operator

import pytest
import torch

import ember

from .harness import compare, graph_inputs, lower, make_inputs

DTYPES = [torch.bool, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32]
OPS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "lt": operator.lt, "eq": operator.eq, "maximum": torch.maximum,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2), "where": lambda a, b: torch.where(a > 0, a, b),
}
SCALARS = {"int": 3, "float": 2.5, "bool": True}


def make(dt, shape, seed):
    g = torch.Generator().manual_seed(seed)
    if dt == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dt.is_floating_point:
        return torch.randn(shape, generator=g).to(dt)
    return torch.randint(1, 5, shape, generator=g).to(dt)


def check(fn, args, sources):
    try:
        fn(*args)
    except (RuntimeError, TypeError) as e:
        with pytest.raises(type(e)) as raised:
            ember.compile(fn)(*args)
        assert type(raised.value) is type(e), f"eager raised {e!r}, Ember {raised.value!r}"
        return
    graphs = ember.explain(fn)(*args).graphs
    assert graphs, "nothing captured"
    for text in graphs:
        after = lower(text)
        assert "alpha=" not in after, after
        # Only a scalar divided by a tensor stays with torch (no exact primitive form).
        assert all("operator." not in line or '"operator.truediv"(' in line for line in after.splitlines()), after
        inputs = make_inputs(graph_inputs(text), 3, dict(zip(sources, args)))
        compare(text, after, inputs)


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("da", DTYPES, ids=str)
@pytest.mark.parametrize("db", DTYPES, ids=str)
def test_tensor_pairs(op, da, db):
    f = OPS[op]
    fn = lambda a, b, z: (f(a, b), f(a, z))
    check(fn, (make(da, (3, 4), 0), make(db, (4,), 1), make(db, (), 2)), ["L['a']", "L['b']", "L['z']"])


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("da", DTYPES, ids=str)
@pytest.mark.parametrize("kind", sorted(SCALARS))
def test_tensor_scalar(op, da, kind):
    f, s = OPS[op], SCALARS[kind]
    if op == "where":
        fn = lambda a: (torch.where(a > 0, a, s), torch.where(a > 0, s, a))
    else:
        fn = lambda a: (f(a, s), f(s, a)) if op not in ("maximum", "add_alpha") else f(a, s)
    check(fn, (make(da, (3, 4), 0),), ["L['a']"])
