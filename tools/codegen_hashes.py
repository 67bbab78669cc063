#!/usr/bin/env python3
"""Hashes the C++ Ember generates for every graph of the parity corpus and the benchmark workloads, so a
refactor of code generation can be proven byte-identical (or each difference shown and explained).

    .venv/bin/python tools/codegen_hashes.py                        # record tools/codegen_hashes.json
    .venv/bin/python tools/codegen_hashes.py --check                # compare with it; exit 1 on a difference
    .venv/bin/python tools/codegen_hashes.py --check FILE --out NEW # compare with FILE, record the new run in NEW
    .venv/bin/python tools/codegen_hashes.py --only parity -k softmax  # a subset (names containing "softmax")

Needs a built tree (`make build`). Runs from the repository root or anywhere; about 4 minutes on two busy
cores (parity 3.5, cpu and models 15 s each), much of it the C++ compiler: every graph is compiled afresh, in a
new temporary EMBER_CACHE_DIR, so nothing is taken from an earlier run's cache.

What runs, under backend="ember":
  parity[grad]/CASE      every case of tests/parity (the programs test_parity runs), three calls as its
                         harness makes them: graphs whose outputs need gradients run eagerly, so most of
                         these are the functions without parameters;
  parity[no_grad]/CASE   the same under torch.no_grad() (test_parity's "ember-no-grad" variant: modules
                         with parameters run generated kernels), cases that switch grad mode themselves left out;
  cpu/NAME               python/ember/bench/cpu_workloads.py at full size, one call under torch.no_grad();
  models/NAME            python/ember/bench/models_workloads.py (transformers GPT-2, BERT, LLaMA, T5 and
                         nanoGPT, tiny configs), one call under torch.no_grad().
Each compile event that captured ops gives one entry, `GROUP/NAME#i code` (i counts the program's compile
events, `code` is the compiled function's name), whose value is the sha256 of the generated translation unit
(the event's `code_text`, C++ here), or "no C++: REASON" when the graph did not reach generated code.

The events come from the collector stack `ember.explain` uses (ember.api._collectors): no production code
exists for this script. The manifest is JSON (sorted keys); beside it, FILE.sources.json.gz keeps every
source so that --check can print a unified diff of each changed translation unit.
"""
import argparse
import contextlib
import difflib
import gzip
import hashlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_MANIFEST = REPO / "tools" / "codegen_hashes.json"
GROUPS = ("parity", "cpu", "models")


def sources_path(manifest):
    return Path(str(manifest) + ".sources.json.gz")


class Recorder:
    """Collects the compile events of one program at a time into entries and sources."""

    def __init__(self):
        self.entries, self.sources = {}, {}

    @contextlib.contextmanager
    def program(self, name):
        import ember.api
        events = []
        stack = getattr(ember.api._collectors, "stack", None)
        if stack is None:
            stack = ember.api._collectors.stack = []
        stack.append(events)
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # some programs print
                yield
        except Exception as e:  # a program that fails still says which graphs it generated first
            self.entries[f"{name}#error"] = f"raised {type(e).__name__}"
        finally:
            stack.remove(events)
        compiles = [info for event, info in events if event == "compile" and info["ops"] > 0]
        for i, info in enumerate(compiles):
            key = f"{name}#{i} {info['code']}"
            source = info["code_text"]
            if source:
                self.entries[key] = hashlib.sha256(source.encode()).hexdigest()
                self.sources[key] = source
            else:
                self.entries[key] = f"no C++: {info['backend_fallback'] or 'no kernels'}"


def run_parity(rec, name_filter):
    import torch
    import ember
    sys.path.insert(0, str(REPO / "tests"))
    from parity import all_cases  # noqa: F401 (register)
    from parity.harness import build_targets, run_calls
    from parity.registry import CASES
    for variant in ("grad", "no_grad"):
        for case in CASES.values():
            name = f"parity[{variant}]/{case.name}"
            if not name_filter(name) or (variant == "no_grad" and case.sets_grad_mode):
                continue
            ember.reset()
            with torch.no_grad() if variant == "no_grad" else contextlib.nullcontext(), rec.program(name):
                _, target = build_targets(case)
                compiled = ember.compile(target, backend="ember", options={"verify_shape_rules": True})
                run_calls(case, compiled, target)


