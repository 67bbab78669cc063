"""Suite `gpu`: eager PyTorch, Ember and torch.compile (Inductor), each in the modes default, reduce-overhead and
max-autotune, on one CUDA device, side by side in one run.

Workloads (gpu_workloads.py has the sizes): the seed block gelu(x @ W + b, tanh) + r in float32 and bfloat16,
softmax, layer_norm(x + r), rms_norm, a GPT-2-size MLP, 4 nanoGPT blocks, transformers' GPT-2 and LLaMA,
ResNet-50, and a one-token decoding step where launch overhead dominates; random init, torch.no_grad(), eval().
Compilers are named `ember`, `inductor` in the default mode and `<compiler>-<mode>` otherwise (compilers.py).

Columns, per workload and compiler:
  time        median of CUDA-event samples, one call each, L2 flushed before each, interleaved across eager and
              every compiler (cuda_measure.py): memory-bound workloads by their kernels' GPU time, the others as
              a caller sees a call (the GPU idle at its start, so launch overhead counts)
  speed-up    eager median / compiler median; a geometric mean over the workloads closes the table
  cold/warm   compile time in a fresh process (gpu_probe.py): first compiled call - fastest eager call, with
              empty cache directories (cold), then in another fresh process with the same ones (warm)
  memory      torch.cuda.max_memory_allocated over a few calls after warm-up, minus what was allocated before
              the compiler first ran: what it keeps allocated (arenas, constants) plus each call's buffers
              and output; not a CUDA-graph pool's memory, which is reserved, not allocated, between replays
  error       max |output - float64 reference| of the output of the last warm-up call, as in the cpu suite
  GB/s        memory-bound workloads: inputs + output bytes (each moved once) / median time, next to the
              copy bandwidth of a large bfloat16 copy_ measured in the same run

Targets (issue 12), printed as met / not met: in each mode, Ember's geomean of time / eager time <= Inductor's;
every memory-bound workload at >= 90% of the copy bandwidth (Ember, each mode); Ember reduce-overhead at least
as fast as Inductor reduce-overhead on the decoding step; Ember's cold compile <= 1/3 of Inductor's in each mode
(sums over the workloads). A compiler that fails or gives a wrong output (compare.py) on a workload is recorded
in its row; the suite carries on and exits 1 at the end.

`--device cpu` (hidden from --help) runs the same code on the CPU for the suite's smoke test: wall-clock timing
(timing.py) and resident-set memory (memory.py) instead of CUDA events and the CUDA allocator, and the modes that
need CUDA (reduce-overhead) are skipped and listed as such. Its numbers mean nothing.
"""
import argparse
import os

from ember.options import MODES

from . import compare, cuda_measure, fresh, gpu_workloads, memory, options, report, timing
from .compilers import COMPILERS, lookup

SPEED_TARGET = 1.0          # Ember's geomean time / Inductor's, per mode; and on the decoding step
COLD_COMPILE_TARGET = 1 / 3
BANDWIDTH_TARGET = 0.9      # fraction of the measured copy bandwidth
CUDA_ONLY_MODES = ("reduce-overhead",)
DEFAULT_MODES = ("default", "reduce-overhead", "max-autotune")  # issue 12's; --modes takes any of MODES
MEMORY_CALLS = 3
PROBE_TIMEOUT_S = 1800      # Inductor's max-autotune benchmarks every matmul of a model
SAMPLING = {"repeat": 50, "warmup": 10, "min_sample_ms": 10.0}  # without --quick (options.py)


def add_arguments(parser):
    parser.add_argument("--workloads", default=",".join(gpu_workloads.BUILDERS),
                        help=f"comma-separated, in run order (default: all of {', '.join(gpu_workloads.BUILDERS)})")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES),
                        help=f"comma-separated modes of both compilers, of {', '.join(MODES)} "
                             f"(default: {','.join(DEFAULT_MODES)})")
    options.add_sampling_arguments(parser, SAMPLING)
    options.add_no_inductor_argument(parser)
    parser.add_argument("--no-compile-times", action="store_true",
                        help="skip the cold and warm compiles in fresh processes (two per workload and compiler)")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and few samples: checks that the suite runs, measures nothing worth reading")
    parser.add_argument("--out", default="bench-results/gpu.json", help="JSON path; .md and .png are written next to it")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help=argparse.SUPPRESS)  # smoke tests


