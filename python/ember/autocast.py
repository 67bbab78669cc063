"""torch.autocast for Ember's interpreter: the policy table and the runtime helpers.

Autocast changes the dtypes an op computes in by casting its inputs before the kernel runs; meta
kernels and Ember's shape rules know nothing of it. So while the trace's autocast state is on for a
device type, the interpreter asks `policy(fn, device_type)` what autocast does to a call of `fn`
with tensors of that device, and records the casts as explicit `Tensor.to` nodes (the backend needs
no autocast knowledge). Policies, as torch's autocast applies them to eligible inputs (floating,
not float64, on that device type):

  "lower"           cast to the autocast dtype (mm, linear, conv, sdpa, ...)
  "fp32"            cast to float32 (losses, and on CUDA exp/log/pow/layer_norm/...)
  "promote"         cast to the widest of the autocast dtype and the inputs (cat, stack, ...)
  "fp32_opt_dtype"  run in float32 unless a `dtype=` is given (CUDA softmax, sum, cumsum, ...)
  "none"            autocast leaves the op alone
  "unknown"         Ember does not know: the call is not traced (detail says why)

The table lists, per device type, the ops Ember knows the policy of; tests/frontend/
test_autocast.py runs every entry eagerly under torch.autocast and checks Ember's trace gives the
same dtypes. Everything else is decided from torch's dispatcher: an op with its own autocast
kernel for the device that the table lacks is "unknown"; an op that decomposes into other ops
(CompositeImplicitAutograd) may reach one, so it is "unknown" unless listed as passing through;
other ops are "none". Python functions that Ember records as one node are "unknown" unless
`PYTHON_OPS` names the aten op they run.

Needs torch >= 2.4 (torch.get_autocast_dtype(device_type)).
"""
import inspect
import operator
import types

import torch
import torch.nn.functional as F

from . import torch_names

DEVICE_TYPES = ("cpu", "cuda")
_DISPATCH_KEYS = {"cpu": "AutocastCPU", "cuda": "AutocastCUDA"}

LOWER, FP32, PROMOTE, FP32_OPT_DTYPE, NONE, UNKNOWN = (
    "lower", "fp32", "promote", "fp32_opt_dtype", "none", "unknown")


def _entries(policy, names):
    return {name: policy for name in names.split()}


# Views, shape ops, indexing and reductions autocast does not list on either device type: some are
# composite in some torch versions (aten::transpose and the Dimname overloads of mean, max, sort,
# ... in 2.11), but they only rearrange, select or reduce in the input's dtype.
_SHAPE_OPS = ("to type_as view_as expand_as reshape flatten unflatten contiguous chunk split narrow dropout where "
              "transpose t permute view unsqueeze squeeze expand select slice movedim swapaxes unbind "
              "mean max min all any sort gather index_select scatter repeat_interleave")

# Per device type: aten op name (no overload) -> policy. Only ops the sweep test checks.
POLICY = {
    "cpu": {
        **_entries(LOWER, "mm bmm matmul linear addmm baddbmm addbmm conv1d conv2d conv3d conv_transpose1d "
                          "conv_transpose2d prelu scaled_dot_product_attention"),
        **_entries(PROMOTE, "cat stack index_copy"),
        **_entries(FP32, "mse_loss l1_loss smooth_l1_loss huber_loss nll_loss cross_entropy_loss kl_div "
                         "binary_cross_entropy_with_logits prod cdist trace avg_pool3d max_pool3d "
                         "adaptive_avg_pool3d margin_ranking_loss soft_margin_loss"),
        # Composite ops whose decomposition reaches no op that autocast changes on CPU.
        **_entries(NONE, _SHAPE_OPS + " softmax log_softmax layer_norm group_norm var var_mean std square tile "
                         "batch_norm sum cumsum"),
    },
    "cuda": {
        **_entries(LOWER, "mm bmm matmul linear addmm baddbmm addbmm addmv addr mv conv1d conv2d conv3d "
                          "conv_transpose1d conv_transpose2d prelu scaled_dot_product_attention"),
        **_entries(PROMOTE, "cat stack index_copy addcmul addcdiv atan2 dot vdot"),
        **_entries(FP32, "exp expm1 log log10 log2 log1p reciprocal rsqrt pow acos asin cosh sinh tan erfinv "
                         "softplus layer_norm group_norm mse_loss l1_loss smooth_l1_loss huber_loss nll_loss "
                         "kl_div binary_cross_entropy_with_logits cdist dist logsumexp margin_ranking_loss "
                         "soft_margin_loss cosine_similarity"),
        **_entries(FP32_OPT_DTYPE, "softmax log_softmax sum prod cumsum cumprod"),
        **_entries(NONE, _SHAPE_OPS + " var var_mean"),
    },
}

