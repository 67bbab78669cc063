"""What the suites that time compilers side by side on workloads share (cpu, gpu): checking outputs, compiling
with those checks, summing up, and the tables of their reports.

A row is `{"description", "memory_bound", "bytes_moved", "results": {name: result}}`, with eager's result
first; a result holds `label`, `error` and, once measured, `time` (timing.Timing.to_json()), `speedup`, `gbs`,
`max_abs_error`, `peak_memory_bytes`, and for a compiler `matches_eager`, `wrong`, `counters` and the fresh-
process `cold` / `warm` compile times (fresh.compile_times). A target check is
`{"name", "ember", "reference", "unit", "ratio", "op", "target", "met"}`, `met` None when a side is missing.

Outputs are judged as in the cpu suite's docstring: each compiled output is compared with eager's
(torch.testing.assert_close) and both with a float64 reference; an output is wrong when it differs from
eager's *and* its error is more than ACCURACY_TARGET x eager's (more accurate than eager is not wrong).
"""
import math

from . import report, timing
from .compilers import check_captured

ACCURACY_TARGET = 2.0  # a compiler's error / eager's error


# ---------------------------------------------------------------------------------------------
# Outputs

def tensors(out):
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in out):
        return list(out)
    raise TypeError(f"a workload must return a tensor or a tuple of tensors, got {type(out).__name__}")


def max_abs_error(out, reference):
    """Max |out - reference| over every output, or None when out has a NaN or inf the reference does not."""
    worst = 0.0
    for o, r in zip(tensors(out), tensors(reference), strict=True):
        if o.shape != r.shape:
            raise ValueError(f"output shape {tuple(o.shape)} differs from the reference's {tuple(r.shape)}")
        diff = (o.double() - r).abs().max().item() if o.numel() else 0.0
        if not math.isfinite(diff):
            return None
        worst = max(worst, diff)
    return worst


def matches(out, expected):
    import torch
    try:
        torch.testing.assert_close(out, expected)
        return True
    except AssertionError:
        return False


def is_wrong(result, eager_error):
    """Differs from eager and is less accurate than eager by more than the accuracy target allows."""
    if result["matches_eager"] or eager_error is None:  # eager's own output is not finite: nothing to judge by
        return False
    error = result["max_abs_error"]
    return error is None or error > ACCURACY_TARGET * eager_error


def compile_checked(compiler, fn, call, reference, eager_out, eager_error, warmup):
    """Compile fn, time the first call, warm up, and check the last output (the steady state a timing sees:
    for CUDA graphs, a replay) against eager and float64 -> (result dict, compiled or None on failure).

    call(compiled) -> the output of one call, finished (a suite on a GPU synchronizes in it)."""
    result = {"label": compiler.label, "error": None}
    try:
        compiled = compiler.compile(fn)
        result["first_call_s"], out = timing.time_first_call(lambda: call(compiled))
        result["counters"] = compiler.counters()
        check_captured(compiler, result["counters"])
        for _ in range(warmup):
            out = None  # CUDA-graph outputs are overwritten by the next replay: hold none across a call
            out = call(compiled)
        result["max_abs_error"] = max_abs_error(out, reference)
        result["matches_eager"] = matches(out, eager_out)
        result["wrong"] = is_wrong(result, eager_error)
    except Exception as exc:  # a compiler failing on a workload is a result to report, not a reason to stop
        result["error"] = report.error_text(exc)
        return result, None
    return result, compiled


def record_times(row, timings):
    """Each timed result gets its time, its speed-up over eager and, for a memory-bound row, its GB/s."""
    eager = timings.get("eager")
    for name, t in timings.items():
        r = row["results"][name]
        r["time"] = t.to_json()
        r["speedup"] = eager.median / t.median
        r["gbs"] = row["bytes_moved"] / t.median / 1e9 if row["memory_bound"] else None


