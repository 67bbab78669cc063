"""Suite `models`: eager PyTorch, Ember and torch.compile (Inductor) on real models, side by side in one run.

Models (models_workloads.py has the configs): transformers' GPT-2, BERT, LLaMA and T5 with tiny random-init
configs (2 layers, hidden 64, 4 heads, vocabulary 128, batch 2, sequence 16) and Ember's nanoGPT at the same
sizes; all under torch.no_grad(), in eval().

Columns, per model and compiler:
  time       median per-call time of samples interleaved across eager and every compiler (timing.py)
  speed-up   eager median / compiler median; a geometric mean over the models closes the table
  graphs     graphs the compiler built for one call (Ember: ember.stats(); Inductor: Dynamo's counters)
  cold       compile time in a fresh process with empty cache directories (this module's `main`): first compiled
             call - fastest eager call
  error      max |output - eager output| over the model's output tensors

A compiler that fails on a model is recorded in its row, the suite carries on and exits 1 at the end; so does
an output that differs from eager's beyond torch.testing.assert_close's float32 tolerances.
"""
import shutil
import sys
import tempfile

from . import fresh, models_workloads, options, report, timing
from .compilers import COMPILERS

PROBE_TIMEOUT_S = 300
SAMPLING = {"repeat": 15, "warmup": 3, "min_sample_ms": 5.0}  # without --quick (options.py)


def add_arguments(parser):
    parser.add_argument("--models", default=",".join(models_workloads.MODELS),
                        help=f"comma-separated, in run order (default: all of {', '.join(models_workloads.MODELS)})")
    options.add_sampling_arguments(parser, SAMPLING)
    options.add_no_inductor_argument(parser)
    parser.add_argument("--no-cold", action="store_true", help="skip the fresh-process cold compile times")
    parser.add_argument("--quick", action="store_true", help="few samples, no cold compiles: checks that the suite runs")
    parser.add_argument("--out", default="bench-results/models.json", help="JSON path; .md is written next to it")


def _config(args, compilers):
    return {"models": report.parse_names(args.models, models_workloads.MODELS, "model"),
            "compilers": [c.name for c in compilers], **options.sampling_config(args, SAMPLING),
            "cold": not (args.no_cold or args.quick), "quick": args.quick}


def _max_abs_diff(out, ref):
    got, want = models_workloads.tensors_of(out), models_workloads.tensors_of(ref)
    if len(got) != len(want):
        raise ValueError(f"the output has {len(got)} tensors, eager's {len(want)}")
    worst = 0.0
    for g, w in zip(got, want):
        if g.shape != w.shape:
            raise ValueError(f"output shape {tuple(g.shape)} differs from eager's {tuple(w.shape)}")
        worst = max(worst, (g.double() - w.double()).abs().max().item() if g.numel() else 0.0)
    return worst


def _matches(out, ref):
    import torch
    try:
        for g, w in zip(models_workloads.tensors_of(out), models_workloads.tensors_of(ref), strict=True):
            torch.testing.assert_close(g, w)
        return True
    except (AssertionError, ValueError):
        return False


def _graphs(compiler):
    c = compiler.counters()
    return c["graphs"]


def _run_model(name, compilers, config):
    import torch
    w = models_workloads.build(name)
    row = {"description": w.description, "results": {}}
    call = (lambda f: lambda: f(*w.args, **w.kwargs))
    with torch.no_grad():
        ref = w.model(*w.args, **w.kwargs)
        row["results"]["eager"] = {"label": "eager PyTorch", "error": None, "max_abs_diff": 0.0}
        callables = {"eager": call(w.model)}
        for compiler in compilers:
            print(f"[models] {name}: {compiler.name} (in this process) ...", flush=True)
            compiler.reset()
            result = {"label": compiler.label, "error": None}
            try:
                compiled = compiler.compile(w.model)
                result["first_call_s"], out = timing.time_first_call(call(compiled))
                result["graphs"] = _graphs(compiler)
                result["max_abs_diff"] = _max_abs_diff(out, ref)
                result["wrong"] = not _matches(out, ref)
                callables[compiler.name] = call(compiled)
            except Exception as exc:  # a compiler failing on a model is a result, not a reason to stop
                result["error"] = report.error_text(exc)
            row["results"][compiler.name] = result
        try:
            timings = timing.measure(callables, warmup=config["warmup"], repeats=config["repeat"],
                                     min_sample_s=config["min_sample_ms"] / 1e3)
        except Exception as exc:
            for cname in callables:
                row["results"][cname]["error"] = f"while timing: {report.error_text(exc)}"
            timings = {}
        for compiler in compilers:
            compiler.reset()
    eager_t = timings.get("eager")
    for cname, t in timings.items():
        row["results"][cname]["time"] = t.to_json()
        row["results"][cname]["speedup"] = eager_t.median / t.median
    if config["cold"]:
        for compiler in compilers:
            if row["results"][compiler.name]["error"] is None:
                print(f"[models] {name}: {compiler.name} cold compile (fresh process) ...", flush=True)
                row["results"][compiler.name]["cold"] = cold_compile("ember.bench.models", name, compiler.name)
    return row


