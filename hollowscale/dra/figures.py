"""The DRA figures of a run, pure functions of the claim timeline, the pod timeline and the pools' devices.

* ``latency_ms``: claim created -> allocated (the scheduler's PreBind wrote ``status.allocation``) ->
  reserved (``reservedFor`` names a pod) -> the pod Running (the hollow kubelet prepared the claim and
  started the pod); and created -> Running; p50/p90/p99/max over claims, ms of client receive times.
* ``claims``: how many, by source (template, shared, extended), allocated, never allocated, still
  allocated at the end (integrity: none may be once its pods ended), released by the controller.
* over time (``series``, sampled every ``step_s``): GPUs allocated (distinct GPUs with at least one
  allocated device on them; a MIG device counts its GPU), GPU memory allocated (a whole device counts its
  memory, a share what it consumed), pods per busy GPU (running pods whose claims are on it), and
  fragmentation: GPUs partly used whose free memory no pending request fits (the smallest memory asked
  by a claim waiting at that moment; with none waiting, the smallest share the workloads ask: their
  "typical" request, as the GPU-sharing simulator does with its task mix).
* ``roles``: per ``workload/role`` the most pods running at once and their wait (created -> Running):
  how many teachers fit, how long the student and the online jobs waited.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hollow.dra import Device, pool_devices
from hollow.pools import PoolSpec
from hollowscale.dra.timeline import ClaimRecord
from hollowscale.measure.timeline import PodRecord

GIB = 2**30

SOURCES: dict[str, str] = {
    "latency_ms": "claim timeline (watch of resourceclaims, client receive times): created = first event; allocated = "
                  "first event with status.allocation; reserved = first with status.reservedFor; running = the pod "
                  "timeline's Running (the first pod of the claim for a shared claim)",
    "series": "sweep over the claims' allocation intervals and the pods' running intervals, sampled every "
              "sample_interval_s: GPUs allocated = distinct GPUs with >= 1 allocated device (a MIG device counts its "
              "GPU); memory = a whole device's memory or a share's consumedCapacity; pods per GPU = running pods "
              "whose claims are on the GPU, over busy GPUs; fragmented = partly used GPUs whose free memory is below "
              "the smallest memory request pending at that moment (none pending: the smallest the workloads ask)",
    "roles": "pod timeline: most pods of a workload/role Running at once; wait = created -> Running",
}


def quantiles(values: Sequence[float]) -> dict[str, float | None]:
    """p50/p90/p99/max (nearest rank) and the count."""
    if not values:
        return {"count": 0, "p50": None, "p90": None, "p99": None, "max": None}
    v = sorted(values)

    def q(p: float) -> float:
        return round(v[min(len(v) - 1, max(0, math.ceil(p * len(v)) - 1))], 3)

    return {"count": len(v), "p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": round(v[-1], 3)}


@dataclass(frozen=True)
class DeviceInfo:
    """What a figure needs of a device: the GPU it is on (``node/gpu-i``) and its memory."""

    gpu: str
    memory: int


def device_catalogue(pools: Sequence[PoolSpec]) -> Callable[[str], DeviceInfo | None]:
    """``"node/device"`` -> :class:`DeviceInfo`, from the pools' rendering (a node is ``<pool>-<index>``)."""
    per_pool: dict[str, dict[str, Device]] = {}
    for p in pools:
        if p.dra is not None:
            per_pool[p.name] = {d.name: d for d in pool_devices(p.dra, p.gpu_count, p.first_ordinal)}
    names = sorted(per_pool, key=len, reverse=True)

    def lookup(key: str) -> DeviceInfo | None:
        node, _, device = key.partition("/")
        for name in names:
            if node.startswith(name + "-") and node[len(name) + 1:].isdigit():
                d = per_pool[name].get(device)
                if d is None:
                    return None
                return DeviceInfo(f"{node}/{d.parent or d.name}", d.memory_bytes)
        return None

    return lookup


def latency(claims: Sequence[ClaimRecord], pods: dict[str, PodRecord]) -> dict[str, Any]:
    """The claim's steps, ms (see the module doc)."""
    steps: dict[str, list[float]] = {"created_to_allocated": [], "allocated_to_reserved": [], "reserved_to_running": [],
                                     "created_to_running": []}
    for c in claims:
        if c.allocated_ms is not None:
            steps["created_to_allocated"].append(max(0.0, c.allocated_ms - c.created_ms))
            if c.reserved_ms is not None:
                steps["allocated_to_reserved"].append(max(0.0, c.reserved_ms - c.allocated_ms))
        users = [pods[u] for u in ([c.pod_uid] if c.pod_uid else c.reserved_pods) if u in pods]
        running = [p.running_ms for p in users if p.running_ms is not None]
        if running:
            first = min(running)
            if c.reserved_ms is not None:
                steps["reserved_to_running"].append(max(0.0, first - c.reserved_ms))
            steps["created_to_running"].append(max(0.0, first - c.created_ms))
    return {k: quantiles(v) for k, v in steps.items()}


def claim_counts(claims: Sequence[ClaimRecord]) -> dict[str, Any]:
    by_source = Counter(c.source for c in claims)
    return {
        "total": len(claims),
        "by_source": dict(sorted(by_source.items())),
        "allocated": sum(1 for c in claims if c.allocated_ms is not None),
        "never_allocated": sum(1 for c in claims if c.allocated_ms is None),
        "allocated_at_end": sum(1 for c in claims if c.allocated_now),
        "released": sum(1 for c in claims if c.released_ms is not None),
        "allocations": sum(c.allocations for c in claims),
        "max_pods_reserved": max((len(c.reserved_pods) for c in claims), default=0),
    }


