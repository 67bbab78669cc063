"""Graph-break corpus, part 2: control flow. Tensor values in Python conditions (`.item()`,
`.tolist()`, `bool(tensor)`, a tensor in `if`/`while`/`assert`, both branches taken across inputs),
breaks inside `for` and `while` loops, `try`/`except`/`finally` around a break, and `with` blocks
(`torch.no_grad`, `enable_grad`, `set_grad_enabled`, `autocast`, a user context manager) active across
a break. Counting rules: corpus.py's header.
"""
import contextlib
import math
import struct

import torch

from .registry import neg34, pos34, program, rand, x34


# ---------------------------------------------------------------------------------------------
# Tensor values in Python control flow

@program("item_if_pos", 2, 1, inputs=pos34, dynamo=(2, 1))
@program("item_if_neg", 2, 1, inputs=neg34, dynamo=(2, 1))
def item_if(x):
    if x.sum().item() > 0:  # BREAK item
        return x * 2
    return x - 1


@program("any_if_pos", 2, 1, inputs=pos34, dynamo=(2, 1))
@program("any_if_neg", 2, 1, inputs=neg34, dynamo=(2, 1))
def any_if(x):
    y = x.relu()
    if (y > 1).any():  # BREAK
        y = y / 2
    return y + 1


@program("sum_gt_if_else_pos", 2, 1, inputs=pos34, dynamo=(2, 1))
@program("sum_gt_if_else_neg", 2, 1, inputs=neg34, dynamo=(2, 1))
def sum_gt_if_else(x):
    if x.sum() > 0:  # BREAK
        y = x.sin()
    else:
        y = x.cos()
    return y * 2


@program("bool_call_if_pos", 2, 1, inputs=pos34, dynamo=(2, 1))
@program("bool_call_if_neg", 2, 1, inputs=neg34, dynamo=(2, 1))
def bool_call_if(x):
    m = x.max()
    if bool(m > 0.5):  # BREAK
        return x / m
    return x + m


@program("tensor_ternary_pos", 2, 1, inputs=pos34, dynamo=(2, 1))
@program("tensor_ternary_neg", 2, 1, inputs=neg34, dynamo=(2, 1))
def tensor_ternary(x):
    y = x * 2 if x.sum() > 0 else x * 3  # BREAK
    return y.exp()


@program("tensor_and_condition_pos", 3, 2, inputs=pos34, dynamo=(3, 2))
@program("tensor_and_condition_neg", 2, 1, inputs=neg34, dynamo=(2, 1))
def tensor_and_condition(x):
    # `and` short-circuits: the second comparison is traced (and breaks) only when the first holds.
    if x.sum() > 0 and x.mean() < 10:  # BREAK
        return x.tanh()
    return x.sigmoid()


@program("tensor_elif_pos", 2, 1, inputs=pos34, dynamo=(2, 1))
@program("tensor_elif_neg", 3, 2, inputs=neg34, dynamo=(3, 2))
@program("tensor_elif_mid", 3, 2, inputs=lambda: (rand(3, 4) * 0.1,), dynamo=(3, 2))
def tensor_elif(x):
    # pos34's mean is above 0.5 and neg34's below -0.5; the mid input's mean is within 0.1 of 0.
    # A false first condition resumes at the `elif`, whose comparison is a graph and a second break.
    if x.mean() > 0.5:  # BREAK
        y = x * 10
    elif x.mean() < -0.5:  # BREAK
        y = x * -10
    else:
        y = x
    return y + 1  # the else path's resume still adds: a graph


@program("item_arithmetic", 2, 1, inputs=x34, dynamo=(2, 1))
def item_arithmetic(x):
    k = x.max().item()  # BREAK item
    return x * k


@program("tolist_loop", 2, 1, inputs=pos34, dynamo=(2, 1))
def tolist_loop(x):
    vals = x.sum(dim=1).tolist()  # BREAK
    out = x
    for i, v in enumerate(vals):
        if v > 0:  # Python floats: no break
            out = out + i
    return out


@program("tolist_return", 1, 1, inputs=x34, dynamo=(1, 0))
def tolist_return(x):
    y = (x * 2).round()
    return y.tolist()  # BREAK (the resume only returns the list)


