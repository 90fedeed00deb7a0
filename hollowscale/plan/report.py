"""The capacity report: ``capacity.json`` (everything), ``capacity.md`` and a self-contained ``capacity.html``.

At each knee the report names the limit that bound first (:func:`hollowscale.measure.attribution.bound_first`,
from each point's ranked limits) with its figures at the knee and at the first failing rate, in words,
in a table and in a plot (each limit's pressure vs rate per cell).

Plots (inline SVG, matplotlib): p99 pod startup vs rate per size, sustainable rate (knee) vs nodes per
SLO, the limits' pressure vs rate per cell, control-plane CPU and memory per component vs nodes and vs rate, and the fitted cost projected to
5,000 and 15,000 nodes with its interval (marked as a projection).  The answers are written in words.
The tables are built once as blocks (headings, paragraphs, lists, tables) and rendered twice: Markdown
for capacity.md, escaped HTML tables (the run report's table helper and style) for capacity.html.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from hollowscale import __version__
from hollowscale.measure.attribution import attribute, bound_first, read_window
from hollowscale.plan.fit import PROJECT_TO, cost_fits
from hollowscale.plan.state import write_json_atomic
from hollowscale.report.html import CSS as REPORT_CSS
from hollowscale.report.html import svg as _svg
from hollowscale.report.html import table as html_table

METHOD = {
    "warmup": "each point loads at a constant rate for warmup_s + measure_s; only pods and workload objects created "
              "after warmup_s count (startup followed to the end of the point's settle time; a pod that never ran "
              "counts as infinitely slow); control-plane CPU/memory/API figures are differences of the components' "
              "own /metrics read when the warm-up ends and when the load ends",
    "backlog": "unfinished workload objects sampled every second of the measured window; growing when their "
               "least-squares slope / arrival rate > backlog.max_growth_fraction, or when fewer than "
               "backlog.min_completed_fraction of the window's objects finished",
    "bisection": "per cell and SLO, bisection on rate between rate.lo and rate.hi until the bracket is <= "
                 "rate.resolution; lo is measured only when no midpoint passes, hi only when all pass; a rate is "
                 "measured once and shared by every SLO of the cell; passed = SLO met and no growing backlog",
    "attribution": "each point's limits from the components' own /metrics read at the window's edges (CPU against a "
                   "core and the machine's cores, client rate limiters, APF, etcd, the scheduler's, Kueue's and the Job "
                   "controller's loops, work queues, pending pods/workloads), each as pressure = figure / threshold, "
                   "ranked; at a knee, walking the points in rising rate up to the first failing one, the first binding "
                   "limit met bound first (hollowscale/measure/attribution.py)",
    "cluster_reuse": "one local cluster per profile, reused across sizes, mixes and rates: each point registers and "
                     "removes its own nodes and uses a namespace of its own; possible bias: etcd history growth "
                     "between compactions and garbage collection of the previous point's namespace during the next "
                     "warm-up; profiles never share a cluster",
    "fit": "least squares cost = a + b*nodes + c*pods_per_s per component over the profile's points; standard "
           "errors from the residual variance; 95% prediction intervals (Student t); beyond the measured sizes "
           "every value is a projection",
}


def build_capacity(sc: Any, planner: Any, result: Any) -> dict[str, Any]:
    """The capacity document from the plan's state and knees."""
    state = planner.state
    cells_out = []
    nodes_of = {c.key: c.nodes for c in result.cells}
    for cell in result.cells:
        pts = sorted((p for p in state.points.values() if p.get("cell_key") == cell.key), key=lambda p: p["rate"])
        rows = [_point_row(p) for p in pts]
        knees = {k: v.to_dict() for k, v in (result.knees.get(cell.key) or {}).items()}
        for name, k in knees.items():
            k["bound_first"] = bound_first([{"rate": r["rate"], "passed": (r["slos"].get(name) or {}).get("passed"),
                                             "attribution": r.get("attribution")} for r in rows])
        cells_out.append({
            "key": cell.key, "profile": cell.setting, "base_profile": cell.profile,
            "client_limits": {c: {"qps": q, "burst": b} for c, q, b in cell.client_limits},
            "mix": cell.mix, "nodes": cell.nodes, "size": dict(cell.size), "knees": knees, "points": rows,
        })
    profiles = sorted({c.setting for c in result.cells})
    fits: dict[str, Any] = {}
    for prof in profiles:
        pts = [p for p in state.points.values() if str(p.get("cell_key", "")).startswith(prof + "/")]
        knee_rates = [k.knee for c in result.cells if c.setting == prof
                      for k in (result.knees.get(c.key) or {}).values() if k.knee is not None]
        rate = min(knee_rates) if knee_rates else planner.sweep.rate.lo
        at_pts = [p["figures"]["pods_per_s"] for p in pts if p["rate"] == rate and p.get("figures", {}).get("pods_per_s")]
        at = sum(at_pts) / len(at_pts) if at_pts else rate
        fits[prof] = {"at_rate": rate, "at_pods_per_s": round(at, 3),
                      "at_why": f"the pods/s measured at {rate:g} instances/s, the lowest knee of the profile",
                      "components": cost_fits(pts, nodes_of, at)}
    doc = {
        "schema_version": 1, "plan": sc.name, "scenario_file": sc.source,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "versions": {"hollowscale": __version__}, "sweep": sc.sweep.model_dump(mode="json"),
        "slos": [s.model_dump(mode="json") for s in planner.slos], "method": METHOD,
        "points_measured_now": result.measured, "points_reused": result.reused, "wall_s": result.wall_s,
        "order": result.order, "cells": cells_out, "fits": fits,
        "saturation": saturation(state.points.values(), planner.slos),
    }
    doc["instance"] = instance_words(sc)
    doc["answers"] = [f"rates are workload instances/s: {doc['instance']}", *answers(doc)]
    return doc


