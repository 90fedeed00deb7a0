"""``report.html``: one self-contained page (inline SVG plots from matplotlib, inline CSS).

Plots: pod startup latency percentiles over time, scheduling throughput (watch vs Prometheus binding
rate), pending/running pods, GPU allocation, API latency p99 by verb over time, API latency by verb.
A latency plot whose positive values span more than :data:`LOG_SPAN` (a 45 s fault spike beside 30 ms
startups) gets a log-scale y axis with labelled decades (:func:`auto_log`), so both stay readable.
Tables: SLOs, measurements with their sources, API latency by verb and resource, components' CPU and
memory, run metadata (profile, versions, client QPS, flags).  Every quantile says whether it is exact or
bucketed, a bucketed one with its bucket (:mod:`hollowscale.report.precision`).  A tiny inline script
counts the plots and logs it to the console, so a headless browser check can tell the page really rendered.
"""

from __future__ import annotations

import html
import io
import json
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from hollowscale.report.numbers import number
from hollowscale.report.precision import LEGEND, api_rows, bucket_of, quantile_text, slo_value_text
from hollowscale.report.sections import ReportSection
from hollowscale.report.verdicts import PASSED, state_of, verdict_line

plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.grid": True, "grid.alpha": 0.3})


def svg(fig: Any) -> str:
    """A matplotlib figure as inline SVG markup (closes the figure)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


#: max/min of a plot's positive values above which its y axis is logarithmic
LOG_SPAN = 100.0


def auto_log(ax: Any, values: list[float]) -> bool:
    """A log-scale y axis for ``ax`` when its positive ``values`` span more than :data:`LOG_SPAN` (max/min),
    ticks at the decades, each labelled; whether it chose one."""
    pos = [v for v in values if v is not None and v > 0]
    if not pos or max(pos) / min(pos) <= LOG_SPAN:
        return False
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10.0))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: number(v, 3, trim=True)))
    ax.yaxis.set_minor_formatter(NullFormatter())
    return True


def _pairs(values: list[Any], t: list[float]) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for x, y in zip(t, values, strict=False):
        if y is not None:
            xs.append(x)
            ys.append(y)
    return xs, ys


def fault_marks(summary: dict[str, Any]) -> list[tuple[float, float, str]]:
    """(start s, duration s, label) of each fault, relative to the load start."""
    marks = []
    for f in summary.get("faults") or []:
        rec = f.get("recovery") or {}
        at = f.get("at_s")
        if at is None:
            continue
        label = f"{f.get('type')}{' ' + f['component'] if f.get('component') else ''}"
        if rec.get("recovery_s") is not None:
            label += f" (back in {rec['recovery_s']:g}s)"
        marks.append((float(at), float(f.get("duration_s") or 0.0), label))
    return marks


def control_plane_plot(cp: dict[str, Any], horizon: float) -> str | None:
    """Lanes per component: down (exit -> start) in red, stalled in orange; leader changes; API outages."""
    events = cp.get("events") or []
    changes = cp.get("leader_changes") or []
    outages = cp.get("apiserver_outages") or []
    if not (any(e.get("event") in ("exited", "stalled") for e in events) or outages or len(changes) > 2):
        return None
    lanes = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]
    fig, ax = plt.subplots(figsize=(7, 2.2))
    for i, name in enumerate(lanes):
        down_at = None
        for e in (e for e in events if e.get("component") == name):
            if e.get("event") == "exited":
                down_at = e["at_s"]
            elif e.get("event") == "started" and down_at is not None:
                ax.broken_barh([(down_at, max(e["at_s"] - down_at, 0.3))], (i - 0.35, 0.7), color="C3")
                down_at = None
            elif e.get("event") == "stalled":
                ax.broken_barh([(e["at_s"], max(float(e.get("duration_s") or 0), 0.3))], (i - 0.35, 0.7), color="C1")
        if down_at is not None:
            ax.broken_barh([(down_at, max(horizon - down_at, 0.3))], (i - 0.35, 0.7), color="C3")
    for o in outages:
        ax.broken_barh([(o["at_s"], o.get("duration_s") or max(horizon - o["at_s"], 0.3))], (len(lanes) - 0.35, 0.7),
                       color="0.6")
    seen: set[str] = set()
    for c in changes:
        if c["lease"] in seen:  # the first sighting is not a change
            lane = lanes.index(c["lease"]) if c["lease"] in lanes else 0
            ax.plot([c["at_s"]], [lane], marker="*", color="k", markersize=9)
        seen.add(c["lease"])
    ax.set_yticks(range(len(lanes) + 1), [*lanes, "API unreachable"])
    ax.set_xlabel("s since load start (red: down, orange: stalled, *: new leader)")
    return svg(fig)


def plots(series: dict[str, Any], prom: dict[str, Any] | None, api_by_verb: dict[str, Any],
          marks: list[tuple[float, float, str]] | None = None) -> list[tuple[str, str, str, str]]:
    """(id, title, source, svg) for each plot; ``marks`` (faults) are drawn on the throughput plot."""
    out = []
    t = series.get("t_s") or []

    fig, ax = plt.subplots(figsize=(7, 2.6))
    shown: list[float] = []
    for key, label in (("startup_p50_ms", "p50"), ("startup_p99_ms", "p99")):
        xs, ys = _pairs(series.get(key) or [], t)
        ax.plot(xs, ys, label=label, marker="." if len(xs) < 30 else None)
        shown += ys
    log = auto_log(ax, shown)
    ax.set_xlabel("s since load start")
    ax.set_ylabel("ms (log scale)" if log else "ms")
    ax.legend(loc="upper left")
    out.append(("plot-startup", "Pod startup latency over time (created -> Running)",
                "timeline: pods that turned Running in the last 10 s, nearest-rank percentiles (exact)"
                + ("; log-scale y axis" if log else ""), svg(fig)))

    fig, ax = plt.subplots(figsize=(7, 2.6))
    ax.bar(t, series.get("scheduled_per_s") or [], width=max((t[1] - t[0]) if len(t) > 1 else 1.0, 0.1),
           label="watch: pods bound per s", alpha=0.6)
    if prom and prom.get("binding_rate"):
        br = [(a, b) for a, b in prom["binding_rate"] if b is not None]
        if br:
            ax.plot([a for a, _ in br], [b for _, b in br], color="C3", label="Prometheus: binding rate (10 s)")
    for k, (at, dur, label) in enumerate(marks or []):
        if dur > 0:
            ax.axvspan(at, at + dur, color="C1", alpha=0.25, label="fault" if k == 0 else None)
        else:
            ax.axvline(at, color="C1", linestyle="--", label="fault" if k == 0 else None)
        ax.annotate(label, (at, 1.0), xycoords=("data", "axes fraction"), fontsize=6, rotation=90, va="top")
    ax.set_xlabel("s since load start")
    ax.set_ylabel("pods/s")
    ax.legend(loc="upper left")
    out.append(("plot-throughput", "Scheduling throughput",
                "timeline scheduled_ms per 1 s bucket; " + html.escape(str((prom or {}).get("query_binding_rate", "no Prometheus"))),
                svg(fig)))

    fig, ax = plt.subplots(figsize=(7, 2.6))
    ax.plot(t, series.get("pending_pods") or [], label="pending")
    ax.plot(t, series.get("running_pods") or [], label="running")
    ax.set_xlabel("s since load start")
    ax.set_ylabel("pods")
    ax.legend(loc="upper left")
    out.append(("plot-pods", "Pending and running pods", "timeline: created/scheduled/running/finished per pod", svg(fig)))

    fig, ax = plt.subplots(figsize=(7, 2.6))
    ax.plot(t, series.get("gpu_allocation_pct") or [], color="C2")
    ax.set_ylim(0, 105)
    ax.set_xlabel("s since load start")
    ax.set_ylabel("% of GPUs allocated")
    out.append(("plot-gpu", "GPU allocation", "timeline: GPU requests of bound, unfinished pods / GPUs in the pools", svg(fig)))

    fig, ax = plt.subplots(figsize=(7, 2.6))
    shown = []
    for verb, pts in sorted(((prom or {}).get("api_p99_ms") or {}).items()):
        xs = [a for a, b in pts if b is not None]
        ys = [b for a, b in pts if b is not None]
        if xs:
            ax.plot(xs, ys, label=verb)
            shown += ys
    edges = [e for e in (prom or {}).get("api_bucket_edges_ms") or [] if shown and min(shown) <= e <= max(shown)]
    for e in edges:  # the values between two edges are interpolated: draw where the measurement is
        ax.axhline(e, color="0.5", lw=0.6, ls=":")
    log = auto_log(ax, shown)
    if shown:
        ax.legend(loc="upper left", ncol=3)
    else:
        ax.text(0.5, 0.5, "no Prometheus data", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("s since load start")
    ax.set_ylabel("p99 ms (log scale)" if log else "p99 ms")
    out.append(("plot-api-time", "API request latency p99 by verb over time (bucketed)",
                html.escape(str((prom or {}).get("query_api_p99", "no Prometheus")))
                + "; bucketed: interpolated inside histogram buckets"
                + ("; dotted lines: the bucket edges" if edges else "") + ("; log-scale y axis" if log else ""),
                svg(fig)))

    fig, ax = plt.subplots(figsize=(7, 2.6))
    verbs = sorted(v for v in api_by_verb if api_by_verb[v].get("p99") is not None)
    log = False
    if verbs:
        x = range(len(verbs))
        for off, q in ((-0.2, "p50"), (0.2, "p99")):
            vals = [api_by_verb[v].get(q) or 0 for v in verbs]
            # the bucket each value was interpolated in, as an error bar from its lower to its upper edge
            lo_hi = [bucket_of(api_by_verb[v], q) for v in verbs]
            err = [[max(val - b[0], 0) if b else 0 for val, b in zip(vals, lo_hi, strict=True)],
                   [max(b[1] - val, 0) if b and b[1] is not None else 0 for val, b in zip(vals, lo_hi, strict=True)]]
            ax.bar([i + off for i in x], vals, width=0.4, label=q, yerr=err if any(lo_hi) else None, capsize=3,
                   error_kw={"elinewidth": 0.8, "ecolor": "0.3"})
        log = auto_log(ax, [api_by_verb[v].get(q) for v in verbs for q in ("p50", "p99")])
        ax.set_xticks(list(x), verbs)
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no Prometheus data", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylabel("ms (log scale)" if log else "ms")
    out.append(("plot-api-verb", "API request latency by verb (whole run, bucketed)",
                "apiserver_request_sli_duration_seconds, histogram_quantile over increase() of the run window; "
                "bars: the interpolated value, whiskers: the bucket it lies in" + ("; log-scale y axis" if log else ""),
                svg(fig)))
    return out


CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:1.4em} h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-size:0.9em} td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f4f4f4} .pass{color:#080;font-weight:bold} .fail{color:#b00;font-weight:bold}
figure.plot{margin:12px 0;padding:8px;border:1px solid #eee} figcaption{font-size:0.8em;color:#555}
figure.plot svg{max-width:100%;height:auto} code{font-size:0.85em;background:#f6f6f6;padding:1px 3px}
.banner{padding:8px 12px;border-radius:4px;margin:8px 0} .banner.bad{background:#fde8e8} .banner.good{background:#e8f7e8}
"""


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """An HTML table: the headers are escaped here, the cells are HTML already (callers escape text)."""
    h = "".join(f"<th>{html.escape(str(x))}</th>" for x in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def _v(v: Any) -> str:
    """A figure in a table cell: three decimals at most, HTML-escaped."""
    return html.escape(number(v, 3, trim=True, group_ints=False))


LEGEND_HTML = (f"<p class='legend'>Every quantile says its precision. <b>exact</b>: {html.escape(LEGEND['exact'])}. "
               f"<b>bucketed</b>: {html.escape(LEGEND['bucketed'])}.</p>")


def _q(fig: dict[str, Any] | None, leaf: str, path: str) -> str:
    """A quantile in a table cell, with its bucket when bucketed (:func:`quantile_text`), HTML-escaped."""
    return html.escape(quantile_text(fig, leaf, 3, path=path))


def control_plane_tables(summary: dict[str, Any]) -> list[str]:
    """Faults with their recovery, component restarts, leader changes and the integrity check."""
    m = summary.get("measurements") or {}
    cp = summary.get("control_plane") or {}
    parts: list[str] = []
    faults = summary.get("faults") or []
    if faults:
        parts.append("<h2>Faults and recovery</h2>")
        rows = []
        for f in faults:
            rec = f.get("recovery") or {}
            rows.append([html.escape(str(f.get("type"))), html.escape(str(f.get("component") or f.get("fraction") or "")),
                         _v(f.get("at_s")), _v(f.get("duration_s")), _v(rec.get("level_before_pods_per_s")),
                         _v(rec.get("dip_at_s")),
                         ("<span class='fail'>not recovered</span> " if rec.get("recovered") is False else "")
                         + _v(rec.get("recovery_s")), html.escape(str(rec.get("note") or ""))])
        parts.append(table(["fault", "target", "at s", "duration s", "bindings/s before", "dip after s",
                             "recovery s", "note"], rows))
        parts.append(f"<p>{html.escape(str((summary.get('sources') or {}).get('fault_recovery_s', '')))}</p>")
    ev = [e for e in cp.get("events") or [] if e.get("event") not in ("started",) or e.get("why") != "cluster up"]
    if ev or cp.get("agent_restarts"):
        parts.append("<h2>Control plane: restarts, stalls, leaders</h2>")
        parts.append(table(["at s", "component", "event", "detail"], [
            [_v(e.get("at_s")), html.escape(str(e.get("component"))), html.escape(str(e.get("event"))),
             html.escape(str(e.get("reason") or e.get("exit") or e.get("why") or e.get("duration_s") or ""))]
            for e in ev] + [[_v(e.get("at_s")), f"agent-{e.get('shard')}", html.escape(str(e.get("event"))),
                             html.escape(str(e.get("exit") or e.get("pid") or ""))] for e in cp.get("agent_restarts") or []]))
    if len(cp.get("leader_changes") or []) > 0:
        parts.append(table(["at s", "lease", "holder", "transitions"], [
            [_v(c.get("at_s")), html.escape(c["lease"]), html.escape(c["holder"] or "(none)"), _v(c.get("transitions"))]
            for c in cp["leader_changes"]]))
    integ = m.get("integrity") or {}
    if integ:
        parts.append("<h2>Integrity: nothing lost, nothing counted twice</h2>")
        b = integ.get("bindings") or {}
        parts.append(table(["what", "apiserver (audit log)", "timeline", "lost", "counted twice"], [
            ["jobs created", _v((integ.get("jobs") or {}).get("apiserver_created")), _v((integ.get("jobs") or {}).get("timeline")),
             _v(integ.get("jobs_lost")), ""],
            ["pods created", _v((integ.get("pods") or {}).get("apiserver_created")), _v((integ.get("pods") or {}).get("timeline")),
             _v(integ.get("pods_lost")), ""],
            ["pods bound", _v(b.get("apiserver_bound")), _v(b.get("timeline_scheduled")), _v(integ.get("bindings_lost")),
             _v(integ.get("double_counted"))],
        ]))
        parts.append(f"<p><b>{html.escape(str(integ.get('verdict')))}</b>; creates by user: "
                     f"{html.escape(json.dumps(integ.get('load_creates') or {}))}</p>")
    return parts


def render(summary: dict[str, Any], series: dict[str, Any], prom_series: dict[str, Any] | None,
           sections: Sequence[ReportSection] = ()) -> str:
    m = summary.get("measurements") or {}
    c = summary.get("cluster") or {}
    ok = state_of(summary) == PASSED
    state = html.escape(verdict_line(summary))
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>hollowscale {html.escape(str(summary.get('run_id')))}</title>",
             f"<style>{CSS}</style></head><body>",
             f"<h1>hollowscale run <code>{html.escape(str(summary.get('run_id')))}</code> - scenario <code>{html.escape(str(summary.get('scenario')))}</code></h1>",
             f"<div class='banner {'good' if ok else 'bad'}'><b>{state}</b> - started {_v(summary.get('started_at'))}, "
             f"{_v(summary.get('duration_s'))} s</div>"]
    parts.append("<h2>SLOs</h2>")
    parts.append(table(["SLO", "metric", "threshold", "value", "result", "description"], [
        [html.escape(s["name"]), f"<code>{html.escape(s['metric'])}</code>", f"{html.escape(s['op'])} {_v(s['threshold'])}",
         html.escape(slo_value_text(s, m)), f"<span class='{'pass' if s['passed'] else 'fail'}'>{'pass' if s['passed'] else 'FAIL'}</span>",
         html.escape(s.get("description", "") + (" - " + s["note"] if s.get("note") else ""))]
        for s in summary.get("slos") or []]))
    parts.append("<h2>Plots</h2>")
    for pid, title, source, svg in plots(series, prom_series, m.get("api_latency_ms") or {}, fault_marks(summary)):
        parts.append(f"<figure class='plot' id='{pid}'><figcaption><b>{html.escape(title)}</b> - source: {source}</figcaption>{svg}</figure>")
    cp = summary.get("control_plane") or {}
    horizon = float(summary.get("duration_s") or 0.0)
    cp_svg = control_plane_plot(cp, horizon)
    if cp_svg:
        parts.append("<figure class='plot' id='plot-control-plane'><figcaption><b>Control plane over time</b> - source: "
                     f"supervisor events, {html.escape(str(cp.get('source', '')))}</figcaption>{cp_svg}</figure>")
    parts += control_plane_tables(summary)
    for section in sections:
        parts += section.html(summary)
    sources = summary.get("sources") or {}
    rows = []
    for key in ("pod_startup_latency_ms", "pod_scheduling_latency_ms", "job_completion_time_s", "gpu_queue_wait_s"):
        v = m.get(key) or {}
        rows.append([key, _v(v.get("p50")), _v(v.get("p90")), _v(v.get("p99")), _v(v.get("count")), "exact",
                     html.escape(str(sources.get(key, "")))])
    parts.append("<h2>Measurements</h2>")
    parts.append(LEGEND_HTML)
    parts.append(table(["figure", "p50", "p90", "p99", "samples", "precision", "source"], rows))
    th = m.get("scheduling_throughput_pods_per_s") or {}
    cc = m.get("crosscheck") or {}
    jobs = m.get("jobs") or {}
    parts.append(table(["figure", "value", "source"], [
        ["scheduling throughput avg / p50 / max (pods/s)", f"{_v(th.get('avg'))} / {_v(th.get('p50'))} / {_v(th.get('max'))}",
         html.escape(str(sources.get("scheduling_throughput_pods_per_s", "")))],
        ["pending pods avg / max", f"{_v((m.get('pending_pods') or {}).get('avg'))} / {_v((m.get('pending_pods') or {}).get('max'))}",
         html.escape(str(sources.get("pending_pods", "")))],
        ["GPU allocation % avg / max", f"{_v((m.get('gpu_allocation_pct') or {}).get('avg'))} / {_v((m.get('gpu_allocation_pct') or {}).get('max'))}",
         html.escape(str(sources.get("gpu_allocation_pct", "")))],
        ["jobs submitted / completed / failed / unfinished",
         f"{_v(jobs.get('submitted'))} / {_v(jobs.get('completed'))} / {_v(jobs.get('failed'))} / {_v(jobs.get('unfinished'))}",
         html.escape(str(sources.get("jobs", "")))],
        ["cross-check (watch vs Prometheus bindings)", html.escape(str(cc.get("verdict", "n/a"))),
         f"<code>{html.escape(str(cc.get('query', '')))}</code>"],
    ]))
    bw = (m.get("jobs") or {}).get("by_workload") or {}
    if bw:
        parts.append(table(["workload", "submitted", "completed", "failed"],
                            [[html.escape(k), v["submitted"], v["completed"], v["failed"]] for k, v in sorted(bw.items())]))
    by_verb = api_rows(m)
    if by_verb:
        parts.append("<h2>API latency by verb (bucketed)</h2>")
        parts.append(table(["verb", "requests", "p50 ms (bucketed)", "p99 ms (bucketed)"],
                            [[html.escape(name), _v(v.get("count")), _q(v, "p50", path), _q(v, "p99", path)]
                             for name, v, path in by_verb]))
    by_resource = (summary.get("prometheus") or {}).get("api_by_verb_resource") or []
    if by_resource:
        parts.append("<h2>API latency by verb and resource (bucketed)</h2>")
        parts.append(table(["verb", "resource", "p50 ms (bucketed)", "p99 ms (bucketed)"],
                            [[html.escape(r["verb"]), html.escape(r["resource"]), _q(r, "p50", "api_latency_ms"),
                              _q(r, "p99", "api_latency_ms")] for r in by_resource]))
    sched = m.get("scheduler") or {}
    if sched:
        parts.append("<h2>Scheduler</h2>")
        parts.append(table(["figure", "value"], [
            ["attempts by result", html.escape(json.dumps(sched.get("attempts_by_result")))],
            ["attempt duration p50 / p99 (ms, bucketed)", f"{_q(sched.get('attempt_duration_ms'), 'p50', 'scheduler')} / "
                                                          f"{_q(sched.get('attempt_duration_ms'), 'p99', 'scheduler')}"]]))
    comps = dict((m.get("components") or {}).get("by_job") or {})
    comps.update({f"{k} (psutil)": v for k, v in (m.get("harness_processes") or {}).items()})
    if comps:
        parts.append("<h2>Components: CPU and memory</h2>")
        parts.append(table(["component", "CPU cores (avg)", "RSS MiB (max)"],
                            [[html.escape(k), _v(v.get("cpu_cores_avg")), _v(v.get("rss_mib_max"))] for k, v in sorted(comps.items())]))
    parts.append("<h2>Run metadata</h2>")
    meta_rows = [
        ["backend / profile", f"{_v(c.get('backend'))} / {_v(c.get('profile'))}"],
        ["Kubernetes", _v(c.get("kubernetes_version"))],
        ["API server", _v(c.get("server"))],
        ["nodes Ready / expected", f"{_v(c.get('nodes_ready'))} / {_v(c.get('nodes_expected'))}"],
        ["GPUs", _v(c.get("gpus_total"))],
        ["client QPS/burst", html.escape(json.dumps(c.get("client_qps") or {}))],
        ["scenario file", _v(summary.get("scenario_file"))],
        ["load", html.escape(json.dumps(summary.get("load") or {}))],
        ["faults", html.escape(json.dumps(summary.get("faults") or []))],
        ["phases (s)", html.escape(json.dumps(summary.get("timings") or {}))],
        ["versions", html.escape(json.dumps(summary.get("versions") or {}))],
    ]
    parts.append(table(["key", "value"], meta_rows))
    flags = c.get("flags") or {}
    if flags:
        parts.append("<details><summary>component flags</summary>" + table(
            ["component", "flags"], [[html.escape(k), "<code>" + html.escape(" ".join(v)) + "</code>"] for k, v in sorted(flags.items())]) + "</details>")
    qs = (summary.get("sources") or {}).get("promql") or []
    if qs:
        parts.append("<h2>PromQL behind the figures</h2>")
        parts.append(table(["purpose", "query"], [[html.escape(q.get("purpose", "")), f"<code>{html.escape(q['query'])}</code>"] for q in qs]))
    parts.append("<script>(function(){var n=document.querySelectorAll('figure.plot svg').length;"
                 "console.log('hollowscale-report plots='+n);})();</script>")
    parts.append("</body></html>")
    return "\n".join(parts)
