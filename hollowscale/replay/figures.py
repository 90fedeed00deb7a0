"""What a replay measured, from its records: the curves, the failures, the scheduler's pace, the checks.

- allocation curves: GPU (the paper's curve, :func:`hollowscale.trace.paper.allocation_curve`), CPU and
  memory allocation (% of capacity) at each whole percent of arrived GPU demand;
- unallocated GPUs when the arrived demand first reaches 100% of capacity (or at the end, if never);
- the first failure: the first pod the scheduler refused, where it arrived, its kind and reason;
- pods that never ran, by kind and by the scheduler's reason (its message with the counts taken out);
- the paper's fragmentation at each whole percent of arrived demand;
- the scheduler's pace: verdicts per second over the replay, create-to-verdict latency;
- checks the report states with their figures: allocation equals arrived demand until the first
  failure (within 0.2 points after every pod; the bucketed curve's own distance is shown beside, it
  is the bucketing's, up to half a point at 0%), pod counts per kind equal the trace's (``trace inspect``),
  and the allocation the replay accounted equals what the API server's objects say at the end.

A timed replay's figures (:func:`timed_figures`): pending time per QoS class, pods never bound with the
scheduler's reasons, unschedulable pods and GPU allocation over time, the replay's own lag, its checks.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from hollowscale.replay.driver import BOUND, NO_VERDICT, Checkpoint, PodRecord
from hollowscale.replay.timed import LATE_S, TimedRecord
from hollowscale.trace.model import GPU_MILLI, KINDS
from hollowscale.trace.paper import AllocRecord, allocation_curve

#: how far a curve point below the first failure may sit from the diagonal (percentage points)
DIAGONAL_TOLERANCE = 0.2
_COUNTS = re.compile(r"^\d+\s+")
_AVAILABLE = re.compile(r"nodes are available: (.*?)(?:\.\s|\.$|$)")


def reason_class(message: str) -> str:
    """The scheduler's message without its counts: ``0/1213 nodes are available: 3 Insufficient cpu,
    1210 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: ...`` -> ``Insufficient
    cpu; Insufficient nvidia.com/gpu`` (the reasons any node gave, sorted)."""
    if not message:
        return "(no message)"
    m = _AVAILABLE.search(message)
    if not m:
        return message
    parts = sorted({_COUNTS.sub("", p.strip()) for p in m.group(1).split(", ") if p.strip()})
    return "; ".join(parts) or message


def first_index(records: Sequence[PodRecord]) -> int:
    """The position of the first pod that was not bound (the number of records when every one was)."""
    return next((i for i, r in enumerate(records) if r.verdict != BOUND), len(records))


def _pctile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


def _curve(arrived: list[int], values: list[int], capacity: int, total: int) -> dict[int, float]:
    """Mean ``values`` (% of ``capacity``) per whole percent of arrived GPU demand (as the GPU curve)."""
    recs = [AllocRecord(a, round(v * total * GPU_MILLI / capacity)) for a, v in zip(arrived, values, strict=True)]
    return allocation_curve(recs, total)


def replay_figures(records: Sequence[PodRecord], checkpoints: Sequence[Checkpoint], gpu_capacity_milli: int,
                   cpu_capacity_milli: int, memory_capacity_mib: int, trace_kinds: dict[str, int] | None,
                   apiserver: dict[str, int] | None, gpu_mode: str, started_ms: float,
                   ended_ms: float) -> dict[str, Any]:
    """The replay's figures (module docstring) as a JSON-able mapping."""
    total_gpus = gpu_capacity_milli // GPU_MILLI
    arrived = [0] + [r.arrived_milli for r in records]
    gpu = [0] + [r.allocated_milli for r in records]
    cpu = [0] + [r.cpu_allocated_milli for r in records]
    mem = [0] + [r.memory_allocated_mib for r in records]
    gpu_curve = allocation_curve([AllocRecord(a, g) for a, g in zip(arrived, gpu, strict=True)], total_gpus) \
        if total_gpus else {}
    failed = [r for r in records if r.verdict != BOUND]
    first = failed[0] if failed else None
    first_pct = first.arrived_milli * 100 / gpu_capacity_milli if first and gpu_capacity_milli else None
    before = records[: first_index(records)]
    deviation = max((abs(r.allocated_milli - r.arrived_milli) * 100 / gpu_capacity_milli for r in before),
                    default=0.0) if gpu_capacity_milli else 0.0
    below = {p: v for p, v in gpu_curve.items() if first_pct is None or p < int(first_pct)}
    curve_deviation = max((abs(v - p) for p, v in below.items()), default=0.0)
    at_full = next((r for r in records if r.arrived_milli >= gpu_capacity_milli), records[-1] if records else None)
    by_kind = {k: {"arrived": 0, "bound": 0, "unschedulable": 0, "no_verdict": 0} for k in KINDS}
    reasons: dict[str, Counter[str]] = {k: Counter() for k in KINDS}
    for r in records:
        by_kind[r.kind]["arrived"] += 1
        by_kind[r.kind]["bound" if r.verdict == BOUND else "no_verdict" if r.verdict == NO_VERDICT
                        else "unschedulable"] += 1
        if r.verdict != BOUND:
            reasons[r.kind][reason_class(r.reason) if r.verdict != NO_VERDICT else "no verdict in time"] += 1
    original = Counter(r.kind for r in records if not r.tuned)
    lat_bound = [r.verdict_ms - r.created_ms for r in records if r.verdict == BOUND]
    lat_failed = [r.verdict_ms - r.created_ms for r in records if r.verdict != BOUND and r.verdict != NO_VERDICT]
    seconds = max(1e-9, (ended_ms - started_ms) / 1000)
    ours = records[-1].allocated_milli if records else 0
    theirs = None
    if apiserver is not None:
        theirs = apiserver["counted_gpu_milli"] if gpu_mode == "counted" else apiserver["claim_shares_milli"]
    return {
        "gpu_mode": gpu_mode,
        "capacity": {"gpus": total_gpus, "gpu_milli": gpu_capacity_milli, "cpu_milli": cpu_capacity_milli,
                     "memory_mib": memory_capacity_mib},
        "pods": {"total": len(records), "bound": len(records) - len(failed),
                 "unschedulable": sum(1 for r in failed if r.verdict != NO_VERDICT),
                 "no_verdict": sum(1 for r in failed if r.verdict == NO_VERDICT), "tuned": sum(r.tuned for r in records),
                 "by_kind": by_kind},
        "curves": {
            "gpu": {str(k): v for k, v in gpu_curve.items()},
            "cpu": {str(k): v for k, v in _curve(arrived, cpu, cpu_capacity_milli, total_gpus).items()}
            if total_gpus and cpu_capacity_milli else {},
            "memory": {str(k): v for k, v in _curve(arrived, mem, memory_capacity_mib, total_gpus).items()}
            if total_gpus and memory_capacity_mib else {},
        },
        "fragmentation": {str(c.arrived_pct): {"frag_gpus": round(c.frag_milli / GPU_MILLI, 2),
                                               "frag_ratio_pct": None if c.frag_ratio is None
                                               else round(100 * c.frag_ratio, 2)} for c in checkpoints},
        "at_100pct_arrived": None if at_full is None else {
            "index": at_full.index, "arrived_pct": round(100 * at_full.arrived_milli / gpu_capacity_milli, 2),
            "allocated_pct": round(100 * at_full.allocated_milli / gpu_capacity_milli, 2),
            "unallocated_gpus": round((gpu_capacity_milli - at_full.allocated_milli) / GPU_MILLI, 3),
            "reached": at_full.arrived_milli >= gpu_capacity_milli},
        "end": {"arrived_pct": round(100 * arrived[-1] / gpu_capacity_milli, 2) if gpu_capacity_milli else None,
                "allocated_pct": round(100 * gpu[-1] / gpu_capacity_milli, 2) if gpu_capacity_milli else None,
                "unallocated_gpus": round((gpu_capacity_milli - gpu[-1]) / GPU_MILLI, 3),
                "cpu_allocated_pct": round(100 * cpu[-1] / cpu_capacity_milli, 2) if cpu_capacity_milli else None,
                "memory_allocated_pct": round(100 * mem[-1] / memory_capacity_mib, 2) if memory_capacity_mib else None},
        "first_failure": None if first is None else {
            "index": first.index, "pod": first.trace_name, "kind": first.kind,
            "arrived_pct": round(first_pct or 0.0, 2), "reason": reason_class(first.reason) if first.verdict != NO_VERDICT
            else "no verdict in time"},
        "never_ran": {k: dict(v.most_common()) for k, v in reasons.items() if v},
        "scheduler": {"verdicts_per_s": round(len(records) / seconds, 2), "replay_s": round(seconds, 1),
                      "latency_ms": {"bound": {"p50": _pctile(lat_bound, 50), "p90": _pctile(lat_bound, 90),
                                               "p99": _pctile(lat_bound, 99)},
                                     "unschedulable": {"p50": _pctile(lat_failed, 50), "p99": _pctile(lat_failed, 99)}}},
        "checks": {
            "allocated_equals_arrived_before_first_failure": {
                "max_deviation_pts": round(deviation, 3), "tolerance_pts": DIAGONAL_TOLERANCE,
                "passed": deviation <= DIAGONAL_TOLERANCE, "pods": len(before),
                "curve_max_deviation_pts": round(curve_deviation, 3)},
            "pods_per_kind_equal_trace": None if trace_kinds is None else {
                "replay": {k: original.get(k, 0) for k in KINDS}, "trace": trace_kinds,
                "passed": all(original.get(k, 0) == trace_kinds.get(k, 0) for k in KINDS)},
            "allocation_equals_apiserver": None if theirs is None else {
                "replay_gpu_milli": ours, "apiserver_gpu_milli": theirs, "passed": ours == theirs,
                "apiserver": apiserver},
        },
    }


