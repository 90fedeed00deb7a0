"""PromQL for batch scheduling: kube-scheduler's pod-group and preemption metrics, Kueue's queue
metrics, and their cross-check with the watch timeline (:func:`hollowscale.batch.figures.crosscheck_counts`).

Metric names and labels, as the pinned sources define them:

* kube-scheduler, ``k8s.io/kubernetes@v1.36.3/pkg/scheduler/metrics/metrics.go`` (subsystem ``scheduler``):
  ``scheduler_podgroup_schedule_attempts_total{result, profile}`` (counter; result ``scheduled``,
  ``unschedulable``, ``waiting_on_preemption``, ``error``, see ``profile_metrics.go``; incremented once
  per pod-group scheduling cycle in ``schedule_one_podgroup.go``),
  ``scheduler_podgroup_scheduling_attempt_duration_seconds{result, profile}`` (histogram),
  ``scheduler_podgroup_scheduling_algorithm_duration_seconds`` (histogram, no labels) -- these three are
  registered only with the ``GenericWorkload`` feature gate; ``scheduler_preemption_attempts_total``
  (counter) and ``scheduler_preemption_victims`` (histogram of victims per preemption; its ``_sum``
  is the number of victims), both STABLE.
* Kueue, ``sigs.k8s.io/kueue@v0.17.0/pkg/metrics/metrics.go`` (subsystem ``kueue``):
  ``kueue_admitted_workloads_total{cluster_queue, priority_class, replica_role}`` (counter, +1 per
  admission, re-admissions after an eviction included), ``kueue_admission_wait_time_seconds{cluster_queue,
  priority_class, replica_role}`` (histogram, from creation or requeue to admission; buckets 1, 2.5, 5,
  10, ... s), ``kueue_pending_workloads{cluster_queue, status, replica_role}`` (gauge; status ``active``
  or ``inadmissible``), ``kueue_evicted_workloads_total{cluster_queue, reason, underlying_cause,
  priority_class, replica_role}``, ``kueue_preempted_workloads_total{preempting_cluster_queue, reason,
  replica_role}`` (reason ``InClusterQueue``, ``InCohortReclamation``, ``InCohortFairSharing``,
  ``InCohortReclaimWhileBorrowing``), ``kueue_local_queue_admitted_workloads_total{name, namespace,
  priority_class, replica_role}`` (LocalQueueMetrics gate, beta and on by default in v0.17), and
  ``kueue_build_info`` (gauge 1, always registered: tells whether Kueue was scraped at all).

Counters are read from their raw samples (as :meth:`PromQueries.bindings` does) so a component restarted
during the run (its counters start again at 0) is summed, not subtracted; quantiles come from
``histogram_quantile`` over ``increase`` of the buckets in the window.  Every function takes epoch
seconds and returns its PromQL next to the values; :class:`PromQueries` logs each query too.
"""

from __future__ import annotations

import math
from typing import Any

from hollowscale.measure.prom import PromQueries, as_number, counter_increase, histogram_quantiles

#: metric names (checked against the sources named in the module docstring)
SCHED_PODGROUP_ATTEMPTS = "scheduler_podgroup_schedule_attempts_total"
SCHED_PODGROUP_ATTEMPT_DURATION = "scheduler_podgroup_scheduling_attempt_duration_seconds"
SCHED_PODGROUP_ALGORITHM_DURATION = "scheduler_podgroup_scheduling_algorithm_duration_seconds"
SCHED_PREEMPTION_ATTEMPTS = "scheduler_preemption_attempts_total"
SCHED_PREEMPTION_VICTIMS = "scheduler_preemption_victims"
KUEUE_ADMITTED = "kueue_admitted_workloads_total"
KUEUE_LQ_ADMITTED = "kueue_local_queue_admitted_workloads_total"
KUEUE_ADMISSION_WAIT = "kueue_admission_wait_time_seconds"
KUEUE_PENDING = "kueue_pending_workloads"
KUEUE_EVICTED = "kueue_evicted_workloads_total"
KUEUE_PREEMPTED = "kueue_preempted_workloads_total"
KUEUE_BUILD_INFO = "kueue_build_info"
#: extra look-back before the window for raw counter samples (a value from before the window is needed)
LOOKBACK_MARGIN_S = 300



