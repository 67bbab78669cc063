"""Ints read through containers that are not the frame's arguments (issue 14): `self.sizes[0]`, `cfg["n"]` of a
global dict, `self.t[0]` of a tuple, `self.cfg.n_embd`. Under automatic dynamic they become int symbols once they
change, read at run time from the guard's source (runtime::SymbolBinding), as ints passed as arguments are; used as
structure (a range() bound) they stay specialized, with the reason in the guards. Results always equal eager's."""
import pytest
import torch

import ember


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


class Cfg:
    n_embd = 2


CFG = {"n": 2}


class Holder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.sizes = [2, 5]
        self.t = (2, 5)
        self.d = {"k": 2}
        self.cfg = Cfg()

    def forward(self, x):
        return x * self.sizes[0] + x * self.t[0] + x * self.d["k"] - x * CFG["n"] + x * self.cfg.n_embd


def set_all(m, v):
    m.sizes[0], m.t, m.d["k"], CFG["n"], m.cfg.n_embd = v, (v, 5), v, v, v


@pytest.mark.parametrize("backend", ["eager", "ember"])
def test_container_ints_compile_at_most_twice(backend):
    model = Holder()
    compiled = ember.compile(model, backend=backend)
    x = torch.randn(4, 3)
    try:
        for v in (2, 3, 4, 7, 3):
            set_all(model, v)
            torch.testing.assert_close(compiled(x), model(x))
    finally:
        CFG["n"] = 2
    s = ember.stats()
    assert s["frames_compiled"] == 2 and s["recompiles"] == 1 and s["eager_frames"] == 0, s


def test_container_ints_are_read_from_their_sources():
    model = Holder()
    compiled = ember.compile(model, backend="eager")
    x = torch.randn(4)
    set_all(model, 2)
    compiled(x)
    set_all(model, 3)
    r = ember.explain(compiled)(x)
    guards = "\n".join(r.guards)
    CFG["n"] = 2
    for source in ("C['mod'].sizes[0]", "C['mod'].t[0]", "C['mod'].d['k']", "['CFG']['n']", "C['mod'].cfg.n_embd"):
        assert f"{source}) is int (its value in the shape guard)" in guards, guards
    assert "C['mod'].sizes[1] == 5" in guards, guards  # an item only carried stays as it was


class Stepper(torch.nn.Module):
    """A counter kept in a list attribute, stored back on every call."""

    def __init__(self):
        super().__init__()
        self.state = [0]

    def forward(self, x):
        self.state[0] += 1
        return x * self.state[0]


def test_list_counter_replays_its_store():
    model, ref = Stepper(), Stepper()
    compiled = ember.compile(model, backend="eager")
    for _ in range(6):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), ref(x))
    assert model.state == ref.state == [6]
    assert ember.stats()["frames_compiled"] <= 2, ember.stats()


class Repeats(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cfg = {"layers": 2}

    def forward(self, x):
        for _ in range(self.cfg["layers"]):
            x = x + 1
        return x


def test_structural_use_specializes_with_a_reason():
    model = Repeats()
    compiled = ember.compile(model, backend="eager")
    for n in (2, 3):
        model.cfg["layers"] = n
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), x + n)
    model.cfg["layers"] = 4
    r = ember.explain(compiled)(torch.randn(3))
    guards = "\n".join(r.guards)
    assert "== 4: an argument of range()" in guards, guards
