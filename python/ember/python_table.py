"""How the interpreter treats Python's own callables: builtins, the operator and math modules,
user code and the standard library. Needs no torch.

`ops.py` adds torch's callables on top of this (and falls back to `classify_python` for the rest).
Where torch is not installed, `table` alone lets Ember interpret pure-Python frames (the bytecode
tests on CPython 3.12 and 3.13 run this way); its torch fields are placeholders that no object
is an instance of.
"""
import abc
import builtins
import contextlib
import dataclasses
import functools
import importlib
import inspect
import os
import sys
import sysconfig
import types

BUILTIN_NAMES = (
    "len", "isinstance", "issubclass", "getattr", "hasattr", "setattr", "type", "range", "enumerate", "zip",
    "reversed", "sorted", "list", "tuple", "dict", "min", "max", "abs", "sum", "any", "all", "int", "float",
    "bool", "str", "iter", "next", "callable", "super", "map", "round", "divmod", "pow", "hash", "repr",
    "format", "slice", "print", "id", "chr", "ord", "frozenset", "set", "filter",
)
_builtins = {getattr(builtins, n): n for n in BUILTIN_NAMES}

EMBER_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB_DIRS = tuple({os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")})
_STDLIB_MODULES = set(sys.stdlib_module_names)
_NO_SELF = object()
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement, not a C type


def core_op_names():
    """The names and torch targets of the core ops, read from the op table ops.def."""
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, "ops.def"), os.path.join(os.path.dirname(os.path.dirname(here)), "src", "ir", "ops.def")):
        if os.path.exists(path):
            break
    else:
        raise ImportError("ember: the op table ops.def was not found next to the package")
    targets = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("EMBER_OP("):
                parts = [p.strip().strip('"') for p in line[len("EMBER_OP("):-1].split(",")]
                targets[parts[1]] = parts[2]
    return targets


def module_of(fn):
    module = getattr(fn, "__module__", None)
    if isinstance(module, str):
        return module
    objclass = getattr(fn, "__objclass__", None)
    if objclass is not None:
        return getattr(objclass, "__module__", "") or ""
    self = getattr(fn, "__self__", None)
    if isinstance(self, types.ModuleType):
        return self.__name__
    return ""


def is_stdlib_module_name(name):
    top = name.split(".")[0]
    return top in _STDLIB_MODULES or top.lstrip("_") in _STDLIB_MODULES


def file_of(fn):
    code = getattr(fn, "__code__", None)
    return os.path.abspath(code.co_filename) if code is not None else ""


def qualname_python(fn):
    if isinstance(fn, types.ModuleType):
        return fn.__name__
    module = module_of(fn)
    if module == "_operator":
        module = "operator"
    qn = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if module and qn:
        return f"{module}.{qn}"
    return repr(fn)


def classify_python(fn, qualname=qualname_python):
    """(kind, detail) for callables that are not torch's (see ops.py for the kinds)."""
    if getattr(fn, "_ember_disabled", False):
        return ("unsupported", f"call to {qualname(fn)}, which is marked ember.disable()")
    if getattr(fn, "_dynamo_marked_constant", False) is True:
        # Marked by its library as a value fixed for the process's lifetime (torch's
        # assume_constant_result; transformers' install probes, under their lru_cache, which
        # copies the mark): run once at trace time, as torch.compile does.
        return ("pure", "")
    if isinstance(fn, functools._lru_cache_wrapper):
        # Folded where its cache answers for good, else traced through __wrapped__
        # (interp_lru_cache.cpp), when the wrapped function is code the interpreter inlines.
        wrapped = inspect.getattr_static(fn, "__wrapped__", None)
        kind = classify_python(wrapped, qualname) if wrapped is not None else ("unsupported", "")
        if kind[0] == "inline" and isinstance(wrapped, types.FunctionType):
            return ("lru_cache", "")
        return ("unsupported", f"call to {qualname(fn)}, an lru_cache over {kind[1] or 'an unknown callable'}")
    if isinstance(fn, types.ModuleType):
        if is_stdlib_module_name(fn.__name__):
            return ("pure", "")
        return ("unsupported", f"module {fn.__name__}")
    try:
        if fn in _builtins:
            return ("builtin", _builtins[fn])
    except TypeError:  # unhashable callable
        pass
    if fn is dataclasses.fields:
        return ("dataclass_fields", "")
    if fn is inspect.signature:
        return ("signature", "")
    if fn is contextlib.nullcontext:
        return ("null_context", "")
    module = module_of(fn)
    if module in ("_operator", "operator") and not isinstance(fn, type):
        return ("operator", fn.__name__)
    if module == "math":
        return ("pure", "")
    if isinstance(fn, types.FunctionType):
        path = file_of(fn)
        if path.startswith(EMBER_DIR) and not path.startswith(EMBER_DIR + "models" + os.sep):
            return ("unsupported", f"call to Ember's own {qualname(fn)}")
        if path.startswith(_STDLIB_DIRS) and "site-packages" not in path:
            return ("unsupported", f"call to the standard library's {qualname(fn)}")
        return ("inline", "")
    if isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType, types.MethodDescriptorType,
                       types.WrapperDescriptorType, types.MethodWrapperType)):
        self = getattr(fn, "__self__", _NO_SELF)
        if self is not _NO_SELF and isinstance(self, (str, bytes, int, float, complex, tuple, frozenset,
                                                      types.MappingProxyType)):
            # a method of an immutable constant: "{}".format, (1, 2).index, a signature's
            # parameters.keys() (a mappingproxy read from the frame is opaque: never called)
            return ("pure", "")
        if module in ("math", "cmath"):
            return ("pure", "")
        return ("unsupported", f"call to {qualname(fn)} (a C function Ember does not know)")
    if isinstance(fn, type):
        if fn.__module__ == "itertools":
            return ("pure", "")  # itertools.repeat(x, n), ... on constants
        if _constructible(fn):
            return ("construct", "")
        return ("unsupported", f"constructing an instance of {fn.__module__}.{fn.__qualname__}")
    call = getattr(type(fn), "__call__", None)
    if isinstance(call, types.FunctionType):
        return ("inline", "")
    return ("unsupported", f"call to {qualname(fn)}")


