"""The zoo in training mode (`python -m ember.bench zoo --train`): one training step per model, eager vs Ember
(and Inductor unless --no-inductor).

Needs: the zoo's catalogue (zoo_models) and zoo_row's judge and explain helpers.
Guarantees: run_model returns a row shaped as zoo.run_model's (so zoo_report's summary and tables read it), whose
Ember result's counters also hold the backward graphs and autograd islands it built, and a result judged
against float64 the step's tensors farthest from it (`worst_tensors`). A step is: the model in train(),
torch.manual_seed(STEP_SEED) and numpy's seed, a forward, the loss = the sum of the means of the float outputs, backward().
Every side (eager, Ember, Inductor, the float64 reference) steps its own deep copy of the same model, so
weights, BatchNorm statistics and inputs are the same; the compilers run with `fallback_random` (Ember's
option, Inductor's config), so dropout draws eager's masks (docs/autograd.md) and the float64 copy draws the
same ones (CPU bernoulli does not depend on the dtype).
Images for timm and torchvision come in a batch of two (train_workload). Judged tensors: the loss, every
parameter's .grad (None as zeros) and every float buffer after the step (BatchNorm's running statistics),
together by zoo_row.judge's rule (as a model's tuple of outputs); the tensors farthest from the float64 step are
named beside the verdict.
Why its own file: the eval suite measures calls of one forward under no_grad; a step differs in what it runs,
what it compares and what it counts, and zoo.py stays a readable size.
"""
import copy
import dataclasses

from . import compare, report, timing, zoo_models, zoo_row
from .models_workloads import tensors_of

STEP_SEED = 1234
OPTIONS = {"fallback_random": True}  # Ember: dropout as aten's native_dropout, eager's masks


def _floats(out):
    return [t for t in tensors_of(out) if t.is_floating_point()]


def loss_of(out):
    """The step's scalar loss: the sum of the means of the model's float outputs."""
    return sum(t.mean() for t in _floats(out))


def step(fn, w, dtype=None):
    """One forward and backward of `fn` (a model or its compiled form) on w's inputs -> the loss, detached."""
    import numpy
    import torch
    args = [zoo_row.cast(a, dtype) if dtype else a for a in w.args]
    kwargs = {k: zoo_row.cast(v, dtype) if dtype else v for k, v in w.kwargs.items()}
    torch.manual_seed(STEP_SEED)
    numpy.random.seed(STEP_SEED)  # wav2vec2-family models draw SpecAugment's masks with numpy in train()
    loss = loss_of(fn(*args, **kwargs))
    loss.backward()
    return loss.detach()


def judged(model, loss):
    """[(name, tensor)] a step is judged by: the loss, each parameter's grad, each float buffer."""
    import torch
    out = [("loss", loss)]
    out += [(f"grad {n}", p.grad if p.grad is not None else torch.zeros_like(p))
            for n, p in model.named_parameters() if p.requires_grad]
    out += [(f"buffer {n}", b) for n, b in model.named_buffers() if b.is_floating_point()]
    return out


def clear_grads(model):
    for p in model.parameters():
        p.grad = None


def train_workload(w, library):
    """w with a batch of two images for timm and torchvision (the eval suite's batch of one): BatchNorm in train()
    needs more than one value per channel, and an SE block or a head after global pooling has one per image."""
    import torch
    if library not in ("timm", "torchvision"):
        return w
    (image,) = w.args
    other = torch.randn(image.shape, generator=torch.Generator().manual_seed(zoo_models.SEED + 2))
    return dataclasses.replace(w, args=(torch.cat([image, other]),))


def trained_copy(w):
    """A deep copy of w's model in train()."""
    return copy.deepcopy(w.model).train()


def float64_judged(w):
    """judged() of a float64 copy's step, or None when the model does not run in float64."""
    import torch
    try:
        model = trained_copy(w).to(torch.float64)
        return judged(model, step(model, w, torch.float64))
    except Exception:  # noqa: BLE001 -- any failure only means there is no float64 reference
        return None