def instance_words(sc: Any) -> str:
    """What one workload instance is in this scenario's mix (one object per role)."""
    parts = []
    for w in sc.workloads:
        roles = " + ".join(f"{r.name} x{r.replicas}" for r in w.roles)
        parts.append(f"{w.name} (share {w.share:g}): one {w.kind} per role, {roles} pod(s)")
    return "; ".join(parts)


def point_attribution(p: dict[str, Any]) -> dict[str, Any] | None:
    """A point's ranked limits, computed again from the reads it kept (``<run_dir>/attribution``) so the
    report follows the current rule; the recorded ones when the reads are gone.  The machine's CPU says
    how much of the "everything else" was the point's own agents and Locust (its ``summary.json``)."""
    run_dir = Path(p["run_dir"]) if p.get("run_dir") else None
    reads = read_window(run_dir / "attribution") if run_dir else None
    doc = attribute(*reads).to_dict() if reads else p.get("attribution")
    try:
        harness = json.loads((run_dir / "summary.json").read_text())["measurements"]["harness_processes"] if run_dir else {}
    except (OSError, ValueError, KeyError, TypeError):
        harness = {}
    cores = sum(float(v.get("cpu_cores_avg") or 0.0) for v in (harness or {}).values() if isinstance(v, dict))
    for lim in (doc or {}).get("limits") or []:
        if lim["key"] == "cpu:host" and harness:
            lim["figures"]["harness_cores"] = round(cores, 3)
            lim["words"] += f"; of the rest, this point's agents and Locust used {cores:.2f} cores"
    return doc


def _point_row(p: dict[str, Any]) -> dict[str, Any]:
    f = p.get("figures") or {}
    cp = p.get("control_plane") or {}
    return {"rate": p["rate"], "passed_all": p.get("passed_all"), "complete": p.get("complete"),
            "slos": {k: {"value": v["value"], "passed": v["passed"], "met": v["met"]} for k, v in (p.get("slos") or {}).items()},
            "pod_startup_p99_ms": (f.get("pod_startup_latency_ms") or {}).get("p99"),
            "pods_per_s": f.get("pods_per_s"), "objects_per_s": f.get("objects_per_s"),
            "backlog": f.get("backlog"), "mutating_requests_per_s": cp.get("mutating_requests_per_s"),
            "components": cp.get("components"), "api_latency_slo_ms": cp.get("api_latency_slo_ms"),
            "wall_s": p.get("wall_s"), "run_dir": p.get("run_dir"), "incomplete_reason": p.get("incomplete_reason"),
            "attribution": point_attribution(p)}