def failures(result):
    """The messages that make a result a failure: its error, a wrong output, a failed fresh-process compile."""
    found = [result["error"]] if result.get("error") else []
    if result.get("wrong"):
        found.append(f"wrong output: differs from eager's and its error ({report.fmt(result['max_abs_error'], '.3g')}) "
                     f"is more than {ACCURACY_TARGET:g}x eager's")
    for phase in ("cold", "warm"):
        if result.get(phase, {}).get("error"):
            found.append(f"{phase} compile: {result[phase]['error']}")
    return found


def all_ok(rows):
    return not any(failures(r) for row in rows.values() for r in row["results"].values())


def geomean_speedups(rows, names):
    out = {}
    for c in names:
        present = [row["results"][c]["speedup"] for row in rows.values() if row["results"][c].get("speedup")]
        out[c] = {"value": report.geomean(present), "workloads": len(present)}
    return out


# ---------------------------------------------------------------------------------------------
# Targets

def time_ratio(row, name):
    """The compiler's median time / eager's, or None when either was not timed."""
    r, eager = row["results"].get(name), row["results"]["eager"]
    if not r or "time" not in r or "time" not in eager:
        return None
    return r["time"]["median_us"] / eager["time"]["median_us"]


def check(name, ours, reference, unit, op, target):
    ratio = ours / reference if ours is not None and reference else None
    met = None if ratio is None else (ratio <= target if op == "<=" else ratio >= target)
    return {"name": name, "ember": ours, "reference": reference, "unit": unit, "ratio": ratio, "op": op,
            "target": target, "met": met}


def geomean_check(rows, ours, theirs, target):
    """Geomean of time / eager time of `ours` vs `theirs`, over the workloads where both were timed."""
    both = [w for w, row in rows.items() if time_ratio(row, ours) and time_ratio(row, theirs)]
    return check(f"time geomean ({len(both)} workloads): {ours} vs {theirs}",
                 report.geomean([time_ratio(rows[w], ours) for w in both]),
                 report.geomean([time_ratio(rows[w], theirs) for w in both]), "x eager time", "<=", target)


def compile_check(rows, ours, theirs, phase, target):
    """Sum of `phase` ("cold" / "warm") compile times of ours vs theirs, over the workloads where both probes ran."""
    both = [w for w, row in rows.items()
            if all(row["results"][c].get(phase, {}).get("error", "missing") is None for c in (ours, theirs))]

    def total(c):
        return sum(rows[w]["results"][c][phase]["compile_s"] for w in both) if both else None

    return check(f"{phase} compile, sum over {len(both)} workloads: {ours} vs {theirs}", total(ours), total(theirs),
                 "s", "<=", target)


def error_checks(rows, ours):
    return [check(f"error {w}: {ours} vs eager", row["results"][ours].get("max_abs_error"),
                  row["results"]["eager"]["max_abs_error"], "abs", "<=", ACCURACY_TARGET) for w, row in rows.items()]


# ---------------------------------------------------------------------------------------------
# Tables: `names` is ["eager", compiler names...], in column order

def _time_cell(r):
    return "error" if r.get("error") and "time" not in r else report.fmt(r.get("time", {}).get("median_us"), ".1f")


def _compile_cell(r, phase):
    p = r.get(phase)
    if p is None:
        return "—"
    return "error" if p.get("error") else timing.format_s(p["compile_s"])


def speed_table(rows, names):
    header = ["workload", "eager µs"]
    for c in names[1:]:
        header += [f"{c} µs", f"{c} ×"]
    lines, geo = [], {c: [] for c in names[1:]}
    for w, row in rows.items():
        cells = [w, _time_cell(row["results"]["eager"])]
        for c in names[1:]:
            r = row["results"][c]
            cells += [_time_cell(r), report.fmt(r.get("speedup"), ".2f", "×")]
            if r.get("speedup"):
                geo[c].append(r["speedup"])
        lines.append(cells)
    footer = ["geomean", ""]
    for c in names[1:]:
        footer += ["", report.fmt(report.geomean(geo[c]), ".2f", f"× ({len(geo[c])})")]
    lines.append(footer)
    return report.markdown_table(header, lines)


