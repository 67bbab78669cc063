"""Graph-break corpus, part 3: breaks inside inlined calls (one and two levels deep), breaks while the
stack holds pending values, nn.Modules, closures and locals across a break, side effects before and
after a break (their order is checked by printing the containers at the break, in CPython),
generators consumed by a compiled caller, and recursion. Counting rules: corpus.py's header.
"""
import types

import torch
from torch import nn

from .registry import pos34, program, rand, x34


# ---------------------------------------------------------------------------------------------
# A break inside an inlined call: the outer CALL breaks, the callee's frame is captured on its own

def _helper_print(v):
    w = v * 2
    print("helper")  # BREAK print
    return w + 1


@program("inlined_break_one_level", 4, 2, inputs=x34, dynamo=(4, 3))
def inlined_break_one_level(x):
    # Graphs: [sin] in the frame, [mul] and [add] in the callee, [cos] in the frame's resume.
    a = x.sin()
    b = _helper_print(a)  # BREAK print
    return b.cos()


def _level2(v):
    a = v + 1
    print("level 2")  # BREAK print
    return a * 2


def _level1(v):
    b = v.sin()
    c = _level2(b)  # BREAK print
    return c - 1


@program("inlined_break_two_levels", 6, 3, inputs=x34, dynamo=(6, 5))
def inlined_break_two_levels(x):
    # Each of the three frames breaks once and has a graph before and after its break.
    d = x.cos()
    e = _level1(d)  # BREAK print
    return e.exp()


@program("inlined_helper_called_twice", 3, 3, inputs=x34, dynamo=(3, 2))
def inlined_helper_called_twice(x):
    # The frame breaks at each call (no op before either: no graph). The helper's frame and its resume
    # compile on the first call (graphs [mul], [add]); the second call has the same guards: a hit.
    # The frame's last resume adds: graph 3.
    a = _helper_print(x)  # BREAK print
    b = _helper_print(a)  # BREAK print
    return a + b


def _scaled_print(v, *, scale, shift):
    print("scaling by", scale)  # BREAK print
    return v * scale + shift


@program("inlined_keyword_arguments", 3, 2, inputs=x34, dynamo=(3, 2))
def inlined_keyword_arguments(x):
    a = x.exp()
    b = _scaled_print(a, scale=3.0, shift=x)  # BREAK print
    return b - a


class Accumulator:
    def __init__(self):
        self.calls = 0

    def add(self, t):
        self.calls += 1
        print("adding; calls =", self.calls)  # BREAK print
        return t * 2


@program("object_method_break", 3, 2, inputs=lambda: (rand(3, 4), Accumulator()), dynamo=(3, 2))
def object_method_break(x, acc):
    y = x + 1
    z = acc.add(y)  # BREAK print
    return z + y, acc.calls


# ---------------------------------------------------------------------------------------------
# Breaks while the stack holds pending values

def _print_and_return(v):
    print("pending values wait")  # BREAK print
    return v


@program("pending_binary_operand", 2, 2, inputs=x34, dynamo=(2, 1))
def pending_binary_operand(x):
    # relu's result and torch.sigmoid wait on the stack while _print_and_return runs in CPython; its
    # own frame breaks at its print and its resume only returns (no graph).
    y = torch.relu(x) + torch.sigmoid(_print_and_return(x))  # BREAK print
    return y


@program("pending_argument_list", 2, 2, inputs=x34, dynamo=(2, 1))
def pending_argument_list(x):
    z = torch.cat([x * 2, _print_and_return(x + 1), x - 1], dim=0)  # BREAK print
    return z


@program("pending_keyword_argument", 2, 2, inputs=x34, dynamo=(2, 1))
def pending_keyword_argument(x):
    y = x * 2
    return torch.clamp(y, min=_print_and_return(-0.5), max=0.5)  # BREAK print


@program("pending_method_chain", 2, 2, inputs=x34, dynamo=(1, 0))
def pending_method_chain(x):
    return (x + 1).mul(_print_and_return(2.0)).sum(dim=0)  # BREAK print


@program("pending_tuple_and_dict", 2, 2, inputs=x34, dynamo=(2, 1))
def pending_tuple_and_dict(x):
    return {"a": x.sin(), "b": (x.cos(), _print_and_return(x).tanh())}  # BREAK print


@program("print_inside_argument_list", 2, 1, inputs=x34, dynamo=(2, 1))
def print_inside_argument_list(x):
    # print itself (not a user function) is the breaking call, with sin and cos pending.
    return torch.stack([x.sin(), x.cos()], dim=print("choosing dim") or 0)  # BREAK print