# ------------------------------------------------------------------------------------- the timed replay
#: points of a timed replay's series: one at each whole percent of its duration
SERIES_POINTS = 101
DELETED_PENDING = "deleted before the scheduler bound it (no Unschedulable verdict yet)"


def _quantiles_ms(values: list[float]) -> dict[str, Any]:
    """Count, p50, p90, p99 (nearest rank on the sorted values: an observed value) and max, in ms."""
    def r(v: float | None) -> float | None:
        return None if v is None else round(float(v), 1)

    return {"count": len(values), "p50": r(_pctile(values, 50)), "p90": r(_pctile(values, 90)),
            "p99": r(_pctile(values, 99)), "max": r(max(values) if values else None)}


Interval = tuple[float, float, int]


def _sweep(intervals: Sequence[Interval], t0: float, t1: float) -> tuple[int, float, float]:
    """Over ``[t0, t1]``: the largest sum of the weights of the intervals ``[start, end)`` open at once,
    when it was first reached, and the time-weighted mean of that sum (exact, not sampled)."""
    changes: dict[float, int] = {}
    for start, end, w in intervals:
        s, e = max(start, t0), min(end, t1)
        if e > s and w:
            changes[s] = changes.get(s, 0) + w
            changes[e] = changes.get(e, 0) - w
    level, peak, peak_at, area, last = 0, 0, t0, 0.0, t0
    for t in sorted(changes):
        area += level * (t - last)
        level += changes[t]
        last = t
        if level > peak:
            peak, peak_at = level, t
    area += level * (t1 - last)
    return peak, peak_at, area / (t1 - t0) if t1 > t0 else 0.0