@program("int_of_tensor_index", 2, 1, inputs=x34, dynamo=(2, 1))
def int_of_tensor_index(x):
    k = int(x.argmax())  # BREAK
    return x.flatten()[k] * 2


@program("item_sets_loop_count", 2, 1, inputs=lambda: (torch.full((3, 4), 0.25),), dynamo=(2, 1))
def item_sets_loop_count(x):
    n = int(x.sum().item()) % 3 + 1  # BREAK item   (sum 3.0: n == 1)
    y = x
    for _ in range(n):
        y = y * 2
    return y


@program("assert_on_tensor", 2, 1, inputs=x34, dynamo=(1, 0))
def assert_on_tensor(x):
    y = x.abs()
    assert y.sum() >= 0, "a sum of absolute values is never negative"  # BREAK
    return y.sqrt()


@program("float_of_tensor_math", 2, 1, inputs=x34, dynamo=(2, 1))
def float_of_tensor_math(x):
    s = float(x.sum())  # BREAK
    return x * math.cos(s)


def _halving_inputs():
    return (torch.tensor([[1.0, -2.0], [3.0, -2.0]]),)  # |x|.sum() == 8: three halvings


@program("while_bool_halving", 3, 3, inputs=_halving_inputs, dynamo=(1, 0))
def while_bool_halving(x):
    # CPython checks a `while` condition at the top (entering) and again at the bottom of the body.
    # The break is the bool() call; its result crosses to the resume at the jump, guarded by value.
    # The frame breaks at the top call (graph: abs, sum, gt); that resume traces div, gt and breaks
    # at the bottom call (graph 2); the resume at the bottom jump (True) traces div, gt and breaks
    # there again (graph 3); later iterations hit it; the exit (False) recompiles it with no op.
    t = x.abs().sum()
    while bool(t > 1):  # BREAK
        t = t / 2
    return t


@program("while_tensor_condition", 2, 2, inputs=_halving_inputs, dynamo=(2, 1))
def while_tensor_condition(x):
    # The test at the top (entering) and its copy at the bottom of the body both break at their
    # jump; both continue at the body's start or at the return, so they share those resume
    # functions: the frame's graph (abs, max, gt), then one body graph (div, abs, max, gt) that
    # later iterations hit. (Before resume functions were shared per successor: 3 graphs.)
    while x.abs().max() > 1:  # BREAK
        x = x / 2
    return x


@program("item_in_for_range", 4, 3, inputs=x34, dynamo=(0, -1))
def item_in_for_range(x):
    total = 0.0
    for i in range(3):
        total += x[i].sum().item()  # BREAK item
    return x * total


@program("loop_item_early_exit", 2, 2, inputs=lambda: (torch.full((4, 3), 0.5),), dynamo=(0, -1))
def loop_item_early_exit(x):
    # Row sums 1.5 each: the running sum passes 2.0 in the second iteration, which then `break`s.
    acc = torch.zeros_like(x[0])
    for i in range(4):
        acc = acc + x[i]
        if acc.sum().item() > 2.0:  # BREAK item
            break
    return acc  # the last resume only returns: 2 graphs


# ---------------------------------------------------------------------------------------------
# Breaks inside loops

@program("for_range_print", 4, 3, inputs=x34, dynamo=(0, -1))
def for_range_print(x):
    y = x
    for i in range(3):
        y = y * 2
        print("iteration", i)  # BREAK print
    return y + 1


@program("while_counter_print", 4, 3, inputs=x34, dynamo=(0, -1))
def while_counter_print(x):
    i = 0
    y = x
    while i < 3:
        y = y + 1
        print("round", i)  # BREAK print
        i += 1
    return y * 2


def _three_tensors():
    return ([rand(2, 3, seed=s) for s in range(3)],)


@program("for_over_list_print", 3, 3, inputs=_three_tensors, dynamo=(0, -1))
def for_over_list_print(xs):
    # The list iterator's position is guarded like a range's remaining items: one trace per iteration.
    # Segments: [zeros, add] [add] [add] [] (the last resume only returns): 3 graphs.
    acc = torch.zeros(2, 3)
    for t in xs:
        acc = acc + t
        print("added one")  # BREAK print
    return acc


