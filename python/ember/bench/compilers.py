"""The compilers a benchmark compares, each with a way to compile, to return to a fresh state, and to count graphs.

Benchmarks are the one place where Ember's code may use torch._dynamo / torch.compile (DESIGN.md): they are
the yardstick. torch._dynamo is imported only when a Dynamo-based compiler is used.

Names (stable: they are JSON keys):
  ember_eager   ember.compile(backend="eager")   capture + Ember's eager executor
  ember         ember.compile(backend="ember")   the full Ember pipeline
  dynamo_eager  torch.compile(backend="eager")   Dynamo capture, FX graph run eagerly
  inductor      torch.compile()                  Dynamo + AOTAutograd + Inductor
A compiler in a mode other than "default" (ember.compile's and torch.compile's `mode`) is named
`<name>-<mode>`, e.g. `inductor-max-autotune`; lookup() resolves such a name.
"""
import dataclasses

from ember.options import MODES


@dataclasses.dataclass(frozen=True)
class Compiler:
    name: str
    label: str
    family: str  # "ember" or "dynamo": which stats() the graph count comes from
    mode: str = "default"

    def in_mode(self, mode):
        """The same compiler called with `mode=mode`."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
        if mode == "default":
            return self
        return dataclasses.replace(self, name=f"{self.name}-{mode}", label=f"{self.label} in mode {mode}", mode=mode)

    def reset(self):
        """Forget everything compiled so far, so the next compile starts as in a fresh process."""
        if self.family == "ember":
            import ember
            ember.reset()
        else:
            import torch._dynamo
            torch._dynamo.reset()
            torch._dynamo.utils.counters.clear()

    def compile(self, fn):
        base = self.name.removesuffix(f"-{self.mode}")
        if base == "ember_eager":
            import ember
            return ember.compile(fn, backend="eager", mode=self.mode)
        if base == "ember":
            import ember
            return ember.compile(fn, backend="ember", mode=self.mode)
        import torch
        if base == "dynamo_eager":
            return torch.compile(fn, backend="eager", mode=self.mode)
        if base == "inductor":
            return torch.compile(fn, mode=self.mode)
        raise ValueError(f"unknown compiler {self.name!r}")

    def counters(self):
        """Graphs built since reset() and, for Ember, the seconds spent tracing."""
        if self.family == "ember":
            import ember
            s = ember.stats()
            return {"graphs": s["graphs"], "graph_breaks": s["graph_breaks"], "eager_frames": s["eager_frames"],
                    "ops_captured": s["ops_captured"], "trace_seconds": s["trace_seconds"]}
        import torch._dynamo
        stats = torch._dynamo.utils.counters["stats"]
        return {"graphs": stats.get("unique_graphs", 0)}


COMPILERS = {
    "ember_eager": Compiler("ember_eager", 'ember.compile(backend="eager")', "ember"),
    "ember": Compiler("ember", 'ember.compile(backend="ember")', "ember"),
    "dynamo_eager": Compiler("dynamo_eager", 'torch.compile(backend="eager")', "dynamo"),
    "inductor": Compiler("inductor", "torch.compile() (Inductor)", "dynamo"),
}


def lookup(name):
    """A registered compiler, or one in a mode (`inductor-max-autotune`); KeyError otherwise."""
    if name in COMPILERS:
        return COMPILERS[name]
    for mode in MODES[1:]:
        base = name.removesuffix(f"-{mode}")
        if base != name and base in COMPILERS:
            return COMPILERS[base].in_mode(mode)
    raise KeyError(f"unknown compiler {name!r}; known: {', '.join(COMPILERS)}, each optionally -<mode>")


def parse_compilers(text):
    """'a,b' -> [Compiler, ...] in the order given; an unknown name is an error that lists the known ones."""
    from .report import parse_names
    return [COMPILERS[n] for n in parse_names(text, COMPILERS, "compiler")]


def check_captured(compiler, counters):
    """Raises when the compiler built no graph: the call ran eagerly, and timing it would measure not compiling."""
    if counters["graphs"] == 0:
        raise RuntimeError(f"{compiler.name} captured no graph; the workload ran eagerly (counters: {counters})")
