"""GuardSet: every check kind passing and failing, failure texts, describe(), captures, safety.

The binding's check_args() itself asserts that check() leaves no Python error set and that a
failed check returns no captures, so every call below also tests those two promises.
"""
import builtins
import collections
import gc
import sys
import types

import pytest

torch = pytest.importorskip("torch")
import torch.nn.modules.module as nn_module  # noqa: E402
from ember._C import guards as G  # noqa: E402

B = builtins.__dict__
X = (("local", 0, "x"),)
SELF = ("local", 0, "self")


def check(g, args=(), glb=None, closure=None):
    return g.check_args(args, {} if glb is None else glb, B, closure)


def passes(g, args=(), glb=None, closure=None):
    return check(g, args, glb, closure)[0]


def why(g, args=(), glb=None, closure=None):
    return g.first_failure(args, {} if glb is None else glb, B, closure)


def guard(kind, spec, *values):
    g = G.GuardSet()
    getattr(g, kind)(spec, *values)
    return g


# ---- tensors ----

def test_tensor_match_shape_and_failure_text():
    g = guard("tensor_match", X, torch.randn(4, 8))
    assert passes(g, (torch.randn(4, 8),))
    assert why(g, (torch.randn(4, 8),)) == ""
    assert not passes(g, (torch.randn(5, 8),))
    assert why(g, (torch.randn(5, 8),)) == "L['x'] tensor: expected f32[4, 8]{8, 1} cpu, got f32[5, 8]{8, 1} cpu"


@pytest.mark.parametrize("dtype", [torch.bool, torch.bfloat16, torch.float16, torch.int64, torch.float64])
def test_tensor_match_dtype(dtype):
    g = guard("tensor_match", X, torch.zeros(3, dtype=dtype))
    assert passes(g, (torch.ones(3, dtype=dtype),))
    assert not passes(g, (torch.zeros(3),))
    assert "got f32[3]{1} cpu" in why(g, (torch.zeros(3),))


def test_tensor_match_strides_of_a_transposed_view():
    g = guard("tensor_match", X, torch.randn(8, 4))
    view = torch.randn(4, 8).t()  # same sizes, strides {1, 8}
    assert not passes(g, (view,))
    assert why(g, (view,)) == "L['x'] tensor: expected f32[8, 4]{4, 1} cpu, got f32[8, 4]{1, 8} cpu"
    g2 = guard("tensor_match", X, view)
    assert passes(g2, (torch.randn(4, 8).t(),))
    assert not passes(g2, (view.contiguous(),))


def test_tensor_match_non_contiguous_slices():
    g = guard("tensor_match", X, torch.randn(6, 8)[::2, 1:])
    assert passes(g, (torch.randn(6, 8)[::2, 1:],))
    assert not passes(g, (torch.randn(6, 8)[::3, 1:],))


def test_tensor_match_zero_dim():
    g = guard("tensor_match", X, torch.tensor(1.0))
    assert passes(g, (torch.tensor(2.0),))
    assert not passes(g, (torch.tensor([2.0]),))
    assert not passes(g, (torch.tensor(2),))


def test_tensor_match_requires_grad():
    g = guard("tensor_match", X, torch.randn(3, requires_grad=True))
    assert passes(g, (torch.randn(3, requires_grad=True),))
    assert passes(g, (torch.randn(3, requires_grad=True) * 2,))  # non-leaf still requires grad
    assert not passes(g, (torch.randn(3),))
    assert why(g, (torch.randn(3),)) == "L['x'] tensor: expected f32[3]{1} cpu grad, got f32[3]{1} cpu"


def test_tensor_match_parameter_versus_tensor_type():
    p = torch.nn.Parameter(torch.randn(2, 3))
    g = guard("tensor_match", X, p)
    assert passes(g, (torch.nn.Parameter(torch.randn(2, 3)),))
    plain = torch.randn(2, 3, requires_grad=True)
    assert not passes(g, (plain,))
    assert why(g, (plain,)) == "L['x'] tensor: expected Parameter f32[2, 3]{3, 1} cpu grad, got f32[2, 3]{3, 1} cpu grad"


