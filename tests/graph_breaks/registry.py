"""The graph-break corpus registry: programs that Ember must split at their breaks and still run
exactly like eager PyTorch.

A Program names a function (or, with module=True, a zero-argument factory of an nn.Module), an input
factory returning fresh arguments (the same values on every call, so that a value guarded by a
resume function — a float from `.item()`, an int loop counter — matches again on the second call
and that call is a cache hit for every segment), and the counts `ember.explain` must report on a
fresh compile: `graphs` (compiled graphs holding at least one tensor op) and `breaks` (breaks taken
while compiling during that one run), per the rules stated at the top of corpus.py.

`dynamo` records what `torch._dynamo.explain` reports for the same program (graphs, breaks), as
printed by dynamo_counts.py; it is information for the reader, never asserted.

`state(target)` snapshots side effects after a call (target: the module, or None); `reset(target)`
restores globals and module attributes before each call, so both calls start from the same state.

Every line where a break is expected carries a `# BREAK` comment, optionally followed by a word the
break reason must contain (`# BREAK print`): explain()'s reasons must point at such lines.
"""
import dataclasses
import io
import logging
from typing import Callable, Optional

import torch


@dataclasses.dataclass
class Program:
    name: str
    fn: Callable
    inputs: Callable[[], tuple]
    graphs: int
    breaks: int
    dynamo: Optional[tuple] = None
    module: bool = False
    state: Optional[Callable] = None
    reset: Optional[Callable] = None
    rtol: Optional[float] = None
    atol: Optional[float] = None
    # The second call may compile again: a value that crosses the break is guarded by value and
    # differs per call (id()/hash() of a fresh object), so its resume function recompiles each time.
    recompiles_per_call: bool = False
    # Files outside the corpus where explain() may report a break (substrings of the filename): frames
    # of libraries that the hook captures on their own (a namedtuple's `<string>` __new__, NumPy's
    # Python code), each a missed optimisation noted at the program.
    foreign_breaks: tuple = ()

    def __post_init__(self):
        if self.graphs < 0 or self.breaks < 0:
            raise ValueError(f"program {self.name}: counts must be non-negative")
        if not callable(self.inputs):
            raise ValueError(f"program {self.name}: inputs must be a function returning fresh arguments")

    def make_target(self):
        """A fresh target: the function itself, or a module built from seed 0 (same weights each time)."""
        if not self.module:
            return self.fn
        torch.manual_seed(0)
        return self.fn()


PROGRAMS: dict = {}


def program(name, graphs, breaks, *, inputs, **kwargs):
    """Decorator registering `fn` under `name`; stack several to run one function on several inputs."""

    def deco(fn):
        if name in PROGRAMS:
            raise ValueError(f"duplicate graph-break program name {name!r}")
        PROGRAMS[name] = Program(name=name, fn=fn, inputs=inputs, graphs=graphs, breaks=breaks, **kwargs)
        return fn

    return deco


# ---------------------------------------------------------------------------------------------
# Inputs: drawn from a generator seeded by the caller, so every call sees the same values.

def rand(*shape, seed=0, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g)
    return t.requires_grad_() if requires_grad else t


def x34():
    return (rand(3, 4),)


def pos34():
    """Every element positive: a branch on the sum, mean or max takes the true side."""
    return (rand(3, 4).abs() + 0.1,)


def neg34():
    return (-rand(3, 4).abs() - 0.1,)


# ---------------------------------------------------------------------------------------------
# The logger the logging programs write to: its records land in LOG_BUFFER, which their state reads.

# Made directly, not through logging.getLogger: a logger outside logging's registry gets no handler
# from anyone else (pytest's logging plugin attaches its capture handlers to registered loggers, and
# their frames, outside the standard library, would be compiled too and change between calls).
LOG_BUFFER = io.StringIO()
LOG = logging.Logger("embercorpus", logging.INFO)
LOG.propagate = False
_handler = logging.StreamHandler(LOG_BUFFER)
_handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
LOG.addHandler(_handler)


def log_state(target):
    return LOG_BUFFER.getvalue()


def log_reset(target):
    LOG_BUFFER.seek(0)
    LOG_BUFFER.truncate()
