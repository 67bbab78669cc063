"""Suite `cpu`: eager PyTorch, Ember and torch.compile (Inductor) on CPU workloads, side by side in one run.

Workloads (cpu_workloads.py has the sizes): the seed block gelu(x @ W + b, tanh) + r in float32 and
bfloat16, its pointwise part alone, layer_norm(x + r), rms_norm, softmax, a GELU MLP, a nanoGPT block, a
conv-bn-relu stack; integer index patterns (a causal-masked softmax, an arange position add, a tril mask
multiply); and pieces of real models (causal attention, a pre-norm GELU MLP block, Llama's RMSNorm, BERT's
embeddings, cross-entropy); all under torch.no_grad(), modules in eval().

Columns, per workload and compiler:
  time        median per-call time of samples interleaved across eager and every compiler (timing.py)
  speed-up    eager median / compiler median; a geometric mean over the workloads closes the table
  cold/warm   compile time in a fresh process (cpu_probe.py): first compiled call - eager call, with empty
              cache directories (cold), then again in another fresh process with the same ones (warm)
  memory      peak resident growth over a few calls after the first (memory.py): the program's buffers
  error       max |output - float64 reference|, the reference being the same program run eagerly on
              float64 copies of its weights and inputs; eager's own error is the yardstick
  GB/s        memory-bound workloads only: inputs + output bytes (each moved once) / median time, next to
              this machine's copy bandwidth measured in the same run (torch copy_ and numpy's memcpy of a
              large float32 buffer, counting its read and its write; the larger is the reference)

Targets (issue 3), printed as met / not met: Ember at least as fast as Inductor on every memory-bound
workload and on the geometric mean of all; Ember's cold compile <= 1/3 of Inductor's and warm <= 1/5 (sums
over the workloads); softmax and layer_norm at >= 70% of the copy bandwidth; and, for the reader, Ember's
error <= 2x eager's. A compiler that fails on a workload is recorded in its row; the suite carries on and
exits 1 at the end. It does the same for a wrong output: one that differs from eager's beyond
torch.testing.assert_close's tolerances *and* is further than 2x eager's error from the float64 reference.
An output that differs from eager's by being more accurate (Inductor's bfloat16 seed block rounds once where
eager rounds after every op) is not wrong.
"""
import os

from . import compare, cpu_workloads, fresh, memory, options, report, timing
from .compilers import COMPILERS

SPEED_TARGET = 1.0          # Ember's time / Inductor's on memory-bound workloads and on the geomean
COLD_COMPILE_TARGET = 1 / 3
WARM_COMPILE_TARGET = 1 / 5
BANDWIDTH_TARGET = 0.7      # fraction of the measured copy bandwidth
BANDWIDTH_WORKLOADS = ("softmax", "layer_norm")
MEMORY_CALLS = 3
PROBE_TIMEOUT_S = 900
SAMPLING = {"repeat": 21, "warmup": 3, "min_sample_ms": 10.0}  # without --quick (options.py)


def _default_threads():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def add_arguments(parser):
    parser.add_argument("--workloads", default=",".join(cpu_workloads.BUILDERS),
                        help=f"comma-separated, in run order (default: all of {', '.join(cpu_workloads.BUILDERS)})")
    options.add_sampling_arguments(parser, SAMPLING)
    parser.add_argument("--threads", type=int, default=_default_threads(),
                        help="torch threads here and OMP_NUM_THREADS in the fresh processes (default: all cores, "
                             f"{_default_threads()} here)")
    options.add_no_inductor_argument(parser)
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and few samples: checks that the suite runs, measures nothing worth reading")
    parser.add_argument("--out", default="bench-results/cpu.json", help="JSON path; .md and .png are written next to it")


def _config(args, compilers):
    config = {"workloads": report.parse_names(args.workloads, cpu_workloads.BUILDERS, "workload"),
              "compilers": [c.name for c in compilers], **options.sampling_config(args, SAMPLING),
              "threads": args.threads, "quick": args.quick, "memory_calls": MEMORY_CALLS,
              "copy_bytes": (16 if args.quick else 256) << 20}
    if config["threads"] < 1:
        raise ValueError("--threads must be >= 1")
    return config


