"""One zoo model's row, the parts both of the zoo's steps use (zoo.py's no_grad call, zoo_train.py's training
step): building the model or recording why not, float64 reference outputs, judging an output by compare.py's
rule, Ember's and Dynamo's explain, and the timing and compile columns that close a row."""
import copy

from . import compare, models, report, timing, zoo_models
from .models_workloads import tensors_of


def cast(value, dtype):
    import torch
    return value.to(dtype) if isinstance(value, torch.Tensor) and value.is_floating_point() else value


def run_in_float64(w, compile_model=lambda model: model):
    """The model's outputs computed in float64 (a copy of the weights and inputs), the copy passed through
    `compile_model` first (a compiler's compile, or none for the reference)."""
    import torch
    model = compile_model(copy.deepcopy(w.model).to(torch.float64))
    return tensors_of(model(*(cast(a, torch.float64) for a in w.args),
                            **{k: cast(v, torch.float64) for k, v in w.kwargs.items()}))


def float64_outputs(w):
    """The float64 reference outputs, or None when the model does not run in float64 (then outputs are judged
    against eager's alone)."""
    try:
        return run_in_float64(w)
    except Exception:  # noqa: BLE001 -- any failure only means there is no float64 reference
        return None


def judge(out, eager_out, reference, eager_error):
    """{"max_abs_error", "matches_eager", "wrong"} of one compiled output, by compare.py's rule."""
    got = tensors_of(out)
    result = {"matches_eager": compare.matches(got, eager_out)}
    if reference is None:
        result["max_abs_error"] = None
        result["wrong"] = not result["matches_eager"]
    else:
        result["max_abs_error"] = compare.max_abs_error(got, reference)
        result["wrong"] = compare.is_wrong(result, eager_error)
    return result


FLOAT64_TOLERANCE = 1e-7  # of the reference's largest magnitude: float64 rounding, not a formula


def recheck_in_float64(result, run_float64, reference):
    """A float32 result judged wrong, run again in float64 by the same compiler (`run_float64()` -> its tensors):
    when that matches the float64 `reference` tensors (FLOAT64_TOLERANCE), the float32 error is the model's
    conditioning, not a wrong formula, and the verdict becomes `ill_conditioned` (not wrong). Why: a float32 error
    can pass twice eager's on a correct program -- ReLU after a BatchNorm over few values per channel flips mask bits
    on rounding (a training step), a deep network of BatchNorms with random statistics amplifies a reordered sum
    (EfficientNetV2's output at magnitude 120: eager 2.9e-4, Ember 6.5e-4, Ember in float64 2e-12). result gets
    `float64_error` (None when the float64 run fails)."""
    try:
        error = compare.max_abs_error(run_float64(), reference)
    except Exception:  # noqa: BLE001 -- no float64 run only means no second opinion
        result["float64_error"] = None
        return
    result["float64_error"] = error
    if error is not None and error <= FLOAT64_TOLERANCE * max(t.abs().max().item() for t in reference if t.numel()):
        result["wrong"] = False
        result["ill_conditioned"] = True


def explain_ember(w, **compile_kwargs):
    import ember
    ember.reset()
    seconds, info = timing.time_first_call(lambda: ember.explain(w.model, **compile_kwargs)(*w.args, **w.kwargs))
    return seconds, {"graphs": info.graph_count, "breaks": info.graph_break_count, "ops": info.op_count,
                     "kernels": sum(info.kernel_counts),
                     "backend_fallbacks": sum(1 for f in info.backend_fallbacks if f),
                     "backend_fallback_reasons": [f for f in info.backend_fallbacks if f],
                     "islands": [island for graph in info.autograd_islands for island in graph],
                     "break_reasons": [{"reason": r.reason, "where": f"{r.filename}:{r.lineno}"}
                                       for r in info.break_reasons]}


def explain_dynamo(w):
    import torch._dynamo
    torch._dynamo.reset()
    try:
        info = torch._dynamo.explain(w.model)(*w.args, **w.kwargs)
        return {"graphs": info.graph_count, "breaks": info.graph_break_count, "error": None,
                "break_reasons": [str(getattr(r, "reason", r)).splitlines()[0][:200] for r in info.break_reasons]}
    except Exception as exc:  # noqa: BLE001 -- Dynamo failing on a model is data, not a reason to stop
        return {"error": report.error_text(exc)}
    finally:
        torch._dynamo.reset()


def new_row(name):
    """(row, workload) of the zoo model `name`; workload None when its library failed to build it (the row
    says why)."""
    entry = zoo_models.MODELS[name]
    row = {"library": entry.library, "family": entry.family, "description": entry.description, "error": None,
           "results": {"eager": {"label": "eager PyTorch", "error": None}}}
    try:
        return row, zoo_models.build(name)
    except Exception as exc:  # noqa: BLE001 -- the model's library failed to build it: recorded
        row["error"] = f"build: {report.error_text(exc)}"
        return row, None


def compile_each(name, row, callables, compilers, check, what=""):
    """Run `check(compiler)` -> (result, compiled callable or None) for each compiler: the result becomes its row
    entry and a compiled callable joins `callables` (to be timed)."""
    for compiler in compilers:
        print(f"[zoo] {name}: {compiler.name}{what} ...", flush=True)
        row["results"][compiler.name], compiled = check(compiler)
        if compiled is not None:
            callables[compiler.name] = compiled


def time_and_finish(name, row, callables, compilers, config, eager_s):
    """Time `callables` (eager's and each compiler's that ran, unless --no-time), then fill in each compiler's
    compile_s (its first call - the fastest eager call, of eager_s and the timed ones) and its cold compiles."""
    timings = {}
    if config.get("time", True):
        try:
            timings = timing.measure(callables, warmup=config["warmup"], repeats=config["repeat"],
                                     min_sample_s=config["min_sample_ms"] / 1e3)
        except Exception as exc:  # noqa: BLE001
            for cname in callables:
                row["results"][cname]["error"] = f"while timing: {report.error_text(exc)}"
    for compiler in compilers:
        compiler.reset()
    for cname, t in timings.items():
        row["results"][cname].update(time=t.to_json(), speedup=timings["eager"].median / t.median)
    fastest_eager = min([eager_s] + ([timings["eager"].min] if timings else []))
    for compiler in compilers:
        r = row["results"][compiler.name]
        if "first_call_s" in r:
            r["compile_s"] = r["first_call_s"] - fastest_eager  # the fastest: a slow sample must not flatter
    if name in config["cold_models"]:
        for compiler in compilers:
            if row["results"][compiler.name]["error"] is None:
                print(f"[zoo] {name}: {compiler.name} cold compile (fresh process) ...", flush=True)
                row["results"][compiler.name]["cold"] = models.cold_compile("ember.bench.zoo", name, compiler.name)
