"""Graph-break corpus, part 4: mutations of the caller's lists and dicts (arguments, globals,
attributes). The trace mutates its model of the container and the real object is brought in place to
its final contents after the graph, in program order with the other side effects and before a break's
glue runs: these programs used to break at every mutation and now run in one graph per segment.
Counting rules: corpus.py's header. Side effects are compared with eager through the arguments after
each call (lists and dicts: contents and key order) and `state`.
"""
import torch
from torch import nn

from .registry import program, rand, x34


# ---------------------------------------------------------------------------------------------
# Lists of the caller

def _list_input():
    return (rand(3, 4), [1, "two", rand(2, seed=1)])


@program("list_methods_one_graph", 1, 0, dynamo=(1, 0), inputs=_list_input)
def list_methods_one_graph(x, xs):
    y = x * 2
    xs.append(y)  # a tensor stored into the caller's list comes from a graph output
    xs.extend([3, 4])
    xs.insert(0, "head")
    last = xs.pop()
    xs.remove("two")
    xs[1] = xs[1] + 10
    del xs[2]
    xs += [last, len(xs)]
    xs[0:1] = ["new head", "second"]
    xs.reverse()
    return y + len(xs)


@program("list_sort_and_clear", 1, 0, dynamo=(1, 0), inputs=lambda: (rand(3, 4), [3, 1, 2], [9, 8]))
def list_sort_and_clear(x, xs, ys):
    xs.sort()
    first = xs[0]
    xs.sort(key=lambda v: -v)  # a lambda as key: used by the trace, not stored
    ys.clear()
    ys.append(first)
    return x * first + xs[0]


# The tensors appended in the loop are graph outputs; the list's earlier items stay the caller's.
@program("list_append_in_loop", 1, 0, dynamo=(1, 0), inputs=lambda: (rand(3, 4), ["start"]))
def list_append_in_loop(x, acc):
    for i in range(3):
        x = x.sin() + i
        acc.append(x)
    return x, len(acc)


# Returned and mutated: the caller gets its own list back, with the new items.
@program("list_mutated_and_returned", 1, 0, dynamo=(1, 0), inputs=lambda: (rand(3, 4), [0]))
def list_mutated_and_returned(x, xs):
    xs.append(x.cos())
    return xs, {"same": xs}


# The caller's list stored into a list the trace builds, then mutated: both show the new item.
@program("list_inside_built_container", 1, 0, dynamo=(1, 0), inputs=lambda: (rand(3, 4), ["a"]))
def list_inside_built_container(x, xs):
    holder = [xs, x + 1]
    xs.append("b")
    holder[0].append("c")
    return holder, len(xs)


HISTORY = []


def _history_state(target):
    return list(HISTORY)


def _history_reset(target):
    HISTORY.clear()
    HISTORY.append("initial")


@program("global_list_one_graph", 1, 0, dynamo=(1, 0), inputs=x34, state=_history_state, reset=_history_reset)
def global_list_one_graph(x):
    HISTORY.append(x.shape[0])
    HISTORY.insert(0, "z")
    y = x.tanh()
    HISTORY.append(len(HISTORY))
    return y, HISTORY[-1]


# ---------------------------------------------------------------------------------------------
# Dicts of the caller: insertion order must come out as eager's

def _dict_input():
    return (rand(3, 4), {"a": 1, "b": 2, "c": 3, "t": rand(2, seed=2)})


@program("dict_methods_one_graph", 1, 0, dynamo=(1, 0), inputs=_dict_input)
def dict_methods_one_graph(x, d):
    d["b"] = 20                 # existing key: keeps its place
    d["new"] = x.sum()          # new key: at the end
    a = d.pop("a")              # popped ...
    d["a"] = a + 100            # ... and inserted again: moves to the end
    d.update({"c": 30, "u": 5}, v=6)
    d.setdefault("b", -1)       # present: no change
    d.setdefault("w", 7)        # absent: added at the end
    del d["u"]
    d |= {"z": 26, "c": 31}
    return x + d["a"], list(d)


@program("dict_clear_then_fill", 1, 0, dynamo=(1, 0), inputs=lambda: (rand(3, 4), {"old": 1, "older": 2}))
def dict_clear_then_fill(x, d):
    n = len(d)
    d.clear()
    d["n"] = n
    d["y"] = x * n
    return d["y"] + 1


CACHE = {}


def _cache_state(target):
    return dict(CACHE)


def _cache_reset(target):
    CACHE.clear()
    CACHE["stale"] = True
    CACHE["hits"] = 0


@program("global_dict_one_graph", 1, 0, dynamo=(1, 0), inputs=x34, state=_cache_state, reset=_cache_reset)
def global_dict_one_graph(x):
    CACHE.pop("stale", None)
    CACHE["hits"] = CACHE["hits"] + 1
    CACHE["mean"] = x.mean()
    return x - CACHE["mean"]


# A list inside the caller's dict: both the inner list and the dict are mutated.
@program("nested_list_in_dict", 1, 0, dynamo=(1, 0), inputs=lambda: (rand(3, 4), {"items": [1], "count": 0}))
def nested_list_in_dict(x, d):
    d["items"].append(x.amax())
    d["items"].append("label")
    d["count"] = len(d["items"])
    inner = d.pop("items")
    d["items"] = inner  # moves to the end; still the caller's inner list
    return x * d["count"]


