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
import math
import os
import shutil
import tempfile

from . import cpu_workloads, fresh, memory, options, report, timing
from .compilers import COMPILERS, check_captured

SPEED_TARGET = 1.0          # Ember's time / Inductor's on memory-bound workloads and on the geomean
COLD_COMPILE_TARGET = 1 / 3
WARM_COMPILE_TARGET = 1 / 5
BANDWIDTH_TARGET = 0.7      # fraction of the measured copy bandwidth
BANDWIDTH_WORKLOADS = ("softmax", "layer_norm")
ACCURACY_TARGET = 2.0       # Ember's error / eager's error
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


def _tensors(out):
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in out):
        return list(out)
    raise TypeError(f"a workload must return a tensor or a tuple of tensors, got {type(out).__name__}")


def _max_abs_error(out, reference):
    """Max |out - reference| over every output, or None when out has a NaN or inf the reference does not."""
    worst = 0.0
    for o, r in zip(_tensors(out), _tensors(reference), strict=True):
        if o.shape != r.shape:
            raise ValueError(f"output shape {tuple(o.shape)} differs from the reference's {tuple(r.shape)}")
        diff = (o.double() - r).abs().max().item() if o.numel() else 0.0
        if not math.isfinite(diff):
            return None
        worst = max(worst, diff)
    return worst


def _matches(out, expected):
    import torch
    try:
        torch.testing.assert_close(out, expected)
        return True
    except AssertionError:
        return False


def _is_wrong(result, eager_error):
    """Differs from eager and is less accurate than eager by more than the accuracy target allows."""
    if result["matches_eager"] or eager_error is None:  # eager's own output is not finite: nothing to judge by
        return False
    error = result["max_abs_error"]
    return error is None or error > ACCURACY_TARGET * eager_error


def _compile_in_process(compiler, workload, reference, eager_out, eager_error, warmup):
    """Compile, check the first output against eager and float64, warm up; -> (result dict, callable or None)."""
    fn, args = workload.fn, workload.args
    result = {"label": compiler.label, "error": None}
    try:
        compiled = compiler.compile(fn)
        result["first_call_s"], out = timing.time_first_call(lambda: compiled(*args))
        result["counters"] = compiler.counters()
        check_captured(compiler, result["counters"])
        result["max_abs_error"] = _max_abs_error(out, reference)
        result["matches_eager"] = _matches(out, eager_out)
        result["wrong"] = _is_wrong(result, eager_error)
        for _ in range(warmup):
            compiled(*args)
    except Exception as exc:  # a compiler failing on a workload is a result to report, not a reason to stop
        result["error"] = report.error_text(exc)
        return result, None
    return result, compiled


def _compile_times(workload_name, compiler, config):
    """{"cold": probe result, "warm": probe result}: two fresh processes sharing new, empty cache directories."""
    root = tempfile.mkdtemp(prefix="ember-bench-cpu-")
    try:
        env = fresh.probe_env(root, config["threads"])
        probe_config = {"workload": workload_name, "compiler": compiler.name, "quick": config["quick"],
                        "threads": config["threads"]}
        cold = fresh.run_probe("ember.bench.cpu_probe", probe_config, env, PROBE_TIMEOUT_S)
        warm = (fresh.run_probe("ember.bench.cpu_probe", probe_config, env, PROBE_TIMEOUT_S) if cold["error"] is None
                else {"error": "not run: the cold run failed"})
        return {"cold": cold, "warm": warm}
    finally:
        shutil.rmtree(root, ignore_errors=True)


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
                                   "max_abs_error": _max_abs_error(eager_out, reference)}
        callables = {"eager": lambda: workload.fn(*workload.args)}
        for compiler in compilers:
            compiler.reset()
        for compiler in compilers:
            print(f"[cpu] {name}: {compiler.name} (in this process) ...", flush=True)
            result, compiled = _compile_in_process(compiler, workload, reference, eager_out,
                                                   row["results"]["eager"]["max_abs_error"], config["warmup"])
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
    eager_t = timings.get("eager")
    for cname, t in timings.items():
        r = row["results"][cname]
        r["time"] = t.to_json()
        r["speedup"] = eager_t.median / t.median
        r["peak_memory_bytes"] = peaks[cname]["bytes"]
        r["memory_method"] = peaks[cname]["method"]
        r["gbs"] = row["bytes_moved"] / t.median / 1e9 if workload.memory_bound else None
    for compiler in compilers:
        if compiler.name in COMPILERS:  # a fresh process can only name registered compilers
            print(f"[cpu] {name}: {compiler.name} cold and warm compile (fresh processes) ...", flush=True)
            row["results"][compiler.name].update(_compile_times(name, compiler, config))
    return row


# ---------------------------------------------------------------------------------------------
# Summary: geomeans and targets

