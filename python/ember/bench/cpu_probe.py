"""A compiler's first call in a fresh process: the `cpu` suite's cold and warm compile times.

    python -m ember.bench.cpu_probe '{"workload": "softmax", "compiler": "ember", "quick": false, "threads": 2}'

The suite starts this module once with empty cache directories (cold) and once more with the same
directories (warm); it sets EMBER_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR and OMP_NUM_THREADS. In here: build the
workload (same seeds as the suite's process), run it eagerly until torch's own lazy initialisation is done
and time a few single eager calls, then compile and time the first compiled call.
    compile_s = first compiled call - fastest single eager call
The fastest eager call, not the median, so that a slow eager sample on a busy machine cannot make a
compiler look faster to compile than it is.
Everything the compiler does before the program's result exists counts: its imports, capture, code
generation, the C++ compiler, loading from its cache. The growth of the resident set during that first
call is reported too (memory.py): the compiler's own footprint, which the suite's peak-memory column
leaves out.

The last line of stdout is `EMBER_BENCH_PROBE <json>` (fresh.py); a failure is reported in that JSON's "error"
(and the process exits 1), so the suite can record it and carry on.
"""
import sys

from . import fresh

EAGER_CALLS = 5


def probe(config):
    import torch

    from . import cpu_workloads, memory, timing
    from .compilers import COMPILERS, check_captured

    torch.set_num_threads(config["threads"])
    compiler = COMPILERS[config["compiler"]]
    workload = cpu_workloads.build(config["workload"], config["quick"])
    fn, args = workload.fn, workload.args
    with torch.no_grad():
        eager = timing.measure({"eager": lambda: fn(*args)}, warmup=2, repeats=EAGER_CALLS, calls=1)["eager"]
        compiled = compiler.compile(fn)
        first = {}

        def first_call():
            first["s"], _ = timing.time_first_call(lambda: compiled(*args))

        footprint = memory.peak_delta(first_call, 1)
        check_captured(compiler, compiler.counters())
    return {"compile_s": first["s"] - eager.min, "first_call_s": first["s"], "eager_call_s": eager.min,
            "first_call_rss_bytes": footprint["bytes"], "memory_method": footprint["method"], "error": None}


def main(argv):
    return fresh.probe_main(argv, probe, "python -m ember.bench.cpu_probe JSON")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
