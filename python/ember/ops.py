"""The table of torch callables: how Ember's interpreter treats each callable it meets.

`classify(fn)` answers with a pair (kind, detail); the C++ interpreter memoizes it per callable.
Kinds: "core" (a core op of src/ir/ops.def; detail = op name), "torch" (a graph node naming the
callable), "query" (a Tensor method answered from metadata), "factory" (a node even without tensor
arguments), "pure" (run at trace time on constants), "builtin" / "operator" (implemented by the
interpreter; detail = name), "inline" (Python code to trace through), "grad_mode",
"is_grad_enabled", "autocast" (torch.autocast and its subclasses), "autocast_query" (detail =
is_autocast_enabled, get_autocast_dtype or is_autocast_cache_enabled), "constant" (detail = the value it always returns), "assert" (torch._assert), "check" (torch._check and its
kin; detail = the exception class a false condition raises), "module_method",
"signature" (inspect.signature), "null_context" (contextlib.nullcontext), "construct" (a plain
Python class whose instance the trace builds), "autograd_function_apply" (torch.autograd.Function.apply:
its forward inlined where no gradient is recorded), "unsupported" (detail = why).
"""
import operator
import os
import types

import torch

from . import autocast
from . import python_table
from .torch_names import core_by_callable, inplace_callables, op_callables, qualname

# ---------------------------------------------------------------------------------------------
# Tables

# Tensor methods whose result is metadata, answered at trace time from the meta tensor.
TENSOR_QUERIES = frozenset({
    "size", "dim", "ndimension", "numel", "nelement", "stride", "is_contiguous", "is_floating_point",
    "is_complex", "element_size", "is_signed", "get_device", "storage_offset", "is_inference",
    "is_nested", "is_sparse", "has_names", "__len__",
})

FACTORIES = {
    torch.zeros, torch.ones, torch.full, torch.empty, torch.arange, torch.linspace, torch.logspace,
    torch.eye, torch.rand, torch.randn, torch.randint, torch.randperm, torch.tensor, torch.as_tensor,
    torch.empty_strided, torch.scalar_tensor, torch.zeros_like, torch.ones_like, torch.full_like,
    torch.empty_like, torch.rand_like, torch.randn_like, torch.randint_like,
}

# torch functions answered from a tensor's metadata, as the Tensor methods of TENSOR_QUERIES are.
TORCH_QUERIES = {torch.is_floating_point: "is_floating_point", torch.is_complex: "is_complex"}

# Functions that only read metadata or compute on Python values: folded at trace time.
PURE_TORCH = {
    torch.get_default_dtype, torch.finfo,
    torch.iinfo, torch.Size, torch.device, torch.dtype, torch.numel, torch.promote_types,
    torch.result_type, torch.can_cast, torch.is_storage,
}

CONSTANTS = [
    ("torch.compiler.is_compiling", True),
    ("torch.compiler.is_dynamo_compiling", True),
    # Ember captures graphs but never exports a program: what eager answers.
    ("torch.compiler.is_exporting", False),
    ("torch.jit.is_scripting", False),
    ("torch.jit.is_tracing", False),
    ("torch._jit_internal.is_scripting", False),
    ("torch._C._get_tracing_state", None),
    ("torch.overrides.has_torch_function", False),
    ("torch.overrides.has_torch_function_unary", False),
    ("torch.overrides.has_torch_function_variadic", False),
    ("torch._C._has_torch_function", False),
    ("torch._C._has_torch_function_unary", False),
    ("torch._C._has_torch_function_variadic", False),
    # nn.MultiheadAttention takes its composite path under a tracer, as under make_fx: its fast
    # path's torch._native_multi_head_attention returns an undefined tensor (None in Python) for
    # the weights where its meta kernel returns an empty one, so it cannot be traced faithfully.
    ("torch.nn.modules.activation._is_make_fx_tracing", True),
    # The transformer layers' fast paths (torch._transformer_encoder_layer_fwd, nested tensors) are one
    # opaque op, without a meta kernel before torch 2.13: their composite path is what Ember can fuse.
    ("torch.backends.mha.get_fastpath_enabled", False),
]
_constants = {}
for _path, _value in CONSTANTS:
    try:
        _constants[python_table.resolve_path(_path)] = _value
    except AttributeError:
        pass

# torch._check and its kin: the exception class a false condition raises (None for torch._check_with,
# whose first argument is the class). Traced by the interpreter (interp_checks.cpp), not run: they
# import torch.fx's symbolic shapes.
CHECKS = {
    torch._check: RuntimeError, torch._check_index: IndexError, torch._check_value: ValueError,
    torch._check_type: TypeError, torch._check_not_implemented: NotImplementedError, torch._check_with: None,
}

