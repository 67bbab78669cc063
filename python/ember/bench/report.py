"""What every suite's report shares: the machine description, markdown tables, and writing results.

Results go to bench-results/<suite>.json (git-ignored) with sorted keys, and the same tables the suite
printed go to bench-results/<suite>.md, so a run can be pasted into an issue as it is. A suite may add a bar
chart (bench-results/<suite>.png) when matplotlib is installed; without it the chart is skipped with a note.
"""
import json
import math
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


def parse_names(text, known, what):
    """'a,b' -> names in the order given; an unknown or repeated name is an error that lists the known ones."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(f"unknown {what}(s) {unknown or [text]}; known: {', '.join(known)}")
    if len(set(names)) != len(names):
        raise ValueError(f"{what} named twice in {text!r}")
    return names


def error_text(exc):
    """The first line of an exception, as a result cell: a failing compiler is reported, not raised."""
    text = f"{type(exc).__name__}: {exc}"
    first_line = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return first_line[:300]


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def fmt(value, spec, suffix=""):
    """A table cell: the value formatted, or a dash for a missing measurement."""
    return "—" if value is None else f"{value:{spec}}{suffix}"


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


def write_bar_chart(path, title, categories, series, ylabel, reference=None):
    """Grouped bars: one group per category, one bar per series ({label: [value or None per category]}).

    A None value leaves its bar out (a failed measurement). `reference` draws a horizontal line (e.g. 1.0 for
    "as fast as eager"). Returns False, writing nothing, when matplotlib is not installed.
    """
    try:
        import matplotlib
    except ModuleNotFoundError:
        return False
    matplotlib.use("Agg")  # files only: no display is needed or wanted
    import matplotlib.pyplot as plt

    width = 0.8 / max(len(series), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(categories) + 2), 4.5))
    for i, (label, values) in enumerate(series.items()):
        xs = [c + (i - (len(series) - 1) / 2) * width for c in range(len(categories)) if values[c] is not None]
        ax.bar(xs, [v for v in values if v is not None], width, label=label)
    if reference is not None:
        ax.axhline(reference, color="black", linewidth=0.8)
    ax.set_xticks(range(len(categories)))
    ax.set_xticklabels(categories, rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def finish(path, results, markdown, chart=None):
    """The end of a suite: prints the tables, writes JSON + markdown (and the chart, `chart(png_path)` -> False
    without matplotlib), says whether anything failed; -> the exit status (0, or 1 when results["ok"] is false)."""
    print()
    print(markdown)
    md_path = write_results(path, results, markdown)
    if chart is None:
        print(f"\nwrote {path} and {md_path}")
    else:
        png_path = os.path.splitext(path)[0] + ".png"
        if chart(png_path):
            print(f"\nwrote {path}, {md_path} and {png_path}")
        else:
            print(f"\nwrote {path} and {md_path}; chart skipped: matplotlib is not installed")
    if not results["ok"]:
        print("some compiler failed or gave a wrong output: see Failures above")
    return 0 if results["ok"] else 1
