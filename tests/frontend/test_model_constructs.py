"""Constructs of real model code (transformers' configs, decorators, outputs), each reduced to a small
program: compiled with fullgraph=True it must capture in one graph and match eager; constructs that stay
unsupported must say why.
"""
import enum

import pytest
import torch

import ember


@pytest.fixture(autouse=True)
def _fresh():
    ember.reset()
    yield
    ember.reset()


def _whole(fn, *args, **kwargs):
    """fn compiled with fullgraph=True: result equal to eager, one graph."""
    expected = fn(*args, **kwargs)
    got = ember.compile(fn, fullgraph=True, backend="eager")(*args, **kwargs)
    torch.testing.assert_close(got, expected)
    assert ember.stats()["frames_compiled"] == 1
    return got


# ---------------------------------------------------------------------------------------------
# An instance __dict__ read through object.__getattribute__, as configuration classes do.

class Config:
    def __init__(self):
        self.scale = 3.0
        self.id2label = {0: "LABEL_0", 1: "LABEL_1"}  # int keys: never read by the program

    def __getattribute__(self, key):
        spec = super().__getattribute__("__dict__").get("_spec")
        if spec is not None and key in spec:
            return 0.5
        return super().__getattribute__(key)


def scaled(x, cfg):
    return x * cfg.scale


def test_instance_dict_get_is_lazy_and_guarded():
    cfg, x = Config(), torch.randn(4)
    _whole(scaled, x, cfg)
    ember.reset()
    f = ember.compile(scaled, backend="eager")
    torch.testing.assert_close(f(x, cfg), x * 3.0)
    cfg._spec = ("scale",)  # a key appears in the __dict__: the absence guard fails, the trace runs again
    torch.testing.assert_close(f(x, cfg), x * 0.5)
    cfg.__dict__["_spec"] = ("other",)  # the value read through the item source changed
    torch.testing.assert_close(f(x, cfg), x * 3.0)
    assert ember.stats()["frames_compiled"] == 3


def dict_view_ops(x, cfg):
    d = cfg.__dict__
    if "scale" in d and "missing" not in d:
        x = x * d["scale"]
    return x + d.get("missing", 1.0)


def test_instance_dict_contains_and_subscript():
    _whole(dict_view_ops, torch.randn(4), Config())


def dict_view_items(x, cfg):
    return x * len(cfg.__dict__.items())


def test_instance_dict_other_methods_stay_unsupported():
    with pytest.raises(ember.Unsupported, match="instance __dict__"):
        ember.compile(dict_view_items, fullgraph=True)(torch.randn(2), Config())


def writes_then_reads_dict(x, obj):
    obj.factor = 2.0
    return x * obj.__dict__["factor"]


class Plain:
    factor = 1.0


def test_instance_dict_sees_the_traces_own_writes():
    obj = Plain()
    obj.factor = 5.0
    x = torch.randn(3)
    got = ember.compile(writes_then_reads_dict, backend="eager")(x, obj)
    torch.testing.assert_close(got, x * 2.0)
    assert obj.factor == 2.0


class Registry(dict):
    """A dict subclass with its own get() that calls dict's (transformers' _CanRecordRegistry)."""

    def get(self, model):
        return super().get(type(model).__name__) or {}


REGISTRY = Registry(Config={"scale": 2.0})


def registry_lookup(x, cfg):
    for key, value in REGISTRY.get(cfg).items():
        x = x * value
    return x + len(REGISTRY.get(x))


def test_dict_subclass_calls_dicts_get():
    _whole(registry_lookup, torch.randn(3), Config())


# ---------------------------------------------------------------------------------------------
# Comparisons of str-based enums run str's C comparison; a Python __eq__ stays unsupported.

class Action(str, enum.Enum):
    NONE = "none"
    RAISE = "raise"


MODE = Action.NONE


def enum_branch(x):
    if MODE == Action.RAISE:
        return x - 1
    if MODE != Action.NONE:
        return x * 0
    return x + 1


def test_str_enum_comparison():
    _whole(enum_branch, torch.randn(3))


class Weird:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


W = Weird()


def weird_branch(x):
    if W == 3:
        return x + 1
    return x


class WeirdNe:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


WN = WeirdNe()


def ne_branch(x):
    if WN != 4:
        return x
    return x + 1


@pytest.mark.parametrize("fn", [weird_branch, ne_branch])
def test_python_eq_stays_unsupported(fn):
    with pytest.raises(ember.Unsupported, match="user-defined __eq__"):
        ember.compile(fn, fullgraph=True)(torch.randn(2))


# ---------------------------------------------------------------------------------------------
# Objects held in the globals of library code inlined from another module: read through their module
# (M['...'].__dict__[...]), so attribute writes replay after the graph and reads are guarded.

from . import model_helpers  # noqa: E402


def uses_holder(x):
    return model_helpers.run_with_holder(x) + 1


def test_module_global_object_attribute_writes_replay():
    h = model_helpers.HOLDER
    h.value, h.active = "before", True
    _whole(uses_holder, torch.randn(3))
    assert h.value is None and h.active is False


def uses_interface(x):
    return model_helpers.apply("double", x) + model_helpers.apply("missing_is_unsupported_later", x)


def uses_interface_present(x):
    return model_helpers.apply("double", x) + model_helpers.apply("neg", x)


def test_mapping_with_python_getitem_and_contains():
    _whole(uses_interface_present, torch.randn(3))


def test_mapping_missing_key_is_caught_in_the_trace():
    # Mapping.__contains__ catches the KeyError of a missing key: the exception is traced
    # (test_traced_exceptions.py), so the whole call is one graph.
    _whole(uses_interface, torch.randn(3))


def calls_callable(x):
    f = lambda t: t + 1  # noqa: E731
    assert callable(f) and not callable(x) and not callable((1, 2))
    return f(x)


def test_callable_of_trace_values():
    _whole(calls_callable, torch.randn(3))


def exporting(x):
    if torch.compiler.is_exporting():
        return x - 1
    return x + 1


def test_is_exporting_answers_what_eager_answers():
    _whole(exporting, torch.randn(3))
