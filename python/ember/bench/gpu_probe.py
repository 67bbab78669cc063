"""A compiler's first call in a fresh process: the `gpu` suite's cold and warm compile times.

    python -m ember.bench.gpu_probe '{"workload": "softmax", "compiler": "inductor-max-autotune", "quick": false,
                                      "device": "cuda"}'

The suite starts this module once with empty cache directories (cold) and once more with the same ones (warm);
it sets EMBER_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR (fresh.py). In here: build the workload
(same seeds as the suite's process), run it eagerly until torch's lazy initialisation (the CUDA context, cuBLAS
handles) is done, time a few single eager calls, then compile and time the first compiled call, each call
followed by a synchronize so that a time is the work done, not the work queued:
    compile_s = first compiled call - fastest single eager call
Everything the compiler does before the result exists counts: imports, capture, code generation, Triton and
C++ compiles, autotuning, CUDA-graph recording, cache loads.

The last line of stdout is `EMBER_BENCH_PROBE <json>` (fresh.py); a failure is reported in that JSON's "error".
"""
import sys

from . import fresh

EAGER_CALLS = 5


def probe(config):
    import torch

    from . import cuda_measure, gpu_workloads, timing
    from .compilers import check_captured, lookup

    device = config["device"]
    compiler = lookup(config["compiler"])
    workload = gpu_workloads.build(config["workload"], config["quick"], device)

    def call(f):
        out = f(*workload.args)
        cuda_measure.synchronize(device)
        return out

    with torch.no_grad():
        eager = timing.measure({"eager": lambda: call(workload.fn)}, warmup=2, repeats=EAGER_CALLS, calls=1)["eager"]
        compiled = compiler.compile(workload.fn)
        first_s, _ = timing.time_first_call(lambda: call(compiled))
        check_captured(compiler, compiler.counters())
    return {"compile_s": first_s - eager.min, "first_call_s": first_s, "eager_call_s": eager.min, "error": None}


def main(argv):
    return fresh.probe_main(argv, probe, "python -m ember.bench.gpu_probe JSON")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
