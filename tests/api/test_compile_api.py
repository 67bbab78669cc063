"""ember.compile's surface: argument checking, decorator forms, what it returns for functions,
modules, bound methods, lambdas and callable objects, and nesting of compiled callables."""
import warnings

import pytest
import torch
import torch.nn as nn

import ember


def double(x):
    return x * 2


@pytest.mark.parametrize("bad", [42, "forward", 3.5, [double], torch.zeros(2)])
def test_non_callable_raises_type_error(bad):
    with pytest.raises(TypeError, match="function or an nn.Module"):
        ember.compile(bad)


def test_compile_42_names_the_type():
    with pytest.raises(TypeError, match="int"):
        ember.compile(42)


@pytest.mark.parametrize("kwargs, match", [
    ({"backend": "inductor"}, "backend"),
    ({"backend": None}, "backend"),
    ({"mode": "fast"}, "mode"),
    ({"mode": "Default"}, "mode"),
    ({"mode": 1}, "mode"),
    ({"dynamic": "yes"}, "dynamic"),
    ({"options": {"strict": 1}}, "strict"),
    ({"options": {"cache_limt": 3}}, "cache_limt"),
    ({"options": {"cache_limit": 0}}, "cache_limit"),
    ({"options": {"cache_limit": "8"}}, "cache_limit"),
])
def test_bad_options_raise_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ember.compile(double, **kwargs)


def test_bad_options_in_decorator_form_raise_at_decoration():
    with pytest.raises(ValueError, match="backend"):
        @ember.compile(backend="nope")
        def f(x):
            return x


def test_decorator_forms():
    @ember.compile
    def f(x):
        return x + 1

    @ember.compile(backend="eager", fullgraph=True)
    def g(x):
        return x - 1

    x = torch.randn(3)
    torch.testing.assert_close(f(x), x + 1)
    torch.testing.assert_close(g(x), x - 1)
    assert f.__name__ == "f" and g.__name__ == "g"
    assert ember.stats()["frames_compiled"] == 2


def test_wrapper_keeps_metadata():
    def documented(x):
        """Doc text."""
        return x

    f = ember.compile(documented)
    assert f.__name__ == "documented"
    assert f.__doc__ == "Doc text."
    assert f.__wrapped__ is documented


@pytest.mark.parametrize("mode, says", [("default", None), (None, None), ("reduce-overhead", "CUDA graph"),
                                         ("max-autotune", "CUDA devices only"),
                                         ("max-autotune-no-cudagraphs", "CUDA devices only")])
def test_modes_accepted(mode, says):
    # The GPU modes have no CPU meaning: a CPU graph gets the same code as "default", and the first
    # one compiled warns once per process (until ember.reset()) saying what the mode does.
    x = torch.randn(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = ember.compile(double, mode=mode)
        torch.testing.assert_close(f(x), x * 2)
        torch.testing.assert_close(ember.compile(lambda t: t + 1, mode=mode)(x), x + 1)
    messages = [str(w.message) for w in caught]
    if says is None:
        assert messages == []
    else:
        assert len(messages) == 1 and says in messages[0] and "same CPU code" in messages[0], messages
    assert ember.stats()["kernels_compiled"] == 2


def test_dynamic_settings_compile_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fs = [ember.compile(double, dynamic=d) for d in (True, False, None)]
    x = torch.randn(3)
    for f in fs:
        torch.testing.assert_close(f(x), x * 2)


def test_options_are_typed():
    from ember import _C, options
    o = options.compile_options("eager", "max-autotune", False, True, {"cache_limit": 3})
    assert isinstance(o, _C.CompileOptions)
    assert (o.backend, o.mode, o.dynamic) == (_C.Backend.eager, _C.Mode.max_autotune, _C.Dynamic.never)
    assert (o.fullgraph, o.cache_limit) == (True, 3)
    assert options.compile_options("ember", None, None, False, None).dynamic == _C.Dynamic.auto
    assert options.compile_options("ember", None, True, False, None).dynamic == _C.Dynamic.always
    with pytest.raises(TypeError):
        o.cache_limit = "8"


def test_module_compile_returns_module_sharing_state():
    m = nn.Linear(4, 3)
    cm = ember.compile(m)
    assert isinstance(cm, nn.Module)
    assert cm.weight is m.weight
    assert cm.in_features == 4
    x = torch.randn(2, 4)
    torch.testing.assert_close(cm(x), m(x))
    torch.testing.assert_close(cm.forward(x), m(x))
    assert ember.stats()["frames_compiled"] == 1


def test_module_compile_twice_is_independent():
    m = nn.Linear(4, 3)
    a, b = ember.compile(m), ember.compile(m, backend="eager")
    x = torch.randn(2, 4)
    torch.testing.assert_close(a(x), m(x))
    torch.testing.assert_close(b(x), m(x))
    assert ember.stats()["frames_compiled"] == 2


def test_compile_bound_method():
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    f = ember.compile(m.forward)
    x = torch.randn(2, 4)
    torch.testing.assert_close(f(x), m(x))


def test_compile_lambda():
    f = ember.compile(lambda x, y: x * y + 1)
    x, y = torch.randn(3), torch.randn(3)
    for _ in range(2):
        torch.testing.assert_close(f(x, y), x * y + 1)
    assert ember.stats()["frames_compiled"] == 1
    assert ember.stats()["cache_hits"] == 1


class CallableObject:
    def __init__(self):
        self.k = 3.0

    def __call__(self, x):
        return x * self.k


def test_compile_callable_object():
    obj = CallableObject()
    f = ember.compile(obj)
    x = torch.randn(3)
    torch.testing.assert_close(f(x), x * 3.0)


def inner_fn(x):
    return x.sin()


INNER = ember.compile(inner_fn)


def outer_fn(x):
    return INNER(x) + 1


def test_nested_compiled_callables():
    f = ember.compile(outer_fn)
    x = torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(f(x), x.sin() + 1)
    torch.testing.assert_close(INNER(x), x.sin())


def test_compiled_function_usable_after_reset():
    f = ember.compile(double)
    x = torch.randn(3)
    f(x)
    ember.reset()
    torch.testing.assert_close(f(x), x * 2)
    assert ember.stats()["frames_compiled"] == 1


def test_no_grad_around_compiled_call():
    m = nn.Linear(4, 2)
    cm = ember.compile(m)
    x = torch.randn(3, 4)
    with torch.no_grad():
        out = cm(x)
    assert not out.requires_grad
    out2 = cm(x)
    assert out2.requires_grad
    torch.testing.assert_close(out2, m(x))


def test_backward_through_compiled_module():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    ref = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    ref.load_state_dict(m.state_dict())
    cm = ember.compile(m)
    x = torch.randn(5, 4, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    cm(x).sum().backward()
    ref(xr).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad)
    for p, q in zip(m.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