# Calls that run torch's autograd engine, or register hooks it runs later, on real tensors: a graph
# break (a compiled graph is differentiated ahead of time; a hook inside it would never run).
_AUTOGRAD_ENGINE = {
    torch.Tensor.backward: "Tensor.backward()", torch.autograd.backward: "torch.autograd.backward()",
    torch.autograd.grad: "torch.autograd.grad()", torch.Tensor.register_hook: "Tensor.register_hook()",
    torch.Tensor.retain_grad: "Tensor.retain_grad()",
}

# The methods of an autograd.Function's ctx that its forward calls; they only set attributes of the
# ctx, which the trace's stand-in holds (interp_calls.cpp, autograd_function_apply).
_FUNCTION_CTX_METHODS = {getattr(torch.autograd.function.FunctionCtx, n) for n in (
    "save_for_backward", "mark_dirty", "mark_non_differentiable", "set_materialize_grads")}


def _op_overload_kind(fn):
    """torch.ops.ns.name (a packet: whichever overload the arguments pick runs) or one overload
    torch.ops.ns.name.overload: a graph node when every schema that may run is functional (a
    custom op's registered fake kernel gives its metadata); one that mutates or aliases its
    arguments, or draws random numbers, is not captured."""
    ops = [getattr(fn, n) for n in fn.overloads()] if isinstance(fn, torch._ops.OpOverloadPacket) else [fn]
    for op in ops:
        schema = op._schema
        if schema.is_mutable:
            return ("unsupported", f"call to {qualname(fn)}, which mutates its arguments ({schema})")
        if any(r.alias_info is not None for r in schema.returns):
            return ("unsupported", f"call to {qualname(fn)}, which returns a view of its arguments ({schema})")
        if torch.Tag.nondeterministic_seeded in op.tags:
            return ("unsupported", f"call to {qualname(fn)}, a random op")
    return ("torch", "")


# Modules whose Python functions are graph nodes as a whole (torch's functional API).
GRAPH_MODULES = ("torch.nn.functional", "torch.functional", "torch._tensor", "torch._refs")

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep

def _is_torch_module_name(name):
    return name == "torch" or name.startswith("torch.")


# nn.Module's iteration methods, implemented by the interpreter over the module tree.
_module_methods = {getattr(torch.nn.Module, n) for n in (
    "children", "named_children", "modules", "named_modules", "parameters", "named_parameters", "buffers",
    "named_buffers")}
# Python code in torch that Ember traces through: module forwards and the grad-mode decorators.
INLINE_TORCH_MODULES = ("torch.nn.modules.", "torch.utils._contextlib", "torch.autograd.grad_mode")
# Functions of torch.nn.functional traced through rather than captured whole: compositions of other
# torch calls with no derivative rule or decomposition of their own, which would otherwise be an extern
# call (an autograd island in training), and the module's private helpers (_none_or_dtype returns a
# dtype, _canonical_mask builds a float mask, _mha_shape_check raises on bad shapes).
INLINE_FUNCTIONAL = {"multi_head_attention_forward"}


def _traced_functional(fn, module):
    name = getattr(fn, "__name__", "")
    return module == "torch.nn.functional" and (name in INLINE_FUNCTIONAL or name.startswith("_"))


def classify(fn):
    try:
        return _classify(fn)
    except Exception as e:  # a callable whose attributes raise: never let that escape the trace
        return ("unsupported", f"call to {fn!r} ({type(e).__name__} while inspecting it)")


