"""The batch part of a run's own report (``summary.md`` and ``report.html``): the figures of
``measurements.batch`` (from the watch timeline: exact) and ``measurements.batch_prometheus`` (Kueue's
and the scheduler's metrics: counters, and quantiles read from histograms: bucketed), so a single run
shows its partial, deadlocked and unfinished jobs, the GPU-seconds they held, queue waits and team
shares without the comparison of variants beside it.

The tables are built once (:func:`tables`) and written as Markdown or HTML; a run without batch figures
gets no section.
"""

from __future__ import annotations

import html
from typing import Any

from hollowscale.report.html import table
from hollowscale.report.numbers import number
from hollowscale.report.precision import LEGEND, quantile_text

#: deadlocked jobs named in the report (``summary.json`` names up to 20)
NAMED = 5
#: (title, column headers, rows of cell texts, a note under the table)
Table = tuple[str, list[str], list[list[str]], str]

#: the job steps of ``batch.job_steps_s``, in the order a job goes through them
STEPS = (
    ("created_to_admitted", "created -> admitted"),
    ("admitted_to_all_bound", "admitted -> all members bound"),
    ("all_bound_to_all_running", "all bound -> all running"),
    ("all_running_to_finished", "all running -> finished"),
    ("created_to_all_running", "created -> all running"),
    ("created_to_finished", "created -> finished"),
)


def _n(v: Any, nd: int = 1) -> str:
    return number(v, nd, trim=True)


def _counts(d: dict[str, Any] | None) -> str:
    """``{"a": 2.0, "b": 1}`` -> ``a 2, b 1``; ``none`` when empty."""
    return ", ".join(f"{k or '(none)'} {_n(v)}" for k, v in sorted((d or {}).items())) or "none"


def _jobs(b: dict[str, Any]) -> Table:
    inst = b.get("instances") or {}
    dead = b.get("deadlocked_jobs") or {}
    part = b.get("partial_jobs") or {}
    pre = b.get("preemption") or {}
    acc = b.get("accounting") or {}
    ev = pre.get("jobs_evicted") or {}
    ip = pre.get("instances_preempted") or {}
    names = (dead.get("instances") or [])[:NAMED]
    more = (dead.get("count") or 0) - len(names)
    rows = [
        ["jobs submitted / completed / failed / unfinished",
         f"{_n(inst.get('total'))} / {_n(inst.get('completed'))} / {_n(inst.get('failed'))} / "
         f"{_n(inst.get('unfinished'))}"],
        ["deadlocked at the end (partially started, holding GPUs)",
         f"{_n(dead.get('count'))}, holding {_n(dead.get('gpus_held'))} GPUs"
         + (f": {', '.join(names)}{f' and {more} more' if more > 0 else ''}" if names else "")],
        ["partially started jobs: max at once / avg / ever",
         f"{_n(part.get('max'))} / {_n(part.get('avg'), 2)} / {_n(part.get('instances_ever_partial'))}"],
        ["GPU-seconds held by partially started jobs", _n(b.get("wasted_gpu_seconds"))],
        ["jobs completed per hour", _n(b.get("jobs_completed_per_hour"))],
        ["queued (created suspended) / gang jobs", f"{_n(inst.get('queued'))} / {_n(inst.get('gang'))}"],
        ["pods preempted by the scheduler (by reason)",
         f"{_n((pre.get('pods_disrupted') or {}).get('total'))} ({_counts((pre.get('pods_disrupted') or {}).get('by_reason'))})"],
        ["Kueue evictions / Jobs evicted / readmitted",
         f"{_n(ev.get('evictions'))} / {_n(ev.get('jobs'))} / {_n(ev.get('readmitted_jobs'))}"],
        ["jobs preempted (of them completed / unfinished)",
         f"{_n(ip.get('total'))} ({_n(ip.get('completed'))} / {_n(ip.get('unfinished'))})"],
        ["accounting (every job counted once)",
         "ok" if acc.get("ok") else f"{_n(acc.get('problem_count'))} problems: {'; '.join(acc.get('problems') or [])[:300]}"],
    ]
    return ("Jobs", ["figure", "value"], rows,
            "A job is one instance: its Jobs (one per role), bare Pods and their pods; partially started = some "
            "member bound while its gang lacks members (over 2 s); deadlocked = still partial at the end.")


