"""Ember's public API: compile, explain, stats, reset, disable, Unsupported, InternalError (DESIGN.md)."""
import contextlib
import dataclasses
import functools
from builtins import compile as builtins_compile
import logging
import sys
import threading
import warnings

from . import options as _options

_log = logging.getLogger("ember")


class Unsupported(RuntimeError):
    """Raised under fullgraph=True when a frame cannot be captured; names the reason and the line."""


class InternalError(RuntimeError):
    """Raised under strict (options={"strict": True} or EMBER_STRICT=1) when Ember failed on a frame or
    graph -- a bug in Ember, not a limitation it reports: `stage` names the pipeline step that threw,
    "compile" (the C++ compiler driver) or "trace" (the frontend), `message` the error. Without strict
    the graph (or frame) runs eagerly and a warning names it; stats()["backend_errors"] counts the
    backend's."""

    def __init__(self, stage, message, where=""):
        super().__init__(f"ember: internal error in {stage}{where}: {message}")
        self.stage = stage
        self.message = message


def _core():
    from . import _C
    return _C


# ---------------------------------------------------------------------------------------------
# Events from the C++ compiler: logging (EMBER_LOGS) and collection for explain().

_collectors = threading.local()
_logged_once = set()
_warned_limit = set()


@contextlib.contextmanager
def collecting_events():
    """Within the block, every compiler event of this thread is appended, as (event, info), to the list
    it yields (explain, and the benchmarks' compile breakdowns and probes)."""
    events = []
    stack = getattr(_collectors, "stack", None)
    if stack is None:
        stack = _collectors.stack = []
    stack.append(events)
    try:
        yield events
    finally:
        stack.remove(events)


def _ensure_log_handler():
    if _log.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("[ember:%(name)s] %(message)s"))
    _log.addHandler(handler)
    _log.setLevel(logging.INFO)


def _warn_once(key, message):
    """One warning per key (a kind and a source site) until ember.reset(); attributed to the
    caller of the listener, as a warning from _listener itself would be."""
    if key not in _warned_limit:
        _warned_limit.add(key)
        warnings.warn(message, stacklevel=3)


def _listener(event, info, strict=False, mode="default"):
    for collector in getattr(_collectors, "stack", ()):
        collector.append((event, info))
    channels = _options.log_channels()
    if channels:
        _ensure_log_handler()
    if event == "compile":
        if "graph" in channels:
            _log.getChild("graph").info("graph for %s (%s:%s):\n%s", info["code"], info["filename"], info["lineno"],
                                        info["graph"])
        if "guards" in channels:
            _log.getChild("guards").info("guards for %s:\n%s", info["code"], info["guards"])
        if "perf" in channels:
            stages = ", ".join(f"{name} {sec * 1e3:.2f} ms" for name, sec in info["stage_seconds"])
            _log.getChild("perf").info("traced %s: %d ops in %.2f ms%s", info["code"], info["ops"],
                                       info["seconds"] * 1e3, f"; backend: {stages}" if stages else "")
        if "passes" in channels:
            for step, text in info["step_ir"]:
                _log.getChild("passes").info("after %s (%s):\n%s", step, info["code"], text)
        if info["backend_fallback"] and ("fallbacks" in channels or "schedule" in channels):
            _log.getChild("fallbacks").info("graph of %s runs on the eager executor: %s", info["code"],
                                            info["backend_fallback"])
        if info["cuda_graph_skip"] and "fallbacks" in channels:
            _log.getChild("fallbacks").info("graph of %s runs without CUDA graphs: %s", info["code"],
                                            info["cuda_graph_skip"])
        if "partition" in channels and info["partition"]:
            _log.getChild("partition").info("partition of %s's training graph:\n%s", info["code"], info["partition"])
        if "schedule" in channels and info["loop_ir"]:
            _log.getChild("schedule").info("schedule for %s (%d kernels):\n%s\n%s", info["code"], info["kernels"],
                                           info["schedule"], info["loop_ir"])
        if "output_code" in channels and info["code_text"]:
            _log.getChild("output_code").info("%s for %s:\n%s", info["code_language"], info["code"],
                                              info["code_text"])
        if info["code_language"] == "C++":
            _warn_unbuilt(mode, stacklevel=4)
        site = (info["filename"], info["lineno"])
        if info["backend_error"]:
            where = f" compiling {info['code']} ({info['filename']}:{info['lineno']})"
            if strict:
                raise InternalError(info["backend_error_stage"], info["backend_error"], where)
            _warn_once(("backend_error", *site), f"ember: internal error in {info['backend_error_stage']}{where}: "
                       f"{info['backend_error']}; that graph runs on the eager executor (a bug in Ember: please "
                       f"report it)")
        if info["codegen_failed"]:
            _warn_once(("codegen", *site), f"ember: the C++ generated for {info['code']} ({info['filename']}:"
                       f"{info['lineno']}) did not compile; that graph runs on the eager executor. "
                       f"{info['backend_fallback']}")
        if "graph_breaks" in channels:
            for note in info["notes"]:
                if ("note", note) not in _logged_once:
                    _logged_once.add(("note", note))
                    _log.getChild("graph_breaks").info("in %s: %s", info["code"], note)
    elif event == "graph_break":
        key = ("break", info["filename"], info["lineno"])
        if "graph_breaks" in channels and key not in _logged_once:
            _logged_once.add(key)
            _log.getChild("graph_breaks").info("graph break in %s at %s:%s: %s\n    %s", info["code"], info["filename"],
                                               info["lineno"], info["reason"],
                                               _source_line(info["filename"], info["lineno"]))
    elif event == "fallback":
        key = (info["filename"], info["lineno"], info["reason"])
        if ("fallbacks" in channels or "graph_breaks" in channels) and key not in _logged_once:
            _logged_once.add(key)
            _log.getChild("fallbacks").info("%s runs eagerly: %s (%s:%s)", info["code"], info["reason"],
                                            info["filename"], info["lineno"])
        if info["internal_error"]:
            where = f" tracing {info['code']} ({info['filename']}:{info['lineno']})"
            if strict:
                raise InternalError("trace", info["reason"], where)
            _warn_once(("trace_error", info["filename"], info["lineno"]),
                       f"ember: {info['reason']}{where}; that frame runs eagerly (a bug in Ember: please report it)")
    elif event == "recompile":
        if "recompiles" in channels:
            _log.getChild("recompiles").info("recompiling %s: guard failed: %s", info["code"], info["guard"])
    elif event == "cache_limit":
        _warn_once((info["filename"], info["lineno"]),
                   f"ember: {info['code']} ({info['filename']}:{info['lineno']}) was recompiled {info['limit']} times "
                   f"and now runs eagerly; the guard that kept failing: {info['guard']}")