# Python functions of torch's functional API that Ember records as one node: the aten op whose
# policy they follow (they check arguments, then call it with the same tensors).
PYTHON_OPS = {
    F.softmax: "softmax", F.log_softmax: "log_softmax", F.layer_norm: "layer_norm", F.group_norm: "group_norm",
    F.dropout: "dropout", F.relu: "relu", F.mse_loss: "mse_loss", F.l1_loss: "l1_loss",
    F.smooth_l1_loss: "smooth_l1_loss", F.huber_loss: "huber_loss", F.nll_loss: "nll_loss",
    F.cross_entropy: "cross_entropy_loss", F.kl_div: "kl_div",
    F.binary_cross_entropy_with_logits: "binary_cross_entropy_with_logits", F.embedding: "embedding",
    F.margin_ranking_loss: "margin_ranking_loss", F.soft_margin_loss: "soft_margin_loss",
    F.batch_norm: "batch_norm", F.max_pool3d: "max_pool3d", F.adaptive_avg_pool3d: "adaptive_avg_pool3d",
    torch.cdist: "cdist", torch.Tensor.unflatten: "unflatten",
}

_dispatcher_sets = {}


def _dispatcher_names(key):
    """Base names of the aten ops with a kernel for dispatch key `key` (memoized)."""
    found = _dispatcher_sets.get(key)
    if found is None:
        found = set()
        has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
        for name in torch._C._dispatch_get_all_op_names():
            if name.startswith("aten::") and has_kernel(name, key):
                found.add(name[len("aten::"):].split(".")[0])
        _dispatcher_sets[key] = found
    return found


def _op_names(fn):
    """The aten op names a callable may run as (several for dunders: `__rpow__` is pow), or None
    for Python code that Ember records as one node and whose ops it does not know."""
    try:
        core = torch_names.core_by_callable.get(fn)
        python_op = PYTHON_OPS.get(fn)
    except TypeError:  # unhashable
        core = python_op = None
    if core is not None:
        return [{"convert": "convert_element_type", "getitem": "index"}.get(core, core)]
    if python_op is not None:
        return [python_op]
    if isinstance(fn, types.FunctionType):
        return None
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str):
        return None
    if fn in torch_names.inplace_callables and name.startswith("i"):
        # operator.imatmul: `x @= w` computes x @ w (tensors have no in-place matmul); iadd is add_.
        return [name[1:] + "_", name[1:]]
    if name.startswith("__") and name.endswith("__"):
        bare = name.strip("_")
        # __rpow__ / __ipow__: the reflected and in-place forms of pow.
        return [bare, bare[1:] + ("_" if bare[0] == "i" else "")] if bare[:1] in ("r", "i") else [bare]
    return [name]


def policy(fn, device_type):
    """(policy, detail) for a call of `fn` on tensors of `device_type` while autocast is on."""
    table = POLICY.get(device_type)
    label = torch_names.qualname(fn)
    if table is None:
        return (UNKNOWN, f"autocast on device type {device_type!r} (Ember traces autocast for cpu and cuda)")
    names = _op_names(fn)
    if names is None:
        return (UNKNOWN, f"{label} under torch.autocast({device_type!r}): Python code recorded as one op, "
                         "whose autocast behaviour Ember's table does not know")
    for name in names:
        if name in table:
            kind = table[name]
            # An op writing its first argument in place would write the cast copy (torch's
            # in-place ops have no autocast kernels; `x @= w` is not in place for tensors).
            writes_in_place = names[0].endswith("_") and fn is not operator.imatmul
            if kind != NONE and writes_in_place:
                return (UNKNOWN, f"{label} under torch.autocast({device_type!r}): an in-place op whose "
                                 "out-of-place form autocast casts")
            return (kind, "")
    autocast_ops = _dispatcher_names(_DISPATCH_KEYS[device_type])
    composite = _dispatcher_names("CompositeImplicitAutograd")
    for name in names:
        if name in autocast_ops:
            return (UNKNOWN, f"{label} under torch.autocast({device_type!r}): autocast changes aten::{name} "
                             "and Ember's autocast table has no policy for it")
        if name in composite:
            return (UNKNOWN, f"{label} under torch.autocast({device_type!r}): aten::{name} runs as other ops "
                             "that autocast may change, and Ember's autocast table does not list it")
    return (NONE, "")