def _time_ratio(row, cname):
    r, eager = row["results"].get(cname), row["results"]["eager"]
    if not r or "time" not in r or "time" not in eager:
        return None
    return r["time"]["median_us"] / eager["time"]["median_us"]


def _check(name, ours, reference, unit, op, target):
    ratio = ours / reference if ours is not None and reference else None
    met = None if ratio is None else (ratio <= target if op == "<=" else ratio >= target)
    return {"name": name, "ember": ours, "reference": reference, "unit": unit, "ratio": ratio, "op": op,
            "target": target, "met": met}


def _compile_sum(rows, cname, phase, both):
    values = [rows[w]["results"][cname][phase]["compile_s"] for w in both]
    return sum(values) if values else None


def _targets(rows, compiler_names, bandwidth):
    checks = []
    if "ember" in compiler_names and "inductor" in compiler_names:
        for w, row in rows.items():
            if row["memory_bound"]:
                ours, theirs = (row["results"][c].get("time", {}).get("median_us") for c in ("ember", "inductor"))
                checks.append(_check(f"time {w}: ember vs inductor", ours, theirs, "us", "<=", SPEED_TARGET))
        both = [w for w, row in rows.items() if _time_ratio(row, "ember") and _time_ratio(row, "inductor")]
        checks.append(_check(f"time geomean ({len(both)} workloads): ember vs inductor",
                             report.geomean([_time_ratio(rows[w], "ember") for w in both]),
                             report.geomean([_time_ratio(rows[w], "inductor") for w in both]), "x eager time", "<=",
                             SPEED_TARGET))
        for phase, target in (("cold", COLD_COMPILE_TARGET), ("warm", WARM_COMPILE_TARGET)):
            both = [w for w, row in rows.items()
                    if all(row["results"][c].get(phase, {}).get("error", "missing") is None for c in ("ember", "inductor"))]
            checks.append(_check(f"{phase} compile, sum over {len(both)} workloads: ember vs inductor",
                                 _compile_sum(rows, "ember", phase, both), _compile_sum(rows, "inductor", phase, both),
                                 "s", "<=", target))
    if "ember" in compiler_names:
        for w in BANDWIDTH_WORKLOADS:
            if w in rows:
                checks.append(_check(f"bandwidth {w}: ember vs copy", rows[w]["results"]["ember"].get("gbs"),
                                     bandwidth["best_gbs"], "GB/s", ">=", BANDWIDTH_TARGET))
        for w, row in rows.items():
            checks.append(_check(f"error {w}: ember vs eager", row["results"]["ember"].get("max_abs_error"),
                                 row["results"]["eager"]["max_abs_error"], "abs", "<=", ACCURACY_TARGET))
    return checks


# ---------------------------------------------------------------------------------------------
# Report

def _time_cell(r):
    return "error" if r.get("error") and "time" not in r else report.fmt(r.get("time", {}).get("median_us"), ".1f")


def _compile_cell(r, phase):
    p = r.get(phase)
    if p is None:
        return "—"
    return "error" if p.get("error") else timing.format_s(p["compile_s"])


def _speed_table(results, names):
    header = ["workload", "eager µs"]
    for c in names[1:]:
        header += [f"{c} µs", f"{c} ×"]
    rows, geo = [], {c: [] for c in names[1:]}
    for w, row in results["workloads"].items():
        cells = [w, _time_cell(row["results"]["eager"])]
        for c in names[1:]:
            r = row["results"][c]
            cells += [_time_cell(r), report.fmt(r.get("speedup"), ".2f", "×")]
            if r.get("speedup"):
                geo[c].append(r["speedup"])
        rows.append(cells)
    footer = ["geomean", ""]
    for c in names[1:]:
        footer += ["", report.fmt(report.geomean(geo[c]), ".2f", f"× ({len(geo[c])})")]
    rows.append(footer)
    return report.markdown_table(header, rows)


def _compile_table(results, names):
    compiled = [c for c in names[1:] if any("cold" in row["results"][c] for row in results["workloads"].values())]
    header = ["workload"] + [f"{c} {phase}" for c in compiled for phase in ("cold", "warm")]
    rows = [[w] + [_compile_cell(row["results"][c], phase) for c in compiled for phase in ("cold", "warm")]
            for w, row in results["workloads"].items()]
    return report.markdown_table(header, rows) if compiled else None


def _memory_error_table(results, names):
    header = ["workload"] + [f"{c} peak MB" for c in names] + [f"{c} max err" for c in names]
    rows = []
    for w, row in results["workloads"].items():
        res = row["results"]
        mem = [report.fmt(None if res[c].get("peak_memory_bytes") is None else res[c]["peak_memory_bytes"] / 1e6, ".2f")
               for c in names]
        err = [report.fmt(res[c].get("max_abs_error"), ".2e") for c in names]
        rows.append([w] + mem + err)
    return report.markdown_table(header, rows)