def _config(args):
    modes = report.parse_names(args.modes, MODES, "mode")
    runnable = [m for m in modes if args.device == "cuda" or m not in CUDA_ONLY_MODES]
    if not runnable:
        raise ValueError(f"--modes {args.modes}: none of them runs on {args.device}")
    bases = [COMPILERS["ember"]] + ([] if args.no_inductor else [COMPILERS["inductor"]])
    return {"workloads": report.parse_names(args.workloads, gpu_workloads.BUILDERS, "workload"),
            "modes": runnable, "skipped_modes": [m for m in modes if m not in runnable],
            "compilers": [base.in_mode(m).name for m in runnable for base in bases],
            **options.sampling_config(args, SAMPLING), "device": args.device, "quick": args.quick,
            "compile_times": not args.no_compile_times, "memory_calls": MEMORY_CALLS,
            "copy_shape": [1024, 1024] if args.quick else [8192, 8192]}


def _environment(device):
    import torch
    env = report.environment()
    env["device"] = device
    if device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        env.update(gpu=props.name, gpu_memory_gb=round(props.total_memory / 1e9, 1), cuda=torch.version.cuda,
                   capability=f"{props.major}.{props.minor}")
    env["tf32"] = {"matmul": torch.backends.cuda.matmul.allow_tf32, "cudnn": torch.backends.cudnn.allow_tf32}
    for package in ("triton", "transformers", "torchvision"):
        try:
            env[package] = __import__(package).__version__
        except ImportError:
            env[package] = None
    # Inductor compiles its Triton kernels with torch's own ptxas when the wheel ships one (notes/triton_backend.md).
    torch_ptxas = os.path.join(os.path.dirname(torch.__file__), "bin", "ptxas")
    env["ptxas"] = os.environ.get("TRITON_PTXAS_PATH") or (torch_ptxas if os.path.exists(torch_ptxas) else "triton's")
    return env


# ---------------------------------------------------------------------------------------------
# Measurements

def _timing_method(config, memory_bound):
    if config["device"] != "cuda":
        return "wall clock"
    return "kernel" if memory_bound else "call"


def _measure(fns, config, memory_bound):
    if config["device"] == "cuda":
        return cuda_measure.measure(fns, warmup=config["warmup"], repeats=config["repeat"], kernel_time=memory_bound)
    return timing.measure(fns, warmup=config["warmup"], repeats=config["repeat"],
                          min_sample_s=config["min_sample_ms"] / 1e3)


def _peak_memory(fn, config, before):
    if config["device"] == "cuda":
        return cuda_measure.peak_memory(fn, config["memory_calls"], before)
    return memory.peak_delta(fn, config["memory_calls"])


def _copy_gbs(elements, config):
    """(GB/s, Timing) of a bfloat16 copy_ of `elements` (its read and its write counted)."""
    import torch
    src = torch.randn(elements, device=config["device"]).to(torch.bfloat16)
    dst = torch.empty_like(src)
    t = _measure({"copy": lambda: dst.copy_(src)}, config, memory_bound=True)["copy"]
    return 2 * src.numel() * src.element_size() / t.median / 1e9, t


def _copy_bandwidth(config):
    """GB/s of a bfloat16 copy_ (its read and its write counted), the ceiling memory-bound kernels are held to."""
    elements = config["copy_shape"][0] * config["copy_shape"][1]
    gbs, t = _copy_gbs(elements, config)
    return {"bytes": 2 * elements, "dtype": "bfloat16", "time": t.to_json(), "copy_gbs": gbs, "best_gbs": gbs}


def _float64_reference(workload):
    fn, args = workload.float64()
    return fn(*args)  # the float64 copies are freed on return: they are not the compilers' memory


