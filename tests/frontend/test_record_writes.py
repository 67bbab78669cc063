"""Writes to a model output the trace built (interp_records.cpp): `out["logits"] = ...` and `out.logits = ...`
replace a present field, and the record read back (by key, attribute, index, to_tuple) and returned matches
eager's. Writes that would add a key (eager appends it after the others, out of field order) or blank one
stay breaks. Skipped without transformers (the record classes are its ModelOutput's subclasses)."""
import dataclasses
from typing import Optional

import pytest
import torch

import ember

transformers = pytest.importorskip("transformers")


@dataclasses.dataclass
class Out(transformers.utils.ModelOutput):
    loss: Optional[torch.Tensor] = None
    logits: Optional[torch.Tensor] = None
    hidden: Optional[torch.Tensor] = None


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


def replaces_by_key_and_attribute(x):
    out = Out(logits=x * 2, hidden=x.sin())
    out["logits"] = out["logits"] + 1
    out.hidden = out.hidden.cos() * out[0]
    first, second = out.to_tuple()
    out["logits"] = first * second
    return out


def check_whole(fn, x):
    e = ember.explain(fn, backend="eager")(x)
    assert (e.graph_count, e.graph_break_count) == (1, 0), e.break_reasons
    got, ref = ember.compile(fn, fullgraph=True, backend="eager")(x), fn(x)
    assert type(got) is Out and list(got.keys()) == list(ref.keys()) == ["logits", "hidden"]
    for a, b in zip(got.to_tuple(), ref.to_tuple()):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(got.logits, ref.logits)


def test_present_fields_replaced():
    check_whole(replaces_by_key_and_attribute, torch.randn(3))


def adds_a_key(x):
    out = Out(logits=x)
    out["loss"] = x.sum()  # eager: keys (logits, loss), not field order
    return out.to_tuple()


def blanks_a_key(x):
    out = Out(logits=x, hidden=x)
    out.hidden = None  # eager: the attribute is None, the key keeps the old value
    return out.to_tuple()


@pytest.mark.parametrize("fn", [adds_a_key, blanks_a_key], ids=lambda f: f.__name__)
def test_writes_that_change_the_keys_are_breaks_and_correct(fn):
    x = torch.randn(3)
    e = ember.explain(fn, backend="eager")(x)
    assert any("setting field" in r.reason for r in e.break_reasons), e.break_reasons
    got, ref = ember.compile(fn, backend="eager")(x), fn(x)
    assert len(got) == len(ref)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b)


# Plain dataclasses the trace constructs: dataclasses.fields of the class or an instance, and a
# __post_init__ that writes through object.__setattr__.

@dataclasses.dataclass
class Scaled:
    x: torch.Tensor
    scale: float = 2.0

    def __post_init__(self):
        object.__setattr__(self, "y", self.x * self.scale)


def uses_fields(x):
    s = Scaled(x)
    names = [f.name for f in dataclasses.fields(s)] + [f.name for f in dataclasses.fields(Scaled)]
    return s.y + len(names), names


def test_dataclass_fields_and_object_setattr_in_post_init():
    x = torch.randn(3)
    e = ember.explain(uses_fields, backend="eager")(x)
    assert (e.graph_count, e.graph_break_count) == (1, 0), e.break_reasons
    got, ref = ember.compile(uses_fields, fullgraph=True, backend="eager")(x), uses_fields(x)
    torch.testing.assert_close(got[0], ref[0])
    assert got[1] == ref[1] == ["x", "scale", "x", "scale"]


def test_dataclass_fields_of_a_record():
    x = torch.randn(3)
    fn = lambda x: x * len(dataclasses.fields(Out(logits=x)))  # noqa: E731
    torch.testing.assert_close(ember.compile(fn, fullgraph=True, backend="eager")(x), fn(x))