def _constructible(cls):
    """A plain Python class of user or library code whose instances the tracer can build: object's
    own __new__, __setattr__, __delattr__ and __getattribute__, no metaclass but ABCMeta (and then no
    abstract methods left), an instance __dict__ and no C base class but object (so every attribute
    lives in the __dict__ the trace models)."""
    if type(cls) not in (type, abc.ABCMeta) or getattr(cls, "__abstractmethods__", None):
        return False
    if cls.__module__ == "builtins" or is_stdlib_module_name(cls.__module__):
        return False
    for base in cls.__mro__[:-1]:
        # Empty __slots__ (as the collections.abc classes declare) add no attribute storage.
        if not base.__flags__ & _HEAPTYPE or base.__dict__.get("__slots__", ()) or "__slots__" in cls.__dict__:
            return False
    # No __del__: the trace's placeholder instance (interp_instances.cpp) must not run user code when
    # it is dropped.
    return (cls.__new__ is object.__new__ and cls.__setattr__ is object.__setattr__ and
            cls.__delattr__ is object.__delattr__ and cls.__getattribute__ is object.__getattribute__ and
            getattr(cls, "__del__", None) is None)


def resolve_path(path):
    """The object a qualified name such as `torch.nn.functional.gelu` names (its modules imported)."""
    parts = path.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=2):
        if not hasattr(obj, part) and isinstance(obj, types.ModuleType):
            importlib.import_module(".".join(parts[:i]))  # a submodule not imported yet (ember.rng)
        obj = getattr(obj, part)
    return obj


class _Unavailable:
    """Placeholder for a torch type where torch is not installed: nothing is an instance of it."""


def _no_torch(*args, **kwargs):
    raise RuntimeError("ember: torch is not installed; only pure-Python frames can be interpreted")


class PythonTable:
    """The interpreter's table where torch is not installed (see torch_table.h for the fields)."""

    torch = types.ModuleType("torch_unavailable")
    tensor_type = module_type = sequential_type = _Unavailable
    size_type = dtype_type = device_type = _Unavailable
    no_grad_type = set_grad_enabled_type = _Unavailable
    set_grad_enabled_fn = staticmethod(_no_torch)
    grad_mode_exit_type = _Unavailable
    tensor_to = tensor_items = staticmethod(_no_torch)
    autocast_policy = autocast_arguments = staticmethod(_no_torch)
    autocast_exit_type = _Unavailable
    autocast_replay = autocast_suspend = autocast_resume = staticmethod(_no_torch)
    environ = os.environ
    inplace_callables = set()
    op_callables = {name: _no_torch for name in core_op_names()}
    qualname = staticmethod(qualname_python)
    classify = staticmethod(classify_python)
    make_meta = staticmethod(_no_torch)
    resolve = staticmethod(resolve_path)


table = PythonTable()