def _run_workload(name, registered, extra, config):
    """One row: every compiler's time, speed-up, error, memory and GB/s; cold/warm of the registered compilers
    (a fresh process can only name those) unless switched off."""
    import torch
    device, compilers = config["device"], registered + extra
    workload = gpu_workloads.build(name, config["quick"], device)
    row = {"description": workload.description, "memory_bound": workload.memory_bound,
           "bytes_moved": workload.bytes_moved, "timing": _timing_method(config, workload.memory_bound),
           "results": {}}
    if workload.memory_bound:
        # A copy of the workload's own bytes: what any kernel moving them can reach (smaller copies reach less of
        # the reference: 83.5% at softmax's 64 MiB on the H200). Reported beside the target, which stays the reference.
        row["same_size_copy_gbs"] = _copy_gbs(max(1, workload.bytes_moved // 4), config)[0]

    def call(f):
        out = f(*workload.args)
        cuda_measure.synchronize(device)
        return out

    with torch.no_grad():
        reference = _float64_reference(workload)
        eager_out = call(workload.fn)
        eager = row["results"]["eager"] = {"label": "eager PyTorch", "error": None,
                                           "max_abs_error": compare.max_abs_error(eager_out, reference)}
        callables = {"eager": lambda: workload.fn(*workload.args)}
        before = cuda_measure.baseline(device, callables["eager"])
        peaks = {"eager": _peak_memory(callables["eager"], config, before)}
        for compiler in compilers:
            compiler.reset()
        for compiler in compilers:
            print(f"[gpu] {name}: {compiler.name} (in this process) ...", flush=True)
            before = cuda_measure.baseline(device, callables["eager"])
            result, compiled = compare.compile_checked(compiler, workload.fn, call, reference, eager_out,
                                                       eager["max_abs_error"], config["warmup"])
            row["results"][compiler.name] = result
            if compiled is not None:
                callables[compiler.name] = (lambda f: lambda: f(*workload.args))(compiled)
                peaks[compiler.name] = _peak_memory(callables[compiler.name], config, before)
        try:
            timings = _measure(callables, config, workload.memory_bound)
        except Exception as exc:  # which callable failed is unknown: the row's timings are all void
            for cname in callables:
                row["results"][cname]["error"] = f"while timing: {report.error_text(exc)}"
            timings = {}
        for compiler in compilers:
            compiler.reset()
    compare.record_times(row, timings)
    for cname, peak in peaks.items():
        row["results"][cname].update(peak_memory_bytes=peak["bytes"], memory_method=peak["method"])
    if config["compile_times"]:
        for compiler in registered:
            print(f"[gpu] {name}: {compiler.name} cold and warm compile (fresh processes) ...", flush=True)
            probe_config = {"workload": name, "compiler": compiler.name, "quick": config["quick"], "device": device}
            row["results"][compiler.name].update(fresh.compile_times("ember.bench.gpu_probe", probe_config,
                                                                     "ember-bench-gpu-", PROBE_TIMEOUT_S))
    return row


# ---------------------------------------------------------------------------------------------
# Targets

def _targets(rows, config, bandwidth):
    checks = []
    names = set(config["compilers"])
    for mode in config["modes"]:
        ours, theirs = (COMPILERS[c].in_mode(mode).name for c in ("ember", "inductor"))
        if theirs in names:
            checks.append(compare.geomean_check(rows, ours, theirs, SPEED_TARGET))
            step = rows.get(gpu_workloads.LAUNCH_BOUND)
            if mode == "reduce-overhead" and step is not None:
                checks.append(compare.check(f"time {gpu_workloads.LAUNCH_BOUND}: {ours} vs {theirs}",
                                            *(step["results"][c].get("time", {}).get("median_us") for c in (ours, theirs)),
                                            "us", "<=", SPEED_TARGET))
            if config["compile_times"]:
                checks.append(compare.compile_check(rows, ours, theirs, "cold", COLD_COMPILE_TARGET))
        checks += [compare.check(f"bandwidth {w}: {ours} vs copy", row["results"][ours].get("gbs"), bandwidth["best_gbs"],
                                 "GB/s", ">=", BANDWIDTH_TARGET) for w, row in rows.items() if row["memory_bound"]]
    return checks


# ---------------------------------------------------------------------------------------------
# Report

def _device_line(env):
    if env["device"] != "cuda":
        return f"Device: {env['device']} (a smoke test: these numbers mean nothing)."
    return (f"Device: {env['gpu']} ({env['gpu_memory_gb']} GB, compute capability {env['capability']}), CUDA "
            f"{env['cuda']}, triton {env['triton']}, ptxas {env['ptxas']}, transformers {env['transformers']}, "
            f"TF32 matmul {env['tf32']['matmul']} / cuDNN {env['tf32']['cudnn']}.")


def _markdown(results):
    env, cfg, bw, rows = results["environment"], results["config"], results["bandwidth"], results["workloads"]
    names = ["eager"] + cfg["compilers"]
    out = ["# Ember benchmark: gpu", "", report.environment_line(env), _device_line(env), ""]
    out += ["Workloads:", ""] + [f"- `{w}` ({row['timing']} timing): {row['description']}" for w, row in rows.items()]
    out += ["", f"Per-call time: median of {cfg['repeat']} samples interleaved across eager and the compilers, after "
            f"{cfg['warmup']} warm-up calls. On CUDA each sample is one call timed by CUDA events with L2 flushed "
            "before it; `kernel` timing lets the CPU run ahead (the kernels' GPU time), `call` timing starts each call "
            "on an idle GPU (launch overhead included). × = speed-up over eager.", "",
            compare.speed_table(rows, names), ""]
    compile_table = compare.compile_table(rows, names)
    if compile_table:
        out += ["Compile time: first compiled call - eager call, in a fresh process with empty caches (cold), "
                "then in another with the caches the cold run left (warm).", "", compile_table, ""]
    memory_text = ("torch.cuda.max_memory_allocated over {n} calls after warm-up, minus what was allocated before the "
                   "compiler first ran (weights and inputs)" if cfg["device"] == "cuda" else
                   "resident-set growth over {n} calls after warm-up")
    out += [f"Peak memory: {memory_text.format(n=cfg['memory_calls'])}. Max err: max |output - float64 eager "
            "reference|.", "", compare.memory_error_table(rows, names), ""]
    out += [f"Copy bandwidth ({bw['bytes'] / 2**20:.0f} MiB bfloat16 copy_, read + write): {bw['copy_gbs']:.1f} GB/s."]
    bandwidth_table = compare.bandwidth_table(rows, names, bw["best_gbs"])
    if bandwidth_table:
        out += ["", "Memory-bound workloads: bytes of inputs + output, each moved once, / median time.", "",
                bandwidth_table]
    if results["targets"]:
        out += ["", "Targets:", "", compare.targets_table(results["targets"])]
    if cfg["skipped_modes"]:
        out += ["", f"Skipped on {cfg['device']}: mode {', '.join(cfg['skipped_modes'])} (needs CUDA)."]
    failures = compare.failures_list(rows)
    if failures:
        out += ["", "Failures:", ""] + failures
    return "\n".join(out)


def _summarized(results, config):
    """`results` with the geomeans, targets and ok of the workloads it holds."""
    rows = results["workloads"]
    results["geomean_speedup"] = compare.geomean_speedups(rows, config["compilers"])
    results["targets"] = _targets(rows, config, results["bandwidth"])
    results["ok"] = compare.all_ok(rows)
    return results


def run(args, extra_compilers=()):
    """extra_compilers: objects shaped like compilers.Compiler, measured in this process only (a test's hook)."""
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("the gpu suite needs a CUDA device, and torch sees none")
        return 2
    config = _config(args)
    registered = [lookup(name) for name in config["compilers"]]
    config["compilers"] += [c.name for c in extra_compilers]
    with fresh.scratch_caches("ember-bench-gpu-"):
        results = {"suite": "gpu", "environment": _environment(args.device), "config": config, "workloads": {}}
        print("[gpu] copy bandwidth ...", flush=True)
        results["bandwidth"] = _copy_bandwidth(config)
        for name in config["workloads"]:
            results["workloads"][name] = _run_workload(name, registered, list(extra_compilers), config)
            # The rows so far, on disk after each workload: a run stopped by a time limit (max-autotune's tuning
            # can take minutes a workload) keeps what it measured.
            report.write_results(args.out, _summarized(results, config), _markdown(results))
    rows = results["workloads"]
    return report.finish(args.out, _summarized(results, config), _markdown(results),
                         lambda png: compare.speedup_chart(rows, config["compilers"],
                                                           f"{args.device} speed-up over eager (higher is better)", png))