@program("nested_loops_print", 5, 4, inputs=x34, dynamo=(0, -1))
def nested_loops_print(x):
    y = x
    for i in range(2):
        for j in range(2):
            y = y + (i * 2 + j)
            print("cell", i, j)  # BREAK print
    return y.neg()


@program("loop_print_odd_iterations", 2, 2, inputs=x34, dynamo=(0, -1))
def loop_print_odd_iterations(x):
    # Iterations 0,1 trace two muls before the first print, 2,3 two more before the second; the last
    # resume only returns y.
    y = x
    for i in range(4):
        y = y * 2
        if i % 2 == 1:
            print("odd", i)  # BREAK print
    return y


@program("print_after_loop", 2, 1, inputs=x34, dynamo=(2, 1))
def print_after_loop(x):
    y = x
    for i in range(3):
        y = y + i
    print("loop done")  # BREAK print
    return y.exp()


# ---------------------------------------------------------------------------------------------
# try / except / finally

@program("try_print_no_exception", 2, 1, inputs=x34, dynamo=(0, -1))
def try_print_no_exception(x):
    y = x + 1
    try:
        print("in try")  # BREAK print
        y = y * 2
    except ValueError:
        y = y - 100
    return y


@program("try_c_call_raises_caught", 1, 1, inputs=x34, dynamo="InternalTorchDynamoError")
def try_c_call_raises_caught(x):
    # struct.error is raised by the breaking call itself, in CPython, inside the user's try: the
    # handler and the rest of the frame run natively in glue (docs/graph-breaks.md), so the
    # subtraction is in no graph: 1 graph.
    y = x * 2
    try:
        struct.unpack("<i", b"ab")  # BREAK
        y = y + 1000
    except struct.error:
        y = y - 1
    return y


@program("try_finally_print", 2, 1, inputs=x34, dynamo=(0, -1))
def try_finally_print(x):
    y = x + 1
    try:
        print("body")  # BREAK print
        y = y * 2
    finally:
        y = y - 1
    return y


@program("try_else_print", 2, 1, inputs=x34, dynamo=(0, -1))
def try_else_print(x):
    y = x.sin()
    try:
        print("trying")  # BREAK print
    except KeyError:
        y = y * 0
    else:
        y = y + 5
    return y


@program("nested_try_print", 2, 1, inputs=x34, dynamo=(0, -1))
def nested_try_print(x):
    y = x * 3
    try:
        try:
            print("inner")  # BREAK print
            y = y + 1
        except KeyError:
            y = y - 1
        y = y * 2
    except ValueError:
        y = y * 0
    return y


# Raised: the true branch's resume raises and catches the ValueError inside its trace (the
# exception is traced, docs/interpreter.md), so the handler's `y * 0` is graph 2.
@program("raise_after_tensor_condition_raised", 2, 1, inputs=lambda: (rand(3, 4).abs() * -1000 - 1,), dynamo=(0, -1))
@program("raise_after_tensor_condition_not_raised", 2, 1, inputs=x34, dynamo=(0, -1))
def raise_after_tensor_condition(x):
    # Not raised: the false branch's resume adds (graph 2). Raised: see above.
    y = x * 2
    try:
        if y.sum() < -1000:  # BREAK
            raise ValueError("very negative")
        y = y + 1
    except ValueError:
        y = y * 0
    return y


# Exceptions raised and caught inside the trace (docs/interpreter.md, "Exceptions"): no break.

@program("traced_raise_caught", 1, 0, inputs=x34, dynamo=(1, 0))
def traced_raise_caught(x):
    y = x.cos()  # computed in the graph before the exception
    try:
        raise ValueError(f"rows {y.shape[0]}")
    except ValueError as e:
        y = y * len(e.args[0])
    return y


def _check_rows(y, limit):
    if y.shape[0] > limit:
        raise IndexError("too many rows")
    return y


@program("traced_raise_in_callee_caught", 1, 0, inputs=x34, dynamo=(1, 0))
def traced_raise_in_callee_caught(x):
    y = x + 1
    try:
        y = _check_rows(y * 2, 2)
    except (KeyError, IndexError):
        y = y - 3
    return y


