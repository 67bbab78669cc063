"""Suite `dynamic`: a language model served over changing sequence lengths, in Ember and torch.compile
(Inductor), default settings (automatic dynamic shapes), one run.

Workloads (inference, no_grad, random init, batch 2): Ember's nanoGPT (python/ember/models/nanogpt.py,
4 layers, d=256, 8 heads, vocabulary 256) and transformers' GPT-2 (2 layers, d=128, 4 heads). Each compiler
meets a fixed schedule of 20 sequence lengths (LENGTHS), each once, from a fresh state: empty compiler
caches (bench/fresh.py, scratch_caches), the model called eagerly once before the schedule.

Columns, per workload and compiler:
  graphs     graphs compiled over the schedule (the first is static; a recompile makes the length symbolic)
  compile    seconds spent compiling over the schedule: the schedule's wall time minus what the same calls
             take once compiled
  t=N        median per-call time at length N once the schedule ran (the dynamic graph's speed)
  static     per-call time at length N of a graph compiled for that length only (dynamic=False), timed
             interleaved with the dynamic graph's calls at that length so that both see the same machine: the
             dynamic graph's speed is compared against it (issue 14: within 10%)
With `--device cuda` the models and inputs live on the GPU and every timed call ends with a synchronize (the
time a caller sees). Ember's row also holds, and prints, where its compile time went
(bench/compile_breakdown.py: tracing, the backend's steps, Triton's compile jobs by stage, workers).
`--device cuda-build` needs no GPU: Ember only, its graphs compiled by the GPU backend to sm_90 cubins
(option triton_build_only) and run eagerly on the CPU; it measures the CUDA path's compile time, not speed.
Outputs are checked against eager on every call of the schedule; a mismatch or a failure is recorded in the
row and the suite exits 1 at the end.
`--probe` runs the other half of the suite instead: which transformers models stay symbolic under
`dynamic=True` (bench/dynamic_probe.py).
"""
import contextlib
import time

from . import compile_breakdown, dynamic_probe, fresh, options, report, timing

SAMPLING = {"repeat": 7, "warmup": 2, "min_sample_ms": 1.0}
WORKLOADS = ("nanogpt", "gpt2")
LENGTHS = (7, 16, 17, 31, 32, 33, 48, 63, 64, 65, 96, 100, 127, 128, 129, 150, 200, 255, 256, 300)
PROBES = (64, 128, 129, 256)


def add_arguments(parser):
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated (default: {', '.join(WORKLOADS)})")
    options.add_sampling_arguments(parser, SAMPLING)
    options.add_no_inductor_argument(parser)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda", "cuda-build"))
    parser.add_argument("--quick", action="store_true", help="small models and few lengths: checks that the suite runs")
    parser.add_argument("--out", default="bench-results/dynamic.json", help="JSON path; .md is written next to it")
    parser.add_argument("--probe", action="store_true",
                        help="probe transformers models under dynamic=True: graphs over 3 sizes and every pinned size "
                             "(writes dynamic_probe.json)")
    parser.add_argument("--models", default="", help=f"--probe: comma-separated (default: "
                                                     f"{', '.join(dynamic_probe.PROBE_MODELS)})")
    parser.add_argument("--backend", default="ember", choices=("ember", "eager"),
                        help="--probe: the full pipeline, or capture only (faster; the same capture pins)")


def _build(name, quick, device):
    """(model, make_input(t), description); the model and its inputs on `device`."""
    model, make, desc = _build_cpu(name, quick)
    if device == "cuda-build":
        return model, make, desc
    return model.to(device), lambda t: tuple(a.to(device) for a in make(t)), desc


def _build_cpu(name, quick):
    import torch
    torch.manual_seed(0)
    if name == "nanogpt":
        from ember.models.nanogpt import GPT, GPTConfig, random_tokens
        cfg = (GPTConfig(block_size=512, vocab_size=64, n_layer=2, n_head=4, n_embd=64, dropout=0.0) if quick else
               GPTConfig(block_size=512, vocab_size=256, n_layer=4, n_head=8, n_embd=256, dropout=0.0))
        model = GPT(cfg).eval()
        return model, lambda t: (random_tokens(cfg, 2, t, seed=t),), f"nanoGPT {cfg.n_layer} layers, d={cfg.n_embd}"
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(n_layer=2, n_embd=64 if quick else 128, n_head=4, vocab_size=256, n_positions=512)
        model = GPT2LMHeadModel(cfg).eval()
        model.config.use_cache = False

        def make(t):
            g = torch.Generator().manual_seed(t)
            return (torch.randint(0, cfg.vocab_size, (2, t), generator=g),)
        return model, make, f"transformers GPT-2 {cfg.n_layer} layers, d={cfg.n_embd}"
    raise ValueError(f"unknown workload {name!r}")


def _logits(out):
    return out if not hasattr(out, "logits") else out.logits


