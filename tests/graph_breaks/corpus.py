"""The graph-break corpus (issue 4): programs with instructions Ember cannot put in a graph, each with
the graph and break counts `ember.explain(fn)(*args)` must report on a fresh compile. This file holds
the breaks at calls Ember does not trace (print, logging, NumPy, C extensions, unknown objects,
unsupported builtins); corpus_flow.py the data-dependent control flow, loops, try/except and `with`
blocks; corpus_calls.py inlined calls, pending stack values, modules, locals, side-effect order,
generators and recursion. `PROGRAMS` (registry.py) holds all of them once this module is imported.

How the expected counts are derived (the lead's rules for issue 4):
- A segment is the frame, or one trace of a resume function. It stops at a break; the ops traced
  before the break form its graph, which counts only if it holds at least one tensor op.
- Each segment that is traced and stops at a break counts one break. A resume function is cached
  per location: entering it again with the same guards is a cache hit (no new trace, no new break).
  Loop state that changes per iteration (a range iterator's remaining items, an int counter used in
  a condition) is guarded, so a break in a loop body is hit once per iteration; tensor-only loop
  state is not, so the second entry hits (see corpus_flow.while_bool_halving).
- A break inside an inlined user function happens at the outer CALL of the frame being compiled;
  the callee then runs in CPython and its own frame is captured by the frame hook, with its own
  segments. Frames of the standard library and of torch are not captured (the hook skips them).
- `.item()`, `.tolist()`, `.numpy()` break at that call; a branch on a tensor's value breaks at the
  conditional jump, after the comparison ops went into the graph.
- NumPy values, C-extension results and unknown objects are opaque to the tracer: a call that takes
  or makes one is a break; passing one along (into a tuple, a local, the return value) is not.
Dynamo's counts (`dynamo=`) come from dynamo_counts.py and are not asserted.
"""
import decimal
import io
import json
import os
import random
import struct
import sys
import zlib

import numpy as np
import torch

from .registry import LOG, log_reset, log_state, neg34, pos34, program, rand, x34

SCALE = 2.5
PRINT_SINK = None  # an io.StringIO while print_to_file runs


# ---------------------------------------------------------------------------------------------
# print

@program("print_middle", 2, 1, inputs=x34, dynamo=(2, 1))
def print_middle(x):
    y = x * 2
    print("middle", y.shape)  # BREAK print
    return y + 1


# could be fewer: Tensor.__repr__ builds a namedtuple whose `<string>` __new__ frame the hook captures
# and that breaks at tuple.__new__ (one more break, outside the corpus).
@program("print_tensor_value", 2, 2, inputs=x34, dynamo=(2, 1), foreign_breaks=("<string>",))
def print_tensor_value(x):
    y = (x * 4).floor()  # whole numbers: the printed repr cannot differ in a last digit
    print(y)  # BREAK print
    return y.abs()


@program("print_first_instruction", 1, 1, inputs=x34, dynamo=(1, 0))
def print_first_instruction(x):
    print("start")  # BREAK print
    return x.sin() + 1


@program("print_before_return", 1, 1, inputs=x34, dynamo=(1, 0))
def print_before_return(x):
    y = x.cos() * 3
    print("done")  # BREAK print
    return y  # the resume only returns: no op, no graph


@program("print_twice_adjacent", 2, 2, inputs=x34, dynamo=(2, 1))
def print_twice_adjacent(x):
    y = x + 1
    print("a")  # BREAK print
    print("b")  # BREAK print
    return y * 2  # the segment between the prints has no op: 2 graphs


@program("print_three_with_ops_between", 4, 3, inputs=x34, dynamo=(4, 3))
def print_three_with_ops_between(x):
    y = x + 1
    print("one")  # BREAK print
    y = y * 2
    print("two")  # BREAK print
    y = y - 3
    print("three")  # BREAK print
    return y.relu()


@program("print_keyword_arguments", 2, 1, inputs=x34, dynamo=(2, 1))
def print_keyword_arguments(x):
    y = x.exp()
    print("value", 3, tuple(y.shape), sep="|", end="!\n")  # BREAK print
    return y.sum(dim=1, keepdim=True)


@program("print_fstring_metadata", 2, 1, inputs=x34, dynamo=(2, 1))
def print_fstring_metadata(x):
    y = x.t().contiguous()
    print(f"shape={tuple(y.shape)} dtype={y.dtype} dims={y.dim()}")  # BREAK print
    return y @ x


def _sink_state(target):
    return PRINT_SINK.getvalue()


