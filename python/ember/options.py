"""Options: the one place Ember reads its settings and the environment.

`ember.compile()` arguments and the `EMBER_LOGS` / `EMBER_CACHE_DIR` variables are parsed here into
one plain dict that the C++ core receives as its CompileOptions.
"""
import os

BACKENDS = ("ember", "eager")
MODES = ("default", "reduce-overhead", "max-autotune")
LOG_CHANNELS = ("graph", "graph_breaks", "guards", "recompiles", "fallbacks", "schedule", "output_code", "perf", "passes")
_OPTION_KEYS = {"cache_limit", "verify_shape_rules", "verify"}


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
    if mode not in MODES:
        raise ValueError(f"ember.compile: unknown mode {mode!r}; expected one of {MODES}")
    options = dict(options or {})
    unknown = set(options) - _OPTION_KEYS
    if unknown:
        raise ValueError(f"ember.compile: unknown option(s) {sorted(unknown)}; known: {sorted(_OPTION_KEYS)}")
    cache_limit = options.get("cache_limit", 8)
    if not isinstance(cache_limit, int) or cache_limit < 1:
        raise ValueError(f"ember.compile: cache_limit must be a positive int, got {cache_limit!r}")
    mask, _ = parse_logs(os.environ.get("EMBER_LOGS", ""))
    return {
        "backend": backend,
        "mode": mode,
        "dynamic": bool(dynamic),
        "fullgraph": bool(fullgraph),
        "cache_limit": cache_limit,
        "logs": mask,
        "verify_shape_rules": bool(options.get("verify_shape_rules", False)),
        "verify_each_step": bool(options.get("verify", False)),
        "cxx": os.environ.get("CXX") or "g++",
        "cache_dir": cache_dir(),
        "include_dir": include_dir(),
    }


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
