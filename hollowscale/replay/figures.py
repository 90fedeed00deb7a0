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
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from hollowscale.replay.driver import BOUND, NO_VERDICT, Checkpoint, PodRecord
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
