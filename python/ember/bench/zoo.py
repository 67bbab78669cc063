"""Suite `zoo`: Ember on ~180 models users run (timm, torchvision, transformers, diffusers), next to eager and torch.compile.

Models (zoo_models.py): small random-init configs, eval(), torch.no_grad(), one small input each. Per model:
  correct    Ember's output vs eager's (torch.testing.assert_close) and both vs a float64 run of the same model;
             wrong = differs from eager *and* its float64 error > 2x eager's (compare.py's rule), unless the
             same compiler run in float64 matches the reference (ill-conditioned: zoo_row.recheck_in_float64)
  graphs     Ember's graphs and breaks (ember.explain) next to torch.compile's (torch._dynamo.explain), and
             Ember's eager frames (frames that ran uncompiled)
  time       median per-call time, eager / Ember / Inductor interleaved (timing.py); speed-up = eager / it
  compile    first compiled call - fastest eager call, in this process (Ember's through ember.explain, whose
             call compiles afresh); the cache directories are new at the start of the run and shared by its
             models, so a kernel an earlier model compiled is a cache hit, as for a user; with --cold N also in
             fresh processes with new caches for N models sampled evenly over the selection
A model that fails to build, or a compiler that fails on it, is recorded with its exception text and the suite
carries on; it exits 1 when any compiler failed or gave a wrong output. `--no-inductor` leaves torch.compile's
time and compile columns out (its graph counts still come from Dynamo's explain, capture only). `--train` takes
one training step per model instead (zoo_train.py); `--no-time` leaves timing out.
"""
import re
import sys

from . import compare, fresh, models, options, report, timing, zoo_models, zoo_report, zoo_row, zoo_train
from .compilers import COMPILERS
from .models_workloads import tensors_of

SAMPLING = {"repeat": 7, "warmup": 2, "min_sample_ms": 5.0}  # without --quick (options.py)


def add_arguments(parser):
    parser.add_argument("--models", default=None, help="comma-separated zoo names, in run order (default: all)")
    parser.add_argument("--filter", default=None, help="only the models whose name matches this regular expression")
    parser.add_argument("--limit", type=int, default=None, help="at most this many models (after --models/--filter)")
    options.add_sampling_arguments(parser, SAMPLING)
    options.add_no_inductor_argument(parser)
    parser.add_argument("--no-dynamo", action="store_true", help="leave torch._dynamo.explain's graph counts out")
    parser.add_argument("--cold", type=int, default=8,
                        help="fresh-process cold compiles on this many models, sampled evenly (default 8; 0 with --quick)")
    parser.add_argument("--quick", action="store_true", help="few samples, no fresh-process compiles")
    parser.add_argument("--train", action="store_true",
                        help="one training step per model in train() instead of a no_grad call (zoo_train.py)")
    parser.add_argument("--no-time", action="store_true", help="no timing: correctness and counts only")
    parser.add_argument("--list", action="store_true", help="print the selected models and exit")
    parser.add_argument("--out", default="bench-results/zoo.json", help="JSON path; .md and .png are written next to it")


def select(names_text, pattern, limit):
    """The zoo names picked by --models, --filter and --limit, in run order."""
    names = (report.parse_names(names_text, zoo_models.MODELS, "zoo model") if names_text
             else list(zoo_models.MODELS))
    if pattern:
        names = [n for n in names if re.search(pattern, n)]
    return names[:limit] if limit is not None else names


