"""Suite `overhead`: what a compiler adds to every call, and what its first call costs to capture a model.

Workloads are chosen so that kernels cost next to nothing and the compiler's own work shows:
  add  `x + 1` on a 16-element float tensor (one op: guards + dispatch + call overhead)
  gpt  a 12-layer nanoGPT-style model on tiny inputs (d=32, 2 heads, seq 8, batch 1; ~270 graph ops)

For each compiler, in a fresh state (its reset()), the suite compiles the workload, times the first call,
checks its output against eager, then times eager and compiled calls interleaved:
  overhead = median(compiled call) - median(eager call), with the spread of per-round differences as noise
  capture  = first compiled call - median eager call (Dynamo's capture is measured with backend="eager", so
             no code generation is included; Inductor's first call is reported separately, codegen included)
Capture is repeated (--capture-repeats, each after a reset) and the median is reported; Ember's own
ember.stats()["trace_seconds"] is recorded next to it.

Targets (DESIGN.md, notes/anchors.md): Ember's per-call overhead <= 1/4 of torch.compile()'s, Ember's
capture <= 1/10 of Dynamo's.

Everything runs under torch.no_grad() (inference) with a fixed number of torch threads (default 1): the
workloads are too small to use more, and one thread keeps other processes' noise out.
"""
import statistics

from . import report, timing
from .compilers import COMPILERS, check_captured, parse_compilers

OVERHEAD_TARGET = 0.25
CAPTURE_TARGET = 0.10


def _add_one(x):
    return x + 1


def _user_add_one():
    from ember.models import as_user_code
    return as_user_code(_add_one)


