"""Constructs the model zoo found (issue 15, item 2; docs/models.md), each reduced to a small program outside
any model: compiled with fullgraph=True it must capture in one graph and match eager; where Ember cannot
model a construct exactly it stays a graph break whose reason says why.
"""
import dataclasses
import functools
import inspect
import types

import pytest
import torch
import torch.nn.functional as F

import ember

from . import zoo_helpers


@pytest.fixture(autouse=True)
def _fresh():
    ember.reset()
    yield
    ember.reset()


def _whole(fn, *args, backend="eager"):
    """fn compiled with fullgraph=True: result equal to eager's, one compiled frame."""
    expected = fn(*args)
    got = ember.compile(fn, fullgraph=True, backend=backend)(*args)
    torch.testing.assert_close(got, expected)
    assert ember.stats()["frames_compiled"] == 1
    return got


def _refused(fn, *args, match):
    with pytest.raises(ember.Unsupported, match=match):
        ember.compile(fn, fullgraph=True, backend="eager")(*args)


# ---------------------------------------------------------------------------------------------
# functools.partial over a torch builtin (transformers' ACT2FN["gelu_pytorch_tanh"]): its func, args
# and keywords are read through the partial, so they are guarded.

GELU_TANH = functools.partial(F.gelu, approximate="tanh")
CLAMP_LOW = functools.partial(torch.clamp, min=-0.5)


def _add(a, b, *, scale=1.0):
    return (a + b) * scale


ADD_ONE = functools.partial(_add, torch.ones(3), scale=2.0)


def partial_calls(x):
    return GELU_TANH(x) * 2 + CLAMP_LOW(x, max=0.5) + CLAMP_LOW(x, min=0.25) + ADD_ONE(x, scale=3.0) + ADD_ONE(x)


def test_partial_call():
    _whole(partial_calls, torch.randn(3))


def test_partial_keywords_are_guarded():
    act = functools.partial(F.gelu, approximate="tanh")
    f = ember.compile(lambda x: act(x) * 2, backend="eager")
    x = torch.randn(5)
    torch.testing.assert_close(f(x), F.gelu(x, approximate="tanh") * 2)
    act.keywords["approximate"] = "none"  # the dict is mutable: the guard on the value read sees it
    torch.testing.assert_close(f(x), F.gelu(x) * 2)
    assert ember.stats()["frames_compiled"] == 2


# ---------------------------------------------------------------------------------------------
# torch.is_tensor (diffusers' get_time_embed) is isinstance(obj, torch.Tensor); torch.is_floating_point
# and torch.is_complex read the dtype, as the Tensor methods do.

def is_tensor_branches(x, t, n, w):
    timesteps = t if torch.is_tensor(t) else torch.tensor([t])
    other = n if torch.is_tensor(n) else torch.tensor([float(n)])
    if torch.is_tensor([x]) or not torch.is_tensor(w) or torch.is_complex(x):
        return x
    if torch.is_floating_point(x) and not torch.is_floating_point(timesteps.long()):
        return x + timesteps + other + w
    return x - 1


def test_is_tensor_and_dtype_queries():
    _whole(is_tensor_branches, torch.randn(3), torch.ones(3), 2, torch.nn.Parameter(torch.ones(3)))


# ---------------------------------------------------------------------------------------------
# Tuple concatenation from a constant tuple (diffusers' down blocks: `output_states = ()` then
# `output_states = output_states + (hidden_states,)`).

def tuple_accumulation(x):
    states = ()
    for i in range(3):
        x = x + i
        states = states + (x,)
    states += (x * 2,)
    return states, x * len(("a",) + (1,))


def test_tuple_concatenation_from_a_constant():
    _whole(tuple_accumulation, torch.randn(3))


# ---------------------------------------------------------------------------------------------
# inspect.signature(...).parameters.keys() (diffusers' Attention.forward): methods of a mappingproxy the
# trace made are folded; one read from the frame is never called at trace time.

class Processor:
    def __call__(self, attn, hidden_states, encoder_hidden_states=None, scale=1.0):
        return hidden_states


PROCESSOR = Processor()


