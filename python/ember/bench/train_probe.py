"""A compiler's first training step(s) in a fresh process: the `train` suite's cold and warm compile times.

    python -m ember.bench.train_probe '{"workload": "gpt2", "compiler": "ember", "quick": false, "device": "cpu",
                                        "dtype": "float32", "adamw": false}'

The suite starts this module once with empty cache directories (cold) and once more with the same ones (warm);
it sets EMBER_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR (fresh.py), and OMP_NUM_THREADS is the
suite's. In here: build the workload (same seeds as the suite's process), run eager steps until torch's lazy
initialisation is done and time a few, then compile and time the first compiled step(s) (train_step.first_steps:
two with AdamW, whose first step creates the optimizer's state):
    compile_s = first compiled step(s) - as many of the fastest eager step
Everything the compiler does before the step's results exist counts: imports, capture of the forward, the joint
graph and the partition, code generation of both graphs and the optimizer step, the C++ / Triton compiles,
cache loads.

The last line of stdout is `EMBER_BENCH_PROBE <json>` (fresh.py); a failure is reported in that JSON's "error".
"""
import copy
import sys

from . import fresh

EAGER_STEPS = 3


def probe(config):
    import torch

    from . import timing, train_step, train_workloads
    from .compilers import check_captured, lookup

    device, adamw = config["device"], config["adamw"]
    compiler = lookup(config["compiler"])
    workload = train_workloads.build(config["workload"], config["quick"], device, getattr(torch, config["dtype"]))
    twin = copy.deepcopy(workload.model)
    eager = train_step.make_runner(None, workload.model, workload.args, adamw, device)
    eager_s = timing.measure({"eager": lambda: train_step.phases(eager)}, warmup=2, repeats=EAGER_STEPS,
                             calls=1)["eager"].min
    runner = train_step.make_runner(compiler, twin, workload.args, adamw, device)
    steps = train_step.first_steps(adamw)
    first_s, _ = timing.time_first_call(lambda: [train_step.phases(runner) for _ in range(steps)])
    check_captured(compiler, compiler.counters())
    return {"compile_s": first_s - steps * eager_s, "first_call_s": first_s, "eager_call_s": eager_s, "error": None}


def main(argv):
    return fresh.probe_main(argv, probe, "python -m ember.bench.train_probe JSON")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