def cold_compile(module, name, compiler_name):
    """`python -m module` (a probe whose config names a model and a compiler) in a fresh process with new, empty
    cache directories -> its result dict."""
    root = tempfile.mkdtemp(prefix="ember-bench-models-")
    try:
        return fresh.run_probe(module, {"model": name, "compiler": compiler_name}, fresh.probe_env(root),
                               PROBE_TIMEOUT_S)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def probe(config):
    """In a fresh process: the first compiled call's time minus the fastest eager call."""
    return first_compile(models_workloads.build(config["model"]), COMPILERS[config["compiler"]])


def first_compile(w, compiler):
    """The probe's measurement of a Workload (this suite's and the zoo's): the first compiled call's time minus
    the fastest of 5 eager calls, under torch.no_grad()."""
    import torch
    with torch.no_grad():
        eager = timing.measure({"eager": lambda: w.model(*w.args, **w.kwargs)}, warmup=2, repeats=5, calls=1)["eager"]
        compiled = compiler.compile(w.model)
        first_s, _ = timing.time_first_call(lambda: compiled(*w.args, **w.kwargs))
    return {"compile_s": first_s - eager.min, "first_call_s": first_s, "eager_call_s": eager.min,
            "graphs": _graphs(compiler), "error": None}


def _markdown(results):
    cfg = results["config"]
    names = ["eager"] + cfg["compilers"]
    out = ["# Ember benchmark: models", "", report.environment_line(results["environment"]), ""]
    out += ["Models:", ""] + [f"- `{m}`: {row['description']}" for m, row in results["models"].items()] + [""]
    out += [f"Per-call time: median of {cfg['repeat']} samples interleaved across eager and the compilers, after "
            f"{cfg['warmup']} warm-up calls. × = speed-up over eager. Graphs: graphs built for one call. Cold: first "
            "compiled call - eager call, in a fresh process with empty caches.", ""]
    header = ["model", "eager µs"]
    for c in names[1:]:
        header += [f"{c} µs", f"{c} ×", f"{c} graphs", f"{c} cold", f"{c} max diff"]
    rows, geo = [], {c: [] for c in names[1:]}
    for m, row in results["models"].items():
        res = row["results"]
        cells = [m, report.fmt(res["eager"].get("time", {}).get("median_us"), ".1f")]
        for c in names[1:]:
            r = res[c]
            cold = r.get("cold", {})
            cells += ["error" if r.get("error") else report.fmt(r.get("time", {}).get("median_us"), ".1f"),
                      report.fmt(r.get("speedup"), ".2f", "×"), report.fmt(r.get("graphs"), "d"),
                      "error" if cold.get("error") else report.fmt(cold.get("compile_s"), ".2f", " s"),
                      report.fmt(r.get("max_abs_diff"), ".1e")]
            if r.get("speedup"):
                geo[c].append(r["speedup"])
        rows.append(cells)
    footer = ["geomean", ""]
    for c in names[1:]:
        footer += ["", report.fmt(report.geomean(geo[c]), ".2f", f"× ({len(geo[c])})"), "", "", ""]
    rows.append(footer)
    out.append(report.markdown_table(header, rows))
    failures = [f"- {m} / {c}: {msg}" for m, row in results["models"].items() for c, r in row["results"].items()
                for msg in _failures(r)]
    if failures:
        out += ["", "Failures:", ""] + failures
    return "\n".join(out)


def _failures(result):
    found = [result["error"]] if result.get("error") else []
    if result.get("wrong"):
        found.append(f"wrong output: differs from eager's by up to {report.fmt(result.get('max_abs_diff'), '.3g')}")
    if result.get("cold", {}).get("error"):
        found.append(f"cold compile: {result['cold']['error']}")
    return found


def run(args):
    compilers = options.compilers(args)
    config = _config(args, compilers)
    with fresh.scratch_caches("ember-bench-models-"):
        results = {"suite": "models", "environment": report.environment(), "config": config, "models": {}}
        for name in config["models"]:
            results["models"][name] = _run_model(name, compilers, config)
    results["ok"] = not any(_failures(r) for row in results["models"].values() for r in row["results"].values())
    return report.finish(args.out, results, _markdown(results))


def main(argv):
    """The fresh-process probe: `python -m ember.bench.models '{"model": ..., "compiler": ...}'`."""
    return fresh.probe_main(argv, probe, "python -m ember.bench.models JSON")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
