"""The zoo suite's report: the summary (pass rate, graphs vs torch.compile, break reasons by count, geomeans),
the markdown tables and the chart.

Needs: the results dict zoo.run builds (`config`, `environment`, `models`: name -> row as zoo.run_model returns).
Guarantees: `summary` is plain data (it goes into the JSON); `markdown` and `chart` only read the results.
Why apart from zoo.py: measuring and reporting change for different reasons, and together they pass 800 lines.
"""
import collections
import re

from . import compare, report

TOP_REASONS = 25


def _ember(row):
    return None if row["error"] else row["results"].get("ember")


def _counts(row, side):
    """(graphs, breaks) for "ember" (its explain) or "dynamo", or None when not measured."""
    if side == "ember":
        r = _ember(row)
        info = r.get("explain") if r and not r["error"] else None
    else:
        info = row.get("dynamo")
        info = info if info and not info.get("error") else None
    return (info["graphs"], info["breaks"]) if info else None


def _geomean(rows, key):
    values = [v for v in (key(row) for row in rows.values()) if v]
    return {"value": report.geomean(values), "models": len(values)}


def _reason_key(reason):
    """The key reasons are grouped by: the text as one line without what differs between occurrences of one
    cause (where a nested frame broke, " (at FILE:LINE)", and object addresses), cut to a cell's length."""
    text = " ".join(reason.split()).split(" (at ")[0]
    return re.sub(r" at 0x[0-9a-f]+", "", text)[:160]


def _short_path(where):
    """A library file named from its package (after site-packages/), as the report prints it."""
    return where.split("site-packages/")[-1]


def summary(results):
    rows = results["models"]
    compilers = results["config"]["compilers"]
    built = {m: row for m, row in rows.items() if not row["error"]}
    ember = {m: _ember(row) for m, row in built.items()}
    out = {"models": len(rows), "built": len(built),
           "libraries": dict(collections.Counter(row["library"] for row in rows.values())),
           "ember_errors": sorted(m for m, r in ember.items() if r and r["error"]),
           "wrong": sorted(m for c in compilers for m, row in built.items()
                           if row["results"].get(c, {}).get("wrong"))}
    passed = [m for m, r in ember.items() if r and not r["error"] and not r.get("wrong")]
    out["passed"] = len(passed)
    # past the float32 rule but exact in float64 (zoo_row.recheck_in_float64): correct, listed apart
    out["ill_conditioned"] = {m: r["float64_error"] for m, r in ember.items() if r and r.get("ill_conditioned")}
    compared = {m: (_counts(rows[m], "ember"), _counts(rows[m], "dynamo")) for m in passed}
    compared = {m: pair for m, pair in compared.items() if pair[0] and pair[1]}
    out["compared_with_dynamo"] = len(compared)
    out["whole"] = sorted(m for m in passed if _counts(rows[m], "ember") == (1, 0))
    out["dynamo_whole"] = sorted(m for m, (_, d) in compared.items() if d == (1, 0))
    out["more_graphs"] = {m: {"ember": e, "dynamo": d} for m, (e, d) in compared.items() if e[0] > d[0]}
    out["more_breaks"] = {m: {"ember": e, "dynamo": d} for m, (e, d) in compared.items() if e[1] > d[1]}
    out["eager_frames"] = {m: r["counters"]["eager_frames"] for m, r in ember.items()
                           if r and not r["error"] and r["counters"].get("eager_frames")}
    out["break_reasons"] = _reason_table(ember)
    if results["config"].get("train"):
        out["train"] = _train_summary(ember)
    out["speedup_geomean"] = {c: _geomean(built, lambda row, c=c: row["results"].get(c, {}).get("speedup"))
                              for c in compilers}
    if "inductor" in compilers:
        out["ember_over_inductor_time_geomean"] = _geomean(built, _time_ratio)
        both = [row["results"] for row in built.values()
                if all(row["results"].get(c, {}).get("compile_s") is not None for c in ("ember", "inductor"))]
        out["compile_s_sum"] = {c: sum(r[c]["compile_s"] for r in both) for c in ("ember", "inductor")}
        out["compile_s_sum"]["models"] = len(both)
    return out


def _train_summary(ember):
    """What a training step built: models with backward graphs, with autograd islands and backend fallbacks (by
    name and reason), and for the models judged wrong the tensors farthest from the float64 step."""
    ran = {m: r for m, r in ember.items() if r and not r["error"]}
    islands = collections.Counter(i for r in ran.values() for i in set((r.get("explain") or {}).get("islands", [])))
    fallbacks = collections.Counter(_reason_key(f) for r in ran.values()
                                    for f in set((r.get("explain") or {}).get("backend_fallback_reasons", [])))
    return {"with_backward": sorted(m for m, r in ran.items() if r["counters"].get("backward_graphs")),
            "fallbacks_by_models": dict(fallbacks.most_common()),
            "with_islands": sorted(m for m, r in ran.items() if r["counters"].get("autograd_islands")),
            "islands_by_models": dict(islands.most_common()),
            "worst_tensors_of_wrong": {m: r.get("worst_tensors", []) for m, r in ran.items() if r.get("wrong")}}