def _sink_reset(target):
    global PRINT_SINK
    PRINT_SINK = io.StringIO()


@program("print_to_file", 2, 1, inputs=x34, state=_sink_state, reset=_sink_reset, dynamo=(2, 1))
def print_to_file(x):
    y = x - 0.5
    print("to a file", tuple(y.shape), file=PRINT_SINK)  # BREAK print
    return y * y


@program("print_tensor_fstring", 2, 1, inputs=x34, dynamo=(2, 1))
def print_tensor_fstring(x):
    # Formatting a tensor's value needs the value: the f-string itself breaks.
    total = (x * 8).round().sum()
    msg = f"total={total.item():.1f}"  # BREAK item
    return x * 2, msg


# ---------------------------------------------------------------------------------------------
# logging (a logger whose handler writes to a StringIO, registry.LOG_BUFFER)

# LOG is a global bound by `from .registry import LOG`; its bound method crosses the break as
# types.MethodType(function, LOG), so the frame splits at the logging call.
@program("log_info", 2, 1, inputs=x34, state=log_state, reset=log_reset, dynamo=(2, 1))
def log_info(x):
    y = x * 2
    LOG.info("y has shape %s", tuple(y.shape))  # BREAK
    return y - 1


# LOG's bound method crosses the break (types.MethodType), so the .item() resume splits at the
# logging call.
@program("log_item_then_warning", 2, 2, inputs=x34, state=log_state, reset=log_reset, dynamo=(2, 1))
def log_item_then_warning(x):
    m = x.mean()
    v = m.item()  # BREAK item
    LOG.warning("mean=%.4f", v)  # BREAK
    return x - v  # the segment between the two breaks has no op


# LOG is a global bound by `from .registry import LOG`; its bound method crosses the break as
# types.MethodType(function, LOG), so the frame splits at the logging call.
@program("log_debug_filtered", 2, 1, inputs=x34, state=log_state, reset=log_reset, dynamo=(2, 1))
def log_debug_filtered(x):
    # Below the logger's level nothing is written, but the call is still made in CPython.
    y = x.sigmoid()
    LOG.debug("not written %d", 3)  # BREAK
    return y * 4


# LOG is a global bound by `from .registry import LOG`; its bound method crosses the break as
# types.MethodType(function, LOG), so the frame splits at the logging call.
@program("log_with_keywords", 2, 1, inputs=x34, state=log_state, reset=log_reset, dynamo=(2, 1))
def log_with_keywords(x):
    y = x.abs()
    LOG.log(30, "custom level %s", "ok", stacklevel=1)  # BREAK
    return y.max(dim=0).values


# LOG's bound method crosses the break (types.MethodType): one split per iteration (Dynamo runs a
# frame with a break inside a loop eagerly).
@program("log_in_loop", 3, 3, inputs=x34, state=log_state, reset=log_reset, dynamo=(0, -1))
def log_in_loop(x):
    y = x
    for i in range(3):
        y = y + i
        LOG.info("step %d", i)  # BREAK
    return y


# ---------------------------------------------------------------------------------------------
# NumPy

@program("numpy_scalar_passed_along", 2, 1, inputs=x34, dynamo=(1, 0))
def numpy_scalar_passed_along(x):
    y = x * 2
    k = np.sqrt(16.0)  # BREAK
    return y + 1, k  # k is returned untouched: no further break


@program("numpy_constructor", 2, 1, inputs=x34, dynamo=(1, 0))
def numpy_constructor(x):
    y = x.sin()
    half = np.float32(0.5)  # BREAK
    z = y * 3
    return z, half


@program("numpy_tensor_roundtrip", 1, 3, inputs=x34, dynamo=(1, 0))
def numpy_tensor_roundtrip(x):
    a = x.numpy()  # BREAK
    b = np.tanh(a)  # BREAK
    t = torch.from_numpy(b)  # BREAK (an ndarray argument is opaque to the tracer)
    return t + x


# could be fewer: NumPy's own Python frame (_methods._sum) is captured by the hook and breaks at
# ufunc.reduce: one more break, outside the corpus.
@program("numpy_array_method", 2, 3, inputs=x34, dynamo=(1, 0), foreign_breaks=("numpy",))
def numpy_array_method(x):
    y = x + 1
    a = y.detach().numpy()  # BREAK
    s = a.sum()  # BREAK (a method of an ndarray)
    return y * 2, s


# ---------------------------------------------------------------------------------------------
# C extensions and unknown library objects

