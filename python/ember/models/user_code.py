"""Marks functions of this package as user code, so that Ember's frame hook compiles them.

The hook skips every frame whose file lies in the ember package (src/frontend/code_cache.cpp: Ember's own
Python code must never be traced), and that rule also catches the reference models here, which stand for
user code. Module forwards are unaffected (ember.compile enters a module through an entry frame of its own
and inlines forward), but a plain function compiled directly would silently run eagerly. as_user_code()
returns the same function with its code's file name wrapped as "<user code: PATH>": no longer a path
under the package, still naming the real file in tracebacks and break reasons.
"""
import types

PREFIX = "<user code: "


def as_user_code(fn):
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"as_user_code expects a Python function, got {type(fn).__name__}")
    code = fn.__code__
    if code.co_filename.startswith(PREFIX):
        return fn
    marked = types.FunctionType(code.replace(co_filename=f"{PREFIX}{code.co_filename}>"), fn.__globals__,
                                fn.__name__, fn.__defaults__, fn.__closure__)
    marked.__kwdefaults__ = fn.__kwdefaults__
    marked.__qualname__ = fn.__qualname__
    marked.__doc__ = fn.__doc__
    marked.__module__ = fn.__module__
    return marked
