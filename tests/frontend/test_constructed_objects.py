"""Instances of plain Python classes constructed inside compiled code (`p = Point(x, y)`): traced
into the graph, their attributes tracked by the trace, and rebuilt as real objects of the class
when they are returned, stored or live across a graph break. Each program runs on new inputs per
call and is compared with eager."""
import dataclasses
from collections.abc import Sequence

import pytest
import torch

import ember


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def norm(self):
        return (self.x * self.x + self.y * self.y).sqrt()

    @property
    def total(self):
        return self.x + self.y

    @property
    def scale(self):
        return self._scale

    @scale.setter
    def scale(self, k):
        self._scale = k * 2


class Shifted(Point):
    def __init__(self, x):
        super().__init__(x, x * 2)
        self.history = [x]


class Plain:
    pass


@dataclasses.dataclass
class Pair:
    a: torch.Tensor
    b: int = 3


def uses_objects(x):
    p = Point(x, x + 1)
    s = Shifted(x)
    d = Pair(x * 2)
    p.scale = 1.5
    q = Plain()
    q.tag = "t"
    return (p.norm() + p.total * p.scale + s.y + s.history[0] + d.a * d.b, isinstance(s, Point),
            hasattr(p, "z"), getattr(p, "z", 7), q.tag)


def returns_objects(x):
    p = Point(x.sin(), 2)
    holder = Plain()
    holder.point = p
    holder.me = holder
    return p, p, holder


def _check(fn, calls=3, fullgraph=False, **compile_kwargs):
    compiled = ember.compile(fn, fullgraph=fullgraph, **compile_kwargs)
    outs = []
    for i in range(calls):
        x = torch.randn(4, generator=torch.Generator().manual_seed(i))
        out, ref = compiled(x), fn(x)
        outs.append(out)
        yield out, ref


def test_construction_methods_properties_and_dataclasses_are_traced():
    for out, ref in _check(uses_objects, fullgraph=True):
        torch.testing.assert_close(out[0], ref[0])
        assert out[1:] == ref[1:]
    assert ember.stats()["frames_compiled"] == 1


def test_returned_instances_are_real_fresh_and_keep_aliases():
    firsts = []
    for out, ref in _check(returns_objects, fullgraph=True):
        p, p_again, holder = out
        assert type(p) is Point and p is p_again and holder.point is p and holder.me is holder
        assert sorted(vars(p)) == ["x", "y"] and sorted(vars(holder)) == ["me", "point"]
        torch.testing.assert_close(p.x, ref[0].x)
        assert p.y == 2
        firsts.append(p)
    assert firsts[0] is not firsts[1], "each call builds its own instance"


class Keeper(torch.nn.Module):
    def forward(self, x):
        self.last = Point(x * 3, x)  # stored on the module: replayed after the graph
        return self.last.norm()


def test_an_instance_stored_on_a_module_is_a_real_object():
    m = Keeper()
    compiled = ember.compile(m, fullgraph=True)
    for i in range(2):
        x = torch.randn(3, generator=torch.Generator().manual_seed(i))
        out = compiled(x)
        assert type(m.last) is Point
        torch.testing.assert_close(m.last.x, x * 3)
        torch.testing.assert_close(out, Point(x * 3, x).norm())


def across_a_break(x):
    p = Shifted(x)
    print("between graphs")
    p.history.append(p.y * 2)
    return p.norm() + p.history[-1], len(p.history)


def test_an_instance_lives_across_a_graph_break(capsys):
    for out, ref in _check(across_a_break):
        torch.testing.assert_close(out[0], ref[0])
        assert out[1] == ref[1]
    e = ember.explain(across_a_break)(torch.randn(4))
    assert e.break_reasons[0].reason == "print() inside compiled code", e.break_reasons


class Recorder:
    def __init__(self, events):
        self.events = events
        self.depth = 0

    def __enter__(self):
        self.depth += 1
        self.events.append("enter")
        return self

    def __exit__(self, *exc):
        self.events.append("exit")
        return False


def with_a_user_context(x):
    events = []
    with Recorder(events) as r:
        y = x.relu() * r.depth
    return y, events


def with_a_user_context_across_a_break(x):
    events = []
    with Recorder(events) as r:
        y = x.relu() * r.depth
        print("inside the block")
        z = y + 1
    return z, events


def test_a_context_manager_made_in_the_trace():
    for out, ref in _check(with_a_user_context, fullgraph=True):
        torch.testing.assert_close(out[0], ref[0])
        assert out[1] == ref[1] == ["enter", "exit"]


def test_a_context_manager_made_in_the_trace_across_a_break(capsys):
    for out, ref in _check(with_a_user_context_across_a_break):
        torch.testing.assert_close(out[0], ref[0])
        assert out[1] == ref[1] == ["enter", "exit"]


class Slotted:
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v


class Guarded:
    def __init__(self, v):
        self.v = v

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value * 2 if name == "v" else value)


class Finalized:
    deleted = 0

    def __init__(self, v):
        self.v = v

    def __del__(self):
        Finalized.deleted += 1


def makes_a_finalized_object(x):
    return Finalized(x).v * 2


def test_a_class_with_del_is_not_constructed_in_the_trace():
    # Its placeholder would run __del__ at compile time: the construction is left to CPython.
    x = torch.randn(3)
    compiled = ember.compile(makes_a_finalized_object)
    Finalized.deleted = 0
    torch.testing.assert_close(compiled(x), x * 2)
    torch.testing.assert_close(compiled(x), x * 2)
    assert Finalized.deleted == 2


class Failing:
    def __init__(self, v):
        raise ValueError("bad value")


def refused_classes(x):
    a, b = Slotted(x), Guarded(x)
    return a.v + b.v, hash(Point(1, 2)) != 0


@pytest.mark.parametrize("fullgraph", [False, True])
def test_other_classes_break_with_a_reason_and_stay_correct(fullgraph):
    x = torch.randn(3)
    if fullgraph:
        with pytest.raises(ember.Unsupported, match="Slotted"):
            ember.compile(refused_classes, fullgraph=True)(x)
        return
    out = ember.compile(refused_classes)(x)
    torch.testing.assert_close(out[0], refused_classes(x)[0])
    assert out[1] is True
    ember.reset()
    with pytest.raises(ValueError, match="bad value"):
        ember.compile(lambda t: Failing(t))(x)


class Layers(Sequence):
    """A read-only sequence view (an ABC subclass), as libraries write them."""

    def __init__(self, items):
        self._items = items

    def __len__(self):
        return len(self._items)

    def __getitem__(self, i):
        return self._items[i]


class Flag:
    def __init__(self, on):
        self.on = on

    def __bool__(self):
        return self.on


def uses_protocols(x):
    layers = Layers([x, x * 2, x * 3])
    total = layers[0] + layers[-1]
    if Flag(len(layers) == 3) and layers:
        total = total * len(layers)
    return total, isinstance(layers, Sequence), bool(Flag(False))


def test_abc_subclasses_len_and_truth_are_traced():
    for out, ref in _check(uses_protocols, fullgraph=True):
        torch.testing.assert_close(out[0], ref[0])
        assert out[1:] == ref[1:]


class Abstract(Sequence):
    pass


def constructs_an_abstract_class(x):
    try:
        Abstract()
    except TypeError:
        return x + 1
    return x


def test_an_abstract_class_is_not_constructed_in_the_trace():
    x = torch.randn(3)
    torch.testing.assert_close(ember.compile(constructs_an_abstract_class)(x), x + 1)
