"""The batch part of ``summary.json``: which runs get it, and its figures from the watch timeline and
from Prometheus (Kueue's and the scheduler's batch metrics, cross-checked against the timeline).

:func:`hollowscale.run.summary.assemble` calls these where the batch figures sit among the others.
"""

from __future__ import annotations

from typing import Any

from hollowscale.batch.figures import batch_measurements, crosscheck_counts
from hollowscale.batch.promfigures import batch_crosscheck, batch_prom_series, kueue_figures, scheduler_batch_figures
from hollowscale.measure.prom import PromQueries
from hollowscale.measure.timeline import JobRecord, PodRecord, Timeline
from hollowscale.scenario import Scenario


def applies(sc: Scenario) -> bool:
    """Whether the batch figures apply: tenants, priority classes, gang or queued workloads, features on."""
    return bool(sc.tenants or sc.priority_classes or sc.variant or sc.cluster.gang_scheduling or sc.cluster.kueue
                or any(w.gang is not None or w.queued for w in sc.workloads))


def timeline_figures(sc: Scenario, pods: list[PodRecord], jobs: list[JobRecord], start_ms: float,
                     end_ms: float) -> dict[str, Any]:
    """``measurements.batch`` with its series and sources (:func:`hollowscale.batch.figures.batch_measurements`)
    over the run's window, with the scenario's GPUs per pool and the tenants' deserved shares."""
    return batch_measurements(pods, jobs, gpus_by_flavor=sc.gpus_by_pool(), deserved_share=sc.deserved_shares(),
                              start_ms=start_ms, end_ms=end_ms, step_s=sc.measurements.sample_interval_s)


def prometheus_figures(sc: Scenario, pq: PromQueries, start: float, end: float, series_start: float,
                       timeline: Timeline | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(measurements, series) from Prometheus: ``batch_prometheus`` (Kueue's figures when the cluster runs
    Kueue, the scheduler's gang figures), with a timeline ``batch_crosscheck`` over the same window, and
    the batch series (``series.json`` ``prometheus.batch``) from ``series_start``."""
    interval = sc.measurements.scrape_interval_s
    kq = kueue_figures(pq, start, end, step_s=interval) if sc.cluster.kueue else None
    sq = scheduler_batch_figures(pq, start, end)
    out: dict[str, Any] = {"batch_prometheus": {"kueue": kq, "scheduler": sq}}
    if timeline is not None:
        pods, jobs = timeline.snapshot()
        out["batch_crosscheck"] = batch_crosscheck(crosscheck_counts(pods, jobs, start * 1000.0, end * 1000.0), kq, sq,
                                                   sc.measurements.crosscheck_tolerance_pct)
    return out, batch_prom_series(pq, series_start, end, max(interval, 1.0))