def _w(start: float, end: float) -> str:
    return f"{max(1, math.ceil(end - start))}s"


def counter_total(pq: PromQueries, metric: str, start: float, end: float, purpose: str,
                  by: tuple[str, ...] = (), selector: str = "") -> dict[str, Any]:
    """How much a counter grew in [start, end], summed over its series and per value of each ``by`` label.

    Returns ``{"query", "total", "by_<label>": {value: n}, "series", "resets"}``; ``total`` is None when
    the counter has no series at all (absent: never incremented, or not scraped; callers say which).
    """
    q = f"{metric}{selector}[{max(1, math.ceil(end - start)) + LOOKBACK_MARGIN_S}s]"
    res = pq.instant(q, end, purpose)
    out: dict[str, Any] = {"query": q, "total": None, "series": len(res), "resets": 0}
    for lbl in by:
        out[f"by_{lbl}"] = {}
    if not res:
        return out
    total = 0.0
    for s in res:
        inc, n = counter_increase([(float(t), float(v)) for t, v in s.get("values") or []], start)
        total += inc
        out["resets"] += n
        for lbl in by:
            key = s["metric"].get(lbl, "")
            out[f"by_{lbl}"][key] = round(out[f"by_{lbl}"].get(key, 0.0) + inc, 3)
    out["total"] = round(total, 3)
    return out


def _present(pq: PromQueries, metric: str, end: float, start: float, purpose: str) -> bool:
    return bool(pq.instant(f"count(last_over_time({metric}[{_w(start, end)}]))", end, purpose))


def kueue_figures(pq: PromQueries, start: float, end: float, step_s: float = 5.0) -> dict[str, Any]:
    """Kueue's own view of the window [start, end] (epoch s).

    Returns ``{"available", "admitted_workloads", "admitted_by_local_queue", "admission_wait_s",
    "pending_workloads", "evicted_workloads", "preempted_workloads"}``: counters as from
    :func:`counter_total` (``total`` 0 when Kueue is scraped and the counter never moved, None when Kueue
    is not scraped), quantiles ``{p50, p99, by_cluster_queue, queries}``, pending workloads ``{at_end:
    {cluster_queue: {status: n}}, max: {cluster_queue: n}, queries}`` (max over ``step_s`` samples).
    """
    available = _present(pq, KUEUE_BUILD_INFO, end, start, "Kueue scraped")

    def counter(metric: str, by: tuple[str, ...], purpose: str) -> dict[str, Any]:
        c = counter_total(pq, metric, start, end, purpose, by)
        if c["total"] is None and available:
            c["total"] = 0.0
        return c

    out: dict[str, Any] = {"available": available}
    out["admitted_workloads"] = counter(KUEUE_ADMITTED, ("cluster_queue", "priority_class"),
                                        "Kueue admissions by ClusterQueue and priority")
    out["admitted_by_local_queue"] = counter(KUEUE_LQ_ADMITTED, ("namespace", "name"),
                                             "Kueue admissions by LocalQueue (namespace = tenant)")
    out["admission_wait_s"] = histogram_quantiles(pq, KUEUE_ADMISSION_WAIT, start, end, "Kueue admission wait",
                                         by="cluster_queue")
    q_end = f"sum by (cluster_queue, status) ({KUEUE_PENDING})"
    q_max = f"max_over_time((sum by (cluster_queue) ({KUEUE_PENDING}))[{_w(start, end)}:{max(step_s, 1.0):g}s])"
    at_end: dict[str, dict[str, float | None]] = {}
    for s in pq.instant(q_end, end, "Kueue pending workloads at the end"):
        at_end.setdefault(s["metric"].get("cluster_queue", ""), {})[s["metric"].get("status", "")] = as_number(s["value"][1])
    mx = {s["metric"].get("cluster_queue", ""): as_number(s["value"][1])
          for s in pq.instant(q_max, end, "Kueue pending workloads, max over the window")}
    out["pending_workloads"] = {"at_end": at_end, "max": mx, "queries": {"at_end": q_end, "max": q_max}}
    out["evicted_workloads"] = counter(KUEUE_EVICTED, ("reason", "priority_class", "cluster_queue"),
                                       "Kueue evictions by reason")
    out["preempted_workloads"] = counter(KUEUE_PREEMPTED, ("reason", "preempting_cluster_queue"),
                                         "Kueue preemptions by reason")
    return out


