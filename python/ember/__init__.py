"""Ember: a compiler for PyTorch programs with a C++ core.

    model = ember.compile(model)
"""
import sys as _sys

if not ((3, 11) <= _sys.version_info[:2] <= (3, 13)):
    raise ImportError(
        f"ember supports CPython 3.11, 3.12 and 3.13; this is {_sys.version.split()[0]}")

from .api import InternalError, Unsupported, compile, disable, explain, mark_dynamic, mark_static, reset, stats  # noqa: E402

__all__ = ["compile", "explain", "stats", "reset", "disable", "Unsupported", "InternalError"]