# ---------------------------------------------------------------------------------------------
# torch.autocast(...) contexts in traced code

def is_autocast_class(cls):
    return isinstance(cls, type) and issubclass(cls, torch.amp.autocast_mode.autocast)


def arguments(cls, args, kwargs, state):
    """What `cls(*args, **kwargs)` (torch.autocast or a subclass) would set, as
    (device_type, enabled, dtype, cache_enabled), where `state` is the trace's autocast state
    ((cpu enabled, cpu dtype), (cuda enabled, cuda dtype), cache), which supplies the defaults.
    Raises ValueError naming what Ember does not trace (torch would raise or warn)."""
    try:
        bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs)
    except TypeError as e:
        raise ValueError(f"torch.autocast() with unexpected arguments ({e})") from None
    bound.apply_defaults()
    values = dict(bound.arguments)
    device = values.get("device_type", "cuda" if issubclass(cls, torch.cuda.amp.autocast) else "cpu")
    if not isinstance(device, str):
        raise ValueError(f"torch.autocast() with device_type {device!r} (torch wants a str)")
    if device not in DEVICE_TYPES:
        raise ValueError(f"torch.autocast({device!r}) (Ember traces autocast for cpu and cuda)")
    index = DEVICE_TYPES.index(device)
    dtype = values.get("dtype")
    if dtype is None:
        dtype = state[index][1]
    enabled = values.get("enabled", True)
    cache = values.get("cache_enabled")
    if cache is None:
        cache = state[2]
    if not isinstance(dtype, torch.dtype) or not isinstance(enabled, bool) or not isinstance(cache, bool):
        raise ValueError("torch.autocast() with a dtype, enabled or cache_enabled of an unexpected type")
    if enabled and device == "cpu" and dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"torch.autocast('cpu', dtype={dtype}) (torch warns and disables it)")
    if enabled and device == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("torch.autocast('cuda') where CUDA is not available (torch warns and disables it)")
        if dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
            raise ValueError("torch.autocast('cuda', dtype=torch.bfloat16) on a GPU without bfloat16")
    return (device, enabled, dtype, cache)


def _enter(device, enabled, dtype, cache):
    torch.set_autocast_enabled(device, enabled)
    torch.set_autocast_dtype(device, dtype)
    torch.autocast_increment_nesting()
    torch.set_autocast_cache_enabled(cache)


def _exit(device, enabled, dtype, cache):
    # As torch.autocast.__exit__: the cast cache lives while any block is open.
    if torch.autocast_decrement_nesting() == 0:
        torch.clear_autocast_cache()
    torch.set_autocast_enabled(device, enabled)
    torch.set_autocast_dtype(device, dtype)
    torch.set_autocast_cache_enabled(cache)


class AutocastExit:
    """The `__exit__` of a `with torch.autocast(...)` block that a graph break splits: the code
    after the break gets this object where the block's exit sits on the stack. Calling it does
    what the block's exit does: closes one autocast nesting level and restores the device type's
    state (enabled, dtype) and the cache flag from before the block."""

    __slots__ = ("device", "enabled", "dtype", "cache")

    def __init__(self, device, enabled, dtype, cache):
        self.device, self.enabled, self.dtype, self.cache = device, bool(enabled), dtype, bool(cache)

    def __call__(self, exc_type=None, exc=None, tb=None):
        _exit(self.device, self.enabled, self.dtype, self.cache)

    def __repr__(self):
        return (f"<exit of an autocast block: restores {self.device} "
                f"{'on' if self.enabled else 'off'} {self.dtype}, cache {'on' if self.cache else 'off'}>")


def replay(events):
    """After a compiled graph: puts CPython in the autocast state its trace ended in. `events` are
    the blocks the trace entered and exited without closing them again, in order, each
    (entering, device, enabled, dtype, cache): the state an entry sets or an exit restores."""
    for entering, device, enabled, dtype, cache in events:
        (_enter if entering else _exit)(device, enabled, dtype, cache)


def suspend():
    """Turns autocast off for cpu and cuda while a compiled graph runs (its casts are explicit);
    returns what `resume` needs to turn it back on."""
    previous = tuple(torch.is_autocast_enabled(d) for d in DEVICE_TYPES)
    for device, on in zip(DEVICE_TYPES, previous):
        if on:
            torch.set_autocast_enabled(device, False)
    return previous


def resume(previous):
    for device, on in zip(DEVICE_TYPES, previous):
        if on:
            torch.set_autocast_enabled(device, True)
