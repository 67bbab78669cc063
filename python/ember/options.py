"""Options: the one place Ember reads its settings and the environment.

`ember.compile()` arguments and the `EMBER_LOGS` / `EMBER_CACHE_DIR` / `EMBER_STRICT` variables are
parsed here into the typed `_C.CompileOptions` (src/support/options.h) that the C++ core receives.

What each setting does today, on the CPU backend (each setting acts or says it does not):
  - `mode`, as torch.compile's: an unknown mode is a ValueError. "reduce-overhead" replays compiled
    graphs on CUDA as CUDA graphs (src/runtime/cuda_graph_runner.h), "max-autotune-no-cudagraphs"
    searches kernel configurations (pipeline/target.h) for graphs on CUDA, and "max-autotune" does
    both; a graph compiled to C++ (on the CPU) gets the same code as
    "default", and the first such graph warns once per process (until ember.reset()) naming what the
    mode does.
  - `dynamic`: None (default), True or False, carried as `_C.Dynamic` for the shape stage. Dynamic
    shapes are not built yet: True warns once per process that every shape is specialized.
  - `EMBER_LOGS`: the channel bits (`_C.LogChannel`, in LOG_CHANNELS order); unknown channels are
    a ValueError. The C++ pipeline reads `perf` and `passes`, the rest are logged by api.py.

`strict` (options={"strict": True}, or EMBER_STRICT=1 for a whole process, as tests/conftest.py
sets it): an internal error of a backend stage -- an exception escaping a stage, a bug -- raises
ember.InternalError instead of running the graph on the eager executor. Fallbacks by design (a
graph needing gradients, a non-CPU device, only extern calls, generated C++ that does not compile)
are not internal errors and never raise.

`verify` (options={"verify": True}; on by default under strict, so in every test): the IR verifier runs
after every pipeline step (docs/pipeline.md), and a step that leaves invalid IR is an internal error
naming that step.

`inject_fault_after` (a pipeline step's name; tests only, like Dynamo's *_TESTING_ONLY settings): the
backend fails after that step as if it had thrown, so the error path (backend_errors, the warning,
strict's InternalError) is tested without depending on a real bug.

`activation_memory_budget` (a number in [0, 1], default 1): for training graphs, how much the partitioner
may save to spare recomputation in the backward. 1 saves the fewest bytes that spare every recomputation
the ban rules forbid; 0 saves only inputs and values that cannot be recomputed (activation checkpointing);
values between make saving a recomputable value dearer (docs/autograd.md).

`fallback_random` (a bool, default False; Inductor's option of that name): dropout in training graphs
draws eager's exact numbers (aten's native_dropout, whose mask the backward reads from saved memory)
instead of Philox streams of one seed per call that the backward recomputes (docs/autograd.md,
"Random ops"). For tests that compare masks with eager's.

`layout_optimization` (a bool, default True; Inductor's option of that name): inference graphs with a chain of
2-d convolutions, on the CPU or CUDA, run them on channels-last activations, which the ops after them keep
(docs/pipeline.md, "channels_last"); False keeps every value in its traced layout.

`triton_interpret` (tests): graphs on the CPU run through the GPU backend -- its Triton kernels, in
Triton's interpreter -- instead of the C++ backend. Slow; it tests the Triton code generator and runtime
without a GPU. Triton decides whether `triton.language` itself is interpreted when it is imported, from
TRITON_INTERPRET, so the option needs TRITON_INTERPRET=1 in the environment from the process's start
(a ValueError says so otherwise).

`triton_build_only` (developer path): graphs on the CPU are compiled by the GPU backend for CUDA --
their Triton kernels built to sm_90 cubins through the cubin cache, as on the H200 -- and then run on
the eager executor (a fallback whose reason says so). It measures and tests the GPU backend's compile
time on a machine without a GPU (`python -m ember.bench dynamic --device cuda-build`).
"""
import os
import sys

BACKENDS = ("ember", "eager")
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# Bit i is channel i: the same order as LogChannel in src/support/options.h (tests/api/test_logs.py
# checks that they agree); a new channel goes at the end of both.
LOG_CHANNELS = ("graph", "graph_breaks", "guards", "recompiles", "fallbacks", "schedule", "output_code", "perf",
                "passes", "partition")
_OPTION_KEYS = {"cache_limit", "verify_shape_rules", "verify", "strict", "inject_fault_after", "triton_interpret",
                "triton_build_only", "activation_memory_budget", "fallback_random", "layout_optimization"}


