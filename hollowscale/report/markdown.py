"""``summary.md``: the table a CI log or a pull request shows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hollowscale.report.numbers import number
from hollowscale.report.precision import LEGEND, api_rows, quantile_text, slo_value_text
from hollowscale.report.sections import ReportSection
from hollowscale.report.verdicts import verdict_line


def control_plane_lines(summary: dict[str, Any]) -> list[str]:
    """Faults with recovery times, component restarts, leader handovers, the integrity verdict."""
    m = summary.get("measurements") or {}
    cp = summary.get("control_plane") or {}
    lines: list[str] = []
    faults = summary.get("faults") or []
    if faults:
        lines += ["", "## Faults and recovery", "", "| fault | target | at s | bindings/s before | recovery s |",
                  "|---|---|---|---|---|"]
        for f in faults:
            rec = f.get("recovery") or {}
            back = number(rec.get("recovery_s")) + (" (**not recovered**)" if rec.get("recovered") is False else "")
            lines.append(f"| {f.get('type')} | {f.get('component') or f.get('fraction')} | {number(f.get('at_s'))} | "
                         f"{number(rec.get('level_before_pods_per_s'), 2)} | {back} |")
    if cp.get("restarts") or cp.get("handovers") or cp.get("agent_restarts"):
        lines += ["", f"- component restarts: {cp.get('restarts') or {}}; leader handovers: {cp.get('handovers') or {}}; "
                      f"agent restarts: {len([e for e in cp.get('agent_restarts') or [] if e.get('event') == 'started'])}"]
        for o in cp.get("apiserver_outages") or []:
            lines.append(f"- apiserver unreachable at {number(o.get('at_s'))} s for {number(o.get('duration_s'))} s")
    integ = m.get("integrity") or {}
    if integ:
        lines.append(f"- integrity (audit log vs timeline): {integ.get('verdict')}; jobs lost {integ.get('jobs_lost')}, "
                     f"pods lost {integ.get('pods_lost')}, bindings lost {integ.get('bindings_lost')}, "
                     f"double counted {integ.get('double_counted')}")
    return lines


def render(summary: dict[str, Any], sections: Sequence[ReportSection] = ()) -> str:
    m = summary.get("measurements") or {}
    c = summary.get("cluster") or {}
    verdict = verdict_line(summary)
    lines = [
        f"# hollowscale run `{summary.get('run_id', '?')}`: scenario `{summary.get('scenario')}` - **{verdict}**",
        "",
        f"- started {summary.get('started_at')}, {number(summary.get('duration_s'))} s; backend `{c.get('backend')}`, "
        f"profile `{c.get('profile')}`, Kubernetes {c.get('kubernetes_version')}",
        f"- nodes Ready {number(c.get('nodes_ready'))} / {number(c.get('nodes_expected'))}, GPUs {number(c.get('gpus_total'), 0)}",
        "",
        "## SLOs",
        "",
        "| SLO | metric | threshold | value | result |",
        "|---|---|---|---|---|",
    ]
    for s in summary.get("slos") or []:
        lines.append(f"| {s['name']} | `{s['metric']}` | {s['op']} {number(s['threshold'])} | {slo_value_text(s, m)} | "
                     f"{'pass' if s['passed'] else '**FAIL**'}{' - ' + s['note'] if s.get('note') else ''} |")
    ps = m.get("pod_startup_latency_ms") or {}
    sl = m.get("pod_scheduling_latency_ms") or {}
    th = m.get("scheduling_throughput_pods_per_s") or {}
    jobs = m.get("jobs") or {}
    lines += [
        "",
        "## Measurements",
        "",
        f"Every quantile says its precision. **exact**: {LEGEND['exact']}. **bucketed**: {LEGEND['bucketed']}.",
        "",
        "| figure | p50 | p90 | p99 | precision (source) |",
        "|---|---|---|---|---|",
        f"| pod startup latency (ms) | {number(ps.get('p50'))} | {number(ps.get('p90'))} | {number(ps.get('p99'))} | exact (timeline) |",
        f"| pod scheduling latency (ms) | {number(sl.get('p50'))} | {number(sl.get('p90'))} | {number(sl.get('p99'))} | exact (timeline) |",
    ]
    for key, label in (("job_completion_time_s", "job completion time (s)"), ("gpu_queue_wait_s", "GPU queue wait (s)")):
        v = m.get(key) or {}
        lines.append(f"| {label} | {number(v.get('p50'))} | {number(v.get('p90'))} | {number(v.get('p99'))} | exact (timeline) |")
    sched = (m.get("scheduler") or {}).get("attempt_duration_ms")
    if sched:
        lines.append(f"| scheduling attempt duration (ms) | {quantile_text(sched, 'p50', 2, path='scheduler')} | n/a | "
                     f"{quantile_text(sched, 'p99', 2, path='scheduler')} | bucketed (Prometheus) |")
    lines += [
        "",
        f"- scheduling throughput (pods/s): avg {number(th.get('avg'), 2)}, p50 {number(th.get('p50'))}, max {number(th.get('max'))} "
        f"({number(th.get('pods'))} pods in {number(th.get('window_s'))} s)",
        f"- workload objects (Jobs, bare Pods): submitted {number(jobs.get('submitted'))}, completed {number(jobs.get('completed'))}, "
        f"failed {number(jobs.get('failed'))}, unfinished {number(jobs.get('unfinished'))}",
        f"- pending pods max {number((m.get('pending_pods') or {}).get('max'))}, GPU allocation max "
        f"{number((m.get('gpu_allocation_pct') or {}).get('max'))} %",
    ]
    cc = m.get("crosscheck") or {}
    if cc:
        lines.append(f"- cross-check watch vs Prometheus bindings: {cc.get('verdict', 'n/a')}")
    lines += control_plane_lines(summary)
    for section in sections:
        lines += section.markdown(summary)
    api = m.get("api_latency_ms") or {}
    if api:
        lines += ["", "## API latency (apiserver_request_sli_duration_seconds)", "",
                  "Bucketed: each value is interpolated inside the histogram bucket shown beside it; the true value "
                  "lies anywhere in that bucket.", "",
                  "| verb | requests | p50 ms (bucketed) | p99 ms (bucketed) |", "|---|---|---|---|"]
        for name, v, path in api_rows(m):
            lines.append(f"| {name} | {number(v.get('count'), 0)} | {quantile_text(v, 'p50', 2, path=path)} | "
                         f"{quantile_text(v, 'p99', 2, path=path)} |")
    lines += ["", "Sources of every figure: `summary.json` -> `sources`; plots: `report.html`.", ""]
    return "\n".join(lines)
