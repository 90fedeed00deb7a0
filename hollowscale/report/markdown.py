"""``summary.md``: the table a CI log or a pull request shows."""

from __future__ import annotations

from typing import Any

from hollowscale.report.distill import markdown_lines as distill_markdown


def fmt(v: Any, nd: int = 1) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


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
            back = fmt(rec.get("recovery_s")) + (" (**not recovered**)" if rec.get("recovered") is False else "")
            lines.append(f"| {f.get('type')} | {f.get('component') or f.get('fraction')} | {fmt(f.get('at_s'))} | "
                         f"{fmt(rec.get('level_before_pods_per_s'), 2)} | {back} |")
    if cp.get("restarts") or cp.get("handovers") or cp.get("agent_restarts"):
        lines += ["", f"- component restarts: {cp.get('restarts') or {}}; leader handovers: {cp.get('handovers') or {}}; "
                      f"agent restarts: {len([e for e in cp.get('agent_restarts') or [] if e.get('event') == 'started'])}"]
        for o in cp.get("apiserver_outages") or []:
            lines.append(f"- apiserver unreachable at {fmt(o.get('at_s'))} s for {fmt(o.get('duration_s'))} s")
    integ = m.get("integrity") or {}
    if integ:
        lines.append(f"- integrity (audit log vs timeline): {integ.get('verdict')}; jobs lost {integ.get('jobs_lost')}, "
                     f"pods lost {integ.get('pods_lost')}, bindings lost {integ.get('bindings_lost')}, "
                     f"double counted {integ.get('double_counted')}")
    return lines


def render(summary: dict[str, Any]) -> str:
    m = summary.get("measurements") or {}
    c = summary.get("cluster") or {}
    verdict = "PASSED" if summary.get("passed") else "FAILED"
    if not summary.get("complete", True):
        verdict += f" (INCOMPLETE: {summary.get('incomplete_reason') or 'interrupted'})"
    lines = [
        f"# hollowscale run `{summary.get('run_id', '?')}`: scenario `{summary.get('scenario')}` - **{verdict}**",
        "",
        f"- started {summary.get('started_at')}, {fmt(summary.get('duration_s'))} s; backend `{c.get('backend')}`, "
        f"profile `{c.get('profile')}`, Kubernetes {c.get('kubernetes_version')}",
        f"- nodes Ready {fmt(c.get('nodes_ready'))} / {fmt(c.get('nodes_expected'))}, GPUs {fmt(c.get('gpus_total'), 0)}",
        "",
        "## SLOs",
        "",
        "| SLO | metric | threshold | value | result |",
        "|---|---|---|---|---|",
    ]
    for s in summary.get("slos") or []:
        lines.append(f"| {s['name']} | `{s['metric']}` | {s['op']} {fmt(s['threshold'])} | {fmt(s['value'])} | "
                     f"{'pass' if s['passed'] else '**FAIL**'} |")
    ps = m.get("pod_startup_latency_ms") or {}
    sl = m.get("pod_scheduling_latency_ms") or {}
    th = m.get("scheduling_throughput_pods_per_s") or {}
    jobs = m.get("jobs") or {}
    lines += [
        "",
        "## Measurements",
        "",
        "| figure | p50 | p90 | p99 | source |",
        "|---|---|---|---|---|",
        f"| pod startup latency (ms) | {fmt(ps.get('p50'))} | {fmt(ps.get('p90'))} | {fmt(ps.get('p99'))} | timeline |",
        f"| pod scheduling latency (ms) | {fmt(sl.get('p50'))} | {fmt(sl.get('p90'))} | {fmt(sl.get('p99'))} | timeline |",
    ]
    for key, label in (("job_completion_time_s", "job completion time (s)"), ("gpu_queue_wait_s", "GPU queue wait (s)")):
        v = m.get(key) or {}
        lines.append(f"| {label} | {fmt(v.get('p50'))} | {fmt(v.get('p90'))} | {fmt(v.get('p99'))} | timeline |")
    lines += [
        "",
        f"- scheduling throughput (pods/s): avg {fmt(th.get('avg'), 2)}, p50 {fmt(th.get('p50'))}, max {fmt(th.get('max'))} "
        f"({fmt(th.get('pods'))} pods in {fmt(th.get('window_s'))} s)",
        f"- jobs: submitted {fmt(jobs.get('submitted'))}, completed {fmt(jobs.get('completed'))}, "
        f"failed {fmt(jobs.get('failed'))}, unfinished {fmt(jobs.get('unfinished'))}",
        f"- pending pods max {fmt((m.get('pending_pods') or {}).get('max'))}, GPU allocation max "
        f"{fmt((m.get('gpu_allocation_pct') or {}).get('max'))} %",
    ]
    cc = m.get("crosscheck") or {}
    if cc:
        lines.append(f"- cross-check watch vs Prometheus bindings: {cc.get('verdict', 'n/a')}")
    lines += control_plane_lines(summary)
    lines += distill_markdown(summary)
    api = m.get("api_latency_ms") or {}
    if api:
        lines += ["", "## API latency (apiserver_request_sli_duration_seconds)", "", "| verb | requests | p50 ms | p99 ms |",
                  "|---|---|---|---|"]
        for verb, v in sorted(api.items()):
            lines.append(f"| {verb} | {fmt(v.get('count'), 0)} | {fmt(v.get('p50'), 2)} | {fmt(v.get('p99'), 2)} |")
    lines += ["", "Sources of every figure: `summary.json` -> `sources`; plots: `report.html`.", ""]
    return "\n".join(lines)