def _classify(fn):
    if getattr(fn, "_ember_disabled", False) or isinstance(fn, types.ModuleType) and not _is_torch_module_name(fn.__name__):
        return python_table.classify_python(fn, qualname)
    if isinstance(fn, types.ModuleType):
        return ("pure", "")  # torch's modules are treated as immutable
    if fn is torch.no_grad or fn is torch.enable_grad or fn is torch.set_grad_enabled:
        return ("grad_mode", "")
    if fn is torch.is_grad_enabled:
        return ("is_grad_enabled", "")
    if autocast.is_autocast_class(fn):
        return ("autocast", "")
    if fn is torch.is_autocast_enabled or fn is torch.get_autocast_dtype or fn is torch.is_autocast_cache_enabled:
        return ("autocast_query", fn.__name__)
    try:
        if fn in _module_methods:
            return ("module_method", fn.__name__)
        if fn in _constants:
            return ("constant", _constants[fn])
        if fn is torch._assert:
            return ("assert", "")
        if fn is torch.is_tensor:
            return ("builtin", "is_tensor")  # isinstance(obj, torch.Tensor), answered from the Var
        if fn in TORCH_QUERIES:
            return ("query", TORCH_QUERIES[fn])
        if fn in _AUTOGRAD_ENGINE:
            return ("unsupported", f"{_AUTOGRAD_ENGINE[fn]} runs torch's autograd engine on the real tensors")
        if fn in CHECKS:
            return ("check", CHECKS[fn])
        if fn is torch.autograd.Function.apply.__func__:
            return ("autograd_function_apply", "")
        if fn in _FUNCTION_CTX_METHODS:
            return ("inline", "")
        if fn in core_by_callable:
            return ("core", core_by_callable[fn])
        if fn in FACTORIES:
            return ("factory", qualname(fn))
        if fn in PURE_TORCH:
            return ("pure", "")
    except TypeError:  # unhashable callable
        pass
    if isinstance(fn, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
        return _op_overload_kind(fn)
    module = python_table.module_of(fn)
    if isinstance(fn, operator.attrgetter):
        return ("torch", "")
    objclass = getattr(fn, "__objclass__", None)
    if isinstance(objclass, type) and issubclass(objclass, torch._C.TensorBase):
        if fn.__name__ in TENSOR_QUERIES:
            return ("query", fn.__name__)
        if fn.__name__ in ("item", "tolist", "numpy", "data_ptr", "__bool__", "__int__", "__float__",
                           "__index__", "backward", "register_hook", "untyped_storage", "storage"):
            return ("unsupported", f"Tensor.{fn.__name__}() needs real data (data-dependent)")
        return ("torch", "")
    if isinstance(fn, types.FunctionType):
        if getattr(fn, "__name__", "") in TENSOR_QUERIES and module == "torch._tensor":
            return ("query", fn.__name__)
        path = python_table.file_of(fn)
        if _is_torch_module_name(module) or path.startswith(_TORCH_DIR):
            # A torch function is captured as a node when it is published by torch's functional
            # API (its __module__: F.max_pool2d is built in torch._jit_internal); it is traced
            # through when its code is one of the modules Ember inlines (its file: decorators
            # copy __module__ from the function they wrap).
            file_module = ""
            if path.startswith(_TORCH_DIR):
                file_module = "torch." + os.path.splitext(path[len(_TORCH_DIR):])[0].replace(os.sep, ".")
            if _traced_functional(fn, module):
                return ("inline", "")
            if module.startswith(GRAPH_MODULES):
                return ("torch", "")
            if file_module.startswith(INLINE_TORCH_MODULES) or (
                    not file_module and module.startswith(INLINE_TORCH_MODULES)):
                return ("inline", "")
            if module.startswith("torch.optim"):
                # The frame hook skips torch's files, so the call runs as eager runs it.
                hint = "; ember.compile(opt.step) compiles a step on its own" if fn.__name__ == "step" else ""
                return ("unsupported", f"{qualname(fn)}() runs eagerly: torch.optim's code is not traced{hint}")
            return ("unsupported", f"call to {qualname(fn)} (torch internals that Ember does not trace)")
    if isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType, types.MethodDescriptorType,
                       types.WrapperDescriptorType, types.MethodWrapperType)):
        if _is_torch_module_name(module) or isinstance(getattr(fn, "__self__", None), torch._C.TensorBase):
            return ("torch", "")
    if isinstance(fn, type) and issubclass(fn, torch.nn.Module):
        if _is_torch_module_name(module):
            # torch.nn's own layers: built at trace time where they hold no state (a loss, an
            # activation: interp_instances.cpp construct_stateless_module).
            return ("stateless_module", "")
        return ("unsupported", f"constructing a {fn.__qualname__} module inside compiled code")
    if isinstance(fn, type) and _is_torch_module_name(module):
        # torch's own classes (autocast, profilers, ...) carry state the tracer does not model.
        return ("unsupported", f"constructing an instance of {qualname(fn)}")
    call = getattr(type(fn), "__call__", None)
    if isinstance(call, types.FunctionType) and python_table.file_of(call).startswith(_TORCH_DIR):
        return ("unsupported", f"call to {qualname(fn)}")
    return python_table.classify_python(fn, qualname)