# ---------------------------------------------------------------------------------------------
# nn.Modules. ember.compile(module) compiles an entry frame that calls the module: a break in forward
# is a break at that entry's CALL (no op before it), then forward's own frame is captured (the
# Module.__call__ frames in between are torch's, which the hook skips).

class PrintingMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        print("hidden", tuple(h.shape))  # BREAK print
        return self.fc2(h)


@program("module_forward_print", 2, 2, inputs=x34, module=True, dynamo=(2, 1))
def module_forward_print():
    return PrintingMLP()


class PrintingBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        print("block", tuple(h.shape))  # BREAK print
        return h.relu()


class OuterWithPrintingBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = nn.Linear(4, 4)
        self.block = PrintingBlock()
        self.post = nn.Linear(4, 2)

    def forward(self, x):
        h = self.pre(x)
        h = self.block(h)  # BREAK print
        return self.post(h)


@program("module_submodule_print", 4, 3, inputs=x34, module=True, dynamo=(4, 3))
def module_submodule_print():
    return OuterWithPrintingBlock()


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def _gate(self, h):
        if h.mean() > -100:  # BREAK
            return h * 2
        return h

    def forward(self, x):
        h = self.lin(x)
        return self._gate(h) + 1  # BREAK


@program("module_method_tensor_branch", 4, 3, inputs=x34, module=True, dynamo=(4, 3))
def module_method_tensor_branch():
    # Entry break; forward: [linear], break at the CALL of _gate; _gate's frame: [mean, gt], break at
    # the jump, its resume [mul]; forward's resume [add].
    return Gate()


class CountingLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.calls = 0
        self.seen = []

    def forward(self, x):
        self.calls += 1
        self.seen.append("before")
        y = self.lin(x)
        print("calls:", self.calls, "seen:", self.seen)  # BREAK print
        self.seen.append("after")
        self.last = y.detach() * 1
        return y * 2


def _counting_state(m):
    return {"calls": m.calls, "seen": list(m.seen), "last": m.__dict__.get("last")}


def _counting_reset(m):
    m.calls = 0
    m.seen.clear()
    m.__dict__.pop("last", None)


# Appends to the module's own list are traced and replayed (corpus_mutations.py): the entry frame
# breaks at its CALL of the module (the print inside), forward at the print.
@program("module_attribute_writes", 2, 2, inputs=x34, module=True, state=_counting_state,
         reset=_counting_reset, dynamo=(2, 1))
def module_attribute_writes():
    return CountingLinear()


class PrintingForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        print("global module forward")  # BREAK print
        return y.tanh()


torch.manual_seed(0)
GLOBAL_NET = PrintingForward()


@program("function_calls_global_module", 4, 2, inputs=x34, dynamo=(4, 3))
def function_calls_global_module(x):
    h = x * 2
    return GLOBAL_NET(h) - 1  # BREAK print


# ---------------------------------------------------------------------------------------------
# Closures and locals across a break

@program("closure_after_break", 2, 1, inputs=x34, dynamo=(2, 1))
def closure_after_break(x):
    # apply (made in the trace) crosses the break as a real function with the frame's cells; the
    # resume function inlines it: graphs [mean], [mul, add].
    scale = 3.0
    bias = x.mean()

    def apply(t):
        return t * scale + bias

    print("closure made")  # BREAK print
    return apply(x)


@program("nonlocal_counter_across_break", 2, 1, inputs=x34, dynamo=(2, 1))
def nonlocal_counter_across_break(x):
    # count's cell crosses the break as the same object bump's closure holds: bump's write in
    # the resume function is replayed on it (cell_contents) and seen by the frame.
    count = 0

    def bump():
        nonlocal count
        count += 1

    bump()
    y = x * 2
    print("count", count)  # BREAK print
    bump()
    return y + count, count


@program("local_first_assigned_after_break_true", 2, 1, inputs=lambda: (rand(3, 4), True), dynamo=(2, 1))
@program("local_first_assigned_after_break_false", 2, 1, inputs=lambda: (rand(3, 4), False), dynamo=(2, 1))
def local_first_assigned_after_break(x, flag):
    y = x + 1
    print("flag", flag)  # BREAK print
    if flag:
        w = y * 2
    else:
        w = y - 2
    return w


@program("del_local_before_break", 2, 1, inputs=x34, dynamo=(2, 1))
def del_local_before_break(x):
    tmp = x * 5
    y = tmp + 1
    del tmp
    print("tmp deleted")  # BREAK print
    return y * 2


@program("del_argument_before_break", 2, 1, inputs=x34, dynamo=(2, 1))
def del_argument_before_break(x):
    # The deleted first argument is passed as None and deleted again by the prologue.
    y = x * 2
    del x
    print("argument deleted")  # BREAK print
    return y + 1