def run_workloads(rec, name_filter, group, names, run_one):
    """One call of each benchmark workload `run_one(name)` under torch.no_grad(), as the bench suites run them."""
    import torch
    import ember
    for workload in names:
        name = f"{group}/{workload}"
        if not name_filter(name):
            continue
        ember.reset()
        with torch.no_grad(), rec.program(name):
            run_one(workload)


def run_cpu(rec, name_filter):
    import ember
    from ember.bench import cpu_workloads

    def run_one(name):
        w = cpu_workloads.build(name, quick=False)
        ember.compile(w.fn, backend="ember")(*w.args)

    run_workloads(rec, name_filter, "cpu", cpu_workloads.BUILDERS, run_one)


def run_models(rec, name_filter):
    import ember
    from ember.bench import models_workloads

    def run_one(name):
        w = models_workloads.build(name)
        ember.compile(w.model, backend="ember")(*w.args, **w.kwargs)

    run_workloads(rec, name_filter, "models", models_workloads.MODELS, run_one)


def record(groups, name_filter):
    rec = Recorder()
    runners = {"parity": run_parity, "cpu": run_cpu, "models": run_models}
    for group in groups:
        start = time.monotonic()
        before = len(rec.entries)
        runners[group](rec, name_filter)
        print(f"{group}: {len(rec.entries) - before} graphs in {time.monotonic() - start:.0f} s", file=sys.stderr)
    return rec


def write(manifest, rec):
    manifest.write_text(json.dumps(rec.entries, indent=1, sort_keys=True) + "\n")
    # mtime=0: the same sources give the same bytes, so an unchanged run leaves git clean.
    with open(sources_path(manifest), "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(json.dumps(rec.sources, sort_keys=True).encode())


def check(baseline, rec, name_filter):
    """Prints each difference from the baseline manifest; returns their count."""
    old = {k: v for k, v in json.loads(baseline.read_text()).items() if name_filter(k.split("#")[0])}
    old_sources = {}
    if sources_path(baseline).exists():
        with gzip.open(sources_path(baseline), "rb") as f:
            old_sources = json.loads(f.read())
    differences = 0
    for key in sorted(old.keys() | rec.entries.keys()):
        a, b = old.get(key), rec.entries.get(key)
        if a == b:
            continue
        differences += 1
        print(f"DIFFERENT: {key}\n  was: {a}\n  now: {b}")
        if key in old_sources and key in rec.sources:
            diff = difflib.unified_diff(old_sources[key].splitlines(), rec.sources[key].splitlines(),
                                        f"{key} (baseline)", f"{key} (now)", lineterm="", n=2)
            print("\n".join(diff))
    print(f"{differences} difference(s) among {len(old.keys() | rec.entries.keys())} entries")
    return differences


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", nargs="?", const=str(DEFAULT_MANIFEST), metavar="FILE",
                        help="compare with a recorded manifest (default: tools/codegen_hashes.json)")
    parser.add_argument("--out", metavar="FILE", help="where to record (default: the manifest, unless --check)")
    parser.add_argument("--only", action="append", choices=GROUPS, help="run only these groups (repeatable)")
    parser.add_argument("-k", dest="substring", default="", help="only programs whose name contains this")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO / "python"))
    groups = args.only or GROUPS

    def name_filter(name):
        return name.split("/")[0].split("[")[0] in groups and args.substring in name
    for variable in ("EMBER_LOGS", "EMBER_STRICT"):  # the defaults: no logging, internal errors fall back
        os.environ.pop(variable, None)
    with tempfile.TemporaryDirectory(prefix="ember-codegen-hashes-") as cache:
        os.environ["EMBER_CACHE_DIR"] = cache
        rec = record(groups, name_filter)
    out = Path(args.out) if args.out else (None if args.check else DEFAULT_MANIFEST)
    if out is not None:
        write(out, rec)
        print(f"recorded {len(rec.entries)} entries in {out}", file=sys.stderr)
    if args.check:
        return 1 if check(Path(args.check), rec, name_filter) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