def _dense(sizes, strides):
    """Whether these strides lay the elements out without gaps or overlaps, in some dim order."""
    expected = 1
    for n, s in sorted(((n, s) for n, s in zip(sizes, strides) if n != 1), key=lambda p: p[1]):
        if s != expected:
            return False
        expected *= n
    return True


def make_meta(sizes, strides, dtype, requires_grad, leaf=True):
    """A meta tensor of these sizes and strides. One that requires grad and is not a leaf (a value
    the program computed, whose meta tensor Ember made from its type) has a grad_fn, as eager's
    has: an in-place op on it is allowed where eager allows it (a leaf that requires grad refuses
    in-place ops while grad mode is on). Dense strides survive a clone; others (expanded, sliced)
    are a view of a 1-D non-leaf, so the strides are always exact."""
    if not requires_grad or leaf:
        t = torch.empty_strided(sizes, strides, dtype=dtype, device="meta")
        return t.requires_grad_(True) if requires_grad else t
    with torch.enable_grad():
        if 0 in sizes or _dense(sizes, strides):
            return torch.empty_strided(sizes, strides, dtype=dtype, device="meta", requires_grad=True).clone()
        extent = 1 + sum((n - 1) * s for n, s in zip(sizes, strides))
        base = torch.empty(extent, dtype=dtype, device="meta", requires_grad=True).clone()
        return base.as_strided(sizes, strides)


class TensorItems:
    """A torch callable whose tuple result holds None beside its tensors (aten.convolution_backward with
    an output_mask of False returns None there): the graph node calls this instead, and its results
    are the items at `keep`, the tensors; the trace puts the Nones back. The arguments that made those
    items None at trace time are guarded, so a tensor in a dropped place is Ember's bug: raised."""

    __slots__ = ("fn", "keep")

    def __init__(self, fn, keep):
        self.fn = fn
        self.keep = keep

    def __call__(self, *args, **kwargs):
        result = self.fn(*args, **kwargs)
        if any(item is not None for i, item in enumerate(result) if i not in self.keep):
            raise RuntimeError(f"ember: {qualname(self.fn)} returned a tensor where the trace saw None")
        return tuple(result[i] for i in self.keep)

    def __repr__(self):
        return f"<tensors {self.keep} of {qualname(self.fn)}>"


_tensor_items = {}


def tensor_items(fn, keep):
    """The TensorItems of (fn, keep), one object per pair so that graphs name one callable."""
    key = (fn, keep)
    if key not in _tensor_items:
        _tensor_items[key] = TensorItems(fn, keep)
    return _tensor_items[key]


class GradModeExit:
    """The `__exit__` of a `with torch.no_grad()` (or enable_grad, set_grad_enabled) block that a
    graph break splits: the generated code after the break gets this object where the block's exit
    sits on the stack. Calling it restores the grad mode from before the block; with `previous`
    None it is the exit of a `contextlib.nullcontext()` block and does nothing."""

    __slots__ = ("previous",)

    def __init__(self, previous):
        self.previous = None if previous is None else bool(previous)

    def __call__(self, exc_type=None, exc=None, tb=None):
        if self.previous is not None:
            torch._C._set_grad_enabled(self.previous)

    def __repr__(self):
        if self.previous is None:
            return "<exit of a nullcontext block>"
        return f"<exit of a grad-mode block: restores {self.previous}>"


class TorchTable:
    """The object the C++ TorchTable reads its fields from (src/frontend/interp/torch_table.h)."""

    torch = torch
    tensor_type = torch.Tensor
    module_type = torch.nn.Module
    sequential_type = torch.nn.Sequential
    size_type = torch.Size
    dtype_type = torch.dtype
    device_type = torch.device
    no_grad_type = torch.no_grad
    set_grad_enabled_type = torch.set_grad_enabled
    set_grad_enabled_fn = torch._C._set_grad_enabled
    grad_mode_exit_type = GradModeExit
    tensor_to = staticmethod(torch.Tensor.to)
    tensor_items = staticmethod(tensor_items)
    autocast_policy = staticmethod(autocast.policy)
    autocast_arguments = staticmethod(autocast.arguments)
    autocast_exit_type = autocast.AutocastExit
    autocast_replay = staticmethod(autocast.replay)
    autocast_suspend = staticmethod(autocast.suspend)
    autocast_resume = staticmethod(autocast.resume)
    environ = os.environ
    inplace_callables = inplace_callables
    op_callables = op_callables
    qualname = staticmethod(qualname)
    classify = staticmethod(classify)
    make_meta = staticmethod(make_meta)
    resolve = staticmethod(python_table.resolve_path)


table = TorchTable()