def _steps(b: dict[str, Any]) -> Table:
    steps = b.get("job_steps_s") or {}
    rows = [[label, *(_n((steps.get(key) or {}).get(q), 2) for q in ("p50", "p90", "p99")),
             _n((steps.get(key) or {}).get("count"))] for key, label in STEPS if key in steps]
    return "Job steps (s, exact: timeline)", ["step", "p50", "p90", "p99", "jobs"], rows, ""


def _queue_wait(b: dict[str, Any]) -> Table:
    qw = b.get("queue_wait_s") or {}
    rows = []
    for dim, label in (("by_queue", "queue"), ("by_priority_class", "priority class")):
        for key, v in (qw.get(dim) or {}).items():
            rows.append([f"{label} {key}", _n(v.get("p50"), 2), _n(v.get("p99"), 2), _n(v.get("count")),
                         _n(v.get("waiting_at_end"))])
    return ("Queue wait (s, exact: timeline)", ["by", "p50", "p99", "jobs admitted", "waiting at the end"], rows,
            "created -> admitted for queued jobs (Kueue), created -> all members bound for the others.")


def _shares(b: dict[str, Any]) -> Table:
    ts = b.get("tenant_share") or {}
    rows = [[ns, _n(v.get("mean_share_pct")), _n(v.get("deserved_pct")), _n(v.get("deviation_pct")),
             _n(v.get("contending_samples"))] for ns, v in sorted((ts.get("by_tenant") or {}).items())]
    note = (f"Shares averaged over the {_n(ts.get('saturated_s'))} s the cluster was saturated ({ts.get('saturation_rule')}); "
            f"max deviation from deserved: {_n(ts.get('max_deviation_pct'))} %.")
    return "Team GPU shares", ["team", "mean share %", "deserved %", "deviation %", "contending samples"], rows, note


def _pools(b: dict[str, Any]) -> Table:
    flavors = (b.get("tenant_share") or {}).get("allocation_by_flavor") or {}
    rows = [[f, _n(v.get("gpus")), _n(v.get("avg_pct")), _n(v.get("max_pct"))] for f, v in sorted(flavors.items())]
    return "GPU allocation by pool", ["pool", "GPUs", "allocated avg %", "allocated max %"], rows, ""


#: unschedulable pod-group attempts per second of the window above which the report names the retry loop
#: (gang-contention: ~1,500/s with SchedulerPopFromBackoffQ on, ~2/s with it off; reports/bench/gang-profile.md)
RETRY_LOOP_PER_S = 50.0


def retry_loop_words(unschedulable: float | None, window_s: float | None) -> str | None:
    """What the scheduler's unschedulable pod-group attempts say, when they are a loop rather than events.

    kube-scheduler v1.36.3 puts a pod group that failed back through its backoff queue with no event-based
    requeue ("not yet implemented for pod group level", pkg/scheduler/backend/queue), and the beta gate
    SchedulerPopFromBackoffQ (on by default) pops it before its backoff ends whenever the active queue is
    empty: a gang that does not fit is retried continuously.  ``make bench-gang-profile`` measured that loop
    as most of the scheduler's CPU (its own pprof), and ~2 attempts/s with the gate off."""
    if not unschedulable or not window_s or unschedulable / window_s < RETRY_LOOP_PER_S:
        return None
    return (f"{unschedulable / window_s:,.0f} unschedulable pod-group attempts/s: waiting gangs retried in a loop "
            "(no event-based requeue for pod groups in v1.36, SchedulerPopFromBackoffQ pops them early; "
            "most of cpu:scheduler, see reports/bench/gang-profile.md)")


