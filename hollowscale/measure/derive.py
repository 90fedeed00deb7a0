"""Figures computed from the watch timeline (each documented with the computation behind it).

Percentiles use the nearest-rank method on the exact samples (no buckets).  Time series are sampled
every ``step_s`` over the run window.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from hollowscale.measure.timeline import JobRecord, PodRecord

#: how each timeline figure is computed; copied into summary.json ``sources`` so readers can trace it
TIMELINE_SOURCES = {
    "pod_startup_latency_ms": "timeline: per pod, running_ms - created_ms (first watch event with phase "
    "Running minus first watch event of the pod, client clock); nearest-rank percentiles over pods that ran",
    "pod_scheduling_latency_ms": "timeline: per pod, scheduled_ms - created_ms (first event with spec.nodeName set)",
    "scheduling_throughput_pods_per_s": "timeline: pods whose scheduled_ms falls in each 1 s bucket, between the "
    "first and the last binding; avg = pods bound / that window, p50 and max over the per-second counts",
    "job_completion_time_s": "timeline: per workload object (Job, bare Pod) that finished Complete/Succeeded, "
    "finished_ms - created_ms",
    "gpu_queue_wait_s": "timeline: per pod requesting nvidia.com/gpu, scheduled_ms - created_ms",
    "pending_pods": "timeline: at each sample t, pods with created_ms <= t and not yet scheduled (nor deleted)",
    "gpu_allocation_pct": "timeline: at each sample t, sum of GPU requests of pods with scheduled_ms <= t < "
    "finished_ms/deleted_ms, divided by the GPUs of the scenario's pools, x 100",
    "jobs": "timeline: workload objects (Jobs and bare Pods of this run); completed = Complete/Succeeded, "
    "failed = Failed, unfinished = neither by the end of the run",
}


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no samples."""
    if not values:
        return None
    xs = sorted(values)
    k = max(0, min(len(xs) - 1, math.ceil(q / 100.0 * len(xs)) - 1))
    return float(xs[k])


def pcts(values: Sequence[float], qs: Iterable[int] = (50, 90, 99)) -> dict[str, Any]:
    out: dict[str, Any] = {f"p{q}": _r(percentile(values, q)) for q in qs}
    out["count"] = len(values)
    return out


def _r(v: float | None, nd: int = 3) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else round(float(v), nd)