def test_tensor_match_rereads_metadata_changed_in_place():
    t = torch.randn(4, 8)
    g = guard("tensor_match", X, t)
    assert passes(g, (t,))
    t.t_()
    assert not passes(g, (t,))
    t.t_()
    t.requires_grad_()
    assert not passes(g, (t,))


def test_tensor_match_refuses_what_cannot_be_described():
    g = guard("tensor_match", X, torch.randn(3, dtype=torch.complex64))
    conj = torch.randn(3, dtype=torch.complex64).conj()
    assert not passes(g, (conj,))
    assert why(g, (conj,)).endswith("got Tensor (not a tensor Ember can describe)")
    assert not passes(g, (3,))
    assert why(g, (3,)).endswith("got int (not a tensor Ember can describe)")
    with pytest.raises(ValueError):
        guard("tensor_match", X, conj)


# ---- constants and types ----

@pytest.mark.parametrize(
    "expected, same, different",
    [
        (1, [1], [True, 1.0, 2, "1", None]),
        (True, [True], [1, 1.0, False]),
        (1.0, [1.0], [1, True, 1.5]),
        (0.0, [0.0], [-0.0]),
        (float("nan"), [float("nan")], [0.0]),
        (2 + 1j, [2 + 1j], [2.0]),
        ("tanh", ["tanh"], ["none", b"tanh"]),
        (b"ab", [b"ab"], ["ab"]),
        (None, [None], [0, False, ""]),
        ((1, 2.0), [(1, 2.0)], [(1.0, 2), (1, 2), [1, 2.0], (1, 2.0, 3)]),
        ((("a", 1), None), [(("a", 1), None)], [(("a", True), None)]),
        (torch.float32, [torch.float32], [torch.float64, "float32"]),
        (torch.device("cpu"), [torch.device("cpu")], [torch.device("meta"), "cpu"]),
    ],
)
def test_equals_needs_exact_types(expected, same, different):
    g = guard("equals", (("global", "V"),), expected)
    for v in same:
        assert passes(g, glb={"V": v}), v
    for v in different:
        assert not passes(g, glb={"V": v}), v


def test_equals_failure_text():
    g = guard("equals", (("global", "FLAG"),), True)
    assert why(g, glb={"FLAG": False}) == "G['FLAG'] == True"
    g = guard("equals", X, "tanh")
    assert why(g, ("none",)) == "L['x'] == 'tanh'"


@pytest.mark.parametrize("value", [[1, 2], {"a": 1}, object(), (1, [2])])
def test_equals_refuses_mutable_or_unknown_values(value):
    with pytest.raises(ValueError, match="equals"):
        guard("equals", X, value)


def test_type_match():
    g = guard("type_match", X, int)
    assert passes(g, (3,))
    assert not passes(g, (True,))
    assert why(g, (True,)) == "type(L['x']) is int"


# ---- identity ----

def test_id_match_on_a_module_holds_it_weakly():
    m = torch.nn.Linear(2, 2)
    before = sys.getrefcount(m)
    g = guard("id_match", (SELF,), m)
    assert sys.getrefcount(m) == before
    assert passes(g, (m,))
    assert not passes(g, (torch.nn.Linear(2, 2),))
    assert why(g, (torch.nn.Linear(2, 2),)) == "id(L['self']) matches"


class Slot:
    """A small weak-referenceable object whose memory CPython reuses at once."""

    __slots__ = ("__weakref__",)


def test_id_match_fails_after_the_object_died_even_at_the_same_address():
    obj = Slot()
    address = id(obj)
    g = guard("id_match", X, obj)
    assert passes(g, (obj,))
    del obj
    gc.collect()
    keep = []
    for _ in range(1000):
        candidate = Slot()
        if id(candidate) == address:
            break
        keep.append(candidate)
    if id(candidate) != address:  # seen on Python 3.12 (another allocator state): nothing to check
        pytest.skip("CPython did not reuse the dead object's address in 1,000 allocations")
    assert not passes(g, (candidate,))


