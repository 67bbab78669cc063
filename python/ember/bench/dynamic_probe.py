"""`python -m ember.bench dynamic --probe`: which transformers models keep their sizes symbolic under
`ember.compile(model, dynamic=True)` (issue 14).

Per model (random init, the zoo's small configs, bench/zoo_transformers.py; no_grad): compile once with
`dynamic=True`, call it at 3 sizes of the dimension a user varies (the sequence length of text models, the
decoder's length for Whisper, the number of samples for wav2vec2, the batch for ViT, whose image size is fixed
by its position embeddings), check every result against eager, and report:
  graphs     frames compiled over the 3 sizes (1 = no recompile)
  pins       the symbols the graphs specialized (`sN == k` relations of the shape guard), each with the reason
             and the user line that needed it, and the backend's shape fallback if any
  extra externs  torch calls the dynamic graphs make that a static graph of the same model (compiled with
             `dynamic=False` at the middle size) does not: ops whose symbolic form lowering leaves to torch,
             each a host dispatch the static graph saves (`callable: reason`, with a count). Full pipeline only.
A pin of a size that does not change between the 3 calls (ViT's image size) costs no recompile but is still
listed. `--backend eager` probes capture only (each node run through torch): pins come from capture, so it
finds the same ones as the full pipeline, minus the backend's shape fallbacks, in a fraction of the time.
"""
import collections
import re

from . import report, zoo_imports, zoo_transformers as zt

PROBE_MODELS = ("gpt2", "gpt_neox", "opt", "llama", "mistral", "qwen2", "phi", "gemma", "bloom", "falcon",
                "bert", "roberta", "distilbert", "t5", "bart", "vit", "wav2vec2", "whisper")
TEXT_LENGTHS = (9, 13, 17)
AUDIO_LENGTHS = (2000, 2400, 3000)
BATCHES = (2, 4, 6)  # not 3: a batch equal to the channels would share their symbol (duck sizing)
_PIN = re.compile(r"shape guard: (s\d+ == -?\d+.*)")


def _spec(name):
    return next(s for s in zt.SPECS.values() if s.model_type == name)


def _inputs(spec, config, n):
    """(args, kwargs) of one call at size n of the varied dimension."""
    import torch
    gen = torch.Generator().manual_seed(n)

    def ids(b, t):
        return torch.randint(3, zt.VOCAB, (b, t), generator=gen)

    def mask(b, t):
        m = torch.ones(b, t, dtype=torch.long)
        m[-1, t - 3:] = 0  # the last sequence is padded: the mask changes the result
        return m
    if spec.family == "decoder":
        return (ids(2, n),), {"use_cache": False}
    if spec.family == "encoder":
        return (ids(2, n),), {"attention_mask": mask(2, n)}
    if spec.family == "encoder-decoder":
        return (ids(2, n),), {"attention_mask": mask(2, n), "decoder_input_ids": ids(2, n - 2), "use_cache": False}
    if spec.family == "vision":
        return (torch.randn(n, 3, zt.IMAGE_SIZE, zt.IMAGE_SIZE, generator=gen),), {}
    if spec.family == "speech":
        return (torch.randn(2, n, generator=gen),), {}
    if spec.family == "speech-seq2seq":
        features = torch.randn(2, config.num_mel_bins, 2 * config.max_source_positions, generator=gen)
        return (features,), {"decoder_input_ids": ids(2, n), "use_cache": False}
    raise ValueError(f"unknown family {spec.family!r}")


def _sizes(spec):
    return {"vision": BATCHES, "speech": AUDIO_LENGTHS}.get(spec.family, TEXT_LENGTHS)


def _first_tensor(out):
    import torch
    if isinstance(out, torch.Tensor):
        return out
    for key in ("logits", "last_hidden_state"):
        if getattr(out, key, None) is not None:
            return getattr(out, key)
    return out[0]


def _externs(events):
    """The extern calls of the compiled graphs' schedules (`callable: reason` -> count)."""
    lines = (line for event, info in events if event == "compile" for line in info["schedule"].splitlines())
    return collections.Counter(line.split(" ", 2)[2] for line in lines if line.startswith("extern: "))


def _compile_events(fn):
    """Runs fn() with Ember's compile events collected; returns them."""
    from ember import api
    with api.collecting_events() as events:
        fn()
    return events


def probe_model(name, backend="ember"):
    """One row: {model, sizes, graphs, pins, fallbacks, breaks, extra_externs, ok, error?}."""
    import torch
    import transformers

    import ember
    spec = _spec(name)
    row = {"model": name, "sizes": list(_sizes(spec)), "pins": [], "fallbacks": [], "extra_externs": {}, "ok": True}
    torch.manual_seed(0)
    config = transformers.CONFIG_MAPPING[spec.model_type](**spec.config)
    auto = transformers.AutoModelForCausalLM if spec.family == "decoder" else transformers.AutoModel
    model = auto.from_config(config).eval()
    ember.reset()

    def calls(dynamic, sizes):
        compiled = ember.compile(model, dynamic=dynamic, backend=backend)
        with torch.no_grad():
            for n in sizes:
                args, kwargs = _inputs(spec, config, n)
                got, want = _first_tensor(compiled(*args, **kwargs)), _first_tensor(model(*args, **kwargs))
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    events = []
    try:
        events = _compile_events(lambda: calls(True, row["sizes"]))
    except Exception as exc:  # noqa: BLE001 -- recorded in the row
        row["ok"], row["error"] = False, report.error_text(exc)
    stats = ember.stats()
    row["graphs"] = stats["frames_compiled"]
    row["breaks"] = stats["graph_breaks"]
    for event, info in events:
        if event == "compile":
            for line in info["guards"].splitlines():
                m = _PIN.search(line)
                if m and m.group(1) not in row["pins"]:
                    row["pins"].append(m.group(1))
            if info["shape_fallback"]:
                row["fallbacks"].append(info["shape_fallback"])
    if backend == "ember" and row["ok"]:
        ember.reset()
        static = _compile_events(lambda: calls(False, row["sizes"][1:2]))
        row["extra_externs"] = dict(_externs(events) - _externs(static))
    ember.reset()
    return row


def run(args):
    zoo_imports.allow_torchvision()
    names = report.parse_names(args.models, PROBE_MODELS, "model") if args.models else list(PROBE_MODELS)
    rows = []
    for name in names:
        print(f"{name} ...", flush=True)
        row = probe_model(name, backend=args.backend)
        rows.append(row)
        status = "ok" if row["ok"] else "FAILED: " + row["error"].splitlines()[0]
        print(f"  graphs {row['graphs']} over {row['sizes']}, {len(row['pins'])} pins, "
              f"{sum(row['extra_externs'].values())} extra externs, {status}", flush=True)
        for pin in row["pins"] + row["fallbacks"]:
            print(f"    {pin}", flush=True)
    ok = all(r["ok"] for r in rows)
    table = [[r["model"], str(r["graphs"]), str(len(r["pins"])), "; ".join(r["pins"] + r["fallbacks"]) or "-",
              "; ".join(f"{k} x{v}" for k, v in r["extra_externs"].items()) or "-", "ok" if r["ok"] else "failed"]
             for r in rows]
    md = report.markdown_table(["model", "graphs over 3 sizes", "pins", "pins' reasons", "extra externs", "vs eager"],
                               table)
    results = {"environment": report.environment(), "backend": args.backend, "rows": rows, "ok": ok}
    return report.finish(args.out.replace("dynamic.json", "dynamic_probe.json"), results, md)