def add_arguments(parser):
    parser.add_argument("--compilers", default=",".join(COMPILERS),
                        help=f"comma-separated, in run order (default: all of {', '.join(COMPILERS)})")
    parser.add_argument("--repeats", type=int, default=31, help="timed samples per callable (default 31)")
    parser.add_argument("--warmup", type=int, default=10, help="calls before timing starts (default 10)")
    parser.add_argument("--min-sample-ms", type=float, default=5.0,
                        help="each sample times enough calls to last this long (default 5 ms)")
    parser.add_argument("--capture-repeats", type=int, default=5,
                        help="fresh compiles whose first call is timed, per compiler (default 5)")
    parser.add_argument("--layers", type=int, default=12, help="layers of the GPT workload (default 12)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    parser.add_argument("--out", default="bench-results/overhead.json", help="JSON path; a .md is written next to it")


def _gpt_workload(layers):
    from ember.models import GPT, GPTConfig, random_tokens
    import torch
    config = GPTConfig(block_size=8, vocab_size=64, n_layer=layers, n_head=2, n_embd=32)
    torch.manual_seed(0)
    model = GPT(config).eval()
    idx = random_tokens(config, batch=1, seq=8, seed=1)
    return {"description": f"nanoGPT {layers} layers, d=32, 2 heads, seq 8, batch 1, vocab 64",
            "fn": model, "args": (idx,)}


def _add_workload():
    import torch
    x = torch.randn(16, generator=torch.Generator().manual_seed(0))
    return {"description": "x + 1, 16-element float32 tensor", "fn": _user_add_one(), "args": (x,)}


def _compare(out, expected):
    """(matches, max_abs_diff) under torch.testing.assert_close's default tolerances."""
    import torch
    try:
        torch.testing.assert_close(out, expected)
        ok = True
    except AssertionError:
        ok = False
    if isinstance(out, torch.Tensor) and isinstance(expected, torch.Tensor) and out.shape == expected.shape:
        diff = (out.double() - expected.double()).abs().max().item() if out.numel() else 0.0
    else:
        diff = None
    return ok, diff


def _run_one(compiler, workload, expected, args):
    """Compile in a fresh state, time the first call, check it, then time eager vs compiled interleaved."""
    fn, call_args = workload["fn"], workload["args"]
    result = {"label": compiler.label, "error": None}
    try:
        compiler.reset()
        compiled = compiler.compile(fn)
        first_s, out = timing.time_first_call(lambda: compiled(*call_args))
        result["counters"] = compiler.counters()
        check_captured(compiler, result["counters"])
        result["first_call_s"] = first_s
        result["matches_eager"], result["max_abs_diff"] = _compare(out, expected)
        timings = timing.measure({"eager": lambda: fn(*call_args), "compiled": lambda: compiled(*call_args)},
                                 warmup=args.warmup, repeats=args.repeats, min_sample_s=args.min_sample_ms / 1e3)
    except Exception as exc:  # a compiler failing on a workload is a result to report, not a reason to stop
        result["error"] = report.error_text(exc)
        return result
    result["eager"] = timings["eager"].to_json()
    result["compiled"] = timings["compiled"].to_json()
    result["overhead"] = timing.difference(timings["compiled"], timings["eager"]).to_json()
    # Robust to drift between compilers' runs, unlike comparing their compiled medians directly.
    result["compiled_over_eager"] = timings["compiled"].median / timings["eager"].median
    result["capture_s"] = first_s - timings["eager"].median
    return result


def _measure_capture(compiler, workload, r, args, capture):
    """Adds capture repeats to r's first call and stores the summary in capture[compiler]; False on failure."""
    samples = [(r["first_call_s"], r["counters"].get("trace_seconds"))]
    ok = True
    try:
        samples += _capture_samples(compiler, workload, args.capture_repeats - 1)
    except Exception as exc:  # reported like any other failure
        r["error"] = f"during capture repeats: {report.error_text(exc)}"
        ok = False
    eager_s = r["eager"]["median_us"] / 1e6
    captures = [first - eager_s for first, _ in samples]
    traces = [t for _, t in samples if t is not None]
    capture[compiler.name] = {
        "eager_call_s": eager_s,
        "first_call_s_samples": [first for first, _ in samples],
        "capture_s_samples": captures,
        "capture_s": statistics.median(captures),
        "trace_seconds_samples": traces,
        "trace_seconds_median": statistics.median(traces) if traces else None,
    }
    return ok


def _capture_samples(compiler, workload, extra):
    """`extra` more fresh compiles of the workload; returns [(first_call_s, trace_seconds or None), ...]."""
    fn, call_args = workload["fn"], workload["args"]
    samples = []
    for _ in range(extra):
        compiler.reset()
        compiled = compiler.compile(fn)
        first_s, _ = timing.time_first_call(lambda: compiled(*call_args))
        samples.append((first_s, compiler.counters().get("trace_seconds")))
        del compiled
    return samples


def _ratio(value, reference, target):
    if value is None or reference is None or reference <= 0:
        return {"ratio": None, "met": None}
    r = value / reference
    return {"ratio": r, "met": r <= target}


def _targets(names, workloads, capture):
    """Target checks for every (Ember, reference) pair that was run; a failed side gives ratio None."""
    checks = []

    def overhead_of(wname, cname):
        r = workloads[wname]["results"].get(cname)
        if not r or r.get("error"):
            return None
        return r["overhead"]["us"]

    pairs = [(ours, theirs) for ours, theirs in (("ember", "inductor"), ("ember_eager", "dynamo_eager"))
             if ours in names and theirs in names]
    for wname in workloads:
        for ours, theirs in pairs:
            a, b = overhead_of(wname, ours), overhead_of(wname, theirs)
            checks.append({"name": f"overhead {wname}: {ours} vs {theirs}", "ember": a, "reference": b,
                           "unit": "us", "target": OVERHEAD_TARGET, **_ratio(a, b, OVERHEAD_TARGET)})
    for ours in ("ember", "ember_eager"):
        if ours in names and "dynamo_eager" in names:
            a = capture.get(ours, {}).get("capture_s")
            b = capture.get("dynamo_eager", {}).get("capture_s")
            checks.append({"name": f"capture gpt: {ours} vs dynamo_eager", "ember": a, "reference": b, "unit": "s",
                           "target": CAPTURE_TARGET, **_ratio(a, b, CAPTURE_TARGET)})
    return checks


def _fmt_us(us):
    return "—" if us is None else f"{us:.1f}"


def _fmt_ratio(check):
    if check["ratio"] is None:
        return "n/a", "n/a (a side failed, or the reference is not > 0)"
    return f"{check['ratio']:.3f}", "yes" if check["met"] else "NO"


def _markdown(results):
    env, cfg = results["environment"], results["config"]
    out = ["# Ember benchmark: overhead", "", report.environment_line(env), "",
           f"Per-call times: median of {cfg['repeats']} interleaved samples after {cfg['warmup']} warm-up calls; "
           f"each sample lasts >= {cfg['min_sample_ms']} ms. Noise = IQR of per-round (compiled - eager) "
           f"differences; '~' marks an overhead within noise. The first compiler's first call also pays "
           f"one-time process costs.", ""]
    rows = []
    for wname, w in results["workloads"].items():
        for cname, r in w["results"].items():
            if r["error"]:
                rows.append([wname, cname, "—", "—", "—", "—", "—", "—", "—", f"error: {r['error']}"])
                continue
            o = r["overhead"]
            rows.append([wname, cname, r["counters"]["graphs"], _fmt_us(r["eager"]["median_us"]),
                         _fmt_us(r["compiled"]["median_us"]), f"{r['compiled_over_eager']:.2f}",
                         ("~" if o["within_noise"] else "") + _fmt_us(o["us"]), _fmt_us(o["noise_us"]),
                         timing.format_s(r["first_call_s"]),
                         "yes" if r["matches_eager"] else f"NO (max abs diff {r['max_abs_diff']})"])
    out.append(report.markdown_table(["workload", "compiler", "graphs", "eager µs", "compiled µs", "compiled/eager",
                                      "overhead µs", "noise µs", "first call", "matches eager"], rows))
    if results["capture"]:
        out += ["", f"Capture of the gpt workload (first call - eager call; median of up to "
                    f"{cfg['capture_repeats']} fresh compiles):", ""]
        rows = []
        for cname, c in results["capture"].items():
            trace = c.get("trace_seconds_median")
            rows.append([cname, timing.format_s(c["capture_s"]), timing.format_s(min(c["capture_s_samples"])),
                         timing.format_s(c["first_call_s_samples"][0]),
                         "—" if trace is None else timing.format_s(trace), len(c["capture_s_samples"])])
        out.append(report.markdown_table(["compiler", "capture (median)", "capture (min)", "first call (1st sample)",
                                          "ember trace_seconds", "samples"], rows))
    if results["targets"]:
        out += ["", "Targets:", ""]
        rows = []
        for t in results["targets"]:
            unit = "µs" if t["unit"] == "us" else "s"
            fmt = (lambda v: "—" if v is None else f"{v:.1f}") if unit == "µs" else \
                  (lambda v: "—" if v is None else f"{v:.4f}")
            ratio, met = _fmt_ratio(t)
            rows.append([t["name"], f"{fmt(t['ember'])} {unit}", f"{fmt(t['reference'])} {unit}", ratio,
                         f"<= {t['target']}", met])
        out.append(report.markdown_table(["check", "ember", "reference", "ratio", "target", "met"], rows))
    return "\n".join(out)


def run(args):
    import torch
    compilers = parse_compilers(args.compilers)
    if args.repeats < 1 or args.capture_repeats < 1 or args.layers < 1 or args.threads < 1:
        raise ValueError("--repeats, --capture-repeats, --layers and --threads must be >= 1")
    torch.set_num_threads(args.threads)
    config = {"compilers": [c.name for c in compilers], "repeats": args.repeats, "warmup": args.warmup,
              "min_sample_ms": args.min_sample_ms, "capture_repeats": args.capture_repeats, "layers": args.layers,
              "threads": args.threads}
    results = {"suite": "overhead", "environment": report.environment(), "config": config, "workloads": {},
               "capture": {}}
    ok = True
    with torch.no_grad():
        for wname, workload in (("add", _add_workload()), ("gpt", _gpt_workload(args.layers))):
            expected = workload["fn"](*workload["args"])
            entry = results["workloads"][wname] = {"description": workload["description"], "results": {}}
            for compiler in compilers:
                print(f"[overhead] {wname}: {compiler.name} ...", flush=True)
                r = _run_one(compiler, workload, expected, args)
                entry["results"][compiler.name] = r
                if r["error"] or not r["matches_eager"]:
                    ok = False
                if wname == "gpt" and not r["error"] and compiler.name != "inductor":
                    ok &= _measure_capture(compiler, workload, r, args, results["capture"])
                if not r["error"]:
                    compiler.reset()  # leave nothing cached behind for the next compiler
    results["targets"] = _targets(config["compilers"], results["workloads"], results["capture"])
    results["ok"] = ok
    markdown = _markdown(results)
    print()
    print(markdown)
    md_path = report.write_results(args.out, results, markdown)
    print(f"\nwrote {args.out} and {md_path}")
    if not ok:
        print("some compiler failed or disagreed with eager: see the table above")
    return 0 if ok else 1