def test_id_match_without_weakref_support_holds_a_strong_reference():
    value = (object(), object())  # tuples have no weak references
    before = sys.getrefcount(value)
    g = guard("id_match", X, value)
    assert sys.getrefcount(value) == before + 1
    assert passes(g, (value,))
    assert not passes(g, ((value[0], value[1]),))
    del g
    assert sys.getrefcount(value) == before


def test_id_match_on_a_builtin():
    g = guard("id_match", (("builtin", "len"),), len)
    assert passes(g)
    assert g.first_failure((), {}, {"len": max}, None) == "id(B['len']) matches"


# ---- containers ----

def test_length_of_list_tuple_dict():
    g = guard("length", X, 3)
    assert passes(g, ([1, 2, 3],))
    assert passes(g, ((1, 2, 3),))
    assert passes(g, ({1: 1, 2: 2, 3: 3},))
    assert passes(g, (torch.nn.ModuleList([torch.nn.ReLU()] * 3),))  # through __len__
    assert not passes(g, ([1, 2],))
    assert why(g, ([1, 2],)) == "len(L['x']) == 3"
    assert not passes(g, (5,))  # no len(): fails without leaving an error


def test_dict_keys_in_order():
    g = guard("dict_keys", X, ("dim", "depth"))
    assert passes(g, ({"dim": 1, "depth": 2},))
    assert not passes(g, ({"depth": 2, "dim": 1},))
    assert not passes(g, ({"dim": 1, "depth": 2, "x": 3},))
    assert not passes(g, (["dim", "depth"],))
    assert why(g, ({"dim": 1},)) == "L['x'].keys() == ('dim', 'depth')"


def test_dict_keys_follow_an_ordered_dicts_own_order():
    g = guard("dict_keys", X, ("a", "b"))
    d = collections.OrderedDict(a=1, b=2)
    assert passes(g, (d,))
    d.move_to_end("a")
    assert not passes(g, (d,))


def test_dict_keys_need_a_tuple():
    with pytest.raises(ValueError):
        guard("dict_keys", X, ["a"])


# ---- hooks ----

def test_no_hooks_with_a_hook_registered_and_removed():
    m = torch.nn.Linear(2, 2)
    g = guard("no_hooks", (SELF,))
    assert passes(g, (m,))
    for register in (m.register_forward_hook, m.register_forward_pre_hook, m.register_full_backward_hook,
                     m.register_full_backward_pre_hook):
        handle = register(lambda *a: None)
        assert not passes(g, (m,))
        assert why(g, (m,)) == "L['self'] has no hooks"
        handle.remove()
        assert passes(g, (m,))


def test_no_hooks_sees_global_module_hooks():
    m = torch.nn.Linear(2, 2)
    g = guard("no_hooks", (SELF,))
    for register in (nn_module.register_module_forward_hook, nn_module.register_module_forward_pre_hook,
                     nn_module.register_module_full_backward_hook):
        handle = register(lambda *a: None)
        try:
            assert not passes(g, (m,))
            assert why(g, (m,)) == "no global module hooks"
        finally:
            handle.remove()
        assert passes(g, (m,))


def test_no_hooks_on_a_non_module_fails():
    g = guard("no_hooks", (SELF,))
    assert not passes(g, (3,))


# ---- global state ----

def test_grad_mode():
    g = G.GuardSet()
    g.global_state()
    assert passes(g)
    with torch.no_grad():
        assert not passes(g)
        assert why(g) == "grad mode enabled"
        inside = G.GuardSet()
        inside.global_state()
        assert passes(inside)
    assert why(inside) == "grad mode disabled"


def test_default_dtype():
    g = G.GuardSet()
    g.global_state()
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert G.current_global_state() == (True, "float64")
        assert not passes(g)
        assert why(g) == "default dtype float32"
    finally:
        torch.set_default_dtype(old)
    assert passes(g)


def test_deterministic_algorithms():
    """Added by graphs whose CUDA kernels add atomically: turning torch.use_deterministic_algorithms on fails it."""
    g = G.GuardSet()
    g.deterministic_algorithms(False)
    assert passes(g)
    torch.use_deterministic_algorithms(True)
    try:
        assert not passes(g)
        assert why(g) == "deterministic algorithms disabled"
    finally:
        torch.use_deterministic_algorithms(False)
    assert passes(g) and g.describe() == "deterministic algorithms disabled\n"