# ---------------------------------------------------------------------------------------------
# Measurements

def _copy_bandwidth(config):
    """GB/s of a large float32 copy (read + write counted), by torch and by numpy's memcpy."""
    import numpy as np
    import torch
    n = config["copy_bytes"] // 4
    src, dst = torch.randn(n), torch.empty(n)
    src_np, dst_np = src.numpy(), dst.numpy()
    t = timing.measure({"torch_copy": lambda: dst.copy_(src), "numpy_memcpy": lambda: np.copyto(dst_np, src_np)},
                       warmup=2, repeats=max(5, config["repeat"] // 2), calls=1)
    moved = 2 * n * 4
    gbs = {name: moved / timing_.median / 1e9 for name, timing_ in t.items()}
    return {"bytes": n * 4, "torch_copy_gbs": gbs["torch_copy"], "numpy_memcpy_gbs": gbs["numpy_memcpy"],
            "best_gbs": max(gbs.values())}


def _run_workload(name, compilers, config):
    """One row: every compiler's time, speed-up, error, memory and GB/s; cold/warm for registered compilers."""
    import torch
    workload = cpu_workloads.build(name, config["quick"])
    ref_fn, ref_args = workload.float64()
    row = {"description": workload.description, "memory_bound": workload.memory_bound,
           "bytes_moved": workload.bytes_moved, "results": {}}
    with torch.no_grad():
        reference = ref_fn(*ref_args)
        eager_out = workload.fn(*workload.args)
        row["results"]["eager"] = {"label": "eager PyTorch", "error": None,
                                   "max_abs_error": compare.max_abs_error(eager_out, reference)}
        callables = {"eager": lambda: workload.fn(*workload.args)}
        for compiler in compilers:
            compiler.reset()
        for compiler in compilers:
            print(f"[cpu] {name}: {compiler.name} (in this process) ...", flush=True)
            result, compiled = compare.compile_checked(compiler, workload.fn, lambda f: f(*workload.args), reference,
                                                       eager_out, row["results"]["eager"]["max_abs_error"],
                                                       config["warmup"])
            row["results"][compiler.name] = result
            if compiled is not None:
                callables[compiler.name] = (lambda f: lambda: f(*workload.args))(compiled)
        try:
            timings = timing.measure(callables, warmup=config["warmup"], repeats=config["repeat"],
                                     min_sample_s=config["min_sample_ms"] / 1e3)
            peaks = {cname: memory.peak_delta(fn, config["memory_calls"]) for cname, fn in callables.items()}
        except Exception as exc:  # which callable failed is unknown: the row's timings are all void
            for cname in callables:
                row["results"][cname]["error"] = f"while timing: {report.error_text(exc)}"
            timings, peaks = {}, {}
        for compiler in compilers:
            compiler.reset()
    compare.record_times(row, timings)
    for cname, peak in peaks.items():
        row["results"][cname].update(peak_memory_bytes=peak["bytes"], memory_method=peak["method"])
    for compiler in compilers:
        if compiler.name in COMPILERS:  # a fresh process can only name registered compilers
            print(f"[cpu] {name}: {compiler.name} cold and warm compile (fresh processes) ...", flush=True)
            probe_config = {"workload": name, "compiler": compiler.name, "quick": config["quick"],
                            "threads": config["threads"]}
            row["results"][compiler.name].update(fresh.compile_times("ember.bench.cpu_probe", probe_config,
                                                                     "ember-bench-cpu-", PROBE_TIMEOUT_S,
                                                                     config["threads"]))
    return row


# ---------------------------------------------------------------------------------------------
# Summary: geomeans and targets

def _targets(rows, compiler_names, bandwidth):
    checks = []
    if "ember" in compiler_names and "inductor" in compiler_names:
        for w, row in rows.items():
            if row["memory_bound"]:
                ours, theirs = (row["results"][c].get("time", {}).get("median_us") for c in ("ember", "inductor"))
                checks.append(compare.check(f"time {w}: ember vs inductor", ours, theirs, "us", "<=", SPEED_TARGET))
        checks.append(compare.geomean_check(rows, "ember", "inductor", SPEED_TARGET))
        checks += [compare.compile_check(rows, "ember", "inductor", "cold", COLD_COMPILE_TARGET),
                   compare.compile_check(rows, "ember", "inductor", "warm", WARM_COMPILE_TARGET)]
    if "ember" in compiler_names:
        for w in BANDWIDTH_WORKLOADS:
            if w in rows:
                checks.append(compare.check(f"bandwidth {w}: ember vs copy", rows[w]["results"]["ember"].get("gbs"),
                                            bandwidth["best_gbs"], "GB/s", ">=", BANDWIDTH_TARGET))
        checks += compare.error_checks(rows, "ember")
    return checks


# ---------------------------------------------------------------------------------------------
# Report

def _markdown(results):
    env, cfg, bw = results["environment"], results["config"], results["bandwidth"]
    names = ["eager"] + cfg["compilers"]
    out = ["# Ember benchmark: cpu", "", report.environment_line(env), ""]
    out += ["Workloads:", ""] + [f"- `{w}`: {row['description']}" for w, row in results["workloads"].items()] + [""]
    out += [f"Per-call time: median of {cfg['repeat']} samples interleaved across eager and the compilers, after "
            f"{cfg['warmup']} warm-up calls; each sample lasts >= {cfg['min_sample_ms']} ms. × = speed-up over eager.",
            "", compare.speed_table(results["workloads"], names), ""]
    compile_table = compare.compile_table(results["workloads"], names)
    if compile_table:
        out += ["Compile time: first compiled call - eager call, in a fresh process with empty caches (cold), "
                "then in another with the caches the cold run left (warm).", "", compile_table, ""]
    out += [f"Peak memory: resident-set growth over {cfg['memory_calls']} calls after the first (buffers of the "
            "program, not the compiler's own). Max err: max |output - float64 eager reference|.", "",
            compare.memory_error_table(results["workloads"], names), ""]
    out += [f"Copy bandwidth ({bw['bytes'] / 2**20:.0f} MiB float32, read + write): torch copy_ "
            f"{bw['torch_copy_gbs']:.2f} GB/s, numpy memcpy {bw['numpy_memcpy_gbs']:.2f} GB/s; reference "
            f"{bw['best_gbs']:.2f} GB/s."]
    bandwidth_table = compare.bandwidth_table(results["workloads"], names, bw["best_gbs"])
    if bandwidth_table:
        out += ["", "Memory-bound workloads: bytes of inputs + output, each moved once, / median time.", "",
                bandwidth_table]
    if results["targets"]:
        out += ["", "Targets:", "", compare.targets_table(results["targets"])]
    failures = compare.failures_list(results["workloads"])
    if failures:
        out += ["", "Failures:", ""] + failures
    return "\n".join(out)


def run(args, extra_compilers=()):
    """extra_compilers: objects shaped like compilers.Compiler, measured in this process only (a test's hook)."""
    compilers = options.compilers(args) + list(extra_compilers)
    config = _config(args, compilers)
    with fresh.scratch_caches("ember-bench-cpu-"):
        import torch
        torch.set_num_threads(config["threads"])
        results = {"suite": "cpu", "environment": report.environment(), "config": config, "workloads": {}}
        print("[cpu] copy bandwidth ...", flush=True)
        results["bandwidth"] = _copy_bandwidth(config)
        for name in config["workloads"]:
            results["workloads"][name] = _run_workload(name, compilers, config)
    results["geomean_speedup"] = compare.geomean_speedups(results["workloads"], config["compilers"])
    results["targets"] = _targets(results["workloads"], config["compilers"], results["bandwidth"])
    results["ok"] = compare.all_ok(results["workloads"])
    return report.finish(args.out, results, _markdown(results),
                         lambda png: compare.speedup_chart(results["workloads"], config["compilers"],
                                                           "CPU speed-up over eager (higher is better)", png))
