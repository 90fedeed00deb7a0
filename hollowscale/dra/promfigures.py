"""What DRA costs the scheduler, from its own metrics in the run's Prometheus (every query with its value).

* scheduling throughput: ``scheduler_schedule_attempts_total{result="scheduled"}`` over the window;
* the DynamicResources plugin's time per extension point: ``scheduler_plugin_execution_duration_seconds``
  ``{plugin="DynamicResources"}``.  **Estimated**: the scheduler records plugin durations in only 10% of
  its cycles, drawn at random (``pluginMetricsSamplePercent = 10``, ``pkg/scheduler/schedule_one.go``), so
  the sums are scaled by cycles / sampled cycles (all attempts of ``scheduler_schedule_attempts_total``
  over the sampled calls of the plugin's PreFilter, which runs once per cycle; 10 when nothing was
  sampled); and Filter runs per candidate node in 16 parallel goroutines, so its sum is CPU time, not wall
  time.  The share among all plugins (DynamicResources' sampled time over every plugin's, Filter apart) needs
  no scaling: every plugin of a cycle is sampled together;
* its share of scheduling time: the estimated non-Filter time (PreEnqueue, PreFilter, PostFilter, Score,
  Reserve, Unreserve, PreBind, ...) over ``scheduler_scheduling_attempt_duration_seconds`` (wall time of
  the attempts), and Filter's estimated CPU time beside ``scheduler_scheduling_algorithm_duration_seconds``
  (the wall time of the Filter and Score phases of all plugins, which the stable
  ``scheduler_framework_extension_point_duration_seconds`` does not record for Filter);
* pods unschedulable for DynamicResources (``scheduler_unschedulable_pods{plugin="DynamicResources"}``),
  claims made by the controller-manager (``resourceclaim_controller_creates_total``) and by the scheduler
  for extended resources (``scheduler_resourceclaim_creates_total``), and the controller-manager's claims
  gauge (``resourceclaim_controller_resource_claims`` by ``allocated``) at the end.
"""

from __future__ import annotations

import math
from typing import Any

from hollowscale.measure.prom import PromQueries, as_number

#: scheduler_perf: plugin metrics are recorded in this percentage of scheduling cycles
PLUGIN_SAMPLE_PERCENT = 10
PLUGIN = "DynamicResources"


def _round(v: float | None, nd: int = 4) -> float | None:
    return None if v is None else round(v, nd)


def _share(part: float, whole: float | None) -> float | None:
    return round(100 * part / whole, 2) if whole else None


