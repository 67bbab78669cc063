"""Programs with constructs that make the whole frame run eagerly in this issue (graph breaks with
resume functions come later): a tensor's value read in an `if`, print, numpy, generators that are
not simply consumed (yield from, send), an exception caught by try/except. Results must be exactly eager's; each line marked `# FALLBACK` is the line Ember's
break reason must name (explain() and fullgraph=True, see test_fallback.py).
"""
import numpy as np
import torch

from ember.testing import randn

from .registry import case
from . import other_file


def x34(g):
    return (randn(g, 3, 4),)


@case(inputs=x34, counters="eager", fallback_marker="item-if")
def item_in_if(x):
    if x.sum().item() > 0:  # FALLBACK item-if
        return x * 2
    return x - 1


@case(inputs=x34, counters="eager", fallback_marker="tensor-bool")
def tensor_bool_in_if(x):
    y = x.relu()
    if (y > 1).any():  # FALLBACK tensor-bool
        y = y / 2
    return y


@case(inputs=x34, counters="eager", fallback_marker="item-arith")
def item_in_python_arithmetic(x):
    k = x.max().item()  # FALLBACK item-arith
    if k > 0.5:
        return x * k
    return x


@case(inputs=x34, counters="eager", fallback_marker="print")
def print_call(x):
    y = x * 2
    print("ember parity: y has shape", tuple(y.shape))  # FALLBACK print
    return y + 1


@case(inputs=x34, counters="eager", fallback_marker="numpy")
def numpy_call(x):
    a = np.tanh(x.cpu().numpy())  # FALLBACK numpy
    return torch.from_numpy(a).to(x.device) + x


@case(inputs=x34, counters="eager", fallback_marker="numpy-const")
def numpy_constant(x):
    k = np.float32(2.0) * np.sqrt(4.0)  # FALLBACK numpy-const
    return x * float(k)


def _chain(x):
    yield from (x, x * 2)  # FALLBACK yield-from


@case(inputs=x34, counters="eager", fallback_marker="yield-from")
def generator_yield_from(x):
    return torch.stack(list(_chain(x)))


def _accumulator():
    total = 0
    while True:
        value = yield total
        total = total + value  # FALLBACK send


@case(inputs=x34, counters="eager", fallback_marker="send",
      note="generators are run to completion when called, sending None: this one fails at its first add")
def generator_send(x):
    acc = _accumulator()
    next(acc)
    acc.send(x)
    return acc.send(x * 2)


@case(inputs=x34, counters="eager", fallback_marker="try-raise")
def try_except_raising(x):
    try:
        y = x.reshape(5, -1)  # FALLBACK try-raise
    except RuntimeError:
        y = x.t()
    return y


@case(inputs=x34, counters="eager", fallback_marker="other-file")
def fallback_in_inlined_helper(x):
    y = x + 1
    return other_file.helper_that_prints(y) * 3


@case(inputs=x34, counters="eager", fallback_marker="tolist")
def tolist_in_loop(x):
    total = x
    for v in x[0].tolist():  # FALLBACK tolist
        total = total + v
    return total


@case(inputs=x34, counters="eager", fallback_marker="nonzero-if")
def data_dependent_branch_on_count(x):
    n = int((x > 0).sum())  # FALLBACK nonzero-if
    return x[:, : max(n % 4, 1)]