def signature_keys(x):
    accepted = set(inspect.signature(PROCESSOR.__call__).parameters.keys())
    unused = [k for k in ("scale", "temb") if k not in accepted]
    return x * len(accepted) + len(unused)


def test_signature_parameter_keys():
    _whole(signature_keys, torch.randn(3))


def proxy_keys(x, proxy):
    return x * len(list(proxy.keys()))


def test_mappingproxy_from_the_frame_is_not_folded():
    _refused(proxy_keys, torch.randn(3), types.MappingProxyType({"a": 1}), match="guarded by its type only")
    d = {"a": 1}
    f = ember.compile(proxy_keys, backend="eager")
    x = torch.randn(3)
    torch.testing.assert_close(f(x, types.MappingProxyType(d)), x)
    d["b"] = 2
    torch.testing.assert_close(f(x, types.MappingProxyType(d)), x * 2)


# ---------------------------------------------------------------------------------------------
# A function its library marks as a process-lifetime constant (torch's assume_constant_result mark,
# under lru_cache, as transformers' is_torch_distributed_available) runs once at trace time.

CALLS = []


@functools.lru_cache
def _probe():
    CALLS.append(1)
    return 2.0


_probe.__wrapped__._dynamo_marked_constant = True
_probe._dynamo_marked_constant = True  # what functools.update_wrapper copies when lru_cache wraps later


@functools.lru_cache
def _unmarked():
    return 2.0


def uses_marked_constant(x):
    return x * _probe() if _probe() > 1 else x


def test_marked_constant_is_folded():
    _whole(uses_marked_constant, torch.randn(3))


def test_unmarked_lru_cache_is_traced_with_a_note():
    """Unmarked, a bounded cache (lru_cache's default maxsize=128) is traced through __wrapped__, and explain
    says so (test_lru_cache.py has the other cases)."""
    _whole(lambda x: x * _unmarked(), torch.randn(3))
    e = ember.explain(lambda x: x * _unmarked())(torch.randn(3))
    assert any("lru_cache bypassed" in n and "_unmarked" in n for n in e.notes), e.notes


# ---------------------------------------------------------------------------------------------
# torch.autograd.Function.apply where it records no backward (bloom's GeLUFunction under no_grad):
# the forward is inlined with grad mode off.

class TanhGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.mark_non_differentiable()
        ctx.scale = scale
        assert ctx.needs_input_grad == (False, False)
        return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x)) * ctx.scale

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class WithSetupContext(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


class GeluModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x):
        return TanhGelu.apply(self.proj(x), 2.0) + 1


def test_autograd_function_without_backward():
    m, x = GeluModule(), torch.randn(2, 4)
    with torch.no_grad():
        expected = m(x)
        got = ember.compile(m, fullgraph=True)(x)
    torch.testing.assert_close(got, expected)
    assert not got.requires_grad
    ember.reset()
    _whole(lambda t: TanhGelu.apply(t, 3.0) * 2, torch.randn(3), backend="ember")


def test_autograd_function_with_backward_stays_a_break():
    x = torch.randn(3, requires_grad=True)
    _refused(lambda t: TanhGelu.apply(t, 1.0), x, match="requires grad")
    with torch.no_grad():
        _refused(lambda t: WithSetupContext.apply(t), x, match="setup_context")


# ---------------------------------------------------------------------------------------------
# Custom ops (torch.ops.ns.name: transformers' grouped_mm_fallback) are graph nodes when functional;
# their registered fake kernel gives the metadata.

@torch.library.custom_op("ember_zoo_test::scaled_rows", mutates_args=())
def scaled_rows(x: torch.Tensor, scale: float) -> torch.Tensor:
    return x * torch.arange(1, x.shape[0] + 1, dtype=x.dtype).unsqueeze(1) * scale


@scaled_rows.register_fake
def _(x, scale):
    return torch.empty_like(x)


@torch.library.custom_op("ember_zoo_test::bump_", mutates_args=("x",))
def bump_(x: torch.Tensor) -> None:
    x.add_(1)