@program("traced_key_error_finally", 1, 0, inputs=x34, dynamo=(1, 0))
def traced_key_error_finally(x):
    table = {"a": 2.0}
    y = x * 2
    try:
        y = y * table["b"]
    except KeyError:
        y = y + table.get("b", 1.0)
    finally:
        y = y - 1
    return y


class _CorpusError(Exception):
    pass


@program("traced_reraise_to_outer_handler", 1, 0, inputs=x34, dynamo=(1, 0))
def traced_reraise_to_outer_handler(x):
    y = x * 5
    try:
        try:
            raise _CorpusError("inner")
        except _CorpusError:
            y = y + 1
            raise
    except Exception as e:
        y = y * (2 if isinstance(e, _CorpusError) else 100)
    return y


@program("traced_exception_print_in_handler", 1, 1, inputs=x34, dynamo=(0, -1))
def traced_exception_print_in_handler(x):
    # The print inside the handler is reported where the handled exception came from: the frame is
    # split at the raise, which CPython runs, and the user's handler runs natively in glue.
    y = x * 2
    try:
        raise KeyError("k")  # BREAK print
    except KeyError:
        print("handled")  # BREAK print
        y = y + 1
    return y


class _Exits:
    def __init__(self):
        self.count = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.count += 1
        return False


@program("traced_exception_through_with", 1, 0, inputs=x34, dynamo=(1, 0))
def traced_exception_through_with(x):
    ctx = _Exits()
    y = x + 1
    try:
        with ctx:
            with torch.no_grad():
                y = y * 2
                raise RuntimeError("leave both blocks")
    except RuntimeError:
        y = y + ctx.count
    return y, torch.is_grad_enabled()


# ---------------------------------------------------------------------------------------------
# `with` blocks active across a break

def _grad_input():
    return (rand(3, 4, requires_grad=True),)


@program("no_grad_across_break", 2, 1, inputs=_grad_input, dynamo=(2, 1))
def no_grad_across_break(x):
    with torch.no_grad():
        y = x * 2
        print("in no_grad")  # BREAK print
        z = y + 1
    w = x * 3  # grad mode is back on: w requires grad
    return z, z.requires_grad, w, w.requires_grad


