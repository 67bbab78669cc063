"""Suite `train`: a training step — forward + backward, optionally AdamW — in eager PyTorch, Ember and
torch.compile (Inductor), side by side in one run.

Workloads (train_workloads.py has the sizes): Ember's nanoGPT with dropout 0 and 0.1, a GELU MLP, transformers'
GPT2LMHeadModel and LlamaForCausalLM (random init, their own loss with labels = ids) and a conv net with
BatchNorm in training mode; float32 on the CPU by default, `--device cuda --dtype bfloat16` on a GPU. The step
(train_step.py) is `loss = loss_of(model(*args)); loss.backward()` from gradients set to None, and with
`--adamw` then `opt.step()`: each compiler compiles the model and the optimizer's step (`ember.compile(opt.step)`,
`torch.compile(opt.step)`) of an AdamW made as eager's.

Columns, per workload and runner (eager and each compiler):
  step        median step time over samples interleaved across the runners, each sample one step or more
              (enough to last --min-sample-ms); x = eager median / runner median, a geomean closes the table
  fwd/bwd/opt the median of each phase, timed inside the same steps (each phase finished before the next)
  peak        the peak memory of two steps after the timing, from gradients set to None: resident-set growth
              on the CPU (memory.py), torch.cuda.max_memory_allocated minus what was allocated before on CUDA
              (as the gpu suite): activations, gradients, the optimizer's temporaries, each compiler's buffers
  saved       bytes the forward saves for the backward (saved_activation_bytes: one count per storage)
  first       the first compiled step(s) in this process (two with --adamw: the optimizer's first creates its state)
  grad err    max |grad - eager grad| after one step from the same weights and seed; float32 gradients must
              match eager's under rtol 1e-4 / atol 1e-5, bfloat16 ones to 5% in norm per tensor or else be no
              farther from a float64 eager step's than compare.py's rule allows (_close); not with
              dropout, whose masks each compiler draws its own way (Ember's counter-based RNG, Inductor's).
              BatchNorm's running statistics (every buffer) are held to the same rule.
  graphs      Ember's forward graphs / backward graphs / autograd islands
  cold/warm   compile time in fresh processes (train_probe.py, fresh.py), unless --no-compile-times

Targets (issue 13), printed as met / NOT MET: Ember's geomean step time / eager's <= Inductor's; Ember's peak
memory <= Inductor's on each workload; Ember's cold compile <= 1/3 of Inductor's (sums over the workloads). A
compiler that fails on a workload, or whose gradients or running statistics differ, is recorded in its row;
the suite carries on and exits 1 at the end.
"""
import copy

from . import compare, cuda_measure, fresh, memory, options, report, timing, train_step, train_workloads
from .compilers import COMPILERS

SAMPLING = {"repeat": 7, "warmup": 2, "min_sample_ms": 1.0}
SPEED_TARGET = 1.0
MEMORY_TARGET = 1.0
COLD_COMPILE_TARGET = 1 / 3
MEMORY_STEPS = 2
PROBE_TIMEOUT_S = 1800
DTYPES = ("float32", "bfloat16")


def add_arguments(parser):
    parser.add_argument("--workloads", default=",".join(train_workloads.BUILDERS),
                        help=f"comma-separated (default: {', '.join(train_workloads.BUILDERS)})")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--dtype", choices=DTYPES + ("bf16",), default="float32",
                        help="of the parameters and floating inputs (default float32; bf16 = bfloat16)")
    parser.add_argument("--adamw", action="store_true", help="the step ends with an AdamW step (compiled too)")
    options.add_sampling_arguments(parser, SAMPLING)
    options.add_no_inductor_argument(parser)
    parser.add_argument("--no-compile-times", action="store_true",
                        help="skip the cold and warm compiles in fresh processes (two per workload and compiler)")
    parser.add_argument("--quick", action="store_true", help="small sizes and few samples: checks that the suite runs")
    parser.add_argument("--out", default="bench-results/train.json", help="JSON path; .md and .png are written next to it")


