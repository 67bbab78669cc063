"""The parity corpus registry: every program Ember must run exactly like eager PyTorch.

A Case names a program (a function, or a factory of an nn.Module), an input factory taking a
torch.Generator (call i of a run draws from seed i: same shapes, new values, so a graph that
baked in input values is caught), and what is expected of the counters:
  - "strict":   the frame is captured once and reused: frames_compiled == 1, cache_hits == 2,
                recompiles == 0, eager_frames == 0, graph_breaks == 0 after three calls;
  - "captured": captured on every call but a guarded value legitimately changes between calls
                (e.g. `self.steps += 1` on an int attribute): eager_frames == 0, graph_breaks == 0,
                frames_compiled + cache_hits == 3;
  - "eager":    the program has a construct Ember leaves to CPython: a graph break or a frame run eagerly.
  - "any":      only results are checked (for constructs the issue does not name, e.g. module hooks).
`fallback_marker` names a comment on the line expected in explain()'s break reason.
`state(target)` snapshots side effects after each call (target: the module, or None for
functions); `reset()` restores globals before each sequence of calls.
"""
import dataclasses
from typing import Any, Callable, Optional

COUNTER_POLICIES = ("strict", "captured", "eager", "any")


@dataclasses.dataclass
class Case:
    name: str
    fn: Callable
    inputs: Callable
    module: bool = False
    counters: str = "strict"
    state: Optional[Callable] = None
    reset: Optional[Callable] = None
    rtol: Optional[float] = None
    atol: Optional[float] = None
    grad: bool = False          # also compare parameter/input gradients after out.sum().backward()
    fallback_marker: Optional[str] = None
    note: str = ""

    def __post_init__(self):
        if self.counters not in COUNTER_POLICIES:
            raise ValueError(f"case {self.name}: counters must be one of {COUNTER_POLICIES}, got {self.counters!r}")
        if self.counters == "eager" and self.fallback_marker is None:
            raise ValueError(f"case {self.name}: an eager case names its fallback line with fallback_marker")


CASES: dict = {}


def register(case: Case) -> Case:
    if case.name in CASES:
        raise ValueError(f"duplicate parity case name {case.name!r}")
    CASES[case.name] = case
    return case


def case(name=None, *, inputs, module=False, **kwargs) -> Callable[[Any], Any]:
    """Decorator: registers a function, or (module=True) a zero-argument nn.Module factory or class."""

    def deco(fn):
        register(Case(name=name or fn.__name__, fn=fn, inputs=inputs, module=module, **kwargs))
        return fn

    return deco


def module_case(name, factory, *, inputs, **kwargs):
    register(Case(name=name, fn=factory, inputs=inputs, module=True, **kwargs))
