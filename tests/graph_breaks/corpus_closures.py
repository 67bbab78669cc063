"""Graph-break corpus, part 5: closures across a break. A function made in the trace (MAKE_FUNCTION)
that is live at a break crosses it as a real function with its code, defaults, kwdefaults,
annotations and *the frame's own cells*, so `nonlocal` writes on either side of the break are seen
on the other; cells of the compiled function's closure and a deleted first argument too.
Counting rules: corpus.py's header. The programs' counts are the ones Ember reports; dynamo=...
is torch._dynamo.explain's (dynamo_counts.py).
"""
import functools

import torch
from torch import nn

from .registry import program, x34


# could be fewer: functools.reduce is a C function Ember does not trace (Dynamo traces it as Python),
# so it is the break and the callback's frame compiles on its own, once per guard set.
@program("closure_passed_to_unknown_call", 4, 1, inputs=x34, dynamo=(1, 0))
def closure_passed_to_unknown_call(x):
    # step (capturing a tensor the graph computed) is an argument of the C reduce: it crosses as a
    # real function. Graphs: [abs, mean, sin, mul] before the break; step's own frame twice (acc is
    # the int 0, then a tensor: two guard sets); [add] in the resume.
    scale = x.abs().mean()
    step = lambda acc, v: acc + v * scale  # noqa: E731
    y = x.sin()
    total = functools.reduce(step, [y, y * 2], 0)  # BREAK
    return total + y


# could be fewer: functools.reduce is a C function Ember does not trace (see above).
@program("callback_writes_nonlocal", 3, 1, inputs=x34, dynamo=(1, 0))
def callback_writes_nonlocal(x):
    # cb runs in CPython (called by reduce); its `nonlocal calls` writes land in the frame's own
    # cell, which the resume function reads. Graphs: [mul]; cb's frame (int acc, tensor acc).
    calls = 0

    def cb(acc, v):
        nonlocal calls
        calls += 1
        return acc + v

    y = x * 2
    total = functools.reduce(cb, [y, x], 0)  # BREAK
    return total, calls


@program("closure_defaults_across_break", 2, 2, inputs=x34, dynamo=(2, 1))
def closure_defaults_across_break(x):
    # Defaults, keyword defaults, annotations, name and qualname survive the break.
    k = x.sum()

    def f(t, a: int = 2, *, b: float = 0.5) -> torch.Tensor:
        return t * a + b + k

    print("defined")  # BREAK print
    print(f.__name__, f.__qualname__, f.__defaults__, f.__kwdefaults__, sorted(f.__annotations__))  # BREAK print
    return f(x), f(x, 3, b=1.0)


@program("nonlocal_both_sides_of_break", 2, 1, inputs=x34, dynamo=(2, 1))
def nonlocal_both_sides_of_break(x):
    # The frame writes `total` after the break and the closures see it; add writes it and the
    # frame sees it: one cell on both sides.
    total = x * 0

    def read():
        return total + 1

    def add(v):
        nonlocal total
        total = total + v

    add(x)
    print("before")  # BREAK print
    total = total * 2
    add(x)
    return read(), total


@program("lambdas_in_loop_with_break", 1, 3, inputs=x34, dynamo=(2, 1))
def lambdas_in_loop_with_break(x):
    # Every lambda shares the loop variable's cell (late binding: each sees i == 2 at the end);
    # j=i is a default. Each iteration's print is a break (a resume per remaining iteration).
    fs = []
    for i in range(3):
        fs.append(lambda t, j=i: t * j + i)
        print("made", i)  # BREAK print
    return [f(x) for f in fs]


@program("recursive_closure_across_break", 2, 1, inputs=x34, dynamo=(2, 1))
def recursive_closure_across_break(x):
    # power's closure holds its own cell: rebuilt once, the cell holding the rebuilt function.
    def power(t, n):
        return t if n == 0 else power(t, n - 1) * t

    y = x + 1
    print("recursive")  # BREAK print
    return power(y, 3)


def _make_outer_cell_program():
    base = 1.5

    def closure_over_outer_cell(x):
        # inner captures `base`, a cell of the compiled function's own closure: it crosses as that
        # same cell.
        inner = lambda t: t * base  # noqa: E731
        y = x.cos()
        print("outer cell")  # BREAK print
        return inner(y)

    return closure_over_outer_cell


program("closure_over_outer_cell", 2, 1, inputs=x34, dynamo=(2, 1))(_make_outer_cell_program())


class _Doubler(nn.Module):
    def forward(self, x):
        return x * 2


class ClosureOverSelf(_Doubler):
    def __init__(self):
        super().__init__()
        self.k = 3.0

    def forward(self, x):
        # `self` is a cell (captured by scale) and the first argument: its cell crosses with the
        # locals, and zero-argument super() after the break still finds self.
        scale = lambda t: t * self.k  # noqa: E731
        y = scale(x)
        print("self captured")  # BREAK print
        return super().forward(y) + scale(x)


@program("closure_over_self_and_super", 2, 2, inputs=x34, module=True, dynamo=(2, 1))
def closure_over_self_and_super():
    return ClosureOverSelf()


class DeletesSelf(_Doubler):
    def forward(self, x):
        # The first argument is deleted before the break: the resume gets None in its slot and
        # deletes it again; super(_Doubler...) with explicit arguments still works.
        keep = self
        y = x + 1
        del self
        print("self deleted")  # BREAK print
        return super(DeletesSelf, keep).forward(y)


@program("deleted_self_before_break", 2, 2, inputs=x34, module=True, dynamo=(2, 1))
def deleted_self_before_break():
    return DeletesSelf()
