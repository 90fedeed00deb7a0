"""How fragmented the free GPUs were over the run, sampled from the pod timeline afterwards (a pure sweep).

At each sample ``t`` (every ``step_s`` from the load's start):

* a node's **free GPUs** are its allocatable ``nvidia.com/gpu`` (the Node object) less the GPUs of the run's
  pods bound to it at ``t`` (``spec.nodeName`` seen, not yet finished or deleted); a node that is not
  Ready or carries a NoSchedule/NoExecute taint (at the end of the run) has none free;
* per level: **whole free domains** (every node of the domain usable and nothing of the run bound on it:
  whole free racks) and the **largest free domain** (the most free GPUs inside one domain);
* the **next waiting gang**: of the gangs waiting at ``t`` (from their Kueue Workload's creation, else
  their first pod's, until their last member was bound), the one waiting longest; it needs its members
  not yet bound, each member's GPUs on one node, all inside one domain of the level its workload's
  ``topology.level`` names (the cluster when it names none: the same yardstick in every variant, whatever
  the variant asks the scheduler).  A domain can host it when the members fit its nodes' free GPUs
  (best fit, largest member first: exact when the members ask the same);
* **free but unusable**: the free GPUs of the domains that cannot host the next waiting gang, and of
  nodes outside every domain of its level; None when no gang waits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hollowscale.measure.timeline import PodRecord
from hollowscale.topology.levels import PoolLevels, domain
from hollowscale.topology.timeline import GangAdmission, Member, NodePlace, pod_end

SOURCE = ("sweep over the pod timeline (spec.nodeName, finished/deleted) and the Nodes (allocatable nvidia.com/gpu, "
          "labels, Ready and taints at the end), every sample_interval_s: free = allocatable - GPUs of bound pods "
          "(0 on unusable nodes); whole free = every node of the domain usable and empty; largest = most free GPUs "
          "in one domain; unusable = free GPUs in domains (at the level the next waiting gang's workload names; "
          "the cluster when none) its unbound members do not fit whole (best fit decreasing), the next gang = the "
          "one waiting longest (Kueue Workload or first pod created -> last member bound)")


@dataclass(frozen=True)
class WaitingGang:
    """A gang from its creation until its last member was bound, and what it asks."""

    key: str
    since_ms: float
    until_ms: float  # math.inf: never all bound
    level: str | None  # its workload's topology level; None: anywhere in the cluster
    demand: tuple[float, ...]  # GPUs of each member
    bound: tuple[tuple[float, float], ...]  # (GPUs, bound at ms) of its members bound at some time


def waiting_gangs(ms: Sequence[Member], admissions: Sequence[GangAdmission],
                  level_of: Mapping[str, str]) -> list[WaitingGang]:
    """The gangs of the run with their waiting intervals (``level_of``: workload name -> topology level)."""
    groups: dict[tuple[str, str], list[Member]] = {}
    for m in ms:
        groups.setdefault(m.key, []).append(m)
    adm = {(a.namespace, a.gang): a for a in admissions}
    out: list[WaitingGang] = []
    for key in sorted(set(groups) | set(adm)):
        group = groups.get(key, [])
        a = adm.get(key)
        starts = [m.created_at for m in group if m.created_at is not None]
        if a is not None and a.created_at is not None:
            starts.append(a.created_at)
        if not starts:
            continue
        demand = a.member_gpus if a is not None and a.member_gpus else tuple(m.gpus for m in group)
        bound = tuple((m.gpus, m.scheduled_ms) for m in group if m.scheduled_ms is not None)
        done = bool(group) and len(bound) == len(group) and len(group) >= len(demand)
        workload = (group[0].workload if group else a.workload if a is not None else "")
        out.append(WaitingGang(key=f"{key[0]}/{key[1]}", since_ms=min(starts) * 1000.0,
                               until_ms=max(t for _, t in bound) if done else math.inf,
                               level=level_of.get(workload), demand=demand, bound=bound))
    return out


def fits(free: Sequence[float], demand: Sequence[float]) -> bool:
    """Whether every member (its GPUs on one node) fits the nodes' free GPUs: best fit, largest first."""
    left = sorted(free)
    for need in sorted(demand, reverse=True):
        i = next((k for k, f in enumerate(left) if f >= need - 1e-9), None)
        if i is None:
            return False
        left[i] -= need
        left.sort()
    return True