def parse_logs(text):
    """EMBER_LOGS value -> (bitmask, set of channel names). Unknown channels are an error."""
    names = {p.strip() for p in (text or "").split(",") if p.strip()}
    unknown = names - set(LOG_CHANNELS) - {"all"}
    if unknown:
        raise ValueError(f"EMBER_LOGS: unknown channel(s) {sorted(unknown)}; known: {', '.join(LOG_CHANNELS)}, all")
    if "all" in names:
        names = set(LOG_CHANNELS)
    mask = 0
    for i, name in enumerate(LOG_CHANNELS):
        if name in names:
            mask |= 1 << i
    return mask, names


def compile_options(backend, mode, dynamic, fullgraph, options):
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"ember.compile: unknown backend {backend!r}; expected one of {BACKENDS}")
    if mode is None:
        mode = "default"
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"ember.compile: unknown mode {mode!r}; expected one of {MODES}")
    if dynamic not in (None, True, False):
        raise ValueError(f"ember.compile: dynamic must be None, True or False, got {dynamic!r}")
    options = dict(options or {})
    unknown = set(options) - _OPTION_KEYS
    if unknown:
        raise ValueError(f"ember.compile: unknown option(s) {sorted(unknown)}; known: {sorted(_OPTION_KEYS)}")
    cache_limit = options.get("cache_limit", 8)
    if not isinstance(cache_limit, int) or cache_limit < 1:
        raise ValueError(f"ember.compile: cache_limit must be a positive int, got {cache_limit!r}")
    from . import _C
    o = _C.CompileOptions()
    o.backend = getattr(_C.Backend, backend)
    o.mode = getattr(_C.Mode, mode.replace("-", "_"))
    o.dynamic = {None: _C.Dynamic.auto, True: _C.Dynamic.always, False: _C.Dynamic.never}[dynamic]
    o.fullgraph = bool(fullgraph)
    o.cache_limit = cache_limit
    o.logs = parse_logs(os.environ.get("EMBER_LOGS", ""))[0]
    o.verify_shape_rules = bool(options.get("verify_shape_rules", False))
    o.verify_each_step = bool(options.get("verify", strict(options)))
    o.inject_fault_after = str(options.get("inject_fault_after", ""))
    o.triton_interpret = bool(options.get("triton_interpret", False))
    o.triton_build_only = bool(options.get("triton_build_only", False))
    # torch's setting when compile runs (fp32 matmul templates' precision); without torch loaded
    # there are no tensors to multiply.
    torch = sys.modules.get("torch")
    o.allow_tf32 = bool(torch is not None and torch.backends.cuda.matmul.allow_tf32)
    if o.triton_interpret and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError("ember.compile: triton_interpret needs TRITON_INTERPRET=1 in the environment before "
                         "triton is imported (Triton builds its interpreted language at import)")
    budget = options.get("activation_memory_budget", 1.0)
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0.0 <= budget <= 1.0:
        raise ValueError(f"ember.compile: activation_memory_budget must be a number in [0, 1], got {budget!r}")
    o.activation_memory_budget = float(budget)
    o.fallback_random = _bool_option(options, "fallback_random", False)
    o.layout_optimization = _bool_option(options, "layout_optimization", True)
    o.cxx = os.environ.get("CXX") or "g++"
    o.cache_dir = cache_dir()
    o.include_dir = include_dir()
    return o


def _bool_option(options, name, default):
    value = options.get(name, default)
    if not isinstance(value, bool):
        raise ValueError(f"ember.compile: {name} must be a bool, got {value!r}")
    return value


def strict(options):
    """Whether internal errors raise: options["strict"] when given, else EMBER_STRICT (0/1)."""
    options = options or {}
    if "strict" in options:
        if not isinstance(options["strict"], bool):
            raise ValueError(f"ember.compile: strict must be a bool, got {options['strict']!r}")
        return options["strict"]
    env = os.environ.get("EMBER_STRICT", "0")
    if env not in ("0", "1"):
        raise ValueError(f"EMBER_STRICT must be 0 or 1, got {env!r}")
    return env == "1"


def log_channels():
    return parse_logs(os.environ.get("EMBER_LOGS", ""))[1]


def cache_dir():
    return os.environ.get("EMBER_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "ember")


def include_dir():
    """The folder of the headers generated C++ includes: installed beside the package, or, in a
    development tree, src/codegen/cpp/include."""
    here = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(here, "include")
    if os.path.isdir(installed):
        return installed
    return os.path.join(os.path.dirname(os.path.dirname(here)), "src", "codegen", "cpp", "include")
