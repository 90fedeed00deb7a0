"""The capacity report: ``capacity.json`` (everything), ``capacity.md`` and a self-contained ``capacity.html``.

Plots (inline SVG, matplotlib): p99 pod startup vs rate per size, sustainable rate (knee) vs nodes per
SLO, control-plane CPU and memory per component vs nodes and vs rate, and the fitted cost projected to
5,000 and 15,000 nodes with its interval (marked as a projection).  The answers are written in words.
"""

from __future__ import annotations

import datetime as dt
import html
import io
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from hollowscale import __version__
from hollowscale.plan.fit import PROJECT_TO, cost_fits
from hollowscale.plan.state import write_json_atomic

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
    "cluster_reuse": "one local cluster per profile, reused across sizes, mixes and rates: each point registers and "
                     "removes its own nodes and uses a namespace of its own; possible bias: etcd history growth "
                     "between compactions and garbage collection of the previous point's namespace during the next "
                     "warm-up; profiles never share a cluster",
    "fit": "least squares cost = a + b*nodes + c*pods_per_s per component over the profile's points; standard "
           "errors from the residual variance; 95% prediction intervals (Student t); beyond the measured sizes "
           "every value is a projection",
}


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def build_capacity(sc: Any, planner: Any, result: Any) -> dict[str, Any]:
    """The capacity document from the plan's state and knees."""
    state = planner.state
    cells_out = []
    nodes_of = {c.key: c.nodes for c in result.cells}
    for cell in result.cells:
        pts = sorted((p for p in state.points.values() if p.get("cell_key") == cell.key), key=lambda p: p["rate"])
        cells_out.append({
            "key": cell.key, "profile": cell.profile, "mix": cell.mix, "nodes": cell.nodes, "size": dict(cell.size),
            "knees": {k: v.to_dict() for k, v in (result.knees.get(cell.key) or {}).items()},
            "points": [_point_row(p) for p in pts],
        })
    profiles = sorted({c.profile for c in result.cells})
    fits: dict[str, Any] = {}
    for prof in profiles:
        pts = [p for p in state.points.values() if str(p.get("cell_key", "")).startswith(prof + "/")]
        knee_rates = [k.knee for c in result.cells if c.profile == prof
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


def _point_row(p: dict[str, Any]) -> dict[str, Any]:
    f = p.get("figures") or {}
    cp = p.get("control_plane") or {}
    return {"rate": p["rate"], "passed_all": p.get("passed_all"), "complete": p.get("complete"),
            "slos": {k: {"value": v["value"], "passed": v["passed"], "met": v["met"]} for k, v in (p.get("slos") or {}).items()},
            "pod_startup_p99_ms": (f.get("pod_startup_latency_ms") or {}).get("p99"),
            "pods_per_s": f.get("pods_per_s"), "objects_per_s": f.get("objects_per_s"),
            "backlog": f.get("backlog"), "mutating_requests_per_s": cp.get("mutating_requests_per_s"),
            "components": cp.get("components"), "api_latency_slo_ms": cp.get("api_latency_slo_ms"),
            "wall_s": p.get("wall_s"), "run_dir": p.get("run_dir"), "incomplete_reason": p.get("incomplete_reason")}


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


# ------------------------------------------------------------------------------------ plots
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
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    names = sorted({k for c in cells for k in c["knees"]})
    for i, name in enumerate(names):
        xs, ys, lo, hi = [], [], [], []
        for c in sorted(cells, key=lambda c: c["nodes"]):
            k = c["knees"].get(name)
            if not k or k["knee"] is None:
                continue
            xs.append(c["nodes"] + i * 2)
            ys.append(k["knee"])
            lo.append(0.0)
            hi.append((k["failing"] - k["knee"]) if k["failing"] is not None else 0.0)
        if xs:
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o-", capsize=3, label=name)
    ax.set_xlabel("nodes")
    ax.set_ylabel("sustainable rate (instances/s)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    out.append(("plot-knee-vs-nodes", "sustainable rate (knee, bar up to the first failing rate) vs nodes", _svg(fig)))
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
def markdown(doc: dict[str, Any]) -> str:
    lines = [f"# Capacity plan: {doc['plan']}", "", f"Scenario `{doc['scenario_file']}`, created {doc['created_at']}, "
             f"{doc['points_measured_now']} point(s) measured in this run, {doc['points_reused']} reused, "
             f"{doc['wall_s']:.0f} s.", "", "## Answers", ""]
    lines += [f"- {a}" for a in doc["answers"]]
    lines += ["", "## Knees", "", "| cell | SLO | knee (instances/s) | verdict | step | points tried (rate: pass/fail) |",
              "|---|---|---|---|---|---|"]
    for c in doc["cells"]:
        for name, k in c["knees"].items():
            tried = ", ".join(f"{t['rate']:g}:{'pass' if t['passed'] else 'fail'}" for t in k["tried"])
            lines.append(f"| {c['key']} | {name} | {k['knee'] if k['knee'] is not None else 'n/a'} | {k['verdict']} | "
                         f"{k['step']:g} | {tried} |")
    lines += ["", "## Points", "", "| cell | rate | startup p99 ms | pods/s | backlog slope/rate | mutating req/s | "
              "apiserver CPU | etcd CPU | passed | wall s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for c in doc["cells"]:
        for p in c["points"]:
            comps = p["components"] or {}
            b = p["backlog"] or {}
            lines.append(f"| {c['key']} | {p['rate']:g} | {p['pod_startup_p99_ms']} | {p['pods_per_s']} | "
                         f"{b.get('growth_fraction')} | {p['mutating_requests_per_s']} | "
                         f"{(comps.get('apiserver') or {}).get('cpu_cores_avg')} | {(comps.get('etcd') or {}).get('cpu_cores_avg')} | "
                         f"{'yes' if p['passed_all'] else 'no'} | {p['wall_s']} |")
    lines += ["", "## Control-plane cost fit (a + b*nodes + c*pods/s) and projections", ""]
    for prof, f in doc["fits"].items():
        lines += [f"Profile {prof}, projected at {f['at_pods_per_s']:g} pods/s:", "",
                  "| component | resource | per node (+/- se) | per pod/s (+/- se) | 5,000 nodes | 15,000 nodes | note |",
                  "|---|---|---|---|---|---|---|"]
        for comp, by in sorted(f["components"].items()):
            for res, v in by.items():
                co, se = v["fit"]["coef"], v["fit"]["stderr"]
                proj = ["n/a" if p["value"] is None else f"{p['value']:.3g}" + (
                    f" +/- {p['error_95']:.2g}" if p["error_95"] is not None else " (no error)") for p in v["projections"]]
                lines.append(f"| {comp} | {res} | {co['per_node']:.3g} +/- {_g(se['per_node'])} | "
                             f"{co['per_pod_per_s']:.3g} +/- {_g(se['per_pod_per_s'])} | "
                             f"{proj[0]} | {proj[1]} | {v['projections'][0].get('projection', '')}; {v['fit']['note']} |")
        lines.append("")
    lines += ["## Method", ""] + [f"- **{k}**: {v}" for k, v in doc["method"].items()]
    return "\n".join(lines) + "\n"


def _g(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2g}"


def render_html(doc: dict[str, Any]) -> str:
    figs = "".join(f"<figure class='plot' id='{pid}'><figcaption><b>{html.escape(title)}</b></figcaption>{svg}</figure>"
                   for pid, title, svg in plots(doc))
    md = html.escape(markdown(doc))
    answers_html = "".join(f"<li>{html.escape(a)}</li>" for a in doc["answers"])
    return ("<!doctype html><html><head><meta charset='utf-8'><title>capacity plan "
            f"{html.escape(doc['plan'])}</title><style>body{{font-family:sans-serif;max-width:1100px;margin:1em auto}}"
            "figure.plot{margin:1em 0}figure.plot svg{max-width:100%;height:auto}pre{white-space:pre-wrap;font-size:12px;"
            "background:#f6f6f6;padding:.5em}</style></head><body>"
            f"<h1>Capacity plan: {html.escape(doc['plan'])}</h1><h2>Answers</h2><ul>{answers_html}</ul>{figs}"
            f"<h2>Tables</h2><pre>{md}</pre>"
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