def test_explicit_global_state():
    g = G.GuardSet()
    g.global_state(False, "bfloat16")
    assert g.describe() == "grad mode disabled\ndefault dtype bfloat16\nautocast inactive\n"
    with pytest.raises(ValueError):
        g.global_state(True, "float128")


# ---- captures ----

def test_captures_through_module_members_of_a_sequential():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    g = G.GuardSet()
    g.id_match((SELF,), model)
    slots = {}
    for name, p in model.named_parameters():
        layer, attr = name.split(".")
        slots[name] = g.capture((SELF, ("module_member", layer), ("module_member", attr)))
    assert g.capture_count() == 4
    ok, captured = check(g, (model,))
    assert ok
    for name, p in model.named_parameters():
        assert captured[slots[name]] is p


def test_captures_through_a_module_list_and_buffers():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2)])

    net = Net()
    g = G.GuardSet()
    layers = (SELF, ("module_member", "layers"))
    w = g.capture(layers + (("module_member", "0"), ("module_member", "weight")))
    rm = g.capture(layers + (("module_member", "1"), ("module_member", "running_mean")))
    assert g.capture((SELF, ("module_member", "layers"), ("module_member", "0"), ("module_member", "weight"))) == w
    ok, captured = check(g, (net,))
    assert ok and captured[w] is net.layers[0].weight and captured[rm] is net.layers[1].running_mean
    del net.layers[1]
    ok, captured = check(g, (net,))
    assert not ok and captured == []
    assert why(g, (net,)).startswith("cannot read L['self'].layers.1: AttributeError")


def test_captured_values_through_items_dict_items_and_closures():
    scale = torch.ones(2)

    def fn():
        return scale

    g = G.GuardSet()
    a = g.capture((("local", 0, "seq"), ("item", 1)))
    b = g.capture((("local", 1, "cfg"), ("dict_item", "w")))
    c = g.capture((("closure", 0, "scale"),))
    d = g.capture((("global", "TABLE"),))
    seq, cfg, table = [torch.zeros(1), torch.zeros(2)], {"w": torch.zeros(3)}, {"k": 1}
    ok, captured = g.check_args((seq, cfg), {"TABLE": table}, B, fn.__closure__)
    assert ok
    assert captured[a] is seq[1] and captured[b] is cfg["w"] and captured[c] is scale and captured[d] is table


# ---- closures and globals ----

def test_closure_guards():
    scale = 2

    def fn():
        return scale

    g = guard("equals", (("closure", 0, "scale"),), 2)
    assert passes(g, closure=fn.__closure__)
    fn.__closure__[0].cell_contents = 3
    assert not passes(g, closure=fn.__closure__)
    assert why(g, closure=fn.__closure__) == "C['scale'] == 2"
    assert not passes(g, closure=(types.CellType(),))
    assert why(g, closure=(types.CellType(),)).startswith("cannot read C['scale']: NameError")


def test_missing_global():
    g = guard("equals", (("global", "FLAG"),), True)
    assert passes(g, glb={"FLAG": True})
    assert not passes(g, glb={})
    assert why(g, glb={}) == "cannot read G['FLAG']: NameError: global 'FLAG' is not defined"


# ---- the tree ----

class Counted:
    """An object whose attribute `inner` counts how often it is read."""

    def __init__(self):
        self.reads = 0
        self.payload = types.SimpleNamespace(a=1, b=2.0, c="x")

    @property
    def inner(self):
        self.reads += 1
        return self.payload


def test_shared_prefix_is_read_once_per_check():
    obj = Counted()
    g = G.GuardSet()
    inner = (SELF, ("attr", "inner"))
    g.equals(inner + (("attr", "a"),), 1)
    g.equals(inner + (("attr", "b"),), 2.0)
    g.equals(inner + (("attr", "c"),), "x")
    g.capture(inner)
    assert passes(g, (obj,))
    assert obj.reads == 1