def _pod_end(p: PodRecord, end_ms: float) -> float:
    ends = [t for t in (p.finished_ms, p.deleted_ms) if t is not None]
    return min(ends) if ends else end_ms


def usage_series(claims: Sequence[ClaimRecord], pods: dict[str, PodRecord], lookup: Callable[[str], DeviceInfo | None],
                 typical_memory: int, start_ms: float, end_ms: float, step_s: float) -> dict[str, list[Any]]:
    """GPUs and memory allocated, pods per busy GPU and fragmented GPUs over time (see the module doc)."""
    step = max(step_s, 0.1) * 1000.0
    times = [start_ms + i * step for i in range(int(max(0.0, end_ms - start_ms) // step) + 1)]
    out: dict[str, list[Any]] = {"t_s": [round((t - start_ms) / 1000.0, 3) for t in times], "gpus_allocated": [],
                                 "memory_allocated_gib": [], "pods_per_gpu": [], "pods_per_gpu_max": [],
                                 "fragmented_gpus": [], "fragmented_memory_gib": [], "claims_pending": []}
    intervals = [(c, float(iv[0] or 0.0), float(iv[1]) if iv[1] is not None else math.inf)
                 for c in claims for iv in c.intervals]
    pod_run = {u: (p.running_ms, _pod_end(p, math.inf)) for u, p in pods.items() if p.running_ms is not None}
    pending = [(c.created_ms, c.allocated_ms if c.allocated_ms is not None else
                (c.deleted_ms if c.deleted_ms is not None else math.inf), c) for c in claims]
    infos: dict[str, DeviceInfo | None] = {}
    for t in times:
        used: dict[str, int] = {}
        memory: dict[str, int] = {}
        pods_on: dict[str, set[str]] = {}
        for c, lo, hi in intervals:
            if not lo <= t < hi:
                continue
            users = [u for u in ([c.pod_uid] if c.pod_uid else c.reserved_pods)
                     if u in pod_run and pod_run[u][0] <= t < pod_run[u][1]]
            for k, key in enumerate(c.devices):
                info = infos[key] if key in infos else infos.setdefault(key, lookup(key))
                if info is None:
                    continue
                share = c.consumed[k] if k < len(c.consumed) and c.consumed[k] else 0
                used[info.gpu] = used.get(info.gpu, 0) + (share or info.memory)
                if info.gpu not in memory:
                    parent = infos[info.gpu] if info.gpu in infos else infos.setdefault(info.gpu, lookup(info.gpu))
                    memory[info.gpu] = parent.memory if parent is not None else info.memory
                pods_on.setdefault(info.gpu, set()).update(users)
        waiting = [c for lo, hi, c in pending if lo <= t < hi]
        smallest = min((c.memory_request or math.inf for c in waiting), default=typical_memory or math.inf)
        frag = [g for g, u in used.items() if 0 < memory[g] - u < smallest]
        busy = [len(v) for v in pods_on.values()]
        out["gpus_allocated"].append(len(used))
        out["memory_allocated_gib"].append(round(sum(used.values()) / GIB, 3))
        out["pods_per_gpu"].append(round(sum(busy) / len(busy), 3) if busy else 0.0)
        out["pods_per_gpu_max"].append(max(busy, default=0))
        out["fragmented_gpus"].append(len(frag))
        out["fragmented_memory_gib"].append(round(sum(memory[g] - used[g] for g in frag) / GIB, 3))
        out["claims_pending"].append(len(waiting))
    return out


def _avg_max(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"avg": None, "max": None}
    return {"avg": round(sum(values) / len(values), 3), "max": round(max(values), 3)}


def role_figures(pods: Sequence[PodRecord], end_ms: float) -> dict[str, Any]:
    """Per ``workload/role``: the most pods Running at once and the wait (created -> Running), seconds."""
    by: dict[str, list[PodRecord]] = {}
    for p in pods:
        if p.workload:
            by.setdefault(f"{p.workload}/{p.role}", []).append(p)
    out: dict[str, Any] = {}
    for key, group in sorted(by.items()):
        events = sorted([(p.running_ms, 1) for p in group if p.running_ms is not None]
                        + [(_pod_end(p, end_ms), -1) for p in group if p.running_ms is not None])
        running = peak = 0
        for _, step in events:
            running += step
            peak = max(peak, running)
        waits = [(p.running_ms - p.created_ms) / 1000.0 for p in group if p.running_ms is not None]
        out[key] = {"pods": len(group), "running_max": peak, "never_ran": sum(1 for p in group if p.running_ms is None),
                    "wait_s": quantiles(waits)}
    return out


def dra_measurements(claims: Sequence[ClaimRecord], pods: Sequence[PodRecord], pools: Sequence[PoolSpec],
                     typical_memory: int, start_ms: float, end_ms: float, step_s: float) -> dict[str, Any]:
    """``measurements.dra`` and its series (``{"measurements", "series"}``)."""
    by_uid = {p.uid: p for p in pods}
    series = usage_series(claims, by_uid, device_catalogue(pools), typical_memory, start_ms, end_ms, step_s)
    m: dict[str, Any] = {
        "claims": claim_counts(claims),
        "latency_ms": latency(claims, by_uid),
        "gpus_allocated": _avg_max(series["gpus_allocated"]),
        "gpu_memory_allocated_gib": _avg_max(series["memory_allocated_gib"]),
        "pods_per_gpu": {"avg": _avg_max([v for v in series["pods_per_gpu"] if v])["avg"],
                         "max": max(series["pods_per_gpu_max"], default=0)},
        "fragmented_gpus": _avg_max(series["fragmented_gpus"]),
        "fragmented_memory_gib": _avg_max(series["fragmented_memory_gib"]),
        "roles": role_figures(pods, end_ms),
    }
    return {"measurements": m, "series": series}