@program("zlib_crc32", 2, 1, inputs=x34, dynamo=(2, 1))
def zlib_crc32(x):
    y = x * 2
    c = zlib.crc32(b"ember")  # BREAK
    return y + (c % 7)


@program("struct_pack", 2, 1, inputs=x34, dynamo=(1, 0))
def struct_pack(x):
    y = x.relu()
    packed = struct.pack("<if", 3, 1.5)  # BREAK
    return y * len(packed)  # bytes are a constant once the resume has them


@program("json_dumps", 2, 1, inputs=x34, dynamo=(2, 1))
def json_dumps(x):
    y = x.mean(dim=0)
    s = json.dumps({"n": 3, "shape": list(y.shape)})  # BREAK
    return y * len(s), s


@program("decimal_object", 2, 1, inputs=x34, dynamo=(2, 1))
def decimal_object(x):
    y = x * 2
    d = decimal.Decimal("1.25")  # BREAK
    return y + 1, d


def _rng_inputs():
    return (rand(3, 4), random.Random(7))


@program("random_instance_method", 2, 1, inputs=_rng_inputs, dynamo=(1, 0))
def random_instance_method(x, rng):
    y = x + 1
    r = rng.random()  # BREAK
    return y * r


def _seed_global_random(target):
    random.seed(1234)


@program("random_module_function", 2, 1, inputs=x34, reset=_seed_global_random,
         state=lambda target: random.random(), dynamo=(2, 1))
def random_module_function(x):
    # The module-level RNG advances: the state snapshot draws the next number, which must agree.
    y = x.exp()
    r = random.random()  # BREAK
    return y * r


@program("os_getpid", 2, 1, inputs=x34, dynamo=(2, 1))
def os_getpid(x):
    y = x * 3
    positive = os.getpid() > 0  # BREAK
    return y - int(positive)


@program("sys_getsizeof", 2, 1, inputs=x34, dynamo=(2, 1))
def sys_getsizeof(x):
    y = x.tanh()
    n = sys.getsizeof(12345) > 0  # BREAK
    return y + int(n)


# ---------------------------------------------------------------------------------------------
# Builtins the tracer does not implement

# id() of a fresh tensor crosses the break guarded by value: each call recompiles the resume.
@program("builtin_id", 2, 1, inputs=x34, dynamo=(0, -1), recompiles_per_call=True)
def builtin_id(x):
    y = x * 2
    nonzero = id(y) != 0  # BREAK
    return y + int(nonzero)


@program("builtin_globals", 2, 1, inputs=x34, dynamo=(2, 1))
def builtin_globals(x):
    y = x - 1
    has = "SCALE" in globals()  # BREAK
    return y * (SCALE if has else 1.0)


class Token:
    """A plain user object: hashed by identity, which only CPython knows."""


# hash() of a fresh Token crosses the break guarded by value: each call recompiles the resume.
@program("builtin_hash", 2, 1, inputs=lambda: (rand(3, 4), Token()), dynamo=(1, 0), recompiles_per_call=True)
def builtin_hash(x, token):
    y = x * 3
    bucket = hash(token) % 1  # BREAK
    return y + bucket


@program("builtin_eval", 2, 1, inputs=x34, dynamo=(1, 0))
def builtin_eval(x):
    y = x.cos()
    k = eval("2 + 3")  # BREAK
    return y * k


# ---------------------------------------------------------------------------------------------
# Several kinds of break in one frame

# LOG's bound method crosses the break (types.MethodType), so the resume after .item() splits at
# the logging call.
@program("mixed_breaks", 3, 4, inputs=x34, state=log_state, reset=log_reset, dynamo=(3, 2))
def mixed_breaks(x):
    y = x * 2
    print("first")  # BREAK print
    y = y + 1
    v = y.max().item()  # BREAK item
    LOG.info("max %.3f", v)  # BREAK
    c = zlib.crc32(b"abc") % 5  # BREAK
    return y * v + c  # [mul] [add, max], then eager (see above): 2 graphs


@program("five_prints", 6, 5, inputs=x34, dynamo=(6, 5))
def five_prints(x):
    y = x
    y = y + 1
    print(1)  # BREAK print
    y = y * 2
    print(2)  # BREAK print
    y = y - 3
    print(3)  # BREAK print
    y = y / 4
    print(4)  # BREAK print
    y = y.exp()
    print(5)  # BREAK print
    return y.sum()


from . import corpus_calls, corpus_closures, corpus_flow, corpus_mutations  # noqa: E402,F401  (registers the rest of the corpus)