def _relative(worst, key):
    return "inf" if worst[key] is None else f"{worst[key] / worst['size']:.1e}"


def _time_ratio(row):
    ember, inductor = row["results"].get("ember", {}), row["results"].get("inductor", {})
    if "time" not in ember or "time" not in inductor:
        return None
    return ember["time"]["median_us"] / inductor["time"]["median_us"]


def _reason_table(ember):
    """[{"reason", "models", "count", "example"}] over Ember's break reasons, most models first."""
    count, models, example = collections.Counter(), collections.defaultdict(set), {}
    for m, r in ember.items():
        for b in ((r or {}).get("explain") or {}).get("break_reasons", []):
            key = _reason_key(b["reason"])
            count[key] += 1
            models[key].add(m)
            example.setdefault(key, f"{m} at {_short_path(b['where'])}")
    ordered = sorted(count, key=lambda k: (-len(models[k]), -count[k], k))
    return [{"reason": k, "models": len(models[k]), "count": count[k], "example": example[k]} for k in ordered]


def failures(row):
    """(compiler or "model", message) for each failure of a row: a build error, a compiler's error, a wrong output."""
    if row["error"]:
        return [("model", row["error"])]
    return [(c, msg) for c, r in row["results"].items() for msg in compare.failures(r)]


def progress_line(results):
    return f"# Ember benchmark: zoo (in progress: {len(results['models'])} of {len(results['config']['models'])} models)"


def _cell_counts(pair):
    return "—" if pair is None else f"{pair[0]} / {pair[1]}"


def _status(row, compilers):
    if row["error"]:
        return "build failed"
    bad = [c for c in compilers if row["results"][c].get("error")]
    wrong = [c for c in compilers if row["results"][c].get("wrong")]
    return ", ".join([f"{c} error" for c in bad] + [f"{c} WRONG" for c in wrong]) or "ok"


def _model_table(results):
    compilers = results["config"]["compilers"]
    train = results["config"].get("train")
    header = ["model", "library", "Ember graphs / breaks", "Dynamo graphs / breaks", "eager frames"]
    header += ["backward graphs", "islands"] if train else []
    header += ["eager µs"]
    for c in compilers:
        header += [f"{c} µs", f"{c} ×", f"{c} compile"]
    header += ["error vs fp64: eager / Ember", "status"]
    rows = []
    for m, row in results["models"].items():
        res = row["results"]
        ember = res.get("ember", {})
        cells = [m, row["library"], _cell_counts(_counts(row, "ember")), _cell_counts(_counts(row, "dynamo")),
                 report.fmt(ember.get("counters", {}).get("eager_frames"), "d")]
        if train:
            cells += [report.fmt(ember.get("counters", {}).get(k), "d") for k in ("backward_graphs", "autograd_islands")]
        cells += [report.fmt(res["eager"].get("time", {}).get("median_us"), ".0f")]
        for c in compilers:
            r = res.get(c, {})
            cells += [report.fmt(r.get("time", {}).get("median_us"), ".0f"), report.fmt(r.get("speedup"), ".2f", "×"),
                      report.fmt(r.get("compile_s"), ".1f", " s")]
        cells += [f"{report.fmt(res['eager'].get('max_abs_error'), '.1e')} / {report.fmt(ember.get('max_abs_error'), '.1e')}",
                  _status(row, compilers)]
        rows.append(cells)
    return report.markdown_table(header, rows)


def _library_table(results):
    compilers = results["config"]["compilers"]
    groups = collections.defaultdict(dict)
    for m, row in results["models"].items():
        groups[row["library"]][m] = row
    header = ["library", "models", "Ember ran and correct", "captured whole (1 graph, 0 breaks)",
              "Dynamo whole", "Ember graphs > Dynamo's"] + [f"{c} × (geomean)" for c in compilers]
    rows = []
    for library, rows_of in groups.items():
        s = summary({"models": rows_of, "config": results["config"]})
        rows.append([library, s["models"], s["passed"], len(s["whole"]), len(s["dynamo_whole"]), len(s["more_graphs"])]
                    + [report.fmt(s["speedup_geomean"][c]["value"], ".2f", "×") for c in compilers])
    return report.markdown_table(header, rows)