def judge_step(got, eager, reference):
    """zoo_row.judge on the step's judged tensors together, as on a model's tuple of outputs -> its verdict, plus
    `worst_tensors`: the three tensors farthest from the float64 step relative to their size (name, Ember's and
    eager's max error, the reference's max magnitude plus eager's largest error, so that a tensor zero in exact
    arithmetic, a conv bias before BatchNorm, does not lead), to tell rounding (errors ~1e-4 of the size, as
    fp32 sums reordered through BatchNorm give) from a wrong formula (errors of the size itself)."""
    tensors = lambda pairs: [t for _, t in pairs]  # noqa: E731
    ref = tensors(reference) if reference else None
    eager_error = compare.max_abs_error(tensors(eager), ref) if ref else None
    verdict = zoo_row.judge(tensors(got), tensors(eager), ref, eager_error)
    if ref:
        rows = []
        for (name, t), e, r in zip(got, tensors(eager), ref):
            size = r.abs().max().item() + eager_error
            rows.append((compare.max_abs_error([t], [r]), compare.max_abs_error([e], [r]), size, name))
        rows.sort(key=lambda x: -(x[0] if x[0] is not None else float("inf")) / x[2])
        verdict["worst_tensors"] = [{"name": n, "ember_error": g, "eager_error": e, "size": z} for g, e, z, n in rows[:3]]
    return verdict


def _compile(compiler, model):
    if compiler.family == "ember":
        import ember
        return ember.compile(model, options=OPTIONS)
    return compiler.compile(model)


def _inductor_random(compiler):
    """Inductor's fallback_random for the calls of a Dynamo-family compiler (its config is read at compile)."""
    import contextlib
    if compiler.family == "ember":
        return contextlib.nullcontext()
    import torch._inductor.config
    return torch._inductor.config.patch(fallback_random=True)


def _train_counters(compiler):
    counters = compiler.counters()
    if compiler.family == "ember":
        import ember
        s = ember.stats()
        counters.update(backward_graphs=s["backward_graphs_compiled"], autograd_islands=s["autograd_islands"])
    return counters


def float64_step(compiler, w):
    """The same compiler's training step on a float64 copy -> the judged tensors (zoo_row.recheck_in_float64)."""
    import torch
    model = trained_copy(w).to(torch.float64)
    with _inductor_random(compiler):
        loss = step(_compile(compiler, model), w, torch.float64)
    return [t for _, t in judged(model, loss)]


def _compile_and_check(compiler, w, eager, reference):
    """One compiler's step on its own copy -> (result, a zero-argument step or None)."""
    result = {"label": compiler.label, "error": None}
    try:
        if compiler.family == "ember":
            _, result["explain"] = zoo_row.explain_ember(dataclasses.replace(w, model=trained_copy(w)), options=OPTIONS)
        compiler.reset()
        model = trained_copy(w)
        compiled = _compile(compiler, model)
        with _inductor_random(compiler):
            result["first_call_s"], loss = timing.time_first_call(lambda: step(compiled, w))
        result["counters"] = _train_counters(compiler)
        result.update(judge_step(judged(model, loss), eager, reference))
        if result["wrong"] and reference:
            zoo_row.recheck_in_float64(result, lambda: float64_step(compiler, w), [t for _, t in reference])

        def again():
            clear_grads(model)
            with _inductor_random(compiler):
                step(compiled, w)
        return result, again
    except Exception as exc:  # noqa: BLE001 -- a compiler failing on a model is a result
        result["error"] = report.error_text(exc)
        return result, None


def run_model(name, compilers, config):
    """zoo.run_model's row for one training step of the model `name` (see the module docstring)."""
    row, w = zoo_row.new_row(name)
    if w is None:
        return row
    w = train_workload(w, row["library"])
    try:
        model = trained_copy(w)
        first_s, loss = timing.time_first_call(lambda: step(model, w))
        eager = judged(model, loss)
    except Exception as exc:  # noqa: BLE001
        row["error"] = f"eager: {report.error_text(exc)}"
        return row
    reference = float64_judged(w)
    row["results"]["eager"]["max_abs_error"] = (
        compare.max_abs_error([t for _, t in eager], [t for _, t in reference]) if reference else None)
    if config["dynamo"]:
        print(f"[zoo] {name}: torch._dynamo.explain (train) ...", flush=True)
        row["dynamo"] = zoo_row.explain_dynamo(dataclasses.replace(w, model=trained_copy(w)))

    def eager_step():
        clear_grads(model)
        step(model, w)
    steps = {"eager": eager_step}
    zoo_row.compile_each(name, row, steps, compilers,
                         lambda compiler: _compile_and_check(compiler, w, eager, reference), " (train)")
    zoo_row.time_and_finish(name, row, steps, compilers, config, first_s)
    return row