def saturation(points: Any, slos: Any) -> dict[str, Any]:
    """The highest mutating request rate served with the API mutating SLO met, and the lowest with it missed."""
    api = next((s for s in slos if s.metric == "api_latency_slo_ms.mutating.p99"), None)
    rows = []
    for p in points:
        cp = p.get("control_plane")
        if not cp or cp.get("mutating_requests_per_s") is None:
            continue
        p99 = (cp.get("api_latency_slo_ms") or {}).get("mutating", {}).get("p99")
        met = api.check(p99) if api is not None else (p99 is not None and p99 <= 1000.0)
        rows.append({"mutating_per_s": cp["mutating_requests_per_s"], "p99_ms": p99, "met": met, "rate": p["rate"],
                     "cell": p.get("cell_key")})
    ok = [r for r in rows if r["met"]]
    bad = [r for r in rows if not r["met"]]
    return {"threshold_ms": api.threshold if api is not None else 1000.0,
            "highest_met": max(ok, key=lambda r: r["mutating_per_s"]) if ok else None,
            "lowest_missed": min(bad, key=lambda r: r["mutating_per_s"]) if bad else None, "points": rows}


def why_failed(cell: dict[str, Any], slo: str, rate: float) -> str:
    """Why the point (cell, rate) failed ``slo``: the value missed, the backlog grew, or the run was incomplete."""
    p = next((p for p in cell["points"] if p["rate"] == rate), None)
    if p is None:
        return "not measured"
    reasons = []
    v = (p.get("slos") or {}).get(slo) or {}
    if not v.get("met"):
        reasons.append(f"{slo} missed: {v.get('value') if v.get('value') is not None else 'no value (a pod never ran)'}")
    if (p.get("backlog") or {}).get("growing"):
        reasons.append(f"backlog grows: {(p.get('backlog') or {}).get('why')}")
    if not p.get("complete"):
        reasons.append(f"run incomplete: {p.get('incomplete_reason')}")
    return "; ".join(reasons) or "failed"


def answers(doc: dict[str, Any]) -> list[str]:
    """The plan's answers in words."""
    out = []
    slo_desc = {s["name"]: f"{s['metric']} {s['op']} {s['threshold']:g}" for s in doc["slos"]}
    for c in doc["cells"]:
        for name, k in c["knees"].items():
            who = f"{c['nodes']:,} nodes ({', '.join(f'{p} {n}' for p, n in c['size'].items())}, profile {c['profile']})"
            if k["verdict"] == "below-lo":
                out.append(f"{who} do not hold {slo_desc[name]} even at {doc['sweep']['rate']['lo']:g} instances/s "
                           f"of mix {c['mix']} (the knee is below the searched range).")
            elif k["verdict"] == "at-least-hi":
                out.append(f"at {k['knee']:g} instances/s of mix {c['mix']} (the top of the searched range), {who} "
                           f"still hold {slo_desc[name]}: the knee is at least that.")
            else:
                out.append(f"at {k['knee']:g} instances/s of mix {c['mix']}, {who} hold {slo_desc[name]}; at "
                           f"{k['failing']:g}/s they do not ({why_failed(c, name, k['failing'])}; knee within "
                           f"{k['step']:g}/s).")
            if k.get("bound_first"):
                out.append(f"{who}, {name}: {bound_words(k['bound_first'])}")
    sat = doc["saturation"]
    if sat["highest_met"]:
        h = sat["highest_met"]
        line = (f"the highest mutating rate served with API mutating p99 <= {sat['threshold_ms']:g} ms was "
                f"{h['mutating_per_s']:.0f} requests/s (p99 {h['p99_ms']} ms at {h['rate']:g} instances/s, {h['cell']})")
        if sat["lowest_missed"]:
            m = sat["lowest_missed"]
            line += (f"; the apiserver saturates by {m['mutating_per_s']:.0f} mutating requests/s "
                     f"(p99 {m['p99_ms']} ms at {m['rate']:g}/s, {m['cell']}).")
        else:
            line += "; no point missed it: the apiserver did not saturate within this sweep."
        out.append(line)
    for prof, f in doc["fits"].items():
        api = (f["components"].get("apiserver") or {}).get("cpu_cores_avg")
        if api:
            for pr in api["projections"]:
                if pr["value"] is None:
                    out.append(f"no projection of apiserver CPU to {pr['nodes']:,} nodes ({prof}): {pr.get('why')}")
                    continue
                err = f" +/- {pr['error_95']:.2f}" if pr.get("error_95") is not None else " (error unknown: too few points)"
                out.append(f"{pr.get('projection', 'fit')}: apiserver CPU at {pr['nodes']:,} nodes and "
                           f"{pr['pods_per_s']:g} pods/s ({prof}) ~ {pr['value']:.2f}{err} cores (95% prediction "
                           "interval).")
    return out


