"""``report.html``: one self-contained page (inline SVG plots from matplotlib, inline CSS).

Plots: pod startup latency percentiles over time, scheduling throughput (watch vs Prometheus binding
rate), pending/running pods, GPU allocation, API latency p99 by verb over time, API latency by verb.
Tables: SLOs, measurements with their sources, API latency by verb and resource, components' CPU and
memory, run metadata (profile, versions, client QPS, flags).  A tiny inline script counts the plots
and logs it to the console, so a headless browser check can tell the page really rendered.
"""

from __future__ import annotations

import html
import io
import json
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.grid": True, "grid.alpha": 0.3})


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _pairs(values: list[Any], t: list[float]) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for x, y in zip(t, values, strict=False):
        if y is not None:
            xs.append(x)
            ys.append(y)
    return xs, ys


def plots(series: dict[str, Any], prom: dict[str, Any] | None, api_by_verb: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(id, title, source, svg) for each plot."""
    out = []
    t = series.get("t_s") or []

    fig, ax = plt.subplots(figsize=(7, 2.6))
    for key, label in (("startup_p50_ms", "p50"), ("startup_p99_ms", "p99")):
        xs, ys = _pairs(series.get(key) or [], t)
        ax.plot(xs, ys, label=label, marker="." if len(xs) < 30 else None)
    ax.set_xlabel("s since load start")
    ax.set_ylabel("ms")
    ax.legend(loc="upper left")
    out.append(("plot-startup", "Pod startup latency over time (created -> Running)",
                "timeline: pods that turned Running in the last 10 s, nearest-rank percentiles", _svg(fig)))

    fig, ax = plt.subplots(figsize=(7, 2.6))
    ax.bar(t, series.get("scheduled_per_s") or [], width=max((t[1] - t[0]) if len(t) > 1 else 1.0, 0.1),
           label="watch: pods bound per s", alpha=0.6)
    if prom and prom.get("binding_rate"):
        br = [(a, b) for a, b in prom["binding_rate"] if b is not None]
        if br:
            ax.plot([a for a, _ in br], [b for _, b in br], color="C3", label="Prometheus: binding rate (10 s)")
    ax.set_xlabel("s since load start")
    ax.set_ylabel("pods/s")
    ax.legend(loc="upper left")
    out.append(("plot-throughput", "Scheduling throughput",
                "timeline scheduled_ms per 1 s bucket; " + html.escape(str((prom or {}).get("query_binding_rate", "no Prometheus"))),
                _svg(fig)))

    fig, ax = plt.subplots(figsize=(7, 2.6))
    ax.plot(t, series.get("pending_pods") or [], label="pending")
    ax.plot(t, series.get("running_pods") or [], label="running")
    ax.set_xlabel("s since load start")
    ax.set_ylabel("pods")
    ax.legend(loc="upper left")
    out.append(("plot-pods", "Pending and running pods", "timeline: created/scheduled/running/finished per pod", _svg(fig)))

    fig, ax = plt.subplots(figsize=(7, 2.6))
    ax.plot(t, series.get("gpu_allocation_pct") or [], color="C2")
    ax.set_ylim(0, 105)
    ax.set_xlabel("s since load start")
    ax.set_ylabel("% of GPUs allocated")
    out.append(("plot-gpu", "GPU allocation", "timeline: GPU requests of bound, unfinished pods / GPUs in the pools", _svg(fig)))

    fig, ax = plt.subplots(figsize=(7, 2.6))
    any_line = False
    for verb, pts in sorted(((prom or {}).get("api_p99_ms") or {}).items()):
        xs = [a for a, b in pts if b is not None]
        ys = [b for a, b in pts if b is not None]
        if xs:
            ax.plot(xs, ys, label=verb)
            any_line = True
    if any_line:
        ax.legend(loc="upper left", ncol=3)
    else:
        ax.text(0.5, 0.5, "no Prometheus data", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("s since load start")
    ax.set_ylabel("p99 ms")
    out.append(("plot-api-time", "API request latency p99 by verb over time",
                html.escape(str((prom or {}).get("query_api_p99", "no Prometheus"))), _svg(fig)))

    fig, ax = plt.subplots(figsize=(7, 2.6))
    verbs = sorted(v for v in api_by_verb if api_by_verb[v].get("p99") is not None)
    if verbs:
        x = range(len(verbs))
        ax.bar([i - 0.2 for i in x], [api_by_verb[v].get("p50") or 0 for v in verbs], width=0.4, label="p50")
        ax.bar([i + 0.2 for i in x], [api_by_verb[v].get("p99") or 0 for v in verbs], width=0.4, label="p99")
        ax.set_xticks(list(x), verbs)
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no Prometheus data", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylabel("ms")
    out.append(("plot-api-verb", "API request latency by verb (whole run)",
                "apiserver_request_sli_duration_seconds, histogram_quantile over increase() of the run window", _svg(fig)))
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


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    h = "".join(f"<th>{html.escape(str(x))}</th>" for x in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def _v(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.3f}".rstrip("0").rstrip(".")
    return html.escape(str(v))


def render(summary: dict[str, Any], series: dict[str, Any], prom_series: dict[str, Any] | None) -> str:
    m = summary.get("measurements") or {}
    c = summary.get("cluster") or {}
    ok = summary.get("passed")
    state = "PASSED" if ok else "FAILED"
    if not summary.get("complete", True):
        state += f" - INCOMPLETE ({html.escape(str(summary.get('incomplete_reason') or 'interrupted'))})"
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>hollowscale {html.escape(str(summary.get('run_id')))}</title>",
             f"<style>{CSS}</style></head><body>",
             f"<h1>hollowscale run <code>{html.escape(str(summary.get('run_id')))}</code> - scenario <code>{html.escape(str(summary.get('scenario')))}</code></h1>",
             f"<div class='banner {'good' if ok else 'bad'}'><b>{state}</b> - started {_v(summary.get('started_at'))}, "
             f"{_v(summary.get('duration_s'))} s</div>"]
    parts.append("<h2>SLOs</h2>")
    parts.append(_table(["SLO", "metric", "threshold", "value", "result", "description"], [
        [html.escape(s["name"]), f"<code>{html.escape(s['metric'])}</code>", f"{html.escape(s['op'])} {_v(s['threshold'])}",
         _v(s["value"]), f"<span class='{'pass' if s['passed'] else 'fail'}'>{'pass' if s['passed'] else 'FAIL'}</span>",
         html.escape(s.get("description", "") + (" - " + s["note"] if s.get("note") else ""))]
        for s in summary.get("slos") or []]))
    parts.append("<h2>Plots</h2>")
    for pid, title, source, svg in plots(series, prom_series, m.get("api_latency_ms") or {}):
        parts.append(f"<figure class='plot' id='{pid}'><figcaption><b>{html.escape(title)}</b> - source: {source}</figcaption>{svg}</figure>")
    sources = summary.get("sources") or {}
    rows = []
    for key in ("pod_startup_latency_ms", "pod_scheduling_latency_ms", "job_completion_time_s", "gpu_queue_wait_s"):
        v = m.get(key) or {}
        rows.append([key, _v(v.get("p50")), _v(v.get("p90")), _v(v.get("p99")), _v(v.get("count")), html.escape(str(sources.get(key, "")))])
    parts.append("<h2>Measurements</h2>")
    parts.append(_table(["figure", "p50", "p90", "p99", "samples", "source"], rows))
    th = m.get("scheduling_throughput_pods_per_s") or {}
    cc = m.get("crosscheck") or {}
    jobs = m.get("jobs") or {}
    parts.append(_table(["figure", "value", "source"], [
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
        parts.append(_table(["workload", "submitted", "completed", "failed"],
                            [[html.escape(k), v["submitted"], v["completed"], v["failed"]] for k, v in sorted(bw.items())]))
    api_rows = (summary.get("prometheus") or {}).get("api_by_verb_resource") or []
    if api_rows:
        parts.append("<h2>API latency by verb and resource</h2>")
        parts.append(_table(["verb", "resource", "p50 ms", "p99 ms"],
                            [[html.escape(r["verb"]), html.escape(r["resource"]), _v(r.get("p50")), _v(r.get("p99"))] for r in api_rows]))
    sched = m.get("scheduler") or {}
    if sched:
        parts.append("<h2>Scheduler</h2>")
        parts.append(_table(["figure", "value"], [
            ["attempts by result", html.escape(json.dumps(sched.get("attempts_by_result")))],
            ["attempt duration p50 / p99 (ms)", f"{_v((sched.get('attempt_duration_ms') or {}).get('p50'))} / "
                                                f"{_v((sched.get('attempt_duration_ms') or {}).get('p99'))}"]]))
    comps = dict((m.get("components") or {}).get("by_job") or {})
    comps.update({f"{k} (psutil)": v for k, v in (m.get("harness_processes") or {}).items()})
    if comps:
        parts.append("<h2>Components: CPU and memory</h2>")
        parts.append(_table(["component", "CPU cores (avg)", "RSS MiB (max)"],
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
    parts.append(_table(["key", "value"], meta_rows))
    flags = c.get("flags") or {}
    if flags:
        parts.append("<details><summary>component flags</summary>" + _table(
            ["component", "flags"], [[html.escape(k), "<code>" + html.escape(" ".join(v)) + "</code>"] for k, v in sorted(flags.items())]) + "</details>")
    qs = (summary.get("sources") or {}).get("promql") or []
    if qs:
        parts.append("<h2>PromQL behind the figures</h2>")
        parts.append(_table(["purpose", "query"], [[html.escape(q.get("purpose", "")), f"<code>{html.escape(q['query'])}</code>"] for q in qs]))
    parts.append("<script>(function(){var n=document.querySelectorAll('figure.plot svg').length;"
                 "console.log('hollowscale-report plots='+n);})();</script>")
    parts.append("</body></html>")
    return "\n".join(parts)
