"""``summary.md``: the table a CI log or a pull request shows."""

from __future__ import annotations

from typing import Any


def fmt(v: Any, nd: int = 1) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


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
    api = m.get("api_latency_ms") or {}
    if api:
        lines += ["", "## API latency (apiserver_request_sli_duration_seconds)", "", "| verb | requests | p50 ms | p99 ms |",
                  "|---|---|---|---|"]
        for verb, v in sorted(api.items()):
            lines.append(f"| {verb} | {fmt(v.get('count'), 0)} | {fmt(v.get('p50'), 2)} | {fmt(v.get('p99'), 2)} |")
    lines += ["", "Sources of every figure: `summary.json` -> `sources`; plots: `report.html`.", ""]
    return "\n".join(lines)