def markdown(results):
    cfg, s = results["config"], results["summary"]
    libraries = ", ".join(f"{k} {v}" for k, v in results["environment"].get("libraries", {}).items())
    out = ["# Ember benchmark: zoo", "", report.environment_line(results["environment"]) + f"; {libraries}", "",
           f"{s['models']} models ({', '.join(f'{k} {v}' for k, v in s['libraries'].items())}), "
           + ("train(), one step (forward, loss = sum of the float outputs' means, backward; judged: the loss, every "
              ".grad and float buffer). Per-step" if cfg.get("train") else "eval(), torch.no_grad(). Per-call")
           + f" time: median of {cfg['repeat']} samples interleaved across eager and "
           f"{', '.join(cfg['compilers'])} after {cfg['warmup']} warm-up calls; × = speed-up over eager. Compile: "
           "first compiled call - fastest eager call, in this process (caches new at the start of the run, shared by "
           "its models). Graphs / breaks: "
           "ember.explain and torch._dynamo.explain on the same call.", "", "## Summary", ""]
    geo = ", ".join(f"{c} {report.fmt(v['value'], '.2f', '×')} ({v['models']})" for c, v in s["speedup_geomean"].items())
    out += [f"- built and ran eagerly: {s['built']} / {s['models']}",
            f"- Ember ran and was correct: **{s['passed']} / {s['built']}**; errors: {len(s['ember_errors'])}; "
            f"wrong results: **{len(s['wrong'])}** {', '.join(s['wrong'])}",
            "- past the float32 rule but exact in float64 (ill-conditioned, not wrong; Ember's float64 error): "
            + (", ".join(f"{m} ({e:.1e})" for m, e in s["ill_conditioned"].items()) or "none"),
            f"- captured whole (1 graph, 0 breaks): Ember {len(s['whole'])}, torch.compile "
            + (f"{len(s['dynamo_whole'])} (of {s['compared_with_dynamo']} models with both counts)" if cfg["dynamo"]
               else "not counted (--no-dynamo)"),
            f"- Ember makes more graphs than torch.compile on {len(s['more_graphs'])} models, more breaks on "
            f"{len(s['more_breaks'])}; eager frames on {len(s['eager_frames'])}",
            f"- speed-up over eager, geomean (models): {geo}"]
    if "ember_over_inductor_time_geomean" in s:
        out.append(f"- Ember time / Inductor time, geomean: "
                   f"{report.fmt(s['ember_over_inductor_time_geomean']['value'], '.2f')} "
                   f"({s['ember_over_inductor_time_geomean']['models']} models); compile seconds summed over "
                   f"{s['compile_s_sum']['models']} models: Ember {s['compile_s_sum']['ember']:.0f} s, "
                   f"Inductor {s['compile_s_sum']['inductor']:.0f} s")
    if "train" in s:
        t = s["train"]
        out += [f"- training: backward graphs on {len(t['with_backward'])} models, autograd islands on "
                f"{len(t['with_islands'])}: " + (", ".join(f"{k} ({v})" for k, v in t["islands_by_models"].items())
                                                 or "none"),
                "- graphs run under torch's autograd (backend fallbacks), by models: "
                + ("; ".join(f"{k} ({v})" for k, v in t["fallbacks_by_models"].items()) or "none"),
                "- judged wrong, the tensors farthest from float64 (Ember's / eager's error, relative to the tensor's "
                "size): " + ("; ".join(m + ": " + ", ".join(f"{w['name']} {_relative(w, 'ember_error')} / "
                                                            f"{_relative(w, 'eager_error')}" for w in v)
                                       for m, v in t["worst_tensors_of_wrong"].items()) or "none")]
    out += ["", "## By library", "", _library_table(results), ""]
    out += [f"## Ember's break reasons, by models affected (top {TOP_REASONS})", ""]
    out.append(report.markdown_table(["models", "breaks", "reason", "first seen"],
                                     [[r["models"], r["count"], r["reason"].replace("|", "\\|"), r["example"]]
                                      for r in s["break_reasons"][:TOP_REASONS]]))
    out += ["", "## More graphs or breaks than torch.compile", ""]
    out += [f"- {m}: Ember {v['ember'][0]} graphs / {v['ember'][1]} breaks, torch.compile {v['dynamo'][0]} / {v['dynamo'][1]}"
            for m, v in sorted({**s["more_breaks"], **s["more_graphs"]}.items())] or ["none"]
    out += ["", "## Models", "", _model_table(results)]
    cold = {m: {c: row["results"][c]["cold"] for c in cfg["compilers"] if "cold" in row["results"].get(c, {})}
            for m, row in results["models"].items() if m in cfg["cold_models"]}
    if cold:
        out += ["", f"## Cold compile in a fresh process (a sample of {len(cold)} models)", ""]
        out.append(report.markdown_table(["model"] + cfg["compilers"], [
            [m] + [("error" if v.get(c, {}).get("error") else report.fmt(v.get(c, {}).get("compile_s"), ".1f", " s"))
                   for c in cfg["compilers"]] for m, v in cold.items()]))
    lines = [f"- {m} / {who}: {msg}" for m, row in results["models"].items() for who, msg in failures(row)]
    if lines:
        out += ["", "## Failures", ""] + lines
    return "\n".join(out)


def chart(results, path):
    """Speed-up over eager, geomean per model family and over all; False without matplotlib."""
    compilers = results["config"]["compilers"]
    families = collections.defaultdict(dict)
    for m, row in results["models"].items():
        families[row["family"]][m] = row
    categories = sorted(families) + ["all"]
    groups = [families[f] for f in categories[:-1]] + [results["models"]]
    series = {c: [_geomean(g, lambda row, c=c: None if row["error"] else row["results"].get(c, {}).get("speedup"))["value"]
                  for g in groups] for c in compilers}
    return report.write_bar_chart(path, "Ember zoo: speed-up over eager (geomean per family)", categories, series,
                                  "× eager", reference=1.0)