def _prometheus(m: dict[str, Any], window_s: float | None = None) -> Table | None:
    bp = m.get("batch_prometheus") or {}
    if not bp:
        return None
    rows: list[list[str]] = []
    kq = bp.get("kueue") or {}
    if kq:
        wait = kq.get("admission_wait_s") or {}
        pend = kq.get("pending_workloads") or {}
        rows += [
            ["Kueue scraped", "yes" if kq.get("available") else "no"],
            ["Kueue admitted workloads (by ClusterQueue)",
             f"{_n((kq.get('admitted_workloads') or {}).get('total'))} ({_counts((kq.get('admitted_workloads') or {}).get('by_cluster_queue'))})"],
            ["Kueue admission wait p50", quantile_text(wait, "p50", 3, "s", "batch_prometheus")],
            ["Kueue admission wait p99", quantile_text(wait, "p99", 3, "s", "batch_prometheus")],
            ["Kueue pending workloads, max (by ClusterQueue)", _counts(pend.get("max"))],
            ["Kueue evicted / preempted workloads", f"{_n((kq.get('evicted_workloads') or {}).get('total'))} / "
                                                    f"{_n((kq.get('preempted_workloads') or {}).get('total'))}"],
        ]
    sq = bp.get("scheduler") or {}
    if sq:
        att = sq.get("podgroup_attempts") or {}
        dur = sq.get("podgroup_attempt_duration_ms") or {}
        if sq.get("podgroups_available"):
            rows += [["scheduler pod-group attempts (by result)", f"{_n(att.get('total'))} ({_counts(att.get('by_result'))})"],
                     ["pod-group attempt duration p50", quantile_text(dur, "p50", 3, "ms", "batch_prometheus")],
                     ["pod-group attempt duration p99", quantile_text(dur, "p99", 3, "ms", "batch_prometheus")]]
            loop = retry_loop_words((att.get("by_result") or {}).get("unschedulable"), window_s)
            if loop is not None:
                rows.append(["scheduler pod-group retry loop", loop])
        else:
            rows.append(["scheduler pod-group figures", "not exported (no gang scheduling in this run)"])
        rows.append(["scheduler preemption attempts / victims",
                     f"{_n((sq.get('preemption_attempts') or {}).get('total'))} / "
                     f"{_n((sq.get('preemption_victims') or {}).get('total'))}"])
    for check in ((m.get("batch_crosscheck") or {}).get("checks") or {}).values():
        rows.append(["cross-check with the timeline", str(check.get("verdict"))])
    return "Kueue and the scheduler (Prometheus)", ["figure", "value"], rows, ""


def tables(summary: dict[str, Any]) -> list[Table]:
    """The section's tables; none when the run measured no batch figures."""
    m = summary.get("measurements") or {}
    b = m.get("batch")
    if not isinstance(b, dict) or not b:
        return []
    out = [_jobs(b), _steps(b), _queue_wait(b), _shares(b), _pools(b)]
    window = (summary.get("prometheus") or {}).get("window") or []
    prom = _prometheus(m, window[1] - window[0] if len(window) == 2 else None)
    if prom is not None:
        out.append(prom)
    return [t for t in out if t[2]]


TITLE = "Batch scheduling"
_LEGEND = f"Quantiles: exact = {LEGEND['exact']}; bucketed = {LEGEND['bucketed']}."


def markdown_lines(summary: dict[str, Any]) -> list[str]:
    found = tables(summary)
    if not found:
        return []
    lines = ["", f"## {TITLE}", "", _LEGEND]
    for title, headers, rows, note in found:
        lines += ["", f"### {title}", "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in rows]
        if note:
            lines += ["", note]
    return lines


def html_parts(summary: dict[str, Any]) -> list[str]:
    found = tables(summary)
    if not found:
        return []
    parts = [f"<h2 id='batch'>{TITLE}</h2>", f"<p>{html.escape(_LEGEND)}</p>"]
    for title, headers, rows, note in found:
        parts.append(f"<h3>{html.escape(title)}</h3>")
        parts.append(table(headers, [[html.escape(c) for c in r] for r in rows]))
        if note:
            parts.append(f"<p>{html.escape(note)}</p>")
    return parts


class BatchSection:
    """This section as the report takes it (:class:`hollowscale.report.sections.ReportSection`)."""

    def markdown(self, summary: dict[str, Any]) -> list[str]:
        return markdown_lines(summary)

    def html(self, summary: dict[str, Any]) -> list[str]:
        return html_parts(summary)