def scheduler_batch_figures(pq: PromQueries, start: float, end: float) -> dict[str, Any]:
    """kube-scheduler's pod-group and preemption figures for the window [start, end] (epoch s).

    Returns ``{"podgroups_available", "podgroup_attempts" (counter, by_result), "podgroup_attempt_duration_ms"
    (p50/p99 by result), "podgroup_algorithm_duration_ms", "preemption_attempts", "preemption_victims"
    (counter of victims: the histogram's _sum), "preemptions_observed" (its _count), "victims_per_preemption"
    (p50/p99)}``.  ``podgroups_available`` is false when the scheduler exports no pod-group histogram
    (GenericWorkload gate off, or not scraped): the pod-group counters are then None, not 0.
    """
    scraped = bool(pq.instant('max(up{job="scheduler"})', end, "scheduler scraped"))
    pg = _present(pq, f"{SCHED_PODGROUP_ALGORITHM_DURATION}_count", end, start, "scheduler pod-group metrics exported")

    def counter(metric: str, by: tuple[str, ...], purpose: str, known: bool) -> dict[str, Any]:
        c = counter_total(pq, metric, start, end, purpose, by)
        if c["total"] is None and known:
            c["total"] = 0.0
        return c

    out: dict[str, Any] = {"podgroups_available": pg}
    out["podgroup_attempts"] = counter(SCHED_PODGROUP_ATTEMPTS, ("result",), "pod-group scheduling attempts", pg)
    out["podgroup_attempt_duration_ms"] = histogram_quantiles(pq, SCHED_PODGROUP_ATTEMPT_DURATION, start, end,
                                                     "pod-group attempt duration", by="result", scale=1000.0)
    out["podgroup_algorithm_duration_ms"] = histogram_quantiles(pq, SCHED_PODGROUP_ALGORITHM_DURATION, start, end,
                                                       "pod-group algorithm duration", scale=1000.0)
    out["preemption_attempts"] = counter(SCHED_PREEMPTION_ATTEMPTS, (), "scheduler preemption attempts", scraped)
    out["preemption_victims"] = counter(f"{SCHED_PREEMPTION_VICTIMS}_sum", (), "scheduler preemption victims",
                                        scraped)
    out["preemptions_observed"] = counter(f"{SCHED_PREEMPTION_VICTIMS}_count", (), "scheduler preemptions", scraped)
    out["victims_per_preemption"] = histogram_quantiles(pq, SCHED_PREEMPTION_VICTIMS, start, end, "victims per preemption")
    return out


def compare(name: str, watch: float | None, prom: float | None, tolerance_pct: float, query: str,
            relation: str = "equal") -> dict[str, Any]:
    """One timeline-vs-Prometheus check, shaped like ``summary.crosscheck``.

    ``relation``: ``equal`` (|watch - prom| / prom <= tolerance) or ``prom_at_least`` (the metric counts
    events that may be more than the timeline's, e.g. one gang scheduled over several cycles: agree when
    prom >= watch x (1 - tolerance)).
    """
    out: dict[str, Any] = {"name": name, "query": query, "watch": watch, "prometheus": prom,
                           "relation": relation, "tolerance_pct": tolerance_pct}
    if prom is None or watch is None:
        out.update(diff_pct=None, agree=None, verdict=f"{name}: no {'Prometheus' if prom is None else 'timeline'} data")
        return out
    if prom == 0 and watch == 0:
        out.update(diff_pct=0.0, agree=True, verdict=f"{name}: none in the window (nothing to compare)")
        return out
    diff = abs(watch - prom) / max(prom, 1e-9) * 100.0
    if relation == "prom_at_least":
        ok = prom >= watch * (1 - tolerance_pct / 100.0)
        rel = ">=" if ok else "<"
        out.update(diff_pct=round(diff, 3), agree=ok,
                   verdict=f"{'agree' if ok else 'DISAGREE'}: {name}: Prometheus {prom:g} {rel} timeline {watch:g}"
                           f" (within {tolerance_pct:g}%)")
    else:
        ok = diff <= tolerance_pct
        out.update(diff_pct=round(diff, 3), agree=ok,
                   verdict=f"{'agree' if ok else 'DISAGREE'}: {name}: timeline {watch:g} vs Prometheus {prom:g} "
                           f"({diff:.2f}% {'<=' if ok else '>'} {tolerance_pct:g}%)")
    return out


