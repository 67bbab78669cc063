"""Sources: text form and resolution of every kind against a frame built from Python values."""
import builtins
import types

import pytest

torch = pytest.importorskip("torch")
from ember._C import guards as G  # noqa: E402

BUILTINS = builtins.__dict__


def resolve(spec, args=(), glb=None, closure=None, builtins_ns=BUILTINS):
    return G.resolve(spec, args, {} if glb is None else glb, builtins_ns, closure)


@pytest.mark.parametrize(
    "spec, text",
    [
        ((("local", 0, "x"),), "L['x']"),
        ((("global", "torch"),), "G['torch']"),
        ((("builtin", "len"),), "B['len']"),
        ((("closure", 0, "scale"),), "C['scale']"),
        ((("local", 0, "self"), ("attr", "w")), "L['self'].w"),
        ((("local", 0, "self"), ("module_member", "layers")), "L['self'].layers"),
        ((("local", 0, "seq"), ("item", 0)), "L['seq'][0]"),
        ((("local", 0, "cfg"), ("dict_item", "dim")), "L['cfg']['dim']"),
        (
            (("local", 0, "self"), ("module_member", "layers"), ("module_member", "0"), ("module_member", "weight")),
            "L['self'].layers.0.weight",
        ),
        ((("local", 0, "d"), ("dict_item", "it's")), "L['d']['it\\'s']"),
    ],
)
def test_source_text(spec, text):
    assert G.source_str(spec) == text


@pytest.mark.parametrize(
    "spec",
    [
        (("attr", "w"),),  # no root
        (("local", 0, "x"), ("global", "y")),  # a second root
        (("local", -1, "x"),),
        (("local", 0, "x"), ("item", -1)),
        (("local", 0),),
        (("unknown", "x"),),
    ],
)
def test_bad_source_spec_is_an_error(spec):
    with pytest.raises(ValueError):
        G.source_str(spec)


def test_resolve_local_global_builtin():
    x = object()
    assert resolve((("local", 1, "x"),), args=(None, x)) is x
    flag = object()
    assert resolve((("global", "FLAG"),), glb={"FLAG": flag}) is flag
    assert resolve((("builtin", "len"),)) is len
    # builtins given as a module resolve through its __dict__
    assert resolve((("builtin", "len"),), builtins_ns=builtins) is len


def test_resolve_missing_names_raise():
    with pytest.raises(NameError):
        resolve((("global", "NOPE"),))
    with pytest.raises(NameError):
        resolve((("builtin", "NOPE"),))
    with pytest.raises(RuntimeError):
        resolve((("local", 3, "x"),), args=(1,))


def test_resolve_closure_cells():
    scale = 2.5

    def inner():
        return scale

    assert resolve((("closure", 0, "scale"),), closure=inner.__closure__) == 2.5
    assert resolve((("closure", 0, "scale"),), closure=inner) == 2.5
    empty = types.CellType()
    with pytest.raises(NameError, match="empty cell"):
        resolve((("closure", 0, "late"),), closure=(empty,))
    with pytest.raises(RuntimeError):
        resolve((("closure", 1, "scale"),), closure=inner.__closure__)


def test_resolve_attr_item_dict_item():
    ns = types.SimpleNamespace(w=[10, (20, 30)], cfg={"dim": 64})
    root = ("local", 0, "self")
    assert resolve((root, ("attr", "w"), ("item", 1), ("item", 0)), args=(ns,)) == 20
    assert resolve((root, ("attr", "cfg"), ("dict_item", "dim")), args=(ns,)) == 64
    with pytest.raises(IndexError):
        resolve((root, ("attr", "w"), ("item", 5)), args=(ns,))
    with pytest.raises(KeyError):
        resolve((root, ("attr", "cfg"), ("dict_item", "depth")), args=(ns,))
    with pytest.raises(AttributeError):
        resolve((root, ("attr", "missing")), args=(ns,))


def test_resolve_module_members_like_nn_module_getattr():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
    model.register_buffer("scale", torch.ones(2))
    model.plain = 7
    root = ("local", 0, "self")
    assert resolve((root, ("module_member", "0")), args=(model,)) is model[0]
    assert resolve((root, ("module_member", "0"), ("module_member", "weight")), args=(model,)) is model[0].weight
    assert resolve((root, ("module_member", "scale")), args=(model,)) is model.scale
    assert resolve((root, ("module_member", "plain")), args=(model,)) == 7
    assert resolve((root, ("module_member", "training")), args=(model,)) is True
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        resolve((root, ("module_member", "nope")), args=(model,))
    # Only instance state counts: class attributes and properties are not module members.
    with pytest.raises(AttributeError):
        resolve((root, ("module_member", "T_destination")), args=(model,))


def test_frame_argument_count():
    def f(a, b, *args, c, **kwargs):
        d = 1
        return d

    def g(a):
        return a

    assert G.frame_argument_count(f) == 5
    assert G.frame_argument_count(g) == 1