# ---------------------------------------------------------------------------------------------
# compile

def _table():
    """The torch table, or the pure-Python one where torch is not installed."""
    try:
        from .ops import table
    except ModuleNotFoundError as e:
        if e.name != "torch":
            raise
        from .python_table import table
    return table


def _new_compiler(backend, mode, dynamic, fullgraph, options):
    table = _table()
    opts = _options.compile_options(backend, mode, dynamic, fullgraph, options)
    listener = functools.partial(_listener, strict=_options.strict(options), mode=mode)
    return _core().Compiler(opts, table, listener, Unsupported)


def _compiled_callable(fn, compiler):
    C = _core()
    compiled = C.CompiledFunction(fn, compiler)
    try:
        functools.update_wrapper(compiled, fn)
    except (AttributeError, TypeError):
        pass
    return compiled


def _make_optimized_module_class():
    import torch

    class OptimizedModule(torch.nn.Module):
        """A module whose calls run compiled; attributes and state come from the original."""

        def __init__(self, mod, compiled):
            super().__init__()
            self._orig_mod = mod
            object.__setattr__(self, "_ember_compiled", compiled)

        def __call__(self, *args, **kwargs):
            return self._ember_compiled(*args, **kwargs)

        def forward(self, *args, **kwargs):
            return self._ember_compiled(*args, **kwargs)

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self._modules["_orig_mod"], name)

    return OptimizedModule


_optimized_module_class = None

# The frame compiled for a module: a small function whose only job is `mod(*args, **kwargs)`.
# Tracing it inlines Module.__call__ -> forward (guarded: no hooks), so torch.nn's own forward
# methods are captured too. Its code lives in no file of torch or Ember, which the hook skips.
_ENTRY_SOURCE = """
def make_entry(mod):
    def module_call(*args, **kwargs):
        return mod(*args, **kwargs)
    return module_call
"""
_entry_namespace = {}
exec(builtins_compile(_ENTRY_SOURCE, "<ember module call>", "exec"), _entry_namespace)
_make_module_entry = _entry_namespace["make_entry"]


