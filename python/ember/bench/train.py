"""Suite `train`: a training step (forward + backward) in eager PyTorch, Ember and torch.compile (Inductor),
side by side in one run.

Workloads: Ember's nanoGPT (python/ember/models/nanogpt.py, tied embeddings, random init) at issue 13's CPU
size — 4 layers, d=256, 8 heads, batch 4 x 128, vocabulary 256 — with dropout 0 and 0.1, and an MLP
(768 -> 3072 -> 768, GELU, batch 256); `--device cuda` runs them on the GPU (bf16 is left to a later
revision). The step is `loss = model(x, y)[1]; loss.backward()` with gradients set to None before it; the
optimizer is not part of the step.

Columns, per workload and compiler:
  time       median step time of samples interleaved across eager and every compiler (timing.py)
  speed-up   eager median / compiler median; a geometric mean closes the table
  first      the first compiled step, capture and compile included (warm caches: run twice for cold numbers)
  grad err   max |grad - eager grad| over the parameters after one step from the same weights and seed, and
             whether each gradient matches eager's under torch.testing.assert_close's float32 tolerances; with
             dropout only Ember is held to it (it draws eager's random numbers; Inductor draws its own)
  graphs     Ember: forward graphs and backward graphs compiled, autograd islands

A compiler that fails on a workload is recorded in its row, the suite carries on and exits 1 at the end;
so does a gradient that does not match eager's.
"""
import copy

from . import options, report, timing
from .compilers import COMPILERS

SAMPLING = {"repeat": 7, "warmup": 2, "min_sample_ms": 1.0}
WORKLOADS = ("nanogpt", "nanogpt_dropout", "mlp")


def add_arguments(parser):
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated (default: {', '.join(WORKLOADS)})")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    options.add_sampling_arguments(parser, SAMPLING)
    options.add_no_inductor_argument(parser)
    parser.add_argument("--quick", action="store_true", help="small sizes and few samples: checks that the suite runs")
    parser.add_argument("--out", default="bench-results/train.json", help="JSON path; .md is written next to it")


def _build(name, quick, device):
    """(model, args, description): a module whose call returns (logits, loss) or an output to sum."""
    import torch
    from ember.models.nanogpt import GPT, GPTConfig, random_tokens
    torch.manual_seed(0)
    if name.startswith("nanogpt"):
        dropout = 0.1 if name.endswith("dropout") else 0.0
        cfg = (GPTConfig(block_size=32, vocab_size=64, n_layer=2, n_head=4, n_embd=64, dropout=dropout) if quick else
               GPTConfig(block_size=128, vocab_size=256, n_layer=4, n_head=8, n_embd=256, dropout=dropout))
        batch, seq = (2, 32) if quick else (4, 128)
        model = GPT(cfg).to(device).train()
        x = random_tokens(cfg, batch, seq, seed=1, device=device)
        y = random_tokens(cfg, batch, seq, seed=2, device=device)
        desc = (f"nanoGPT {cfg.n_layer} layers, d={cfg.n_embd}, {cfg.n_head} heads, vocabulary {cfg.vocab_size}, "
                f"batch {batch} x {seq}, dropout {dropout}")
        return model, (x, y), desc
    if name == "mlp":
        d, rows = (64, 16) if quick else (768, 256)
        model = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d)).to(device)
        x = torch.randn(rows, d, device=device)
        return model, (x,), f"MLP {d} -> {4 * d} -> {d}, GELU, batch {rows}"
    raise ValueError(f"unknown workload {name!r}")


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


def _loss(out):
    if isinstance(out, tuple):
        return out[1]
    return out.float().square().mean()


def _step(fn, model, args, seed):
    import torch
    for p in model.parameters():
        p.grad = None
    torch.manual_seed(seed)
    loss = _loss(fn(*args))
    loss.backward()
    return loss


def _grads(model):
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def _grad_check(got, want):
    """(max abs difference, whether every gradient matches eager's)."""
    import torch
    if set(got) != set(want):
        return float("inf"), False
    worst, ok = 0.0, True
    for name, g in want.items():
        worst = max(worst, (got[name].double() - g.double()).abs().max().item())
        try:
            torch.testing.assert_close(got[name], g, rtol=1e-4, atol=1e-5)
        except AssertionError:
            ok = False
    return worst, ok