def _compile(compiler, model, dynamic, reset=True, device="cpu"):
    if compiler == "ember":
        import ember
        if reset:
            ember.reset()
        return ember.compile(model, dynamic=dynamic, options={"triton_build_only": device == "cuda-build"})
    import torch
    import torch._dynamo
    if reset:
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
    return torch.compile(model, dynamic=dynamic)


def _graphs(compiler):
    if compiler == "ember":
        import ember
        return ember.stats()["graphs"]
    import torch._dynamo
    return torch._dynamo.utils.counters["stats"].get("unique_graphs", 0)


def _per_call(fns, args, sampling, device):
    """Median seconds per call of each of `fns` (name -> callable), interleaved."""
    import torch
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def call(fn):
        fn(*args)
        sync()
    times = timing.measure({k: (lambda fn=fn: call(fn)) for k, fn in fns.items()}, warmup=sampling["warmup"],
                           repeats=sampling["repeat"], min_sample_s=sampling["min_sample_ms"] / 1e3)
    return {k: t.median for k, t in times.items()}


def _run(name, compiler, sampling, quick, device):
    import torch
    model, make, desc = _build(name, quick, device)
    lengths = LENGTHS[:6] if quick else LENGTHS
    # Build only: the calls run eagerly, so there is no speed to compare.
    probes = () if device == "cuda-build" else tuple(p for p in PROBES if p in lengths) or lengths[-2:]
    row = {"workload": name, "description": desc, "compiler": compiler}
    with torch.no_grad():
        # Eager's one-time costs (CUDA's lazy module loading, cuBLAS's handle) are nobody's compile time.
        model(*make(lengths[0]))
        fn = _compile(compiler, model, None, device=device)
        collecting = compile_breakdown.collect() if compiler == "ember" else contextlib.nullcontext({})
        with collecting as breakdown:
            start = time.perf_counter()
            for t in lengths:
                args = make(t)
                torch.testing.assert_close(_logits(fn(*args)), _logits(model(*args)))
            schedule = time.perf_counter() - start
        if breakdown:
            row["breakdown"] = breakdown
            print(f"  {name} / ember compile: {compile_breakdown.line(breakdown)}", flush=True)
        row["graphs"] = _graphs(compiler)
        once = {"warmup": 0, "repeat": 1, "min_sample_ms": 0.0}
        steady = sum(_per_call({"x": fn}, make(t), once, device)["x"] for t in lengths)
        row["compile_s"] = max(schedule - steady, 0.0)
        row["dynamic"], row["static"] = {}, {}
        for t in probes:
            # Compiled beside the dynamic graph (no reset): both stay cached, so their calls interleave.
            static = _compile(compiler, model, False, reset=False)
            static(*make(t))
            times = _per_call({"dynamic": fn, "static": static}, make(t), sampling, device)
            row["dynamic"][t], row["static"][t] = times["dynamic"], times["static"]
    return row


def _stop_compile_workers():
    import sys
    if "ember._triton.compile" in sys.modules:
        sys.modules["ember._triton.compile"].shutdown()


def _markdown(rows):
    out = []
    for name in dict.fromkeys(r["workload"] for r in rows):
        group = [r for r in rows if r["workload"] == name]
        out.append(f"### {group[0].get('description', name)}\n")
        probes = next((list(r["dynamic"]) for r in group if "dynamic" in r), [])
        header = ["compiler", "graphs", "compile"] + [f"t={t} dyn / static" for t in probes]
        table = []
        for r in group:
            if "error" in r:
                table.append([r["compiler"], "failed: " + r["error"]] + [""] * (len(header) - 2))
                continue
            cells = [r["compiler"], str(r["graphs"]), timing.format_s(r["compile_s"])]
            for t in probes:
                d, s = r["dynamic"][t], r["static"][t]
                cells.append(f"{timing.format_us(d)} / {timing.format_us(s)} ({d / s:.2f}x)")
            table.append(cells)
        out.append(report.markdown_table(header, table))
    return "\n".join(out)


def run(args):
    if args.probe:
        return dynamic_probe.run(args)
    sampling = options.sampling_config(args, SAMPLING)
    names = report.parse_names(args.workloads, WORKLOADS, "workload")
    compilers = ["ember"] + ([] if args.no_inductor or args.device == "cuda-build" else ["inductor"])
    rows, ok = [], True
    for name in names:
        for compiler in compilers:
            print(f"{name} / {compiler} ...", flush=True)
            try:
                with fresh.scratch_caches("ember-bench-dynamic-"):  # cold caches: compile time from scratch
                    try:
                        rows.append(_run(name, compiler, sampling, args.quick, args.device))
                    finally:  # Ember's compile workers: the next row starts its own, in its caches
                        _stop_compile_workers()
            except Exception as exc:  # noqa: BLE001 -- recorded in the row; the suite carries on
                ok = False
                rows.append({"workload": name, "compiler": compiler, "error": report.error_text(exc)})
    results = {"environment": report.environment(), "device": args.device, "lengths": list(LENGTHS), "rows": rows, "ok": ok}
    return report.finish(args.out, results, _markdown(rows))