def _remaining(g: WaitingGang, t: float) -> list[float]:
    """The GPUs of the members not bound at ``t`` (one demand entry taken per member bound)."""
    rest = list(g.demand)
    for gpus, at in g.bound:
        if at <= t and gpus in rest:
            rest.remove(gpus)
    return rest


def _stats(values: Sequence[float | None]) -> dict[str, Any]:
    xs = [v for v in values if v is not None]
    if not xs:
        return {"avg": None, "min": None, "max": None, "samples": 0}
    return {"avg": round(sum(xs) / len(xs), 3), "min": round(min(xs), 3), "max": round(max(xs), 3),
            "samples": len(xs)}


def fragmentation(pods: Sequence[PodRecord], nodes: Mapping[str, NodePlace], levels: PoolLevels,
                  gangs: Sequence[WaitingGang], start_ms: float, end_ms: float, step_s: float
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(measurements, series) of the module doc over [start_ms, end_ms]."""
    names = levels.names()
    step = max(step_s, 0.1) * 1000.0
    times = [start_ms + i * step for i in range(int(max(0.0, end_ms - start_ms) // step) + 1)]
    domains: dict[str, dict[tuple[str, ...], list[str]]] = {name: {} for name in names}
    for node in sorted(nodes):
        lv = levels.levels(node)
        for name in names:
            path = domain(lv, nodes[node].labels, name)
            if path is not None:
                domains[name].setdefault(path, []).append(node)
    events = sorted([(p.scheduled_ms, p.node, p.gpus) for p in pods if p.node and p.scheduled_ms is not None
                     and p.gpus] + [(pod_end(p), p.node, -p.gpus) for p in pods if p.node and p.scheduled_ms
                                    is not None and p.gpus and pod_end(p) is not None],
                    key=lambda e: (e[0], e[2]))
    used: dict[str, float] = {}
    series: dict[str, Any] = {"t_s": [], "free_gpus": [], "unusable_gpus": [], "waiting_gangs": [],
                              "whole_free": {n: [] for n in names}, "largest_free_gpus": {n: [] for n in names}}
    k = 0
    for t in times:
        while k < len(events) and events[k][0] <= t:  # type: ignore[operator]
            _, node, d = events[k]
            used[node] = used.get(node, 0.0) + d
            k += 1
        free = {n: (max(p.gpus - used.get(n, 0.0), 0.0) if p.usable else 0.0) for n, p in nodes.items()}
        series["t_s"].append(round((t - start_ms) / 1000.0, 3))
        series["free_gpus"].append(round(sum(free.values()), 3))
        for name in names:
            doms = domains[name].values()
            series["whole_free"][name].append(sum(1 for members in doms if all(
                nodes[n].usable and used.get(n, 0.0) <= 1e-9 for n in members)))
            series["largest_free_gpus"][name].append(round(max((sum(free[n] for n in members) for members in doms),
                                                               default=0.0), 3))
        waiting = sorted((g for g in gangs if g.since_ms <= t < g.until_ms), key=lambda g: (g.since_ms, g.key))
        series["waiting_gangs"].append(len(waiting))
        series["unusable_gpus"].append(_unusable(waiting[0], t, free, domains) if waiting else None)
    measurements = {
        "free_gpus": _stats(series["free_gpus"]),
        "unusable_gpus": _stats(series["unusable_gpus"]),
        "samples_with_a_gang_waiting": sum(1 for v in series["unusable_gpus"] if v is not None),
        "whole_free_domains": {n: _stats(series["whole_free"][n]) for n in names},
        "largest_free_domain_gpus": {n: _stats(series["largest_free_gpus"][n]) for n in names},
        "domains": {n: len(domains[n]) for n in names},
        "unusable_nodes": sorted(n for n, p in nodes.items() if not p.usable)[:20],
        "unusable_node_count": sum(1 for p in nodes.values() if not p.usable),
    }
    return measurements, series


def _unusable(g: WaitingGang, t: float, free: Mapping[str, float],
              domains: Mapping[str, Mapping[tuple[str, ...], list[str]]]) -> float:
    """Free GPUs the gang cannot use at ``t`` (see the module doc)."""
    need = _remaining(g, t)
    groups = list(domains[g.level].values()) if g.level is not None and g.level in domains else [sorted(free)]
    lost = 0.0
    for members in groups:
        if not fits([free[n] for n in members], need):
            lost += sum(free[n] for n in members)
    inside = {n for members in groups for n in members}
    lost += sum(v for n, v in free.items() if n not in inside)
    return round(lost, 3)