def saved_activation_bytes(fn, *args, **kwargs):
    """(bytes, result): what torch autograd saves for the backward while `fn(*args, **kwargs)` runs —
    eager ops' saved tensors and Ember's compiled functions' (ctx.save_for_backward) alike — counted once
    per storage (a view of a saved tensor costs nothing more), parameters and inputs included."""
    import torch
    storages = {}

    def pack(t):
        s = t.untyped_storage()
        storages[(s.device, s.data_ptr())] = max(storages.get((s.device, s.data_ptr()), 0), s.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = fn(*args, **kwargs)
    return sum(storages.values()), result


# ---------------------------------------------------------------------------------------------
# Correctness after the first step

def _state(model):
    """Gradients and floating/integer buffers after a step, by name."""
    grads = {f"grad {n}": p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return grads, {f"buffer {n}": b.detach().clone() for n, b in model.named_buffers()}


def _close(got, want, ref):
    """float32 (and integer) tensors: eager's within rtol 1e-4 / atol 1e-5. bfloat16/float16 ones: eager's
    within 5% in norm, or else not wrong by compare.py's rule against the float64 step's (`ref`): two roundings
    of a small BatchNorm batch can differ by more than 5% while both are as good as the other."""
    import torch
    if got.dtype in (torch.float32, torch.float64) or not got.is_floating_point():
        try:
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
            return True
        except AssertionError:
            return False
    if (got.double() - want.double()).norm().item() <= 0.05 * want.double().norm().item() + 1e-6:
        return True
    if ref is None:
        return False
    verdict = {"matches_eager": False, "max_abs_error": compare.max_abs_error([got], [ref])}
    return not compare.is_wrong(verdict, compare.max_abs_error([want], [ref]))


def _state_check(got, want, ref):
    """(max abs difference, names that differ from eager's) over tensors named alike; `ref`: the float64
    step's tensors (or None)."""
    if set(got) != set(want):
        return float("inf"), sorted(set(got) ^ set(want))
    worst, bad = 0.0, []
    for name, w in want.items():
        worst = max(worst, (got[name].double() - w.double()).abs().max().item() if w.numel() else 0.0)
        if not _close(got[name], w, ref.get(name) if ref else None):
            bad.append(name)
    return worst, bad


def _reference_state(pristine, workload, config):
    """The state (_state) after eager's first step(s) on a float64 copy of the model and its floating inputs,
    or None for float32 runs (not needed) and models that do not run in float64."""
    import torch
    if config["dtype"] == "float32":
        return None
    model = copy.deepcopy(pristine).double()
    args = tuple(a.double() if torch.is_tensor(a) and a.is_floating_point() else a for a in workload.args)
    runner = train_step.make_runner(None, model, args, config["adamw"], config["device"])
    try:
        for _ in range(train_step.first_steps(config["adamw"])):
            train_step.phases(runner)
    except RuntimeError:
        return None
    return _state(model)


# ---------------------------------------------------------------------------------------------
# Measurements

def _peak_memory(runner, device):
    for p in runner.model.parameters():
        p.grad = None
    if device == "cuda":
        return cuda_measure.peak_memory(lambda: train_step.phases(runner), MEMORY_STEPS,
                                        cuda_measure.baseline(device, lambda: None))
    return memory.peak_delta(lambda: train_step.phases(runner), MEMORY_STEPS)


def _time(runners, config):
    """{runner: {"step" | phase: timing.Timing}}, steps interleaved across the runners."""
    fns = {name: (lambda r=r: train_step.phases(r)[0]) for name, r in runners.items()}
    timing.warm_up(fns, config["warmup"])
    steps = max(timing.calls_per_sample(f, config["min_sample_ms"] / 1e3) for f in fns.values())

    def sample(fn):
        per_step = [fn() for _ in range(steps)]
        return [sum(s[i] for s in per_step) / steps for i in range(len(train_step.PHASES))]

    samples = timing.interleave(fns, config["repeat"], sample)
    out = {}
    for name, rounds in samples.items():
        out[name] = {"step": timing.Timing([sum(s) for s in rounds], steps)}
        for i, phase in enumerate(train_step.PHASES):
            out[name][phase] = timing.Timing([s[i] for s in rounds], steps)
    return out


def _compile_runner(c, pristine, workload, config, want, ref, result):
    """Compiles a twin of the pristine model with c, takes its first step(s) and checks the gradients and buffers
    after them against eager's (`want`; `ref`: the float64 step's, for low-precision runs)."""
    c.reset()
    twin = copy.deepcopy(pristine)
    runner = train_step.make_runner(c, twin, workload.args, config["adamw"], config["device"])
    steps = train_step.first_steps(config["adamw"])

    def first():
        for _ in range(steps):
            train_step.phases(runner)
        return _state(twin)

    result["first_s"], got = timing.time_first_call(first)
    result["max_grad_diff"], bad = _state_check(got[0], want[0], ref and ref[0])
    buffer_diff, bad_buffers = _state_check(got[1], want[1], ref and ref[1])
    result["max_buffer_diff"] = buffer_diff if want[1] else None
    result["differs"] = bad + bad_buffers
    if "dropout" in workload.name:
        result["differs"] = None  # its own random numbers (Ember's counter-based dropout too): not comparable
    if c.family == "ember":
        import ember
        s = ember.stats()
        result.update(graphs=s["graphs"], backward_graphs=s["backward_graphs_compiled"], islands=s["autograd_islands"])
    else:
        result["graphs"] = c.counters()["graphs"]
    return runner


def _run_workload(name, compilers, config):
    import torch
    device = config["device"]
    workload = train_workloads.build(name, config["quick"], device, getattr(torch, config["dtype"]))
    row = {"description": workload.description, "memory_bound": False, "bytes_moved": None,
           "results": {"eager": {"label": "eager PyTorch", "error": None}}}
    pristine = copy.deepcopy(workload.model)
    runners = {"eager": train_step.make_runner(None, workload.model, workload.args, config["adamw"], device)}
    for _ in range(train_step.first_steps(config["adamw"])):
        train_step.phases(runners["eager"])
        want = _state(workload.model)
    ref = _reference_state(pristine, workload, config)
    for c in compilers:
        print(f"[train] {name}: {c.name} (in this process) ...", flush=True)
        result = row["results"][c.name] = {"label": c.label, "error": None}
        try:
            runners[c.name] = _compile_runner(c, pristine, workload, config, want, ref, result)
        except Exception as e:  # recorded, the suite goes on
            result["error"] = report.error_text(e)
    try:
        timings = _time(runners, config)
        for n, r in runners.items():
            peak = _peak_memory(r, device)
            saved, _ = saved_activation_bytes(lambda r=r: train_workloads.loss(r.forward(*r.args)))
            row["results"][n].update(peak_memory_bytes=peak["bytes"], memory_method=peak["method"], saved_bytes=saved,
                                     phases={p: timings[n][p].to_json() for p in train_step.PHASES})
    except Exception as exc:  # which runner failed is unknown: the row's timings are all void
        for n in runners:
            row["results"][n]["error"] = f"while timing: {report.error_text(exc)}"
        timings = {}
    compare.record_times(row, {n: t["step"] for n, t in timings.items()})
    if config["compile_times"]:
        for c in compilers:
            print(f"[train] {name}: {c.name} cold and warm compile (fresh processes) ...", flush=True)
            probe = {k: config[k] for k in ("quick", "device", "dtype", "adamw")}
            row["results"][c.name].update(fresh.compile_times("ember.bench.train_probe",
                                                              {**probe, "workload": name, "compiler": c.name},
                                                              "ember-bench-train-", PROBE_TIMEOUT_S))
    return row


# ---------------------------------------------------------------------------------------------
# Targets and report

def _targets(rows, config):
    if config["compilers"] != ["ember", "inductor"]:
        return []
    checks = [compare.geomean_check(rows, "ember", "inductor", SPEED_TARGET)]
    for w, row in rows.items():
        mb = [None if row["results"][c].get("peak_memory_bytes") is None else row["results"][c]["peak_memory_bytes"] / 1e6
              for c in ("ember", "inductor")]
        checks.append(compare.check(f"peak memory {w}: ember vs inductor", *mb, "MB", "<=", MEMORY_TARGET))
    if config["compile_times"]:
        checks.append(compare.compile_check(rows, "ember", "inductor", "cold", COLD_COMPILE_TARGET))
    return checks


def _failures(rows):
    lines = compare.failures_list(rows)
    for w, row in rows.items():
        for c, r in row["results"].items():
            if r.get("differs"):
                lines.append(f"- {w} / {c}: differs from eager after one step: {', '.join(r['differs'][:5])}"
                             + (f" and {len(r['differs']) - 5} more" if len(r["differs"]) > 5 else ""))
    return lines


def _ms(value_us):
    return report.fmt(None if value_us is None else value_us / 1e3, ".2f")


def _phase_table(rows, names, adamw):
    phases = train_step.PHASES if adamw else train_step.PHASES[:2]
    short = {"forward": "fwd", "backward": "bwd", "optimizer": "opt"}
    header = ["workload"] + [f"{n} {short[p]} ms" for n in names for p in phases]
    lines = [[w] + [_ms(row["results"][n].get("phases", {}).get(p, {}).get("median_us")) for n in names for p in phases]
             for w, row in rows.items()]
    return report.markdown_table(header, lines)


def _memory_table(rows, names):
    compilers = names[1:]
    header = (["workload"] + [f"{n} peak MB" for n in names] + [f"{n} saved MB" for n in names]
              + [f"{c} first" for c in compilers] + [f"{c} grad err" for c in compilers] + ["ember graphs fw/bw/islands"])
    lines = []
    for w, row in rows.items():
        r = row["results"]
        mb = [report.fmt(None if r[n].get(k) is None else r[n][k] / 1e6, ".1f")
              for k in ("peak_memory_bytes", "saved_bytes") for n in names]
        first = [timing.format_s(r[c]["first_s"]) if "first_s" in r[c] else "-" for c in compilers]
        err = []
        for c in compilers:
            d = r[c].get("max_grad_diff")
            err.append("-" if d is None else f"{d:.1e}" + (" DIFFERS" if r[c]["differs"] else " (RNG)"
                                                            if r[c]["differs"] is None else ""))
        e = r.get("ember", {})
        lines.append([w] + mb + first + err + [f"{e.get('graphs', '-')}/{e.get('backward_graphs', '-')}/"
                                               f"{e.get('islands', '-')}"])
    return report.markdown_table(header, lines)


def _markdown(results):
    env, cfg, rows = results["environment"], results["config"], results["workloads"]
    names = ["eager"] + cfg["compilers"]
    step = "forward + backward" + (" + AdamW" if cfg["adamw"] else "")
    out = ["# Ember benchmark: train", "", report.environment_line(env),
           f"Device {cfg['device']}, {cfg['dtype']}; step: {step}.", ""]
    out += ["Workloads:", ""] + [f"- `{w}`: {row['description']}" for w, row in rows.items()] + [""]
    out += [f"Step time: median of {cfg['repeat']} samples interleaved across eager and the compilers, after "
            f"{cfg['warmup']} warm-up steps. × = speed-up over eager.", "", compare.speed_table(rows, names), "",
            "Phases (medians, timed inside the same steps):", "", _phase_table(rows, names, cfg["adamw"]), "",
            f"Memory: peak over {MEMORY_STEPS} steps ({'torch.cuda.max_memory_allocated' if cfg['device'] == 'cuda' else 'resident-set growth'}), "
            "bytes saved for the backward; first compiled step(s); gradient error against eager after one step.", "",
            _memory_table(rows, names)]
    compile_table = compare.compile_table(rows, names)
    if compile_table:
        out += ["", "Compile time: first compiled step(s) - eager step(s), in a fresh process with empty caches "
                "(cold), then in another with the caches the cold run left (warm).", "", compile_table]
    if results["targets"]:
        out += ["", "Targets:", "", compare.targets_table(results["targets"])]
    failures = _failures(rows)
    if failures:
        out += ["", "Failures:", ""] + failures
    return "\n".join(out)


def run(args):
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("the train suite on cuda needs a CUDA device, and torch sees none")
        return 2
    compilers = options.compilers(args)
    config = {"workloads": report.parse_names(args.workloads, train_workloads.BUILDERS, "workload"),
              "compilers": [c.name for c in compilers], "device": args.device,
              "dtype": "bfloat16" if args.dtype == "bf16" else args.dtype, "adamw": args.adamw, "quick": args.quick,
              "compile_times": not args.no_compile_times, **options.sampling_config(args, SAMPLING)}
    with fresh.scratch_caches("ember-bench-train-"):
        results = {"suite": "train", "config": config, "environment": report.environment(), "workloads": {}}
        for name in config["workloads"]:
            results["workloads"][name] = _run_workload(name, compilers, config)
    rows = results["workloads"]
    results["geomean_speedup"] = compare.geomean_speedups(rows, config["compilers"])
    results["targets"] = _targets(rows, config)
    results["ok"] = not _failures(rows)
    return report.finish(args.out, results, _markdown(results),
                         lambda png: compare.speedup_chart(rows, config["compilers"],
                                                           f"training step speed-up over eager, {args.device} "
                                                           f"{config['dtype']} (higher is better)", png))