def test_checks_run_in_insertion_order_within_a_node():
    g = G.GuardSet()
    g.length(X, 2)
    g.equals(X, (1, 2))
    assert why(g, ((3, 4, 5),)) == "len(L['x']) == 2"
    g2 = G.GuardSet()
    g2.equals(X, (1, 2))
    g2.length(X, 2)
    assert why(g2, ((3, 4, 5),)) == "L['x'] == (1, 2)"


def test_describe_lists_every_check_in_a_stable_order_without_duplicates():
    def build():
        g = G.GuardSet()
        g.tensor_match((SELF, ("module_member", "w")), torch.zeros(2, 3))
        g.id_match((SELF,), Slot)
        g.equals((("global", "FLAG"),), True)
        g.equals((("global", "FLAG"),), True)  # a duplicate
        g.length((SELF, ("attr", "items")), 2)
        g.dict_keys((("local", 1, "cfg"),), ("dim",))
        g.type_match((("local", 1, "cfg"),), dict)
        g.global_state(True, "float32")
        g.global_state(True, "float32")
        return g

    g = build()
    text = g.describe()
    assert text == (
        "grad mode enabled\n"
        "default dtype float32\n"
        "autocast inactive\n"
        "id(L['self']) matches\n"
        "L['self'].w tensor: f32[2, 3]{3, 1} cpu\n"
        "len(L['self'].items) == 2\n"
        "G['FLAG'] == True\n"
        "L['cfg'].keys() == ('dim',)\n"
        "type(L['cfg']) is dict\n"
    )
    assert len(g) == 9
    assert build().describe() == text


# ---- safety: errors and references ----

class Raising:
    @property
    def boom(self):
        raise ValueError("boom")

    def __len__(self):
        raise RuntimeError("no length")


def test_python_errors_during_a_check_fail_it_and_are_cleared():
    g = guard("equals", (SELF, ("attr", "boom")), 1)
    assert not passes(g, (Raising(),))
    assert why(g, (Raising(),)) == "cannot read L['self'].boom: ValueError: boom"
    g = guard("length", (SELF,), 1)
    assert not passes(g, (Raising(),))
    assert why(g, (Raising(),)) == "len(L['self']) == 1 (raised RuntimeError: no length)"


def test_missing_local_slot_fails():
    g = guard("equals", (("local", 2, "z"),), 1)
    assert not passes(g, (1,))
    assert why(g, (1,)).startswith("cannot read L['z']: RuntimeError")


def test_no_reference_leaks_over_many_checks():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
    x = torch.randn(2, 3)
    flag = 12345678901234  # a fresh int object, not a cached small one
    glb = {"FLAG": flag}
    g = G.GuardSet()
    g.global_state()
    g.id_match((SELF,), model)
    g.no_hooks((SELF,))
    g.tensor_match((("local", 1, "x"),), x)
    g.equals((("global", "FLAG"),), flag)
    g.capture((SELF, ("module_member", "0"), ("module_member", "weight")))
    g.capture((("local", 1, "x"),))
    watched = [model, model[0], model[0].weight, x, flag, glb, vars(model), vars(model[0]), vars(model[0])["_parameters"]]
    other = torch.randn(5, 3)
    for _ in range(10):  # warm up lazily built caches
        check(g, (model, x), glb)
        check(g, (model, other), glb)
    gc.collect()
    before = [sys.getrefcount(o) for o in watched]
    for _ in range(2000):
        ok, captured = check(g, (model, x), glb)
        assert ok
        del captured
        assert not check(g, (model, other), glb)[0]
        g.first_failure((model, other), glb, B, None)
    gc.collect()
    assert [sys.getrefcount(o) for o in watched] == before


def test_guard_set_releases_its_references():
    big = 98765432109876
    keys = ("k1", "k2")

    class Local:
        pass

    counts = [sys.getrefcount(big), sys.getrefcount(keys), sys.getrefcount(Local)]
    g = G.GuardSet()
    g.equals(X, big)
    g.dict_keys(X, keys)
    g.type_match(X, Local)
    assert [sys.getrefcount(big), sys.getrefcount(keys), sys.getrefcount(Local)] != counts
    del g
    gc.collect()
    assert [sys.getrefcount(big), sys.getrefcount(keys), sys.getrefcount(Local)] == counts