@program("many_live_locals", 2, 1, inputs=x34, dynamo=(2, 1))
def many_live_locals(x):
    n, s, t, none, f, b = 3, "abc", (1, 2.5, "z"), None, 1.5, True
    lst = [x, 2]
    d = {"k": x * 2}
    y = x + n
    print("live locals of every kind")  # BREAK print
    return y * f + d["k"] + lst[0] * lst[1], s * n, t, none, b


MODE = "a"


def _mode_state(target):
    return MODE


def _mode_reset(target):
    global MODE
    MODE = "a"


# could be fewer: globals() (a C function Ember does not know) is a break of its own before exec.
@program("global_changed_by_break", 2, 2, inputs=x34, state=_mode_state, reset=_mode_reset, dynamo=(2, 1))
def global_changed_by_break(x):
    # The resume must read MODE after the exec ran, not the value seen when the frame was traced.
    y = x * 2
    exec("MODE = 'b'", globals())  # BREAK
    if MODE == "b":
        return y + 1
    return y - 1


# ---------------------------------------------------------------------------------------------
# Side effects before and after a break: the print at the break shows what was applied by then.

# The mutations of the caller's list are replayed after each graph; the print (in glue) sees the
# first two. Only the print breaks.
@program("list_mutation_order", 2, 1, inputs=lambda: (rand(3, 4), []), dynamo=(2, 1))
def list_mutation_order(x, log):
    log.append("start")
    y = x * 2
    log.append(tuple(y.shape))
    print("log before break:", log)  # BREAK print
    log.append("after")
    log.extend(["x", "y"])
    return y + len(log)


# Item assignment and del on the caller's dict are replayed after each graph; only the print breaks.
@program("dict_mutation_order", 2, 1, inputs=lambda: (rand(3, 4), {"existing": 0}), dynamo=(2, 1))
def dict_mutation_order(x, d):
    d["first"] = 1
    d["shape"] = tuple(x.shape)
    y = x.exp()
    print("dict before break:", d)  # BREAK print
    d["after"] = True
    del d["first"]
    d["n"] = len(d)
    return y * d["n"]


G_VALUE = 0


def _g_state(target):
    return G_VALUE


def _g_reset(target):
    global G_VALUE
    G_VALUE = 0


@program("global_write_order", 2, 1, inputs=x34, state=_g_state, reset=_g_reset, dynamo=(2, 1))
def global_write_order(x):
    global G_VALUE
    G_VALUE = 1
    y = x + G_VALUE
    seen = eval("G_VALUE")  # BREAK   (eval reads the global in CPython: the write must be applied)
    G_VALUE = seen + 10
    return y * seen, G_VALUE


@program("attribute_write_order", 2, 1, inputs=lambda: (rand(3, 4), types.SimpleNamespace(count=0)), dynamo=(2, 1))
def attribute_write_order(x, ns):
    ns.before = "set"
    ns.count = ns.count + 1
    y = x * 2
    print("namespace at break:", ns)  # BREAK print
    ns.after = tuple(y.shape)
    return y - ns.count


# The appends are replayed before each print's glue; each print is a break.
@program("print_interleave_list", 2, 2, inputs=lambda: (rand(3, 4), []), dynamo=(2, 1))
def print_interleave_list(x, log):
    # No op before the first print: the frame has no graph.
    log.append("a")
    print("one", log)  # BREAK print
    log.append("b")
    y = x * 2
    print("two", log)  # BREAK print
    log.append("c")
    return y + 1


HISTORY = []


def _history_state(target):
    return list(HISTORY)


def _history_reset(target):
    HISTORY.clear()


# The global list's mutations are replayed; the print is the only break, and only the segment with
# sin has an op (1 graph).
@program("global_list_order", 1, 1, inputs=x34, state=_history_state, reset=_history_reset, dynamo=(1, 0))
def global_list_order(x):
    HISTORY.append("a")
    y = x.sin()
    print("history", HISTORY)  # BREAK print
    HISTORY.append("b")
    HISTORY.insert(0, "z")
    return y, len(HISTORY)


def _record_then_print(log, v):
    log.append("callee start")
    w = v + 1
    print("callee sees", log)  # BREAK print
    log.append("callee end")
    return w


# The callee's print breaks the caller at its CALL and the callee's own frame at the print; the
# appends in both frames are replayed in order around them.
@program("callee_side_effects_order", 2, 2, inputs=lambda: (rand(3, 4), []), dynamo=(2, 1))
def callee_side_effects_order(x, log):
    # The frame applies "caller start" before its CALL breaks; the callee's frame (run on its own)
    # applies "callee start" before its print; both resumes only append (no op): 2 graphs.
    log.append("caller start")
    y = x * 2
    z = _record_then_print(log, y)  # BREAK
    log.append("caller end")
    return z


