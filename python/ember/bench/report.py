"""What every suite's report shares: the machine description, markdown tables, and writing results.

Results go to bench-results/<suite>.json (git-ignored) with sorted keys, and the same tables the suite
printed go to bench-results/<suite>.md, so a run can be pasted into an issue as it is.
"""
import json
import os
import platform
import subprocess
import sys


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_commit():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def environment():
    import torch
    return {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "ember_commit": _git_commit(),
    }


def environment_line(env):
    return (f"Python {env['python']}, torch {env['torch']}, {env['cpu']} ({env['cpu_count']} CPUs, "
            f"torch threads {env['torch_threads']}), ember {env['ember_commit'] or 'unknown commit'}")


def markdown_table(header, rows):
    """header: list of column titles; rows: lists of cells (str() is applied)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"markdown_table: row has {len(row)} cells, header has {len(header)}")
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def write_results(path, results, markdown):
    """Writes results as JSON to `path` and the markdown next to it (same name, .md); returns the md path."""
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=2, sort_keys=True, allow_nan=False)
        f.write("\n")
    md_path = os.path.splitext(path)[0] + ".md"
    with open(md_path, "w") as f:
        f.write(markdown.rstrip() + "\n")
    return md_path