def batch_crosscheck(counts: dict[str, Any], kueue: dict[str, Any] | None, scheduler: dict[str, Any] | None,
                     tolerance_pct: float) -> dict[str, Any]:
    """Timeline counts (:func:`hollowscale.batch.figures.crosscheck_counts` over the SAME window as the
    Prometheus queries) against Kueue's and the scheduler's counters.

    Checks: ``kueue_admissions`` (Job admissions incl. re-admissions vs ``kueue_admitted_workloads_total``),
    ``kueue_evictions`` (re-suspensions vs ``kueue_evicted_workloads_total``), ``gang_schedules`` (gangs
    reaching gang_min bound vs ``scheduler_podgroup_schedule_attempts_total{result="scheduled"}``, which
    may be more: prom_at_least), ``scheduler_preemption_victims`` (pods with DisruptionTarget
    PreemptionByScheduler vs the victims histogram's _sum).  Returns ``{"checks": {name: check},
    "agree": all checks with data agree (None when none has data)}``.
    """
    checks: dict[str, Any] = {}
    if kueue is not None:
        a = kueue.get("admitted_workloads") or {}
        checks["kueue_admissions"] = compare("Kueue admissions", counts.get("kueue_admissions"), a.get("total"),
                                             tolerance_pct, a.get("query", ""))
        e = kueue.get("evicted_workloads") or {}
        checks["kueue_evictions"] = compare("Kueue evictions", counts.get("kueue_evictions"), e.get("total"),
                                            tolerance_pct, e.get("query", ""))
    if scheduler is not None:
        pa = scheduler.get("podgroup_attempts") or {}
        scheduled = (pa.get("by_result") or {}).get("scheduled")
        if scheduled is None and pa.get("total") is not None:
            scheduled = 0.0
        checks["gang_schedules"] = compare("gangs scheduled", counts.get("gang_schedules"), scheduled, tolerance_pct,
                                           pa.get("query", ""), relation="prom_at_least")
        v = scheduler.get("preemption_victims") or {}
        checks["scheduler_preemption_victims"] = compare(
            "pods preempted by the scheduler", counts.get("pods_preempted_by_scheduler"), v.get("total"),
            tolerance_pct, v.get("query", ""))
    verdicts = [c["agree"] for c in checks.values() if c["agree"] is not None]
    return {"checks": checks, "agree": all(verdicts) if verdicts else None}


def batch_prom_series(pq: PromQueries, start: float, end: float, step_s: float) -> dict[str, Any]:
    """Kueue pending workloads per ClusterQueue and the scheduler's pod-group scheduling rate, for plots:
    ``{"kueue_pending_workloads": {cluster_queue: [[t_s, n], ...]}, "podgroups_scheduled_per_s": [[t_s, v]],
    "queries": {...}}`` (t_s from ``start``)."""
    q_p = f"sum by (cluster_queue) ({KUEUE_PENDING})"
    q_s = f'sum(rate({SCHED_PODGROUP_ATTEMPTS}{{result="scheduled"}}[30s]))'
    pending = {s["metric"].get("cluster_queue", ""): [[round(float(t) - start, 3), as_number(v)] for t, v in s["values"]]
               for s in pq.range(q_p, start, end, step_s, "Kueue pending workloads over time")}
    res = pq.range(q_s, start, end, step_s, "pod groups scheduled per second")
    rate = [[round(float(t) - start, 3), as_number(v)] for t, v in res[0]["values"]] if res else []
    return {"kueue_pending_workloads": pending, "podgroups_scheduled_per_s": rate,
            "queries": {"kueue_pending_workloads": q_p, "podgroups_scheduled_per_s": q_s}}