def _config(args, compilers):
    names = select(args.models, args.filter, args.limit)
    cold = 0 if args.quick or args.train else max(args.cold, 0)  # the fresh-process probe compiles a forward
    step = max(len(names) // cold, 1) if cold else 0
    return {"models": names, "compilers": [c.name for c in compilers], **options.sampling_config(args, SAMPLING),
            "dynamo": not args.no_dynamo, "quick": args.quick, "train": args.train, "time": not args.no_time,
            "cold_models": names[::step][:cold] if cold else []}


def _compile_and_check(compiler, w, eager_out, reference, eager_error):
    """One compiler on one model -> (result, compiled callable or None). Ember's first call goes through
    ember.explain (graph counts and break reasons), then a second compile reads the code it cached."""
    result = {"label": compiler.label, "error": None}
    call = (lambda f: lambda: f(*w.args, **w.kwargs))
    try:
        if compiler.family == "ember":
            first_s, result["explain"] = zoo_row.explain_ember(w)
            compiler.reset()
            compiled = compiler.compile(w.model)
            _, out = timing.time_first_call(call(compiled))
        else:
            compiler.reset()
            compiled = compiler.compile(w.model)
            first_s, out = timing.time_first_call(call(compiled))
        result["counters"] = compiler.counters()
        result["first_call_s"] = first_s
        result.update(zoo_row.judge(out, eager_out, reference, eager_error))
        if result["wrong"] and reference is not None:
            zoo_row.recheck_in_float64(result, lambda: zoo_row.run_in_float64(w, compiler.compile), reference)
        return result, call(compiled)
    except Exception as exc:  # noqa: BLE001 -- a compiler failing on a model is a result
        result["error"] = report.error_text(exc)
        return result, None


def run_model(name, compilers, config):
    """Everything the suite measures on one model -> its row (see the module docstring)."""
    import torch
    row, w = zoo_row.new_row(name)
    if w is None:
        return row
    with torch.no_grad():
        try:
            eager = timing.measure({"eager": lambda: w.model(*w.args, **w.kwargs)}, warmup=1, repeats=3, calls=1)
            eager_out = tensors_of(w.model(*w.args, **w.kwargs))
        except Exception as exc:  # noqa: BLE001
            row["error"] = f"eager: {report.error_text(exc)}"
            return row
        reference = zoo_row.float64_outputs(w)
        eager_error = compare.max_abs_error(eager_out, reference) if reference is not None else None
        row["results"]["eager"]["max_abs_error"] = eager_error
        if config["dynamo"]:
            print(f"[zoo] {name}: torch._dynamo.explain ...", flush=True)
            row["dynamo"] = zoo_row.explain_dynamo(w)
        callables = {"eager": lambda: w.model(*w.args, **w.kwargs)}
        zoo_row.compile_each(name, row, callables, compilers,
                             lambda compiler: _compile_and_check(compiler, w, eager_out, reference, eager_error))
        zoo_row.time_and_finish(name, row, callables, compilers, config, eager["eager"].min)
    return row


def probe(config):
    """In a fresh process: `models.first_compile` on the zoo model `config["model"]`."""
    return models.first_compile(zoo_models.build(config["model"]), COMPILERS[config["compiler"]])


def _library_versions():
    import importlib.metadata
    versions = {}
    for name in ("timm", "torchvision", "transformers", "diffusers"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def run(args):
    compilers = options.compilers(args)
    config = _config(args, compilers)
    if args.list:
        print("\n".join(config["models"]))
        return 0
    results = {"suite": "zoo", "environment": {**report.environment(), "libraries": _library_versions()},
               "config": config, "models": {}}
    with fresh.scratch_caches("ember-bench-zoo-"):
        for i, name in enumerate(config["models"]):
            print(f"[zoo] {i + 1}/{len(config['models'])} {name}", flush=True)
            results["models"][name] = (zoo_train.run_model if args.train else run_model)(name, compilers, config)
            report.write_results(args.out, results, zoo_report.progress_line(results))  # a crash keeps the rest
    results["summary"] = zoo_report.summary(results)
    results["ok"] = not any(zoo_report.failures(row) for row in results["models"].values())
    return report.finish(args.out, results, zoo_report.markdown(results),
                         chart=lambda path: zoo_report.chart(results, path))


def main(argv):
    """The fresh-process probe: `python -m ember.bench.zoo '{"model": ..., "compiler": ...}'`."""
    return fresh.probe_main(argv, probe, "python -m ember.bench.zoo JSON")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