def _run_workload(name, compilers, config):
    import torch
    model, args, desc = _build(name, config["quick"], config["device"])
    row = {"description": desc, "results": {"eager": {"label": "eager PyTorch", "error": None}}}
    _step(model, model, args, seed=0)
    want = _grads(model)
    copies = {"eager": model}
    steps = {"eager": lambda: _step(model, model, args, seed=0)}
    for c in compilers:
        result = {"label": c.label, "error": None}
        row["results"][c.name] = result
        try:
            c.reset()
            twin = copy.deepcopy(model)
            fn = c.compile(twin)
            first, _ = timing.time_first_call(lambda: _step(fn, twin, args, seed=0))
            result["first_s"] = first
            result["max_grad_diff"], result["grads_match"] = _grad_check(_grads(twin), want)
            if "dropout" in name and c.family != "ember":
                result["grads_match"] = None  # its own random numbers: not comparable
            if c.family == "ember":
                import ember
                s = ember.stats()
                result["graphs"] = s["graphs"]
                result["backward_graphs"] = s["backward_graphs_compiled"]
                result["islands"] = s["autograd_islands"]
            copies[c.name] = twin
            steps[c.name] = (lambda f=fn, m=twin: _step(f, m, args, seed=0))
        except Exception as e:  # recorded, the suite goes on
            result["error"] = report.error_text(e)
    sync = torch.cuda.synchronize if config["device"] == "cuda" else (lambda: None)
    timed = {k: (lambda f=f: (f(), sync())) for k, f in steps.items()}
    times = timing.measure(timed, warmup=config["warmup"], repeats=config["repeat"],
                           min_sample_s=config["min_sample_ms"] / 1e3)
    for k, t in times.items():
        row["results"][k]["median_s"] = t.median
    return row


def _markdown(results):
    names = ["eager"] + results["config"]["compilers"]
    header = ["workload"] + [f"{n} step" for n in names] + [f"{n} speed-up" for n in names[1:]] + \
             [f"{n} first" for n in names[1:]] + [f"{n} grad err" for n in names[1:]] + ["Ember graphs (fw/bw/islands)"]
    rows, speedups = [], {n: [] for n in names[1:]}
    for name, row in results["workloads"].items():
        r = row["results"]
        eager = r["eager"].get("median_s")
        line = [name]
        for n in names:
            line.append(timing.format_us(r[n]["median_s"]) if r[n].get("median_s") else r[n].get("error") or "-")
        for n in names[1:]:
            t = r[n].get("median_s")
            line.append(f"{eager / t:.2f}x" if t and eager else "-")
            if t and eager:
                speedups[n].append(eager / t)
        for n in names[1:]:
            line.append(timing.format_s(r[n]["first_s"]) if "first_s" in r[n] else "-")
        for n in names[1:]:
            d = r[n].get("max_grad_diff")
            match = r[n].get("grads_match")
            line.append("-" if d is None else f"{d:.1e}{' MISMATCH' if match is False else ' (RNG)' if match is None else ''}")
        e = r.get("ember", {})
        line.append(f"{e.get('graphs', '-')}/{e.get('backward_graphs', '-')}/{e.get('islands', '-')}")
        rows.append(line)
    geo = ["geomean"] + [""] * len(names) + [f"{report.geomean(v):.2f}x" if v else "-" for v in speedups.values()]
    rows.append(geo + [""] * (len(header) - len(geo)))
    return f"{report.environment_line(results['environment'])}\n\n" + report.markdown_table(header, rows)


def run(args):
    compilers = options.compilers(args)
    config = {"workloads": report.parse_names(args.workloads, WORKLOADS, "workload"),
              "compilers": [c.name for c in compilers], "device": args.device, "quick": args.quick,
              **options.sampling_config(args, SAMPLING)}
    results = {"suite": "train", "config": config, "environment": report.environment(), "workloads": {}, "ok": True}
    for name in config["workloads"]:
        print(f"{name} ...", flush=True)
        row = _run_workload(name, compilers, config)
        results["workloads"][name] = row
        for n, r in row["results"].items():
            if r.get("error") or r.get("grads_match") is False:
                results["ok"] = False
                print(f"  {n}: {r.get('error') or 'gradients differ from eager'}")
    return report.finish(args.out, results, _markdown(results))
