"""`python -m ember.demo` (`make demo`): Ember on two small programs, next to eager PyTorch.

Workloads: the seed block gelu(x @ W + b) + residual, and a 4-layer nanoGPT-style model (d=128, 4 heads,
seq 64, batch 2). For each: what Ember captured (ember.explain: graphs, breaks and their reasons, ops), the
first compiled call (capture included), per-call times of eager and Ember (median of interleaved samples
after warm-up), and whether Ember's output matches eager's. Exit status 1 if any output differs or Ember
fails, so the demo doubles as an end-to-end check. It runs in seconds on two cores, under torch.no_grad().
"""
import argparse
import sys
import time


def _workloads():
    import torch
    from ember.models import GPT, GPTConfig, random_tokens, seed_block, seed_block_inputs
    config = GPTConfig(block_size=64, vocab_size=256, n_layer=4, n_head=4, n_embd=128)
    torch.manual_seed(0)
    model = GPT(config).eval()
    return [
        ("seed block", "gelu(x @ W + b) + r, x 64x256, W 256x256", seed_block, seed_block_inputs(64, 256)),
        ("nanoGPT", f"{config.n_layer} layers, d={config.n_embd}, {config.n_head} heads, seq 64, batch 2, "
                    f"{model.num_parameters() / 1e6:.2f}M params", model, (random_tokens(config, 2, 64, seed=1),)),
    ]


def _indent(text, limit, width=150):
    lines = [line if len(line) <= width else line[:width - 4] + " ..." for line in text.splitlines()]
    shown = lines[:limit] + ([f"... ({len(lines) - limit} more lines)"] if len(lines) > limit else [])
    return "\n".join("    " + line for line in shown)


def _run_workload(name, what, fn, args, opts):
    import torch
    import ember
    from ember.bench import timing

    print(f"\n== {name}: {what}")
    expected = fn(*args)
    explain_start = time.perf_counter()
    explained = ember.explain(fn, backend=opts.backend)(*args)
    explain_s = time.perf_counter() - explain_start
    print(f"   ember.explain: {explained.graph_count} graph(s), {explained.graph_break_count} break(s), "
          f"{explained.op_count} ops ({timing.format_s(explain_s)})")
    for r in explained.break_reasons:
        print(f"     break: {r.reason} ({r.filename}:{r.lineno})")
    if opts.show_graphs:
        for g in explained.graphs:
            print(_indent(g, opts.show_graphs))

    ember.reset()
    compiled = ember.compile(fn, backend=opts.backend)
    first_s, out = timing.time_first_call(lambda: compiled(*args))
    trace_s = ember.stats()["trace_seconds"]
    if ember.stats()["graphs"] == 0:
        raise RuntimeError("Ember captured no graph: the call ran eagerly")
    try:
        torch.testing.assert_close(out, expected)
        match = "yes"
    except AssertionError as exc:
        match = "NO: " + str(exc).strip().splitlines()[0]

    t = timing.measure({"eager": lambda: fn(*args), "ember": lambda: compiled(*args)},
                       warmup=opts.warmup, repeats=opts.repeats, min_sample_s=opts.min_sample_ms / 1e3)
    eager, ours = t["eager"], t["ember"]
    print(f"   first call {timing.format_s(first_s)} (tracing {timing.format_s(trace_s)}); "
          f"per call: eager {timing.format_us(eager.median)}, ember {timing.format_us(ours.median)} "
          f"({eager.median / ours.median:.2f}x); matches eager: {match}")
    return {"name": name, "graphs": explained.graph_count, "breaks": explained.graph_break_count,
            "ops": explained.op_count, "first_s": first_s, "trace_s": trace_s, "eager": eager, "ember": ours,
            "match": match}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m ember.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="ember", choices=("ember", "eager"), help="Ember backend (default ember)")
    parser.add_argument("--repeats", type=int, default=15, help="timed samples per callable (default 15)")
    parser.add_argument("--warmup", type=int, default=5, help="calls before timing (default 5)")
    parser.add_argument("--min-sample-ms", type=float, default=2.0, help="shortest sample (default 2 ms)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (default 1: more threads on a busy small machine add noise)")
    parser.add_argument("--show-graphs", type=int, default=12, metavar="LINES",
                        help="print up to LINES lines of each captured graph (0: none; default 12)")
    opts = parser.parse_args(argv)

    import torch
    from ember.bench import report, timing

    if opts.threads < 1 or opts.repeats < 1:
        parser.error("--threads and --repeats must be >= 1")
    torch.set_num_threads(opts.threads)
    print("Ember demo:", report.environment_line(report.environment()))
    print(f'backend="{opts.backend}"; times are medians of {opts.repeats} interleaved samples after '
          f"{opts.warmup} warm-up calls")
    rows, failed = [], False
    with torch.no_grad():
        for name, what, fn, args in _workloads():
            try:
                r = _run_workload(name, what, fn, args, opts)
            except Exception as exc:  # report and go on: the other workload still says something
                print(f"   ember failed: {type(exc).__name__}: {exc}")
                failed = True
                continue
            failed |= r["match"] != "yes"
            rows.append([r["name"], r["graphs"], r["breaks"], r["ops"], timing.format_s(r["first_s"]),
                         timing.format_s(r["trace_s"]), timing.format_us(r["eager"].median),
                         timing.format_us(r["ember"].median), f"{r['eager'].median / r['ember'].median:.2f}x",
                         r["match"]])
    print()
    print(report.markdown_table(["workload", "graphs", "breaks", "ops", "first call", "tracing", "eager/call",
                                 "ember/call", "speed-up", "matches eager"], rows))
    if failed:
        print("\nember failed or disagreed with eager (see above)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