@program("enable_grad_inside_no_grad", 2, 1, inputs=_grad_input, dynamo=(2, 1))
def enable_grad_inside_no_grad(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
            print("enable_grad inside no_grad")  # BREAK print
            c = b + 1
        d = c * a
    return a.requires_grad, c.requires_grad, d.requires_grad, d, c


@program("set_grad_enabled_across_break", 2, 1, inputs=_grad_input, dynamo=(2, 1))
def set_grad_enabled_across_break(x):
    with torch.set_grad_enabled(False):
        y = x.exp()
        print("grad disabled")  # BREAK print
        z = y * x
    return z, z.requires_grad


@program("no_grad_tensor_branch", 2, 1, inputs=_grad_input, dynamo=(2, 1))
def no_grad_tensor_branch(x):
    with torch.no_grad():
        if x.sum() > -100:  # BREAK
            y = x * 2
        else:
            y = x
    return y, y.requires_grad


@program("nullcontext_across_break", 2, 1, inputs=_grad_input, dynamo=(2, 1))
def nullcontext_across_break(x):
    with contextlib.nullcontext(x * 2) as y:
        z = y + 1
        print("in nullcontext")  # BREAK print
        torch.set_grad_enabled(False)  # a mode change inside the block outlives it
        w = z * 3
    out = w, w.requires_grad, torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    return out


@program("nullcontext_or_autocast", 1, 0, inputs=_grad_input, dynamo=(1, 0))
def nullcontext_or_autocast(x, amp=False):
    with torch.autocast("cpu") if amp else contextlib.nullcontext():
        y = x.sin()
    with contextlib.nullcontext(enter_result=y) as z:
        return z * 2, torch.is_grad_enabled()


def _autocast_inputs():
    return (rand(4, 8), rand(8, 8, seed=1))


# The block is traced: its casts are nodes of the first graph, which leaves CPython inside the
# block (autocast on) for the print and the resume; the resume is traced under that state and its
# exit of the block restores it.
@program("autocast_across_break", 2, 1, inputs=_autocast_inputs, rtol=2e-2, atol=2e-2, dynamo=(2, 1))
def autocast_across_break(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        print("autocast", y.dtype)  # BREAK print
        z = y @ w
    return z.float(), y.dtype, z.dtype, (z + 1).dtype, torch.is_autocast_enabled("cpu")


@program("autocast_print_in_block", 2, 1, inputs=_autocast_inputs, rtol=2e-2, atol=2e-2, dynamo=(2, 1))
def autocast_print_in_block(x, w):
    h = torch.relu(x @ w)
    with torch.amp.autocast("cpu", dtype=torch.bfloat16):
        a = torch.nn.functional.linear(h, w)
        print("inside", a.dtype, torch.is_autocast_enabled("cpu"))  # BREAK print
        b = torch.cat([a, h], dim=-1)
        c = torch.nn.functional.mse_loss(a, h)
    return a.float(), b, c, b.dtype, c.dtype, (h @ w).dtype


@program("autocast_nested_disabled", 2, 1, inputs=_autocast_inputs, rtol=2e-2, atol=2e-2, dynamo=(2, 1))
def autocast_nested_disabled(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a = x @ w
        with torch.autocast("cpu", enabled=False):
            b = x @ w
            print("disabled", b.dtype, torch.is_autocast_enabled("cpu"))  # BREAK print
            c = a.float() @ w
        d = c @ w
        with torch.autocast("cpu", dtype=torch.float16):
            e = d @ w
    return a.float(), b, c, d.float(), e.float(), [t.dtype for t in (a, b, c, d, e)]


def _autocast_helper(x, w):
    return torch.softmax(x @ w, dim=-1) * 2


@program("autocast_helper_called_under_it", 1, 0, inputs=_autocast_inputs, rtol=2e-2, atol=2e-2, dynamo=(1, 0))
def autocast_helper_called_under_it(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = _autocast_helper(x, w)
    return y.float(), y.dtype, _autocast_helper(x, w).dtype


EVENTS = []


class Recorder:
    """A user context manager that records its enter and exit in EVENTS."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        EVENTS.append(("enter", self.name))
        return self

    def __exit__(self, *exc):
        EVENTS.append(("exit", self.name))
        return False


def _events_state(target):
    return list(EVENTS)


def _events_reset(target):
    EVENTS.clear()


# The Recorder is constructed and entered in the trace (its __enter__/__exit__ inlined, their
# appends to EVENTS replayed); only the prints break, and the bound __exit__ crosses them.
@program("user_cm_across_break", 2, 1, inputs=x34, state=_events_state, reset=_events_reset, dynamo=(0, -1))
def user_cm_across_break(x):
    y = x + 1
    with Recorder("outer"):  # BREAK
        y = y * 2
        print("inside; events so far:", EVENTS)  # BREAK print
        y = y - 3
    EVENTS.append(("after", len(EVENTS)))
    return y


# The Recorder is constructed and entered in the trace (its __enter__/__exit__ inlined, their
# appends to EVENTS replayed); only the prints break, and the bound __exit__ crosses them.
@program("user_cm_nested_two_breaks", 3, 2, inputs=x34, state=_events_state, reset=_events_reset, dynamo=(0, -1))
def user_cm_nested_two_breaks(x):
    y = x.cos()
    with Recorder("a"):  # BREAK
        with Recorder("b"):  # BREAK
            y = y + 1
            print("inside both", EVENTS)  # BREAK print
            y = y * 2
        print("inside a only", EVENTS)  # BREAK print
        y = y - 1
    return y, len(EVENTS)


# The Recorder is constructed and entered in the trace (its __enter__/__exit__ inlined, their
# appends to EVENTS replayed); only the prints break, and the bound __exit__ crosses them.
@program("user_cm_with_no_grad", 2, 1, inputs=_grad_input, state=_events_state, reset=_events_reset, dynamo=(0, -1))
def user_cm_with_no_grad(x):
    with Recorder("r"), torch.no_grad():  # BREAK
        y = x * 2
        print("both active", EVENTS)  # BREAK print
        y = y + 1
    return y, y.requires_grad, x.requires_grad