# What the settings without a CPU meaning will do, said once per process (until ember.reset()): the
# modes when a graph is compiled to C++ (CPU graphs; GPU graphs act on them), dynamic at compile().
_UNBUILT = {
    "reduce-overhead": "ember.compile(mode='reduce-overhead') replays graphs on CUDA as CUDA graphs; graphs on "
                       "the CPU get the same CPU code as 'default'",
    "max-autotune": "ember.compile(mode='max-autotune') generates the same CPU code as 'default': it searches "
                    "kernel configurations and replays CUDA graphs for graphs on CUDA devices only",
    "max-autotune-no-cudagraphs": "ember.compile(mode='max-autotune-no-cudagraphs') generates the same CPU code as "
                                  "'default': it searches kernel configurations for graphs on CUDA devices only",
}
_warned_unbuilt = set()


def _warn_unbuilt(mode, stacklevel=3):
    if mode in _UNBUILT and mode not in _warned_unbuilt:
        _warned_unbuilt.add(mode)
        warnings.warn(_UNBUILT[mode], stacklevel=stacklevel)


def _prestart_triton_workers(backend, options):
    """With CUDA in use (or triton_build_only), Triton's compile workers start now and boot while the
    first graph is traced (python/ember/_triton/compile.py, prestart) instead of when its kernels
    are ready to compile."""
    torch = sys.modules.get("torch")
    cuda = torch is not None and torch.cuda.is_initialized()
    if backend != "ember" or not (cuda or (options or {}).get("triton_build_only")):
        return
    import importlib.util
    if importlib.util.find_spec("triton") is not None:
        from ._triton import compile as triton_compile
        triton_compile.prestart()


def compile(model=None, *, backend="ember", mode="default", dynamic=None, fullgraph=False, options=None):
    """Compile a function or an nn.Module (like torch.compile); usable as a decorator."""
    if model is None:
        return functools.partial(compile, backend=backend, mode=mode, dynamic=dynamic, fullgraph=fullgraph,
                                 options=options)
    if not callable(model):
        raise TypeError(f"ember.compile expects a function or an nn.Module, got {type(model).__name__}")
    compiler = _new_compiler(backend, mode, dynamic, fullgraph, options)
    _prestart_triton_workers(backend, options)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(model, torch.nn.Module):
        global _optimized_module_class
        if _optimized_module_class is None:
            _optimized_module_class = _make_optimized_module_class()
        return _optimized_module_class(model, _core().CompiledFunction(_make_module_entry(model), compiler))
    if torch is not None and "torch.optim" in sys.modules:
        from . import optim
        if optim.is_optimizer_step(model):
            return optim.CompiledStep(model, functools.partial(_compiled_callable, compiler=compiler),
                                      functools.partial(_listener, "fallback", strict=_options.strict(options)),
                                      Unsupported if fullgraph else None)
    return _compiled_callable(model, compiler)


# ---------------------------------------------------------------------------------------------
# explain, stats, reset, disable

@dataclasses.dataclass
class BreakReason:
    """A graph break, or a frame that runs eagerly: why, and the user's line."""
    reason: str
    filename: str
    lineno: int
    source: str = ""  # the text of that line, stripped


def _source_line(filename, lineno):
    import linecache
    return linecache.getline(filename, lineno).strip() if lineno and lineno > 0 else ""


@dataclasses.dataclass
class ExplainOutput:
    graph_count: int
    graph_break_count: int
    break_reasons: list
    op_count: int
    graphs: list
    guards: list
    compile_seconds: float = 0.0
    # Per graph, what the backend made of it: kernels generated, the planned peak memory of one
    # call in bytes (None without a memory plan), and why it runs on the eager executor ("" if not).
    kernel_counts: list = dataclasses.field(default_factory=list)
    planned_peak_bytes: list = dataclasses.field(default_factory=list)
    backend_fallbacks: list = dataclasses.field(default_factory=list)
    # Per graph under mode="reduce-overhead" or "max-autotune": why it is not replayed as a CUDA graph ("" if it is).
    cuda_graph_skips: list = dataclasses.field(default_factory=list)
    # Per graph: whether it was compiled as a training graph (forward + backward), and the ops its
    # backward differentiates through torch autograd (autograd islands: no derivative rule).
    training: list = dataclasses.field(default_factory=list)
    autograd_islands: list = dataclasses.field(default_factory=list)
    # Per graph: how many shape symbols it kept (dynamic shapes), and why the backend compiled it
    # for the traced sizes instead ("" if it did not).
    symbol_counts: list = dataclasses.field(default_factory=list)
    shape_fallbacks: list = dataclasses.field(default_factory=list)
    # What the trace did differently from running the code line by line where the result is the same
    # (a functools.lru_cache folded or bypassed), over every frame compiled, in order.
    notes: list = dataclasses.field(default_factory=list)

    def __str__(self):
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}",
                 f"Op count: {self.op_count}"]
        lines += [f"Note: {n}" for n in self.notes]
        for r in self.break_reasons:
            lines.append(f"Break: {r.reason} ({r.filename}:{r.lineno})" + (f"\n    {r.source}" if r.source else ""))
        for i, g in enumerate(self.graphs):
            lines.append(g)
            if i < len(self.kernel_counts):
                peak = self.planned_peak_bytes[i]
                lines.append(f"Kernels: {self.kernel_counts[i]}; planned peak memory: "
                             f"{'n/a' if peak is None else f'{peak} bytes'}")
                if self.backend_fallbacks[i]:
                    lines.append(f"Runs on the eager executor: {self.backend_fallbacks[i]}")
                if self.cuda_graph_skips[i]:
                    lines.append(f"Runs without CUDA graphs: {self.cuda_graph_skips[i]}")
                if self.symbol_counts[i]:
                    lines.append(f"Shape symbols: {self.symbol_counts[i]}")
                if self.shape_fallbacks[i]:
                    lines.append(f"Compiled for the traced sizes: {self.shape_fallbacks[i]}")
                if self.training[i]:
                    islands = self.autograd_islands[i]
                    lines.append("Training graph: compiled forward and backward" +
                                 (f"; through torch autograd (no derivative rule): {', '.join(islands)}" if islands else ""))
        return "\n".join(lines)


