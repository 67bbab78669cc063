"""Names of torch callables: the core ops' callables (src/ir/ops.def), the callables that mutate
their first argument, and readable qualified names. Shared by the callable table (`ops.py`) and the
autocast policy (`autocast.py`); it imports neither, so the two depend on it one way.
"""
import math
import operator
import types

import torch
import torch.nn.functional as F

from . import python_table

# ---------------------------------------------------------------------------------------------
# Core ops (src/ir/ops.def): name -> the torch target the op table names.

CORE_TARGETS = python_table.core_op_names()
op_callables = {name: python_table.resolve_path(target) for name, target in CORE_TARGETS.items()}

# Callables with the core op's semantics and argument order: the target itself, and the Tensor
# method of the same name (self first).
core_by_callable = {}
for _name, _fn in op_callables.items():
    core_by_callable[_fn] = _name
    _method = getattr(torch.Tensor, _name, None)
    # Tensor.where(cond, other) puts self second in torch.where's order: not the same op.
    if _method is not None and _name not in ("view", "expand", "contiguous", "where"):
        core_by_callable.setdefault(_method, _name)
# torch's documented aliases of core ops (the same aten op, the same arguments): torch.multiply is
# torch.mul, as aten's alias table says.
for _alias, _name in (("multiply", "mul"), ("divide", "div"), ("subtract", "sub")):
    for _owner in (torch, torch.Tensor):
        core_by_callable.setdefault(getattr(_owner, _alias), _name)

inplace_callables = {getattr(operator, "i" + n) for n in (
    "add", "and", "floordiv", "lshift", "matmul", "mul", "mod", "or", "pow", "rshift", "sub", "truediv", "xor")}
inplace_callables.add(operator.setitem)

# Public names of torch callables, for readable IR ("torch.add", not "torch._C._VariableFunctions.add").
_public_names = {}


def _index_public(prefix, namespace):
    # vars(), not dir()/getattr(): a module's __getattr__ would import lazy submodules.
    for attr, obj in list(vars(namespace).items()):
        if callable(obj) and not attr.startswith("__"):
            try:
                # An alias (torch.dsmm is torch.mm) never hides the callable's own name.
                if obj not in _public_names or getattr(obj, "__name__", None) == attr:
                    _public_names[obj] = f"{prefix}.{attr}"
            except TypeError:
                pass


_index_public("torch.nn.functional", F)
_index_public("torch", torch)
_index_public("torch.Tensor", torch.Tensor)
_index_public("torch.Tensor", torch._C.TensorBase)
_index_public("operator", operator)
_index_public("math", math)


def qualname(fn):
    try:
        name = _public_names.get(fn)
    except TypeError:
        name = None
    if name:
        return name
    if isinstance(fn, types.ModuleType):
        return fn.__name__
    if isinstance(fn, torch._ops.OpOverloadPacket):  # torch.ops.ns.name, a path resolve_path follows
        return "torch.ops." + fn._qualified_op_name.replace("::", ".")
    if isinstance(fn, torch._ops.OpOverload):
        return "torch.ops." + fn._schema.name.replace("::", ".") + "." + fn._overloadname
    objclass = getattr(fn, "__objclass__", None)
    if isinstance(objclass, type) and issubclass(objclass, torch._C.TensorBase):
        return "torch.Tensor." + fn.__name__
    if isinstance(fn, operator.attrgetter):
        return repr(fn)
    return python_table.qualname_python(fn)
