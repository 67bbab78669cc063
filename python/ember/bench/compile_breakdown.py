"""Where Ember's compile time went while a block of code ran: one dict, and one line to print.

`collect()` is a context manager yielding a dict that it fills on exit:
  graphs            graphs compiled (compile events with ops)
  trace_s           seconds tracing bytecode into graphs, summed over graphs
  stages_s          the backend's pipeline steps, summed by step over graphs ("compile" is the code build:
                    the C++ compiler, or the Triton kernels' cubins through the cache; "compile (cached)" a
                    build that was all hits)
  triton            python/ember/_triton/compile.stats() over the block: Triton compile batches, jobs
                    (kernel x config compiled by Triton, cache misses only), the batches' wall seconds,
                    workers started and their start-up (importing triton) summed over workers, and per
                    Triton stage the seconds summed over jobs (frontend = Python AST to ttir, ptx = LLVM,
                    cubin = ptxas)
The sums over jobs overlap in time (the workers run in parallel); the batches' wall seconds do not.
"""
import contextlib

_SHOWN_STAGES = ("compile", "compile (cached)", "schedule", "lower", "emit")


@contextlib.contextmanager
def collect():
    from ember import api
    from ember._triton import compile as triton_compile

    triton_compile.reset_stats()
    out = {}
    with api.collecting_events() as events:
        try:
            yield out
        finally:
            graphs = [info for event, info in events if event == "compile" and info["ops"] > 0]
            stages = {}
            for info in graphs:
                for name, seconds in info["stage_seconds"]:
                    stages[name] = stages.get(name, 0.0) + seconds
            out.update(graphs=len(graphs), trace_s=sum(info["seconds"] for info in graphs), stages_s=stages,
                       triton=triton_compile.stats())


def line(breakdown):
    """'graphs 3; trace 0.41 s; backend 1.20 s (compile 0.95 s, ...); triton: 12 jobs in 2 batches, ...'."""
    stages = breakdown["stages_s"]
    shown = ", ".join(f"{name} {stages[name]:.2f} s" for name in _SHOWN_STAGES if name in stages)
    t = breakdown["triton"]
    text = (f"graphs {breakdown['graphs']}; trace {breakdown['trace_s']:.2f} s; "
            f"backend {sum(stages.values()):.2f} s ({shown})")
    if t["jobs"]:
        per_stage = ", ".join(f"{stage} {s:.2f}" for stage, s in t["job_seconds"].items() if stage != "total")
        text += (f"; triton: {t['jobs']} jobs in {t['batches']} batches, {t['wall_seconds']:.2f} s wall, "
                 f"{t['job_seconds'].get('total', 0.0):.2f} s summed over jobs ({per_stage}); "
                 f"{t['workers_started']} workers started, {t['worker_boot_seconds']:.2f} s importing triton")
    return text