# ---------------------------------------------------------------------------------------------
# Aliasing: one object reached through two sources is one Var in the trace, and guarded so

def _same_list_twice():
    xs = [1, 2]
    return (rand(3, 4), xs, xs)


@program("alias_same_list_twice", 1, 0, dynamo=(1, 0), inputs=_same_list_twice)
def alias_same_list_twice(x, xs, ys):
    xs.append(3)
    ys.append(len(xs))  # eager: ys is xs, so this sees the 3
    return x + len(ys), ys[-1]


def _list_in_dict_and_arg():
    inner = ["i"]
    return (rand(3, 4), {"inner": inner}, inner)


@program("alias_list_also_in_dict", 1, 0, dynamo=(1, 0), inputs=_list_in_dict_and_arg)
def alias_list_also_in_dict(x, d, inner):
    inner.append("via arg")
    d["inner"].append("via dict")
    d["size"] = len(inner)
    return x * d["size"]


class SharedBuffers(nn.Module):
    """Two attributes holding one list (`self.a is self.b`)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.a = []
        self.b = self.a

    def forward(self, x):
        y = self.lin(x)
        self.a.append("a")
        self.b.append(len(self.a))
        return y * len(self.b)


def _shared_state(m):
    return {"a": list(m.a), "same": m.a is m.b}


def _shared_reset(m):
    m.a.clear()


@program("alias_module_attributes", 1, 0, dynamo=(1, 0), inputs=x34, module=True, state=_shared_state,
         reset=_shared_reset)
def alias_module_attributes():
    return SharedBuffers()


# ---------------------------------------------------------------------------------------------
# Order against other side effects and against breaks

# The print (run in glue) sees the mutations made before it; those after it are the resume
# function's. One break, two graphs.
@program("list_mutation_around_print", 2, 1, dynamo=(2, 1), inputs=lambda: (rand(3, 4), ["start"]))
def list_mutation_around_print(x, log):
    y = x * 2
    log.append(tuple(y.shape))
    log.insert(0, "first")
    print("log at the break:", log)  # BREAK print
    log.pop(0)
    log.append(y.sum())
    return y + len(log)


@program("dict_mutation_around_print", 2, 1, dynamo=(2, 1), inputs=lambda: (rand(3, 4), {"k": 0, "m": 1}))
def dict_mutation_around_print(x, d):
    d["k"] = d.pop("k") + 1  # k moves after m
    y = x.exp()
    print("dict at the break:", list(d.items()))  # BREAK print
    d["after"] = True
    del d["m"]
    return y * d["k"]


# A break inside a loop: each iteration's appends are applied before that iteration's print.
@program("list_mutation_loop_with_print", 1, 2, dynamo=(0, -1), inputs=lambda: (rand(3, 4), []))
def list_mutation_loop_with_print(x, log):
    y = x.relu()
    for i in range(2):
        log.append(i)
        print("iteration", i, log)  # BREAK print
    return y, len(log)


class Holder:
    def __init__(self, items, tag=None):
        self.items = items
        self.tag = tag


class Flag:
    def __init__(self, flag):
        self.flag = flag


# An attribute write after the list mutation: the old list gets the item, the attribute the new
# list; and a store into an item rotated by the trace lands on the object the trace saw there.
@program("mutation_and_attribute_writes", 1, 0, dynamo=(1, 0),
         inputs=lambda: (rand(3, 4), Holder([0]), [Flag(0), Flag(1)]))
def mutation_and_attribute_writes(x, holder, objs):
    old = holder.items
    holder.items.append(x.shape[1])
    holder.items = ["fresh"]
    first = objs.pop(0)
    objs.append(first)
    objs[0].flag = 10  # the object that was objs[1] when the frame started
    holder.tag = len(old)
    return x + 1, old


# dict.popitem takes the last key; the rest keep their order.
@program("dict_popitem", 1, 0, dynamo=(1, 0), inputs=lambda: (rand(3, 4), {"p": 1, "q": 2, "r": 3}))
def dict_popitem(x, d):
    key, value = d.popitem()
    d[key + "2"] = value * 2
    return x * value, list(d)


def _append_helper(log, v):
    log.append(("helper", v.shape[0]))
    return v * 3


# A mutation inside an inlined call is a mutation of the frame's trace.
@program("list_mutation_in_callee", 1, 0, dynamo=(1, 0), inputs=lambda: (rand(3, 4), []))
def list_mutation_in_callee(x, log):
    log.append("caller")
    y = _append_helper(log, x)
    log.append("caller end")
    return y


# A list the frame built crosses the break as a real list; the resume function mutates it as a
# list of its caller (replayed), and returns it.
@program("built_list_across_print", 2, 1, dynamo=(2, 1), inputs=x34)
def built_list_across_print(x):
    acc = [x + 1]
    acc.append("built")
    print("acc has", len(acc))  # BREAK print
    acc.append(x * 2)
    acc.insert(0, "first")
    return acc
