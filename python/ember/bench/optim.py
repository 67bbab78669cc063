"""Suite `optim`: one optimizer step over a model's parameters — eager PyTorch (foreach and fused), Ember's
`ember.compile(opt.step)` and `torch.compile(opt.step)` (Inductor), side by side in one run.

Workloads: the parameters of Ember's nanoGPT at 6 layers, d=256, vocabulary 256 (76 tensors, 4.8 M
parameters; `--quick`: 2 layers, d=64) with fixed random gradients; `adamw` (lr 1e-3, weight decay 0.1)
and `sgd` (momentum 0.9, nesterov, weight decay 1e-4). The eager rows run torch's own step: `foreach=True`,
and `fused=True` where torch has a fused CPU kernel (AdamW; SGD's fused path is CUDA-only in spirit, measured
anyway where torch accepts it). Ember and Inductor compile the step of an optimizer made with
`foreach=False`; the first step of each (state creation) is outside the timing. `--device cuda` runs the
same on a GPU (float32), each sample one step timed by CUDA events from an idle GPU (cuda_measure's "call"
timing: launch overhead included, which is what a multi-tensor or grouped kernel saves).

Columns, per workload and runner:
  time       median step time of samples interleaved across the runners (timing.py)
  vs fused   eager fused median / runner median (above 1: faster than eager's fused step)
  first      the first compiled step after the state exists (capture and compile; warm caches: run twice)
  param err  max |param - eager foreach param| after the first two steps
"""
from . import cuda_measure, options, report, timing
from .compilers import COMPILERS

SAMPLING = {"repeat": 7, "warmup": 2, "min_sample_ms": 20.0}
WORKLOADS = ("adamw", "sgd")
RUNNERS = ("eager_foreach", "eager_fused", "ember", "inductor")


def add_arguments(parser):
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated (default: {', '.join(WORKLOADS)})")
    options.add_sampling_arguments(parser, SAMPLING)
    options.add_no_inductor_argument(parser)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--quick", action="store_true", help="small sizes and few samples: checks that the suite runs")
    parser.add_argument("--out", default="bench-results/optim.json", help="JSON path; .md is written next to it")


def _parameters(quick, device):
    import torch
    from ember.models.nanogpt import GPT, GPTConfig
    torch.manual_seed(0)
    cfg = (GPTConfig(block_size=32, vocab_size=64, n_layer=2, n_head=4, n_embd=64) if quick else
           GPTConfig(block_size=128, vocab_size=256, n_layer=6, n_head=8, n_embd=256))
    params = list(GPT(cfg).to(device).parameters())
    gen = torch.Generator().manual_seed(1)
    grads = [(torch.randn(p.shape, generator=gen) * 1e-2).to(device) for p in params]
    count = sum(p.numel() for p in params)
    desc = f"nanoGPT {cfg.n_layer} layers, d={cfg.n_embd}: {len(params)} tensors, {count} parameters"
    return params, grads, desc


def _optimizer(workload, params, **flags):
    import torch
    if workload == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1, **flags)
    return torch.optim.SGD(params, lr=1e-2, momentum=0.9, nesterov=True, weight_decay=1e-4, **flags)


def _runner(name, workload, params, grads):
    """(step callable, its parameters): a fresh copy of the parameters with the gradients set, one step taken."""
    import torch
    mine = [torch.nn.Parameter(p.detach().clone()) for p in params]
    for p, g in zip(mine, grads):
        p.grad = g.clone()
    flags = {"eager_foreach": {"foreach": True}, "eager_fused": {"fused": True}}.get(name, {"foreach": False})
    opt = _optimizer(workload, mine, **flags)
    opt.step()  # the state exists from here on
    if name.startswith("eager"):
        return opt.step, mine
    compiler = COMPILERS[name]
    compiler.reset()
    return compiler.compile(opt.step), mine


def _run_workload(workload, runners, config):
    params, grads, desc = _parameters(config["quick"], config["device"])
    row = {"description": desc, "results": {}}
    steps, copies = {}, {}
    for name in runners:
        result = {"error": None}
        row["results"][name] = result
        try:
            step, mine = _runner(name, workload, params, grads)
            first, _ = timing.time_first_call(step)  # a CUDA step's kernels may still run: compile dominates
            if not name.startswith("eager"):
                result["first_s"] = first
            steps[name] = step
            copies[name] = [p.detach().clone() for p in mine]  # after two steps, the same two everywhere
        except Exception as e:  # recorded, the suite goes on
            result["error"] = report.error_text(e)
    if config["device"] == "cuda":
        times = cuda_measure.measure(steps, warmup=config["warmup"], repeats=config["repeat"], kernel_time=False)
    else:
        times = timing.measure(steps, warmup=config["warmup"], repeats=config["repeat"],
                               min_sample_s=config["min_sample_ms"] / 1e3)
    for name, t in times.items():
        row["results"][name]["median_s"] = t.median
    base = copies.get("eager_foreach")
    for name, mine in copies.items():
        if base is not None:
            row["results"][name]["max_param_diff"] = max(
                (a.double() - b.double()).abs().max().item() for a, b in zip(mine, base))
    return row


def _markdown(results):
    names = results["config"]["runners"]
    header = ["workload"] + [f"{n}" for n in names] + [f"{n} vs fused" for n in names if n != "eager_fused"] + \
             [f"{n} first" for n in names if not n.startswith("eager")] + \
             [f"{n} param err" for n in names if n != "eager_foreach"]
    rows = []
    for workload, row in results["workloads"].items():
        r = row["results"]
        fused = r.get("eager_fused", {}).get("median_s")
        line = [workload]
        line += [timing.format_us(r[n]["median_s"]) if r[n].get("median_s") else r[n].get("error") or "-"
                 for n in names]
        line += [f"{fused / r[n]['median_s']:.2f}x" if fused and r[n].get("median_s") else "-"
                 for n in names if n != "eager_fused"]
        line += [timing.format_s(r[n]["first_s"]) if "first_s" in r[n] else "-"
                 for n in names if not n.startswith("eager")]
        line += [f"{r[n]['max_param_diff']:.1e}" if "max_param_diff" in r[n] else "-"
                 for n in names if n != "eager_foreach"]
        rows.append(line)
    descs = "\n".join(f"- {w}: {row['description']}, {results['config']['device']}"
                      for w, row in results["workloads"].items())
    return f"{report.environment_line(results['environment'])}\n\n{descs}\n\n" + report.markdown_table(header, rows)


def run(args):
    runners = [n for n in RUNNERS if not (n == "inductor" and args.no_inductor)]
    config = {"workloads": report.parse_names(args.workloads, WORKLOADS, "workload"), "runners": runners,
              "quick": args.quick, "device": args.device, **options.sampling_config(args, SAMPLING)}
    results = {"suite": "optim", "config": config, "environment": report.environment(), "workloads": {}, "ok": True}
    for name in config["workloads"]:
        print(f"{name} ...", flush=True)
        row = _run_workload(name, runners, config)
        results["workloads"][name] = row
        for n, r in row["results"].items():
            if r.get("error"):
                results["ok"] = False
                print(f"  {n}: {r['error']}")
    return report.finish(args.out, results, _markdown(results))
