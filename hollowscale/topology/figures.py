"""Where each gang landed and what its placement cost, pure functions of the records of
:mod:`hollowscale.topology.timeline`.

* **per gang** (pods labelled ``hollowscale.io/gang``, per namespace): the distinct domains its members'
  nodes span at each level (hosts, racks, blocks, ...), and the level that holds it
  (:func:`hollow.topology.spanned_level` over the Nodes' labels: the smallest level one of whose domains
  holds every member's node; ``cluster`` when none does).  A gang counts as *placed* once every pod of its
  latest placement was bound.  A gang evicted and placed again (more pods than its ``gang-min``) is judged
  by its latest placement, the pods still listed at the end (:func:`hollowscale.topology.timeline.latest_placement`); the earlier pods
  are counted as ``earlier_members`` and still count in the GPU-hours below;
* **within one domain**: the share of placed gangs inside one domain of that level (their own level is
  it or a finer one: a gang inside one rack is inside one block too);
* **GPU-hours lost to spread**: per gang member that ran, GPUs x its run time (Running -> finished, or the
  end of the window) x (1 - 1/factor), the factor from the hollow agent's
  :data:`hollow.topology.SPREAD_CONDITION` (the run time it applied was the drawn duration x factor, so
  1/factor of it was the work); a member without the condition (gone before the end) takes the factor of
  the level its nodes show.  **Mismatches**: members whose condition names another level than the one
  computed from the Node labels (the agent's view of the gang at its barrier against the API's);
* **admission** (Kueue Workloads): created -> ``QuotaReserved`` and -> ``Admitted`` (the conditions'
  times); **created -> all bound**: the gang's Workload created (its first pod's creation without Kueue)
  -> the last member's ``PodScheduled`` time, all on the apiserver's clock (whole seconds), over the gangs
  whose pods all still exist at the end.  The client-clock steps of the batch figures
  (``batch.job_steps_s``: created -> admitted by the Job's unsuspend, admitted -> all bound) are not
  computed again: the summary refers to them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from hollow.pools import CLUSTER, PoolSpec
from hollow.topology import spanned_level
from hollowscale.measure.derive import pcts
from hollowscale.measure.timeline import PodRecord
from hollowscale.topology.fragmentation import SOURCE as FRAGMENTATION_SOURCE
from hollowscale.topology.fragmentation import fragmentation, waiting_gangs
from hollowscale.topology.levels import Levels, PoolLevels, domain, inside
from hollowscale.topology.throughput import SOURCE as THROUGHPUT_SOURCE
from hollowscale.topology.throughput import gang_runs, throughput_decomposition
from hollowscale.topology.timeline import (
    GangAdmission,
    Member,
    NodePlace,
    latest_placement,
    members,
    node_places,
    workload_admissions,
)

#: gangs listed by name in summary.json (the counts cover all)
LISTED_GANGS = 50
#: mismatches named in summary.json
NAMED_MISMATCHES = 10

SOURCES: dict[str, str] = {
    "gangs": "pods of the run labelled hollowscale.io/gang (the pod timeline: spec.nodeName) and the Nodes' labels "
             "(a LIST at the end): distinct domains per level (a domain = the label values from the top level "
             "down); level = hollow.topology.spanned_level; placed = every pod of the gang bound",
    "within_one_domain_pct": "placed gangs whose level is that level or finer (inside one of its domains), over placed gangs",
    "spread": "per gang member that ran: GPUs x (end or window end - Running) x (1 - 1/factor); factor from the pod "
              "condition hollowscale.io/TopologySpread (LIST at the end), else the pool's spread factor of the level "
              "the Node labels give; mismatches = members whose condition's level differs from the Node labels' one",
    "admission_s": "Kueue Workloads (LIST at the end, apiserver clock, whole seconds): QuotaReserved / Admitted "
                   "condition lastTransitionTime - creationTimestamp, nearest rank",
    "created_to_all_bound_s": "apiserver clock: the gang's Workload creationTimestamp (else its first pod's) -> the "
                              "last member's PodScheduled lastTransitionTime, gangs whose pods all exist at the end",
    "fragmentation": FRAGMENTATION_SOURCE,
    "throughput": THROUGHPUT_SOURCE,
}


def _r(v: float | None, nd: int = 3) -> float | None:
    return None if v is None else round(v, nd)


def gangs_of(ms: Sequence[Member]) -> dict[tuple[str, str], list[Member]]:
    """Members by (namespace, gang), in a stable order."""
    out: dict[tuple[str, str], list[Member]] = {}
    for m in sorted(ms, key=lambda m: (m.namespace, m.gang, m.uid)):
        out.setdefault(m.key, []).append(m)
    return out


def slices_whole(lv: Levels, labels: Sequence[Mapping[str, str]], slice_level: str, size: int) -> bool:
    """Whether the members on nodes of ``labels`` (one entry per member) can form slices of ``size`` pods, each
    inside one ``slice_level`` domain: every such domain holds a multiple of ``size`` of them (Kueue's
    ``podset-slice-required-topology``; Kueue does not say which pod is in which slice, so this is the check
    the Node labels allow)."""
    counts = Counter(domain(lv, lab, slice_level) for lab in labels)
    return size > 0 and None not in counts and all(c % size == 0 for c in counts.values())


def gang_placements(ms: Sequence[Member], nodes: Mapping[str, NodePlace], levels: PoolLevels,
                    slices_of: Mapping[str, tuple[str, int]] | None = None) -> list[dict[str, Any]]:
    """One row per gang: members, placed, the domains spanned per level, its level, and whether its slices
    are whole (``slices_of``: workload name -> (slice level, slice size); None for a workload without)."""
    rows: list[dict[str, Any]] = []
    for (ns, gang), every in gangs_of(ms).items():
        group = latest_placement(every)
        bound = sorted({m.node for m in group if m.node})
        placed = bool(bound) and all(m.node for m in group)
        lv = levels.levels(bound[0]) if bound else ()
        labels = [nodes[n].labels if n in nodes else {} for n in bound]
        spans: dict[str, int] = {}
        for name, _ in lv:
            paths = {domain(lv, lab, name) for lab in labels}
            spans[name] = len(paths) if None not in paths else 0
        level = spanned_level(lv, labels) if bound else None
        said = Counter(m.spread_level for m in group if m.spread_level is not None)
        spec = (slices_of or {}).get(group[0].workload)
        whole = None
        if spec is not None and placed:
            member_labels = [nodes[m.node].labels if m.node in nodes else {} for m in group]
            whole = slices_whole(lv, member_labels, *spec)
        rows.append({"gang": f"{ns}/{gang}", "workload": group[0].workload, "members": len(group),
                     "earlier_members": len(every) - len(group),
                     "gpus": sum(m.gpus for m in group), "placed": placed, "nodes": len(bound),
                     "domains": spans, "level": level, "inside": inside(lv, level) if level else [],
                     "condition_level": said.most_common(1)[0][0] if said else None,
                     "mismatched_members": sum(1 for m in group if m.spread_level is not None and m.node
                                               and m.spread_level != level),
                     "slices_whole": whole})
    return rows


def placement_figures(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """Counts by level, the share within one domain of each level, the domains spanned per level."""
    placed = [r for r in rows if r["placed"]]
    by_level = Counter(r["level"] for r in placed)
    within = {name: _r(100.0 * sum(1 for r in placed if name in r["inside"]) / len(placed)) if placed else None
              for name in names}
    spans = {name: pcts([float(r["domains"][name]) for r in placed if r["domains"].get(name)], (50, 99))
             for name in names}
    for name in names:
        spans[name]["max"] = max((r["domains"].get(name, 0) for r in placed), default=None)
    sliced = [r for r in placed if r.get("slices_whole") is not None]
    return {"gangs": len(rows), "placed": len(placed), "placed_again": sum(1 for r in rows if r["earlier_members"]),
            "slices_whole_pct": _r(100.0 * sum(1 for r in sliced if r["slices_whole"]) / len(sliced)) if sliced
            else None, "sliced_gangs": len(sliced),
            "by_level": dict(sorted(by_level.items())),
            "within_one_domain_pct": within, "domains_spanned": spans,
            "listed": [{k: r[k] for k in ("gang", "workload", "members", "gpus", "nodes", "domains", "level",
                                          "condition_level")} for r in placed[:LISTED_GANGS]]}


def spread_figures(ms: Sequence[Member], rows: Sequence[dict[str, Any]], levels: PoolLevels,
                   end_ms: float) -> dict[str, Any]:
    """GPU-hours lost to spread (by level) and the condition/Node-label mismatches (see the module doc)."""
    level_of = {r["gang"]: r["level"] for r in rows}
    lost: dict[str, float] = {}
    total_h = lost_h = 0.0
    from_condition = from_labels = no_factor = 0
    mismatched: list[str] = []
    gangs_mismatched: set[str] = set()
    for m in ms:
        if m.running_ms is None or not m.node:
            continue
        key = f"{m.namespace}/{m.gang}"
        level = level_of.get(key)
        hours = m.gpus * max((m.end_ms if m.end_ms is not None else end_ms) - m.running_ms, 0.0) / 3_600_000.0
        total_h += hours
        factor = m.spread_factor
        if factor is not None:
            from_condition += 1
        elif level is not None:
            factor = levels.factor(m.node, level)
            from_labels += factor is not None
        if factor is None or factor <= 0:
            no_factor += 1
            continue
        part = hours * (1.0 - 1.0 / factor)
        lost_h += part
        named = m.spread_level if m.spread_factor is not None and m.spread_level else (level or CLUSTER)
        lost[named] = lost.get(named, 0.0) + part
        if m.spread_level is not None and level is not None and m.spread_level != level:
            gangs_mismatched.add(key)
            if len(mismatched) < NAMED_MISMATCHES:
                mismatched.append(f"{key} {m.uid}: condition {m.spread_level}, node labels {level}")
    return {"gpu_hours_lost": _r(lost_h, 4), "gpu_hours_run": _r(total_h, 4),
            "lost_pct": _r(100.0 * lost_h / total_h) if total_h else None,
            "gpu_hours_lost_by_level": {k: _r(v, 4) for k, v in sorted(lost.items())},
            "members_ran": from_condition + from_labels + no_factor, "factor_from_condition": from_condition,
            "factor_from_node_labels": from_labels, "no_factor": no_factor,
            "mismatches": {"members": sum(r["mismatched_members"] for r in rows), "gangs": len(gangs_mismatched),
                           "examples": mismatched}}


def admission_figures(admissions: Sequence[GangAdmission], ms: Sequence[Member]) -> dict[str, Any]:
    """Kueue's admission times and created -> all bound, on the apiserver's clock (see the module doc)."""
    qr = [a.quota_reserved_at - a.created_at for a in admissions
          if a.quota_reserved_at is not None and a.created_at is not None]
    ad = [a.admitted_at - a.created_at for a in admissions if a.admitted_at is not None and a.created_at is not None]
    created = {(a.namespace, a.gang): a.created_at for a in admissions if a.created_at is not None}
    bound: list[float] = []
    incomplete = 0
    for key, group in gangs_of(ms).items():
        if not all(m.listed for m in group):
            incomplete += 1
            continue
        times = [m.scheduled_at for m in group if m.scheduled_at is not None]
        start = created.get(key, min((m.created_at for m in group if m.created_at is not None), default=None))
        if len(times) < len(group) or start is None:
            continue
        bound.append(max(max(times) - start, 0.0))
    return {"workloads": len(admissions),
            "quota_reserved_s": pcts([max(v, 0.0) for v in qr], (50, 99)),
            "admitted_s": pcts([max(v, 0.0) for v in ad], (50, 99)),
            "not_admitted_at_end": sum(1 for a in admissions if a.admitted_at is None),
            "created_to_all_bound_s": pcts(bound, (50, 99)), "gangs_with_pods_gone": incomplete}


def topology_measurements(pods: Sequence[PodRecord], listed_pods: Sequence[Mapping[str, Any]],
                          node_objects: Sequence[Mapping[str, Any]], workload_objects: Sequence[Mapping[str, Any]],
                          pools: Sequence[PoolSpec], level_of: Mapping[str, str], start_ms: float, end_ms: float,
                          step_s: float, window_ms: tuple[float, float] | None = None,
                          slices_of: Mapping[str, tuple[str, int]] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``measurements.topology`` (without the Prometheus part) and its series, from the pod timeline and the
    objects listed at the end (``level_of``: workload name -> its ``topology.level``; ``window_ms``: the batch
    figures' window, which the jobs-per-hour decomposition shares; else [start_ms, end_ms]; ``slices_of``: workload
    name -> its (slice level, slice size))."""
    levels = PoolLevels(pools)
    nodes = node_places(node_objects, {t.key for p in pools for t in p.taints})
    ms = members(pods, listed_pods)
    admissions = workload_admissions(workload_objects)
    rows = gang_placements(ms, nodes, levels, slices_of)
    frag, series = fragmentation(pods, nodes, levels, waiting_gangs(ms, admissions, level_of), start_ms, end_ms,
                                 step_s)
    m: dict[str, Any] = {
        "levels": levels.names(),
        "placement": placement_figures(rows, levels.names()),
        "spread": spread_figures(ms, rows, levels, end_ms),
        "fragmentation": frag,
        "admission": admission_figures(admissions, ms),
        "members": {"total": len(ms), "gone_before_the_end": sum(1 for x in ms if not x.listed)},
        "throughput": throughput_decomposition(gang_runs(gangs_of(ms), levels, {r["gang"]: r["level"] for r in rows}),
                                               *(window_ms or (start_ms, end_ms))),
    }
    return m, series