# could be fewer: printing a tensor captures a namedtuple's `<string>` __new__ frame, which breaks at
# tuple.__new__ (one more break, outside the corpus).
@program("inplace_input_before_break", 2, 2, inputs=lambda: ((rand(3, 4) * 4).floor(),), dynamo=(2, 1),
         foreign_breaks=("<string>",))
def inplace_input_before_break(x):
    x.mul_(2)
    print("input after mul_:", x)  # BREAK print
    x.add_(1)
    return x


# ---------------------------------------------------------------------------------------------
# Generators consumed by a compiled caller (generator frames themselves run eagerly)

def _powers(x, n):
    p = x
    for _ in range(n):
        yield p
        p = p * x


@program("generator_consumed_whole", 1, 0, inputs=x34, dynamo=(1, 0))
def generator_consumed_whole(x):
    # A generator consumed whole is inlined (docs/interpreter.md): no break.
    total = torch.zeros_like(x)
    for t in _powers(x, 3):
        total = total + t
    return total


def _printing_gen(x):
    for i in range(2):
        print("yielding", i)  # BREAK print
        yield x + i


# could be fewer: making the generator breaks (it cannot run to completion at trace time), then
# list() over the generator object breaks again on the same line: 2 breaks where 1 would do.
@program("generator_with_print", 2, 2, inputs=x34, dynamo=(0, -1))
def generator_with_print(x):
    # The print inside the generator breaks at the CALL consuming it; the generator runs in CPython.
    y = x * 2
    vals = list(_printing_gen(y))  # BREAK print
    return torch.stack(vals).sum(0)


@program("generator_expression_sum", 1, 0, inputs=lambda: ([rand(2, 2, seed=s) for s in range(3)],), dynamo=(1, 0))
def generator_expression_sum(xs):
    return sum(t * 2 for t in xs)


def _halves(x):
    yield x / 2
    yield x / 4


@program("generators_in_loops_list_zip", 1, 0, inputs=x34, dynamo=(1, 0))
def generators_in_loops_list_zip(x):
    total = torch.zeros_like(x)
    for t in _powers(x, 2):
        total = total + t
    for a, b in zip(_powers(x, 2), _halves(x)):
        total = total + a * b
    return total + sum(list(_halves(x)), torch.zeros_like(x)) + tuple(_powers(x, 3))[2]


class _Rows:
    """Iterated through the old sequence protocol: __getitem__ until IndexError."""

    def __init__(self, t):
        self.t = t

    def __getitem__(self, i):
        if i >= self.t.shape[0]:
            raise IndexError(i)
        return self.t[i]


class _Steps:
    """An iterator: __iter__ returns itself, __next__ raises StopIteration."""

    def __init__(self, n):
        self.i = 0
        self.n = n

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.i


class _Pairs:
    """__iter__ is a generator."""

    def __init__(self, t):
        self.t = t

    def __iter__(self):
        yield self.t
        yield self.t * 2


@program("user_iteration_protocols", 1, 0, inputs=x34, dynamo=(1, 0))
def user_iteration_protocols(x):
    y = x.clone()
    for row in _Rows(x):
        y = y + row.sum()
    for k in _Steps(3):
        y = y * k
    a, b = _Pairs(x)
    return y + a - b + len(list(_Rows(x)))


# ---------------------------------------------------------------------------------------------
# Recursion

def _countdown(x, n):
    if n == 0:
        return x
    print("depth", n)  # BREAK print
    return _countdown(x * 2, n - 1) + 1  # BREAK print


@program("recursion_through_breaks", 3, 4, inputs=x34, dynamo=(4, 3))
def recursion_through_breaks(x):
    # Segments: this frame breaks at the call [no op]; _countdown(n=2) at its print [no op]; its
    # resume [mul], breaking at the recursive call; _countdown(n=1) (new guards: n) at its print
    # [no op]; its resume inlines n=0 [mul, add]; n=2's call resume [add]; this frame's resume
    # only returns. 3 graphs, 4 breaks.
    return _countdown(x, 2)  # BREAK print


def _tree_sum(x, n):
    if n == 0:
        return x
    return _tree_sum(x, n - 1) + _tree_sum(x * 2, n - 1)


@program("recursion_inlined", 1, 0, inputs=pos34, dynamo=(1, 0))
def recursion_inlined(x):
    return _tree_sum(x, 2)
