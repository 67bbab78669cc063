"""Helpers for Ember's differential tests: build inputs, compare result trees, record call effects.

Imported only by tests (never by `import ember`), so it may import torch. The comparison is strict
on structure: containers must have the same type and length, Python values must be equal, tensors
must agree in dtype, device, shape and values (torch.testing.assert_close defaults unless given),
and requires_grad is compared separately so that a value mismatch is always reported first.
"""
import math
import os

import torch

# Where test inputs live: EMBER_TEST_DEVICE=cuda runs the differential tests on the GPU machine.
# The parity harness also makes it torch's default device while a case runs (`with DEVICE:`), so
# that programs making tensors without a device (torch.zeros(3)) make them where their inputs are.
DEVICE = torch.device(os.environ.get("EMBER_TEST_DEVICE", "cpu"))
# Whether graphs on DEVICE reach generated kernels: C++ on the CPU, Triton on CUDA; elsewhere they run
# on the eager executor with that reason (never an error).
GENERATES_KERNELS = DEVICE.type in ("cpu", "cuda")

__all__ = ["randn", "randint", "randbool", "Call", "assert_tree_close", "TreeMismatch", "tensor_leaves",
           "clone_tree", "alias_map"]


def randn(g, *shape, dtype=torch.float32, requires_grad=False):
    """A normal tensor drawn from generator `g` (float32 first, then cast, so every dtype sees one stream)."""
    t = torch.randn(*shape, generator=g, device="cpu").to(dtype).to(DEVICE)
    return t.requires_grad_() if requires_grad else t


def randint(g, low, high, *shape, dtype=torch.int64):
    return torch.randint(low, high, shape, generator=g, device="cpu").to(dtype).to(DEVICE)


def randbool(g, *shape):
    return (torch.rand(*shape, generator=g, device="cpu") > 0.5).to(DEVICE)


class Call:
    """Positional and keyword arguments of one call, for input factories that need keywords."""

    def __init__(self, *args, **kwargs):
        self.args = args
        self.kwargs = kwargs

    @staticmethod
    def of(value):
        if isinstance(value, Call):
            return value
        if isinstance(value, tuple):
            return Call(*value)
        raise TypeError(f"an input factory must return a tuple or a Call, got {type(value).__name__}")

    def tree(self):
        return (self.args, self.kwargs)


class TreeMismatch(AssertionError):
    pass


def _tensor_equal(path, expected, actual, rtol, atol, grad_mismatches):
    if not isinstance(actual, torch.Tensor):
        raise TreeMismatch(f"{path}: expected a tensor, got {type(actual).__name__}: {actual!r}")
    if expected.requires_grad != actual.requires_grad:
        grad_mismatches.append(f"{path}: requires_grad expected {expected.requires_grad}, got {actual.requires_grad}")
    try:
        kwargs = {} if rtol is None else {"rtol": rtol, "atol": atol}
        torch.testing.assert_close(actual.detach(), expected.detach(), equal_nan=True, **kwargs)
    except AssertionError as e:
        raise TreeMismatch(f"{path}: {e}") from None


def _compare(path, expected, actual, rtol, atol, grad_mismatches):
    if isinstance(expected, torch.Tensor):
        _tensor_equal(path, expected, actual, rtol, atol, grad_mismatches)
        return
    if type(expected) is not type(actual):
        raise TreeMismatch(f"{path}: expected {type(expected).__name__} {expected!r}, got "
                           f"{type(actual).__name__} {actual!r}")
    if isinstance(expected, torch.Size):
        if expected != actual:
            raise TreeMismatch(f"{path}: expected {expected}, got {actual}")
    elif isinstance(expected, (list, tuple)):
        if len(expected) != len(actual):
            raise TreeMismatch(f"{path}: expected length {len(expected)}, got {len(actual)}")
        for i, (e, a) in enumerate(zip(expected, actual)):
            _compare(f"{path}[{i}]", e, a, rtol, atol, grad_mismatches)
    elif isinstance(expected, dict):
        if list(expected) != list(actual):
            raise TreeMismatch(f"{path}: expected keys {list(expected)}, got {list(actual)}")
        for k in expected:
            _compare(f"{path}[{k!r}]", expected[k], actual[k], rtol, atol, grad_mismatches)
    elif isinstance(expected, float):
        if not (expected == actual or (math.isnan(expected) and math.isnan(actual))
                or math.isclose(expected, actual, rel_tol=1e-6, abs_tol=1e-9)):
            raise TreeMismatch(f"{path}: expected {expected!r}, got {actual!r}")
    elif _is_plain_object(expected):
        _compare(f"{path}.__dict__", vars(expected), vars(actual), rtol, atol, grad_mismatches)
    elif expected != actual:
        raise TreeMismatch(f"{path}: expected {expected!r}, got {actual!r}")


def _is_plain_object(obj):
    """An instance of a user class compared by its attributes (modules are compared by state_dict)."""
    return (hasattr(obj, "__dict__") and not isinstance(obj, (type, torch.nn.Module))
            and type(obj).__eq__ is object.__eq__ and not callable(obj))


def assert_tree_close(expected, actual, *, rtol=None, atol=None, path="out"):
    """Compares two result trees; returns the list of requires_grad mismatches (values all agree)."""
    grad_mismatches = []
    _compare(path, expected, actual, rtol, atol, grad_mismatches)
    return grad_mismatches


def tensor_leaves(tree, path="", out=None):
    """(path, tensor) pairs of a tree of lists, tuples and dicts, in a stable order."""
    if out is None:
        out = []
    if isinstance(tree, torch.Tensor):
        out.append((path, tree))
    elif isinstance(tree, (list, tuple)):
        for i, v in enumerate(tree):
            tensor_leaves(v, f"{path}[{i}]", out)
    elif isinstance(tree, dict):
        for k, v in tree.items():
            tensor_leaves(v, f"{path}[{k!r}]", out)
    return out


def alias_map(outputs, inputs):
    """How each output tensor relates to the inputs and to earlier outputs, by path:
    (output path, the input it is, the earlier output it is, the inputs whose memory it shares).
    Eager and compiled calls must agree: a caller may mutate an output and expect what eager does."""
    ins = tensor_leaves(inputs)
    by_id = {id(t): p for p, t in ins}
    seen = {}
    rows = []
    for p, t in tensor_leaves(outputs):
        shares = sorted(q for q, u in ins if _shares_memory(t, u))
        rows.append((p, by_id.get(id(t)), seen.get(id(t)), shares))
        seen.setdefault(id(t), p)
    return rows


def _shares_memory(a, b):
    if a.layout != torch.strided or b.layout != torch.strided:
        return False
    if a.untyped_storage().nbytes() == 0 or b.untyped_storage().nbytes() == 0:
        return False
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def clone_tree(tree):
    """Deep copy of a state snapshot: tensors detached and cloned, containers rebuilt."""
    if isinstance(tree, torch.Tensor):
        return tree.detach().clone()
    if isinstance(tree, list):
        return [clone_tree(v) for v in tree]
    if isinstance(tree, tuple) and not hasattr(tree, "_fields"):
        return tuple(clone_tree(v) for v in tree)
    if isinstance(tree, dict):
        return {k: clone_tree(v) for k, v in tree.items()}
    return tree