@pytest.mark.parametrize("backend", ["eager", "ember"])
def test_functional_custom_op_is_a_node(backend):
    op, overload = torch.ops.ember_zoo_test.scaled_rows, torch.ops.ember_zoo_test.scaled_rows.default
    _whole(lambda x: op(x, 2.0) + overload(x + 1, 0.5), torch.randn(3, 2), backend=backend)


def test_mutating_custom_op_stays_a_break():
    _refused(lambda x: torch.ops.ember_zoo_test.bump_(x), torch.randn(2), match="mutates its arguments")


# ---------------------------------------------------------------------------------------------
# Relative imports inside library code (diffusers' `from . import USE_PEFT_BACKEND`).

def test_relative_import_of_a_loaded_module():
    _whole(lambda x: zoo_helpers.scale_by_package_constant(x) + 1, torch.randn(3))


# ---------------------------------------------------------------------------------------------
# diffusers' BaseOutput (an OrderedDict dataclass, as transformers' ModelOutput): a record.

def _output_class():
    outputs = pytest.importorskip("diffusers.utils.outputs")

    @dataclasses.dataclass
    class Out(outputs.BaseOutput):
        sample: torch.Tensor
        extra: torch.Tensor = None

    return Out


def test_base_output_reads_and_return():
    Out = _output_class()

    def reads(x):
        out = Out(sample=x * 2)
        first = out[0] + out["sample"] + out.sample + out.to_tuple()[0]
        assert out.extra is None and "extra" not in out and list(out.keys()) == ["sample"] and len(out) == 1
        return Out(sample=first, extra=x)

    x = torch.randn(3)
    expected = reads(x)
    got = ember.compile(reads, fullgraph=True, backend="eager")(x)
    assert type(got) is Out and list(got.keys()) == list(expected.keys())
    torch.testing.assert_close(got.to_tuple(), expected.to_tuple())


def test_base_output_of_a_lone_dict_stays_unsupported():
    Out = _output_class()
    _refused(lambda x: Out(sample={"a": x}), torch.randn(3), match="only value is a dict")


def _alias_class():
    # As diffusers' deprecated Transformer2DModelOutput alias, whose own __init__ warns first; this
    # one also changes what it is given, which only running it tells.
    Out = _output_class()

    class Alias(Out):
        def __init__(self, sample, *args, **kwargs):
            CALLS.append("alias")
            super().__init__(sample * 2, *args, **kwargs)

    return Alias


def test_base_output_with_its_own_init_is_built_after_the_graph():
    Alias = _alias_class()

    def returns(x, y):
        return Alias(x + 1, extra=y * 3)

    x, y = torch.randn(3), torch.randn(2)
    CALLS.clear()
    expected = returns(x, y)
    got = ember.compile(returns, fullgraph=True, backend="eager")(x, y)
    assert type(got) is Alias and list(got.keys()) == ["sample", "extra"]
    torch.testing.assert_close(got.to_tuple(), expected.to_tuple())
    assert CALLS == ["alias", "alias"]  # once in eager, once after the graph


def test_reading_a_base_output_built_after_the_graph_is_unsupported():
    Alias = _alias_class()

    def reads(x):
        return Alias(sample=x).sample + 1

    _refused(reads, torch.randn(3), match="builds it after the graph")
    x = torch.randn(3)
    torch.testing.assert_close(ember.compile(reads, backend="eager")(x), reads(x))
    ember.reset()
    explained = ember.explain(reads)(x)
    assert any("builds it after the graph" in r.reason for r in explained.break_reasons), explained


def test_an_own_init_compiled_from_a_string_is_not_taken_for_the_dataclass_one():
    # exec() (and `python -c`) code has the file name "<string>", as @dataclass's generated __init__:
    # telling them apart by file name alone modelled this class's fields and dropped its doubling.
    Out = _output_class()
    namespace = {"Out": Out}
    exec("class Alias(Out):\n"
         "    def __init__(self, sample, *args, **kwargs):\n"
         "        super().__init__(sample * 2, *args, **kwargs)\n", namespace)
    Alias = namespace["Alias"]

    def reads(x):
        return Alias(sample=x).sample + 1

    x = torch.randn(3)
    torch.testing.assert_close(ember.compile(reads, backend="eager")(x), reads(x))
    _refused(reads, x, match="builds it after the graph")
