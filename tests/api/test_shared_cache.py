"""Two processes sharing one cache directory (EMBER_CACHE_DIR), compiling the same and different
graphs at the same moment: both get eager's results, and the cache is intact afterwards -- every
compiled library complete, with its checksum, and no temporaries left -- so that a third process
loads it and is right too."""
import hashlib
import json
import os
import subprocess
import sys
import time

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shared_cache_worker.py")


def _run_together(cache_dir, roles):
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache_dir), EMBER_STRICT="1")
    # Both start compiling at this time, after their imports (a few seconds on a loaded machine).
    start = time.time() + 6.0
    procs = [subprocess.Popen([sys.executable, WORKER, str(r), str(start)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in roles]
    stats = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, f"worker failed:\n{err[-3000:]}"
        stats.append(json.loads(out.strip().splitlines()[-1]))
    return stats


def _check_intact(cache_dir):
    libraries = 0
    for root, _, files in os.walk(cache_dir):
        for name in files:
            path = os.path.join(root, name)
            stem, ext = os.path.splitext(path)
            # The cache's own files; a temporary (cache_files.h: renamed into place) would be left
            # behind by a writer that lost a race. The one exception is the documented one
            # (runtime/cpp_compiler.h): the precompiled header is built by a background thread at the
            # lowest priority, and a process that exits before it finishes leaves the compiler's
            # output under its temporary name, never under the entry's.
            if ".gch.tmp." in name and os.sep + "pch" + os.sep in path:
                continue
            assert ext in (".cpp", ".so", ".sha256", ".lock", ".gch", ".unit"), f"unexpected file {path}"
            if ext == ".unit":  # a kernel's index entry: the key of the published unit that defines it
                with open(path) as f:
                    unit = f.read().strip()
                assert len(unit) == 64 and os.path.exists(os.path.join(cache_dir, "cpp", unit[:2], unit + ".so")), path
            if ext == ".so":
                libraries += 1
                with open(path, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                with open(stem + ".sha256") as f:
                    assert f.read().strip() == digest, f"{path} does not match its checksum"
    return libraries


def test_two_processes_share_one_cache(tmp_path):
    cache = tmp_path / "cache"
    stats = _run_together(cache, (0, 1))
    for s in stats:
        assert s["codegen_failures"] == 0 and s["backend_errors"] == 0, s
        # Per function: a graph for 3 rows, then one with the rows symbolic that 7 rows reuse.
        assert s["frames_compiled"] == 4, s
    libraries = _check_intact(cache)
    assert libraries > 0
    # A second pair finds everything compiled: the same results from the libraries on disk.
    _run_together(cache, (1, 0))
    assert _check_intact(cache) == libraries
