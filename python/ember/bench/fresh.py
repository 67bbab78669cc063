"""Fresh processes and scratch caches: how the suites measure compile time without the user's caches.

A suite's own process compiles inside `scratch_caches()`, so nothing it compiles lands in (or is read from)
the user's EMBER_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR or TRITON_CACHE_DIR (where Inductor's Triton kernels go).
A cold or warm compile time is measured in a fresh Python process (`run_probe`) started with cache
directories under a root the suite chooses: a new root is cold, the same root again is warm
(`compile_times` runs the pair). The probe module's `main` prints one line, `PREFIX <json>`, as the
last thing it does (`print_result`); a probe that crashes before it is reported with the last line of its
stderr, so the suite records the failure and carries on.
"""
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

PREFIX = "EMBER_BENCH_PROBE "
CACHE_VARIABLES = ("EMBER_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def _cache_dirs(root):
    return {"EMBER_CACHE_DIR": os.path.join(root, "ember"), "TORCHINDUCTOR_CACHE_DIR": os.path.join(root, "inductor"),
            "TRITON_CACHE_DIR": os.path.join(root, "triton")}


@contextlib.contextmanager
def scratch_caches(prefix):
    """Points this process's compiler caches at a new temporary directory, removed (and the old values
    restored) on exit; yields the directory."""
    root = tempfile.mkdtemp(prefix=prefix)
    saved = {k: os.environ.get(k) for k in CACHE_VARIABLES}
    os.environ.update(_cache_dirs(root))
    try:
        yield root
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(root, ignore_errors=True)


def probe_env(root, threads=None):
    """The environment of a probe process: caches under `root`, this checkout's ember importable."""
    import ember
    python_dir = os.path.dirname(os.path.dirname(os.path.abspath(ember.__file__)))
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, **_cache_dirs(root), PYTHONPATH=python_dir + (os.pathsep + path if path else ""))
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def run_probe(module, config, env, timeout_s):
    """Runs `python -m module '<config json>'` -> the probe's result dict (its "error" None on success)."""
    cmd = [sys.executable, "-m", module, json.dumps(config, sort_keys=True)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"the fresh process ran past {timeout_s} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith(PREFIX)]
    if lines:
        return json.loads(lines[-1][len(PREFIX):])
    tail = [line for line in proc.stderr.splitlines() if line.strip()]
    return {"error": f"the fresh process exited with status {proc.returncode} and no result"
                     + (f": {tail[-1][:300]}" if tail else "")}


def compile_times(module, config, prefix, timeout_s, threads=None):
    """{"cold": probe result, "warm": probe result}: `python -m module` twice, in fresh processes sharing new,
    empty cache directories (removed afterwards); the warm run is skipped when the cold one failed."""
    root = tempfile.mkdtemp(prefix=prefix)
    try:
        env = probe_env(root, threads)
        cold = run_probe(module, config, env, timeout_s)
        warm = (run_probe(module, config, env, timeout_s) if cold["error"] is None
                else {"error": "not run: the cold run failed"})
        return {"cold": cold, "warm": warm}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def probe_main(argv, probe, usage):
    """A probe module's `main`: probe(config) -> result dict, printed as the PREFIX line; exit status 0/1/2."""
    if len(argv) != 1:
        print(f"usage: {usage} (got {len(argv)} arguments)", file=sys.stderr)
        return 2
    config = json.loads(argv[0])
    try:
        result = probe(config)
    except Exception as exc:  # reported to the suite, which records it in the row and carries on
        from .report import error_text
        result = {"error": error_text(exc)}
    print(PREFIX + json.dumps(result, sort_keys=True), flush=True)
    return 0 if result["error"] is None else 1