def _bandwidth_table(results, names):
    best = results["bandwidth"]["best_gbs"]
    header = ["workload", "MB moved"] + [f"{c} GB/s" for c in names] + [f"{c} % of copy" for c in names[1:]]
    rows = []
    for w, row in results["workloads"].items():
        if not row["memory_bound"]:
            continue
        gbs = [row["results"][c].get("gbs") for c in names]
        rows.append([w, f"{row['bytes_moved'] / 1e6:.2f}"] + [report.fmt(g, ".3g") for g in gbs]
                    + [report.fmt(None if g is None else 100 * g / best, ".0f", "%") for g in gbs[1:]])
    return report.markdown_table(header, rows) if rows else None


def _targets_table(targets):
    rows = []
    for t in targets:
        spec = ".4f" if t["unit"] in ("s", "x eager time") else ".3g" if t["unit"] == "abs" else ".1f"
        met = "n/a (a side failed)" if t["met"] is None else "met" if t["met"] else "NOT MET"
        rows.append([t["name"], f"{report.fmt(t['ember'], spec)} {t['unit']}", f"{report.fmt(t['reference'], spec)} {t['unit']}",
                     report.fmt(t["ratio"], ".3f"), f"{t['op']} {t['target']:.3g}", met])
    return report.markdown_table(["check", "ember", "reference", "ratio", "target", "met"], rows)


def _markdown(results):
    env, cfg, bw = results["environment"], results["config"], results["bandwidth"]
    names = ["eager"] + cfg["compilers"]
    out = ["# Ember benchmark: cpu", "", report.environment_line(env), ""]
    out += ["Workloads:", ""] + [f"- `{w}`: {row['description']}" for w, row in results["workloads"].items()] + [""]
    out += [f"Per-call time: median of {cfg['repeat']} samples interleaved across eager and the compilers, after "
            f"{cfg['warmup']} warm-up calls; each sample lasts >= {cfg['min_sample_ms']} ms. × = speed-up over eager.",
            "", _speed_table(results, names), ""]
    compile_table = _compile_table(results, names)
    if compile_table:
        out += ["Compile time: first compiled call - eager call, in a fresh process with empty caches (cold), "
                "then in another with the caches the cold run left (warm).", "", compile_table, ""]
    out += [f"Peak memory: resident-set growth over {cfg['memory_calls']} calls after the first (buffers of the "
            "program, not the compiler's own). Max err: max |output - float64 eager reference|.", "",
            _memory_error_table(results, names), ""]
    out += [f"Copy bandwidth ({bw['bytes'] / 2**20:.0f} MiB float32, read + write): torch copy_ "
            f"{bw['torch_copy_gbs']:.2f} GB/s, numpy memcpy {bw['numpy_memcpy_gbs']:.2f} GB/s; reference "
            f"{bw['best_gbs']:.2f} GB/s."]
    bandwidth_table = _bandwidth_table(results, names)
    if bandwidth_table:
        out += ["", "Memory-bound workloads: bytes of inputs + output, each moved once, / median time.", "",
                bandwidth_table]
    if results["targets"]:
        out += ["", "Targets:", "", _targets_table(results["targets"])]
    failures = [f"- {w} / {c}: {msg}" for w, row in results["workloads"].items() for c, r in row["results"].items()
                for msg in _failures(r)]
    if failures:
        out += ["", "Failures:", ""] + failures
    return "\n".join(out)


def _failures(result):
    found = [result["error"]] if result.get("error") else []
    if result.get("wrong"):
        found.append(f"wrong output: differs from eager's and its error ({report.fmt(result['max_abs_error'], '.3g')}) "
                     f"is more than {ACCURACY_TARGET:g}x eager's")
    for phase in ("cold", "warm"):
        if result.get(phase, {}).get("error"):
            found.append(f"{phase} compile: {result[phase]['error']}")
    return found


def _chart(results, path):
    names = results["config"]["compilers"]
    workloads = list(results["workloads"])
    series = {}
    for c in names:
        values = [results["workloads"][w]["results"][c].get("speedup") for w in workloads]
        present = [v for v in values if v is not None]
        series[c] = values + [report.geomean(present) if present else None]
    return report.write_bar_chart(path, "CPU speed-up over eager (higher is better)", workloads + ["geomean"], series,
                                  "× eager", reference=1.0)


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
    results["geomean_speedup"] = {}
    for c in config["compilers"]:
        present = [row["results"][c]["speedup"] for row in results["workloads"].values()
                   if row["results"][c].get("speedup")]
        results["geomean_speedup"][c] = {"value": report.geomean(present), "workloads": len(present)}
    results["targets"] = _targets(results["workloads"], config["compilers"], results["bandwidth"])
    results["ok"] = not any(_failures(r) for row in results["workloads"].values() for r in row["results"].values())
    return report.finish(args.out, results, _markdown(results), lambda png: _chart(results, png))