def throughput(pods: Sequence[PodRecord], t0_ms: float | None = None, t1_ms: float | None = None) -> dict[str, Any]:
    """Scheduling throughput from bindings seen on the watch (optionally only within [t0, t1])."""
    ts = sorted(p.scheduled_ms for p in pods if p.scheduled_ms is not None
                and (t0_ms is None or p.scheduled_ms >= t0_ms) and (t1_ms is None or p.scheduled_ms <= t1_ms))
    if not ts:
        return {"avg": None, "p50": None, "max": None, "pods": 0, "window_s": 0.0}
    first = ts[0]
    nb = int((ts[-1] - first) // 1000) + 1
    buckets = [0] * nb
    for t in ts:
        buckets[int((t - first) // 1000)] += 1
    window_s = max((ts[-1] - first) / 1000.0, 1.0)
    return {
        "avg": _r(len(ts) / window_s),
        "p50": _r(percentile(buckets, 50)),
        "max": float(max(buckets)),
        "pods": len(ts),
        "window_s": _r(window_s),
    }


def series(pods: Sequence[PodRecord], gpus_total: float, start_ms: float, end_ms: float,
           step_s: float = 1.0) -> dict[str, list[Any]]:
    """Time series for the report: t (s from start), scheduled/s, pending, running, GPU %, startup p50/p99."""
    step = step_s * 1000.0
    n = max(1, math.ceil((end_ms - start_ms) / step) + 1)
    t = [round(i * step_s, 3) for i in range(n)]
    sched = [0] * n
    delta_pending = [0] * (n + 1)
    delta_gpu = [0.0] * (n + 1)
    delta_running = [0] * (n + 1)
    lat_by_bucket: list[list[float]] = [[] for _ in range(n)]

    def idx(ms: float) -> int:
        return max(0, min(n, math.ceil((ms - start_ms) / step)))

    for p in pods:
        end_p = p.deleted_ms
        if p.scheduled_ms is not None:
            i = int((p.scheduled_ms - start_ms) // step)
            if 0 <= i < n:
                sched[i] += 1
        # pending from created until scheduled (or deleted)
        stop = p.scheduled_ms if p.scheduled_ms is not None else end_p
        delta_pending[idx(p.created_ms)] += 1
        if stop is not None:
            delta_pending[idx(stop)] -= 1
        if p.scheduled_ms is not None and p.gpus:
            gstop = p.finished_ms if p.finished_ms is not None else end_p
            delta_gpu[idx(p.scheduled_ms)] += p.gpus
            if gstop is not None:
                delta_gpu[idx(gstop)] -= p.gpus
        if p.running_ms is not None:
            rstop = p.finished_ms if p.finished_ms is not None else end_p
            delta_running[idx(p.running_ms)] += 1
            if rstop is not None:
                delta_running[idx(rstop)] -= 1
            i = int((p.running_ms - start_ms) // step)
            if 0 <= i < n:
                lat_by_bucket[i].append(p.running_ms - p.created_ms)
    pending, gpu, running = [], [], []
    acc_p, acc_g, acc_r = 0, 0.0, 0
    for i in range(n):
        acc_p += delta_pending[i]
        acc_g += delta_gpu[i]
        acc_r += delta_running[i]
        pending.append(acc_p)
        running.append(acc_r)
        gpu.append(round(100.0 * acc_g / gpus_total, 3) if gpus_total else 0.0)
    # startup latency percentiles over a sliding window of 10 samples, so sparse seconds still plot
    win = max(1, round(10.0 / step_s))
    p50, p99 = [], []
    for i in range(n):
        vals = [v for b in lat_by_bucket[max(0, i - win + 1): i + 1] for v in b]
        p50.append(_r(percentile(vals, 50)))
        p99.append(_r(percentile(vals, 99)))
    return {"t_s": t, "scheduled_per_s": sched, "pending_pods": pending, "running_pods": running,
            "gpu_allocation_pct": gpu, "startup_p50_ms": p50, "startup_p99_ms": p99}


def timeline_measurements(pods: Sequence[PodRecord], jobs: Sequence[JobRecord], gpus_total: float,
                          start_ms: float, end_ms: float, step_s: float = 1.0) -> dict[str, Any]:
    """The timeline part of ``summary.json``'s ``measurements`` plus the plotted series."""
    startup = [p.running_ms - p.created_ms for p in pods if p.running_ms is not None]
    sched_lat = [p.scheduled_ms - p.created_ms for p in pods if p.scheduled_ms is not None]
    done = [(j.finished_ms - j.created_ms) / 1000.0 for j in jobs if j.outcome == "Complete" and j.finished_ms]
    gpu_wait = [(p.scheduled_ms - p.created_ms) / 1000.0 for p in pods if p.gpus > 0 and p.scheduled_ms is not None]
    ser = series(pods, gpus_total, start_ms, end_ms, step_s)
    by_workload: dict[str, dict[str, int]] = {}
    for j in jobs:
        row = by_workload.setdefault(j.workload or "?", {"submitted": 0, "completed": 0, "failed": 0})
        row["submitted"] += 1
        row["completed"] += j.outcome == "Complete"
        row["failed"] += j.outcome == "Failed"
    completed = sum(1 for j in jobs if j.outcome == "Complete")
    failed = sum(1 for j in jobs if j.outcome == "Failed")
    pend = ser["pending_pods"]
    gpu = ser["gpu_allocation_pct"]
    return {
        "measurements": {
            "pod_startup_latency_ms": pcts(startup),
            "pod_scheduling_latency_ms": pcts(sched_lat),
            "scheduling_throughput_pods_per_s": throughput(pods),
            "job_completion_time_s": pcts(done),
            "gpu_queue_wait_s": pcts(gpu_wait),
            "pending_pods": {"avg": _r(sum(pend) / len(pend)) if pend else None, "max": max(pend) if pend else None},
            "gpu_allocation_pct": {"avg": _r(sum(gpu) / len(gpu)) if gpu else None, "max": max(gpu) if gpu else None},
            "jobs": {
                "submitted": len(jobs),
                "completed": completed,
                "failed": failed,
                "unfinished": len(jobs) - completed - failed,
                "by_workload": by_workload,
            },
            "pods": {
                "created": len(pods),
                "scheduled": len(sched_lat),
                "started": len(startup),
                "succeeded": sum(1 for p in pods if p.phase == "Succeeded"),
                "failed": sum(1 for p in pods if p.phase == "Failed"),
            },
        },
        "series": ser,
    }