def _at(intervals: Sequence[Interval], t: float) -> int:
    return sum(w for s, e, w in intervals if s <= t < e)


def timed_figures(records: Sequence[TimedRecord], gpu_capacity_milli: int, apiserver: dict[str, int] | None,
                  gpu_mode: str, started_ms: float, ended_ms: float, schedule: dict[str, Any],
                  stopped: bool = False) -> dict[str, Any]:
    """A timed replay's figures (:mod:`hollowscale.replay.timed`) as a JSON-able mapping: pending time
    (creation to bound, the client's clock) per QoS class, pods never bound per QoS class and kind with the
    scheduler's reasons, the pods pending as unschedulable, pending and running and the GPU allocation over
    time (a series at each whole percent of the replay, the peaks and means exact), the replay's own
    timing, and its checks (every pod created and deleted; the GPUs the harness's account still holds at the
    end equal what the API server's objects say)."""
    never = float("inf")
    t0 = started_ms
    t1 = max([ended_ms, t0, *(r.deleted_ms or t0 for r in records)])
    qos_names = sorted({r.qos or "(none)" for r in records})
    pending: dict[str, list[float]] = {q: [] for q in qos_names}
    never_bound: dict[str, dict[str, dict[str, Any]]] = {}
    for r in records:
        q = r.qos or "(none)"
        if r.bound_ms is not None and r.created_ms is not None:
            pending[q].append(max(0.0, r.bound_ms - r.created_ms))
            continue
        why = (f"create failed: {r.create_error}" if r.create_error else "never created (stopped)"
               if r.created_ms is None else reason_class(r.reason) if r.unschedulable_events else DELETED_PENDING)
        entry = never_bound.setdefault(q, {}).setdefault(r.kind, {"pods": 0, "reasons": Counter()})
        entry["pods"] += 1
        entry["reasons"][why] += 1
    created = [r for r in records if r.created_ms is not None]
    unsched: list[Interval] = [(r.unschedulable_ms, r.pending_end_ms or never, 1) for r in records
                               if r.unschedulable_ms is not None]
    waiting: list[Interval] = [(r.created_ms or 0.0, r.pending_end_ms or never, 1) for r in created]
    running: list[Interval] = [(r.bound_ms, r.deleted_ms or never, 1) for r in records if r.bound_ms is not None]
    gpu: list[Interval] = [(r.bound_ms, r.deleted_ms or never, r.gpu_milli) for r in records
                           if r.bound_ms is not None]
    times = [t0 + (t1 - t0) * k / (SERIES_POINTS - 1) for k in range(SERIES_POINTS)]
    u_peak, u_at, u_mean = _sweep(unsched, t0, t1)
    g_peak, _, g_mean = _sweep(gpu, t0, t1)
    cap = gpu_capacity_milli or 1
    lags = [r.create_lag_s for r in records if r.create_lag_s is not None]
    dlags = [r.delete_lag_s for r in records if r.delete_lag_s is not None]
    held = sum(r.gpu_milli for r in records if r.bound_ms is not None and r.deleted_ms is None)
    theirs = None
    if apiserver is not None:
        theirs = apiserver["counted_gpu_milli"] if gpu_mode == "counted" else apiserver["claim_shares_milli"]
    deleted = sum(1 for r in created if r.deleted_ms is not None)
    gone = sum(1 for r in created if r.gone_ms is not None)
    return {
        "protocol": "timed",
        "gpu_mode": gpu_mode,
        "schedule": schedule,
        "capacity": {"gpus": gpu_capacity_milli // GPU_MILLI, "gpu_milli": gpu_capacity_milli},
        "pods": {"total": len(records), "created": len(created), "bound": sum(len(v) for v in pending.values()),
                 "never_bound": len(records) - sum(len(v) for v in pending.values()),
                 "unschedulable_ever": len(unsched), "deleted": deleted, "gone": gone,
                 "cut_at_window_end": sum(r.cut for r in records), "create_failed": sum(bool(r.create_error)
                                                                                        for r in records),
                 "by_qos": {q: sum(1 for r in records if (r.qos or "(none)") == q) for q in qos_names}},
        "pending_ms": {q: _quantiles_ms(v) for q, v in pending.items()},
        "never_bound": {q: {k: {"pods": e["pods"], "reasons": dict(e["reasons"].most_common())}
                            for k, e in sorted(kinds.items(), key=lambda kv: KINDS.index(kv[0]))}
                        for q, kinds in sorted(never_bound.items())},
        "unschedulable": {"peak": u_peak, "peak_at_s": round((u_at - t0) / 1000, 3) if u_peak else None,
                          "mean": round(u_mean, 3)},
        "gpu_allocation": {"peak_milli": g_peak, "max_pct": round(100 * g_peak / cap, 3),
                           "mean_pct": round(100 * g_mean / cap, 3)},
        "series": {"t_s": [round((t - t0) / 1000, 3) for t in times],
                   "unschedulable": [_at(unsched, t) for t in times],
                   "pending": [_at(waiting, t) for t in times],
                   "running": [_at(running, t) for t in times],
                   "gpu_allocated_pct": [round(100 * _at(gpu, t) / cap, 3) for t in times]},
        "timing": {"replay_s": round((t1 - t0) / 1000, 3), "planned_s": schedule.get("duration_s"),
                   "late_threshold_ms": round(1000 * LATE_S), "late_creates": sum(1 for v in lags if v > LATE_S),
                   "create_lag_ms": _quantiles_ms([1000 * v for v in lags]),
                   "late_deletes": sum(1 for v in dlags if v > LATE_S),
                   "delete_lag_ms": _quantiles_ms([1000 * v for v in dlags])},
        "checks": {
            "every_pod_created_and_deleted": {"pods": len(records), "created": len(created), "deleted": deleted,
                                              "gone": gone, "stopped": stopped,
                                              "passed": not stopped and len(created) == len(records)
                                              and deleted == len(created) and gone == len(created)},
            "allocation_equals_apiserver": None if theirs is None else {
                "replay_gpu_milli": held, "apiserver_gpu_milli": theirs, "passed": held == theirs,
                "apiserver": apiserver},
        },
    }