def compile_table(rows, names):
    """Cold and warm compile times of the compilers that have them, or None when none has."""
    compiled = [c for c in names[1:] if any("cold" in row["results"][c] for row in rows.values())]
    header = ["workload"] + [f"{c} {phase}" for c in compiled for phase in ("cold", "warm")]
    lines = [[w] + [_compile_cell(row["results"][c], phase) for c in compiled for phase in ("cold", "warm")]
             for w, row in rows.items()]
    return report.markdown_table(header, lines) if compiled else None


def memory_error_table(rows, names):
    header = ["workload"] + [f"{c} peak MB" for c in names] + [f"{c} max err" for c in names]
    lines = []
    for w, row in rows.items():
        res = row["results"]
        mem = [report.fmt(None if res[c].get("peak_memory_bytes") is None else res[c]["peak_memory_bytes"] / 1e6, ".2f")
               for c in names]
        err = [report.fmt(res[c].get("max_abs_error"), ".2e") for c in names]
        lines.append([w] + mem + err)
    return report.markdown_table(header, lines)


def bandwidth_table(rows, names, best_gbs):
    """GB/s of the memory-bound rows and their % of `best_gbs`, or None when no row is memory-bound. Rows that carry
    `same_size_copy_gbs` (the gpu suite's copy of the row's own bytes) add it and each compiler's % of it."""
    same_size = any(row.get("same_size_copy_gbs") for row in rows.values() if row["memory_bound"])
    header = ["workload", "MB moved"] + [f"{c} GB/s" for c in names] + [f"{c} % of copy" for c in names[1:]]
    if same_size:
        header += ["same-size copy GB/s"] + [f"{c} % of same-size copy" for c in names[1:]]
    lines = []
    pct = lambda g, ref: report.fmt(None if g is None or not ref else 100 * g / ref, ".0f", "%")
    for w, row in rows.items():
        if not row["memory_bound"]:
            continue
        gbs = [row["results"][c].get("gbs") for c in names]
        line = [w, f"{row['bytes_moved'] / 1e6:.2f}"] + [report.fmt(g, ".3g") for g in gbs] + [pct(g, best_gbs) for g in gbs[1:]]
        if same_size:
            copy = row.get("same_size_copy_gbs")
            line += [report.fmt(copy, ".3g")] + [pct(g, copy) for g in gbs[1:]]
        lines.append(line)
    return report.markdown_table(header, lines) if lines else None


def targets_table(targets):
    lines = []
    for t in targets:
        spec = ".4f" if t["unit"] in ("s", "x eager time") else ".3g" if t["unit"] == "abs" else ".1f"
        met = "n/a (a side failed)" if t["met"] is None else "met" if t["met"] else "NOT MET"
        lines.append([t["name"], f"{report.fmt(t['ember'], spec)} {t['unit']}",
                      f"{report.fmt(t['reference'], spec)} {t['unit']}", report.fmt(t["ratio"], ".3f"),
                      f"{t['op']} {t['target']:.3g}", met])
    return report.markdown_table(["check", "ember", "reference", "ratio", "target", "met"], lines)


def failures_list(rows):
    """Markdown lines `- workload / compiler: message`, one per failure."""
    return [f"- {w} / {c}: {msg}" for w, row in rows.items() for c, r in row["results"].items() for msg in failures(r)]


def speedup_chart(rows, names, title, path):
    """A bar chart of every compiler's speed-up per workload and their geomeans; False without matplotlib."""
    workloads = list(rows)
    series = {}
    for c in names:
        values = [rows[w]["results"][c].get("speedup") for w in workloads]
        present = [v for v in values if v is not None]
        series[c] = values + [report.geomean(present) if present else None]
    return report.write_bar_chart(path, title, workloads + ["geomean"], series, "× eager", reference=1.0)