def dra_prom_figures(pq: PromQueries, start: float, end: float) -> dict[str, Any]:
    """``measurements.dra_scheduler`` over [start, end] (epoch seconds)."""
    w = f"{max(1, math.ceil(end - start))}s"
    q: dict[str, str] = {
        "scheduled": f'sum(increase(scheduler_schedule_attempts_total{{result="scheduled"}}[{w}]))',
        "unschedulable_attempts": f'sum(increase(scheduler_schedule_attempts_total{{result="unschedulable"}}[{w}]))',
        "attempt_seconds": f"sum(increase(scheduler_scheduling_attempt_duration_seconds_sum[{w}]))",
        "algorithm_seconds": f"sum(increase(scheduler_scheduling_algorithm_duration_seconds_sum[{w}]))",
        "plugin_seconds_sampled": f'sum by (extension_point) (increase(scheduler_plugin_execution_duration_seconds_sum'
                                  f'{{plugin="{PLUGIN}"}}[{w}]))',
        "plugin_calls_sampled": f'sum by (extension_point) (increase(scheduler_plugin_execution_duration_seconds_count'
                                f'{{plugin="{PLUGIN}"}}[{w}]))',
        "attempts": f"sum(increase(scheduler_schedule_attempts_total[{w}]))",
        "all_plugins_sampled": f'sum by (filter) (label_replace(increase(scheduler_plugin_execution_duration_seconds_sum'
                               f'[{w}]), "filter", "$1", "extension_point", "(Filter)"))',
        "unschedulable_pods_max": f'max_over_time(sum(scheduler_unschedulable_pods{{plugin="{PLUGIN}"}})[{w}:])',
        "controller_claim_creates": f"sum(increase(resourceclaim_controller_creates_total[{w}]))",
        "scheduler_claim_creates": f"sum(increase(scheduler_resourceclaim_creates_total[{w}]))",
        "controller_claims_at_end": "sum by (allocated) (resourceclaim_controller_resource_claims)",
    }
    scheduled = pq.scalar(q["scheduled"], end, "pods scheduled in the window")
    attempt_s = pq.scalar(q["attempt_seconds"], end, "scheduling attempts' wall time")
    algorithm_s = pq.scalar(q["algorithm_seconds"], end, "scheduling algorithm wall time (Filter + Score)")
    attempts = pq.scalar(q["attempts"], end, "scheduling attempts (cycles), every result")
    sampled: dict[str, dict[str, float | None]] = {}
    for key, purpose in (("plugin_seconds_sampled", "seconds"), ("plugin_calls_sampled", "calls")):
        for s in pq.instant(q[key], end, f"DynamicResources {purpose} by extension point (sampled)"):
            sampled.setdefault(s["metric"].get("extension_point", "?"), {})[purpose] = as_number(s["value"][1])
    cycles_sampled = (sampled.get("PreFilter") or {}).get("calls")
    scale = attempts / cycles_sampled if attempts and cycles_sampled else 100 / PLUGIN_SAMPLE_PERCENT
    by_point = {k: {"seconds_sampled": _round(v.get("seconds")), "calls_sampled": _round(v.get("calls"), 1),
                    "seconds_estimated": _round((v.get("seconds") or 0.0) * scale)} for k, v in sorted(sampled.items())}
    totals = {s["metric"].get("filter") or "other": as_number(s["value"][1])
              for s in pq.instant(q["all_plugins_sampled"], end, "every plugin's sampled time, Filter apart")}
    dra_filter = (sampled.get("Filter") or {}).get("seconds") or 0.0
    dra_other = sum(v.get("seconds") or 0.0 for k, v in sampled.items() if k != "Filter")
    filter_s = (by_point.get("Filter") or {}).get("seconds_estimated")
    other_s = sum(v.get("seconds_estimated") or 0.0 for k, v in by_point.items() if k != "Filter")
    window = max(end - start, 1e-9)
    claims_at_end = {s["metric"].get("allocated", "?"): as_number(s["value"][1])
                     for s in pq.instant(q["controller_claims_at_end"], end, "controller-manager's claims gauge")}
    return {
        "window_s": round(window, 3),
        "pods_scheduled": _round(scheduled, 1),
        "throughput_pods_per_s": _round(scheduled / window if scheduled is not None else None, 3),
        "unschedulable_attempts": _round(pq.scalar(q["unschedulable_attempts"], end, "unschedulable attempts"), 1),
        "attempt_seconds": _round(attempt_s),
        "algorithm_seconds": _round(algorithm_s),
        "cycles": _round(attempts, 1),
        "cycles_sampled": _round(cycles_sampled, 1),
        "sampling_scale": _round(scale, 3),
        "plugin_by_extension_point": by_point,
        "share_of_all_plugins_pct": _share(dra_other, totals.get("other")),
        "filter_share_of_all_plugins_filter_pct": _share(dra_filter, totals.get("Filter")),
        "plugin_seconds_estimated_without_filter": _round(other_s),
        "plugin_share_of_attempt_time_pct": _round(100 * other_s / attempt_s, 2) if attempt_s else None,
        "filter_cpu_seconds_estimated": filter_s,
        "filter_cpu_per_algorithm_wall_pct": _round(100 * filter_s / algorithm_s, 2) if filter_s is not None
        and algorithm_s else None,
        "plugin_ms_per_scheduled_pod_estimated": _round(1000 * (other_s + (filter_s or 0.0)) / scheduled, 3)
        if scheduled else None,
        "unschedulable_pods_max": _round(pq.scalar(q["unschedulable_pods_max"], end,
                                                   "pods unschedulable for DynamicResources, max"), 1),
        "controller_claim_creates": _round(pq.scalar(q["controller_claim_creates"], end, "claims from templates"), 1),
        "scheduler_claim_creates": _round(pq.scalar(q["scheduler_claim_creates"], end,
                                                    "claims for extended resources"), 1),
        "controller_claims_at_end": claims_at_end,
        "estimated": f"plugin seconds x{scale:.3g} (cycles / sampled cycles; the scheduler samples "
                     f"{PLUGIN_SAMPLE_PERCENT}% of cycles at random); Filter is CPU time over parallel goroutines, not "
                     "wall time; shares among plugins are of sampled time (no scaling)",
        "queries": q,
    }