def bound_words(b: dict[str, Any]) -> str:
    """What bound first at a knee, in words, with its pressure at the knee and at the first failing rate."""
    def pr(x: dict[str, Any] | None) -> str:
        if not x or x.get("pressure") is None:
            return "n/a"
        return f"{x['pressure']:.2f} at {x['rate']:g}/s"
    moves = f" (pressure {pr(b.get('knee'))} -> {pr(b.get('failing'))}; 1 = its threshold)"
    fail = b.get("failing") or {}
    words = fail.get("words") or b["words"]
    if b["binding"]:
        return f"bound first by {b['key']} (binding from {b['at_rate']:g}/s){moves}: {words}"
    return f"no limit reached its threshold up to the first failing rate; nearest {b['key']}{moves}: {words}"


def limits_plot(doc: dict[str, Any]) -> str:
    """Each cell's limits: pressure (figure / threshold, log axis) vs rate, the threshold at 1, the knee
    dotted; the limits drawn are those that bind at some point of the cell or rank in its top three."""
    cells = [c for c in doc["cells"] if any(p.get("attribution") for p in c["points"])]
    n = max(len(cells), 1)
    cols = 2 if n > 1 else 1
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.8 * rows), squeeze=False)
    keys: list[str] = []
    for c in cells:
        for p in c["points"]:
            lims = (p.get("attribution") or {}).get("limits") or []
            for i, lim in enumerate(lims):
                if lim["pressure"] is not None and (lim["binding"] or i < 3) and lim["key"] not in keys:
                    keys.append(lim["key"])
    for idx, c in enumerate(cells):
        ax = axes[idx // cols][idx % cols]
        pts = sorted((p for p in c["points"] if p.get("attribution")), key=lambda p: p["rate"])
        for j, key in enumerate(keys):
            xs, ys = [], []
            for p in pts:
                lim = next((x for x in p["attribution"]["limits"] if x["key"] == key), None)
                if lim and lim["pressure"] is not None:
                    xs.append(p["rate"])
                    ys.append(max(lim["pressure"], 1e-3))
            if xs:
                ax.plot(xs, ys, "o-", color=f"C{j % 10}", ms=4, lw=1.2, label=key)
        ax.axhline(1.0, color="k", ls="--", lw=1)
        for k in c["knees"].values():
            if k.get("knee") is not None:
                ax.axvline(k["knee"], color="0.5", ls=":", lw=1)
            b = k.get("bound_first")
            if b:
                ax.set_title(f"{c['key']}\n{'bound first: ' if b['binding'] else 'nearest: '}{b['key']}", fontsize=7)
        ax.set_yscale("log")
        ax.set_xlabel("rate (instances/s)", fontsize=7)
        ax.set_ylabel("pressure (1 = threshold)", fontsize=7)
        ax.tick_params(labelsize=7)
    for idx in range(len(cells), rows * cols):
        axes[idx // cols][idx % cols].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    for row in axes:
        for ax in row:
            for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
    if handles:
        fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=min(4, len(labels)),
                   bbox_to_anchor=(0.5, -0.02 - 0.03 * ((len(labels) - 1) // 4)))
    fig.tight_layout(rect=(0, 0.08 + 0.03 * ((len(labels) - 1) // 4), 1, 1))
    return _svg(fig)


# ------------------------------------------------------------------------------------ plots
def knee_plot(doc: dict[str, Any]) -> str:
    """Knee per size and SLO: a marker at the knee, a bar up to the first failing rate.

    Sizes sit at evenly spaced slots (labelled with their node counts) so that small and large sizes
    read equally well; the series (one per SLO, and per mix/profile when the plan has several) are
    offset inside a slot so their bars never hide each other.  A knee at the top of the searched
    range gets an upward arrow (at least that), a knee below it an open triangle at 0.
    """
    cells = doc["cells"]
    sizes = sorted({c["nodes"] for c in cells})
    slot = {n: i for i, n in enumerate(sizes)}
    groups = sorted({(c["mix"], c["profile"]) for c in cells})
    names = sorted({k for c in cells for k in c["knees"]})
    series = [(name, g) for name in names for g in groups]
    width = 0.6 / max(len(series), 1)
    top = float(doc["sweep"]["rate"]["hi"])  # the searched range is always in view
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    markers = "osD^vP*X"
    seen: set[str] = set()  # the verdicts drawn, for their legend entries
    for j, (name, (mix, prof)) in enumerate(series):
        color, marker = f"C{j % 10}", markers[j % len(markers)]
        label = name if len(groups) == 1 else f"{name} ({mix}, {prof})"
        offset = (j - (len(series) - 1) / 2) * width
        xs, ys, up = [], [], []
        for c in sorted((c for c in cells if (c["mix"], c["profile"]) == (mix, prof)), key=lambda c: c["nodes"]):
            k = c["knees"].get(name)
            if not k:
                continue
            x = slot[c["nodes"]] + offset
            if k["knee"] is None:  # below the searched range
                ax.plot([x], [0], marker="v", ms=8, mfc="none", color=color, ls="none", clip_on=False)
                seen.add("below-lo")
                continue
            xs.append(x)
            ys.append(k["knee"])
            up.append((k["failing"] - k["knee"]) if k["failing"] is not None else 0.0)
            top = max(top, k["failing"] or k["knee"])
            if k["verdict"] == "at-least-hi":
                seen.add("at-least-hi")
                ax.annotate("", xy=(x, k["knee"] * 1.12), xytext=(x, k["knee"]),
                            arrowprops={"arrowstyle": "->", "color": color, "lw": 1.5})
        if xs:
            ax.errorbar(xs, ys, yerr=[[0.0] * len(up), up], fmt=marker, ms=7, color=color, ecolor=color,
                        elinewidth=2, capsize=5, capthick=1.5, label=label, zorder=3)
            if len(xs) > 1:
                ax.plot(xs, ys, color=color, lw=0.8, alpha=0.35, zorder=2)
    hi = float(doc["sweep"]["rate"]["hi"])
    ax.axhline(hi, color="0.5", ls=":", lw=1, label=f"top of searched range ({hi:g}/s)")
    if "at-least-hi" in seen:
        ax.plot([], [], marker="$\\uparrow$", ls="none", color="0.3", label="holds at the top: knee at least that")
    if "below-lo" in seen:
        ax.plot([], [], marker="v", mfc="none", ls="none", color="0.3", label="fails at the bottom of the range")
    ax.set_xticks(range(len(sizes)), [f"{n:,}" for n in sizes])
    ax.set_xlim(-0.5, len(sizes) - 0.5)
    ax.set_ylim(0, top * 1.15)
    ax.grid(axis="y", alpha=0.3)
    ax.grid(False, axis="x")  # a line through a slot's centre would pass between the offset series
    ax.set_xlabel("nodes (one slot per measured size)")
    ax.set_ylabel("sustainable rate (instances/s)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="SLO: knee, bar up to\nthe first failing rate",
              title_fontsize=7)
    return _svg(fig)


def plots(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(id, title, svg) of every plot."""
    out = []
    cells = doc["cells"]
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    for c in cells:
        xs = [p["rate"] for p in c["points"]]
        ys = [p["pod_startup_p99_ms"] if p["pod_startup_p99_ms"] is not None else float("nan") for p in c["points"]]
        line = ax.plot(xs, ys, "o-", label=f"{c['nodes']} nodes {c['mix']} {c['profile']}")[0]
        bad = [(x, y) for x, y, p in zip(xs, ys, c["points"], strict=True) if not p["passed_all"]]
        ax.scatter([b[0] for b in bad], [b[1] for b in bad], marker="x", s=60, color=line.get_color(), zorder=3)
    for s in doc["slos"]:
        if s["metric"] == "pod_startup_latency_ms.p99":
            ax.axhline(s["threshold"], color="C3", ls="--", lw=1, label=f"SLO {s['threshold']:g} ms")
    ax.set_xlabel("arrival rate (instances/s)")
    ax.set_ylabel("pod startup p99 (ms)")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    out.append(("plot-startup-vs-rate", "p99 pod startup vs rate per size (warm-up excluded; x = the point failed an "
                "SLO or its backlog grew; missing = a pod never ran)",
                _svg(fig)))
    out.append(("plot-knee-vs-nodes", "sustainable rate (knee, bar up to the first failing rate) vs nodes",
                knee_plot(doc)))
    if any(p.get("attribution") for c in cells for p in c["points"]):
        out.append(("plot-limits", "what binds: each limit's pressure (its figure / its threshold; log axis, 1 = the "
                    "threshold, dashed) vs rate per cell; dotted: the knee; title: the limit that bound first",
                    limits_plot(doc)))
    comps = sorted({comp for c in cells for p in c["points"] for comp in (p["components"] or {})})
    for resource, label in (("cpu_cores_avg", "CPU cores"), ("rss_mib_max", "RSS MiB")):
        fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
        for j, comp in enumerate(comps):
            pts = [(c["nodes"], p["rate"], (p["components"] or {}).get(comp, {}).get(resource)) for c in cells
                   for p in c["points"]]
            pts = [t for t in pts if t[2] is not None]
            axes[0].scatter([t[0] for t in pts], [t[2] for t in pts], color=f"C{j}", label=comp, s=14)
            axes[1].scatter([t[1] for t in pts], [t[2] for t in pts], color=f"C{j}", label=comp, s=14)
        axes[0].set_xlabel("nodes")
        axes[1].set_xlabel("arrival rate (instances/s)")
        axes[0].set_ylabel(label)
        axes[0].legend(fontsize=7)
        out.append((f"plot-{resource}", f"control-plane {label} by component vs nodes and vs rate (measured window)",
                    _svg(fig)))
    for prof, f in doc["fits"].items():
        fig, ax = plt.subplots(figsize=(6.5, 3.2))
        for j, (comp, by) in enumerate(sorted(f["components"].items())):
            cpu = by.get("cpu_cores_avg")
            if not cpu:
                continue
            data = cpu["data"]
            ax.scatter([d["nodes"] for d in data], [d["value"] for d in data], color=f"C{j}", s=12)
            pr = cpu["projections"]
            xs = [d["nodes"] for d in data] + [p["nodes"] for p in pr]
            lo_n = min(d["nodes"] for d in data)
            coef = cpu["fit"]["coef"]
            xline = [lo_n, *PROJECT_TO]
            if not cpu["fit"]["stderr"]["per_node"] and cpu["projections"][0]["value"] is None:
                continue
            ax.plot(xline, [coef["intercept"] + coef["per_node"] * x + coef["per_pod_per_s"] * f["at_pods_per_s"]
                            for x in xline], "--", color=f"C{j}", label=f"{comp} (projection beyond {max(xs[:len(data)])})")
            for p in pr:
                if p["interval_95"]:
                    ax.vlines(p["nodes"], p["interval_95"][0], p["interval_95"][1], color=f"C{j}", lw=2, alpha=0.6)
        ax.set_xscale("log")
        ax.set_xlabel("nodes (log)")
        ax.set_ylabel("CPU cores")
        ax.legend(fontsize=7)
        out.append((f"plot-projection-{prof}", f"PROJECTION ({prof}): fitted control-plane CPU at "
                    f"{f['at_pods_per_s']:g} pods/s, 95% prediction intervals at {', '.join(map(str, PROJECT_TO))} nodes",
                    _svg(fig)))
    return out


# ------------------------------------------------------------------------------------ text
Runs = list[tuple[str, str]]
"""Inline text as (style, text) runs; style is "" (plain), "code" or "b" (bold)."""


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Para:
    runs: Runs


@dataclass(frozen=True)
class Bullets:
    items: list[Runs]


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[str]]


Block = Heading | Para | Bullets | Table


def head_blocks(doc: dict[str, Any]) -> list[Block]:
    """Title, what was run, and the answers: the top of capacity.md (the HTML puts the plots after it)."""
    return [Heading(1, f"Capacity plan: {doc['plan']}"),
            Para([("", "Scenario "), ("code", doc["scenario_file"]),
                  ("", f", created {doc['created_at']}, {doc['points_measured_now']} point(s) measured in this run, "
                       f"{doc['points_reused']} reused, {doc['wall_s']:.0f} s.")]),
            Heading(2, "Answers"), Bullets([[("", a)] for a in doc["answers"]])]


def table_blocks(doc: dict[str, Any]) -> list[Block]:
    """Knees, points, the cost fit and the method: one content for capacity.md and capacity.html."""
    knees = []
    bound = []
    for c in doc["cells"]:
        for name, k in c["knees"].items():
            tried = ", ".join(f"{t['rate']:g}:{'pass' if t['passed'] else 'fail'}" for t in k["tried"])
            b = k.get("bound_first")
            knees.append([c["key"], name, str(k["knee"] if k["knee"] is not None else "n/a"), k["verdict"],
                          f"{k['step']:g}", tried, (b["key"] + ("" if b["binding"] else " (nearest, not binding)"))
                          if b else "n/a"])
            if b:
                bound.append([c["key"], name, b["key"], "yes" if b["binding"] else "no",
                              _pressure(b.get("knee")), _pressure(b.get("failing")),
                              (b.get("failing") or {}).get("words") or b["words"]])
    points = []
    for c in doc["cells"]:
        for p in c["points"]:
            comps = p["components"] or {}
            b = p["backlog"] or {}
            attr = p.get("attribution") or {}
            top = (attr.get("limits") or [{}])[0]
            points.append([c["key"], f"{p['rate']:g}", str(p["pod_startup_p99_ms"]), str(p["pods_per_s"]),
                           str(b.get("growth_fraction")), str(p["mutating_requests_per_s"]),
                           str((comps.get("apiserver") or {}).get("cpu_cores_avg")),
                           str((comps.get("etcd") or {}).get("cpu_cores_avg")), "yes" if p["passed_all"] else "no",
                           (attr.get("binding") or f"none (top {top.get('key')} {_pressure(top)})") if attr else "n/a",
                           str(p["wall_s"])])
    out: list[Block] = [
        Heading(2, "Knees"),
        Table(["cell", "SLO", "knee (instances/s)", "verdict", "step", "points tried (rate: pass/fail)", "bound first"],
              knees)]
    if bound:
        out += [Heading(2, "What bound at each knee"),
                Para([("", "Pressure = the limit's figure / its threshold (1 = at the limit), at the knee and at the "
                           "first failing rate; the figures are those of the first failing rate.")]),
                Table(["cell", "SLO", "limit", "binding", "pressure at the knee", "at the first failing rate",
                       "figures"], bound)]
    out += [
        Heading(2, "Points"),
        Table(["cell", "rate", "startup p99 ms", "pods/s", "backlog slope/rate", "mutating req/s", "apiserver CPU",
               "etcd CPU", "passed", "binding limit", "wall s"], points),
        Heading(2, "Control-plane cost fit (a + b*nodes + c*pods/s) and projections")]
    for prof, f in doc["fits"].items():
        rows = []
        for comp, by in sorted(f["components"].items()):
            for res, v in by.items():
                co, se = v["fit"]["coef"], v["fit"]["stderr"]
                proj = ["n/a" if p["value"] is None else f"{p['value']:.3g}" + (
                    f" +/- {p['error_95']:.2g}" if p["error_95"] is not None else " (no error)") for p in v["projections"]]
                rows.append([comp, res, f"{co['per_node']:.3g} +/- {_g(se['per_node'])}",
                             f"{co['per_pod_per_s']:.3g} +/- {_g(se['per_pod_per_s'])}", proj[0], proj[1],
                             f"{v['projections'][0].get('projection', '')}; {v['fit']['note']}"])
        out += [Para([("", f"Profile {prof}, projected at {f['at_pods_per_s']:g} pods/s:")]),
                Table(["component", "resource", "per node (+/- se)", "per pod/s (+/- se)", "5,000 nodes",
                       "15,000 nodes", "note"], rows)]
    out += [Heading(2, "Method"), Bullets([[("b", k), ("", f": {v}")] for k, v in doc["method"].items()])]
    return out


def _pressure(x: dict[str, Any] | None) -> str:
    if not x or x.get("pressure") is None:
        return "n/a"
    return f"{x['pressure']:.2f}" + (f" ({x['rate']:g}/s)" if "rate" in x else "")


def _md_runs(runs: Runs) -> str:
    return "".join({"code": f"`{t}`", "b": f"**{t}**"}.get(style, t) for style, t in runs)


def _md_block(b: Block) -> str:
    if isinstance(b, Heading):
        return f"{'#' * b.level} {b.text}"
    if isinstance(b, Para):
        return _md_runs(b.runs)
    if isinstance(b, Bullets):
        return "\n".join(f"- {_md_runs(item)}" for item in b.items)
    return "\n".join([f"| {' | '.join(b.headers)} |", "|" + "---|" * len(b.headers),
                      *(f"| {' | '.join(r)} |" for r in b.rows)])


def markdown(doc: dict[str, Any]) -> str:
    """capacity.md: the answers and every table, as Markdown."""
    return "\n\n".join(_md_block(b) for b in head_blocks(doc) + table_blocks(doc)) + "\n"


def _g(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2g}"


def _html_runs(runs: Runs) -> str:
    tag = {"code": "code", "b": "b"}
    return "".join(f"<{tag[style]}>{html.escape(t)}</{tag[style]}>" if style in tag else html.escape(t)
                   for style, t in runs)


def _html_block(b: Block) -> str:
    if isinstance(b, Heading):
        return f"<h{b.level}>{html.escape(b.text)}</h{b.level}>"
    if isinstance(b, Para):
        return f"<p>{_html_runs(b.runs)}</p>"
    if isinstance(b, Bullets):
        return "<ul>" + "".join(f"<li>{_html_runs(item)}</li>" for item in b.items) + "</ul>"
    return "<div class='scroll'>" + html_table(b.headers, [[html.escape(c) for c in r] for r in b.rows]) + "</div>"


CAPACITY_CSS = ("figure.plot svg{max-width:100%;height:auto} div.scroll{overflow-x:auto} "
                "td{vertical-align:top} #tables td:first-child{white-space:nowrap}")


def render_html(doc: dict[str, Any]) -> str:
    """capacity.html: the answers, the plots, then the tables of capacity.md as HTML (self-contained)."""
    figs = "".join(f"<figure class='plot' id='{pid}'><figcaption><b>{html.escape(title)}</b></figcaption>{svg}</figure>"
                   for pid, title, svg in plots(doc))
    head = "".join(_html_block(b) for b in head_blocks(doc))
    tables = "".join(_html_block(b) for b in table_blocks(doc))
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'><title>capacity plan "
            f"{html.escape(doc['plan'])}</title><style>{REPORT_CSS}{CAPACITY_CSS}</style></head><body>"
            f"{head}<h2>Plots</h2>{figs}<section id='tables'>{tables}</section>"
            "<script>console.log('capacity plots: ' + document.querySelectorAll('figure.plot svg').length);</script>"
            "</body></html>")


def write_capacity_report(folder: Path, sc: Any, planner: Any, result: Any) -> list[Path]:
    """Write capacity.json, capacity.md and capacity.html into ``folder``; return their paths."""
    doc = build_capacity(sc, planner, result)
    paths = [folder / "capacity.json", folder / "capacity.md", folder / "capacity.html"]
    write_json_atomic(paths[0], doc)
    paths[1].write_text(markdown(doc))
    paths[2].write_text(render_html(doc))
    return paths


def load_capacity(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "capacity.json").read_text()))