def explain(fn, **compile_kwargs):
    """explain(fn)(*args, **kwargs) compiles fn afresh, runs it once and reports what was captured."""

    def run(*args, **kwargs):
        with collecting_events() as events:
            compile(fn, **compile_kwargs)(*args, **kwargs)
        compiles = [info for event, info in events if event == "compile"]
        # A segment of a frame with no tensor op compiles to no graph (as in Dynamo).
        graphs = [info for info in compiles if info["ops"] > 0]
        breaks = [BreakReason(info["reason"], info["filename"], info["lineno"],
                              _source_line(info["filename"], info["lineno"]))
                  for event, info in events if event in ("graph_break", "fallback")]
        return ExplainOutput(
            graph_count=len(graphs),
            graph_break_count=len(breaks),
            break_reasons=breaks,
            op_count=sum(info["ops"] for info in graphs),
            graphs=[info["graph"] for info in graphs],
            guards=[info["guards"] for info in graphs],
            compile_seconds=sum(info["seconds"] for info in compiles),
            kernel_counts=[info["kernels"] for info in graphs],
            planned_peak_bytes=[info["planned_peak_bytes"] if info["planned_peak_bytes"] >= 0 else None
                                for info in graphs],
            backend_fallbacks=[info["backend_fallback"] for info in graphs],
            cuda_graph_skips=[info["cuda_graph_skip"] for info in graphs],
            training=[bool(info["partition"]) and not info["backend_fallback"] for info in graphs],
            autograd_islands=[list(info["autograd_islands"]) for info in graphs],
            symbol_counts=[info["symbols"] for info in graphs],
            shape_fallbacks=[info["shape_fallback"] for info in graphs],
            notes=[note for info in compiles for note in info["notes"]],
        )

    return run


def stats():
    """Counters since the last ember.reset()."""
    return dict(_core().stats())


def reset():
    """Forget every compiled frame and zero the counters."""
    C = _core()
    C.clear_all_caches()
    C.reset_stats()
    _logged_once.clear()
    _warned_limit.clear()
    _warned_unbuilt.clear()


def disable(fn):
    """Run `fn` without compiling it or anything it calls."""
    C = _core()

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return C.call_disabled(fn, args, kwargs)

    wrapper._ember_disabled = True
    return wrapper


def _mark_dims(t, dims, attribute):
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a tensor, got {type(t).__name__}")
    dims = [dims] if isinstance(dims, int) else list(dims)
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool) or not -t.dim() <= d < t.dim():
            raise IndexError(f"dimension {d!r} out of range for a tensor of {t.dim()} dimensions")
    marked = set(getattr(t, attribute, ()))
    marked.update(d % t.dim() for d in dims)
    setattr(t, attribute, marked)


def mark_dynamic(t, dims):
    """Compile `t`'s dimension(s) `dims` with symbolic sizes from the first call on (sizes 0 and 1
    still specialize). Uses the attribute torch._dynamo.mark_dynamic sets, so either works."""
    _mark_dims(t, dims, "_dynamo_dynamic_indices")


def mark_static(t, dims):
    """Keep `t`'s dimension(s) `dims` static even when they change between calls (a recompile per size)."""
    _mark_dims(t, dims, "_dynamo_static_indices")
