"""What the API server shows of a run's gangs and nodes, as records the figures read (no I/O here).

Three sources, joined once at the end of the run (before the teardown: the nodes, pods and Workloads
still exist):

* the run's pod timeline (:mod:`hollowscale.measure.timeline`, a watch of the run's pods): when each pod
  was bound (``spec.nodeName``), ran and ended, on which node, its gang (label ``hollowscale.io/gang``) and
  GPUs.  It is read, not watched again: a second pod watch would load the apiserver the run measures;
* a LIST of the run's pods at the end: the conditions the timeline does not keep, the hollow agent's
  :data:`hollow.topology.SPREAD_CONDITION` (reason = the level of the smallest domain that held the gang,
  message ``factor=<f>``) and ``PodScheduled``'s ``lastTransitionTime`` (the apiserver's clock); a pod gone
  before the end (evicted, preempted) keeps its timeline record and has no condition;
* a LIST of the Nodes (their labels: the topology levels' values; ``status.allocatable``'s GPUs; Ready and
  the NoSchedule/NoExecute taints other than those its pool declares: an unusable node's free GPUs are free
  for nobody) and of Kueue's
  Workloads (``creationTimestamp``, the ``QuotaReserved`` and ``Admitted`` conditions' times, the pod sets).

Server times are epoch seconds (the apiserver writes RFC 3339 to the second); the timeline's are the
harness's receive times in epoch ms.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hollow.topology import SPREAD_CONDITION
from hollowscale.measure.timeline import PodRecord
from kubecore.durations import parse_go_duration
from kubecore.quantity import parse_quantity
from loadgen.workloads import ANN_RUN, LABEL_GANG, LABEL_WORKLOAD

GPU = "nvidia.com/gpu"
#: Kueue's Workloads (the API version the run's Kueue serves: hollowscale/batch/objects.py KUEUE_API)
WORKLOADS_PATH = "/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads"
PODS_PATH = "/api/v1/namespaces/{ns}/pods"
NODES_PATH = "/api/v1/nodes"
_FACTOR = re.compile(r"factor=([0-9.]+)")


def server_time(value: Any) -> float | None:
    """An RFC 3339 time of the apiserver as epoch seconds (None when absent or unreadable)."""
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return dict(c)
    return None


@dataclass(frozen=True)
class NodePlace:
    """A node as placement sees it: its labels, GPUs, and whether anything may be placed on it."""

    name: str
    labels: Mapping[str, str]
    gpus: float
    usable: bool  # Ready, schedulable, no NoSchedule/NoExecute taint but those its pool declares


def node_places(nodes: Iterable[Mapping[str, Any]], declared: Collection[str] = ()) -> dict[str, NodePlace]:
    """Node name -> :class:`NodePlace`, from Node objects; ``declared``: the taint keys the pools put on their
    nodes on purpose (``nvidia.com/gpu`` on GPU nodes: the workloads tolerate them), which leave a node usable."""
    out: dict[str, NodePlace] = {}
    for n in nodes:
        meta = n.get("metadata") or {}
        name = meta.get("name")
        if not name:
            continue
        alloc = ((n.get("status") or {}).get("allocatable") or {}).get(GPU)
        ready = _condition(n, "Ready")
        taints = [t for t in (n.get("spec") or {}).get("taints") or ()
                  if t.get("effect") in ("NoSchedule", "NoExecute") and t.get("key") not in declared]
        usable = bool(ready and ready.get("status") == "True") and not taints and not (n.get("spec") or {}).get(
            "unschedulable")
        out[name] = NodePlace(name, dict(meta.get("labels") or {}), float(parse_quantity(alloc)) if alloc else 0.0,
                              usable)
    return out


@dataclass(frozen=True)
class Member:
    """One pod of a gang: the timeline's times (epoch ms) and the conditions of the LIST at the end."""

    uid: str
    namespace: str
    gang: str
    workload: str
    gpus: float
    gang_min: int | None
    node: str
    created_at: float | None  # creationTimestamp, epoch s (server)
    scheduled_ms: float | None
    running_ms: float | None
    end_ms: float | None  # finished or deleted, whichever first
    scheduled_at: float | None = None  # PodScheduled=True lastTransitionTime, epoch s (server); None: gone/unbound
    spread_level: str | None = None  # SPREAD_CONDITION's reason
    spread_factor: float | None = None  # from its message ``factor=<f>``
    listed: bool = False  # seen in the LIST at the end (False: gone before it)
    succeeded_ms: float | None = None  # when it finished with phase Succeeded (None: not, or not yet)
    run_s: float | None = None  # its run-duration annotation: the job's run before any spread (None: unknown)

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.gang


def latest_placement(group: Sequence[Member]) -> list[Member]:
    """The members of a gang's latest placement: all of them, unless it has more pods than its ``gang-min``
    (evicted or preempted and created again) and at least ``gang-min`` are still listed at the end: then
    those (the pods of an earlier placement were deleted with it)."""
    need = max((m.gang_min or 0 for m in group), default=0)
    listed = [m for m in group if m.listed]
    return listed if need and len(group) > need and len(listed) >= need else list(group)


def pod_end(p: PodRecord) -> float | None:
    """When a pod stopped holding its node's resources (finished or deleted, whichever first)."""
    ends = [t for t in (p.finished_ms, p.deleted_ms) if t is not None]
    return min(ends) if ends else None


def members(pods: Sequence[PodRecord], listed: Iterable[Mapping[str, Any]]) -> list[Member]:
    """Every gang pod of the timeline, with the conditions of its object in ``listed`` (pods at the end)."""
    by_uid = {(p.get("metadata") or {}).get("uid"): p for p in listed}
    out: list[Member] = []
    for p in pods:
        if not p.gang:
            continue
        obj = by_uid.get(p.uid)
        scheduled_at = level = factor = run_s = None
        if obj is not None:
            run_s = _run_seconds(obj)
            sc = _condition(obj, "PodScheduled")
            if sc and sc.get("status") == "True":
                scheduled_at = server_time(sc.get("lastTransitionTime"))
            spread = _condition(obj, SPREAD_CONDITION)
            if spread and spread.get("status") == "True":
                level = str(spread.get("reason") or "") or None
                m = _FACTOR.search(str(spread.get("message") or ""))
                factor = float(m.group(1)) if m else None
        out.append(Member(uid=p.uid, namespace=p.namespace, gang=p.gang, workload=p.workload, gpus=p.gpus,
                          gang_min=p.gang_min, node=p.node, created_at=server_time(p.server_created),
                          scheduled_ms=p.scheduled_ms, running_ms=p.running_ms, end_ms=pod_end(p),
                          scheduled_at=scheduled_at, spread_level=level, spread_factor=factor,
                          listed=obj is not None, run_s=run_s,
                          succeeded_ms=p.finished_ms if p.phase == "Succeeded" else None))
    return out


def _run_seconds(obj: Mapping[str, Any]) -> float | None:
    """The pod's run-duration annotation in seconds (None when absent, unreadable or ``forever``)."""
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(ANN_RUN)
    try:
        seconds = parse_go_duration(str(text)) if text else None
    except ValueError:
        return None
    return seconds if seconds is not None and math.isfinite(seconds) else None


@dataclass(frozen=True)
class GangAdmission:
    """A Kueue Workload of a gang: when it was created and when Kueue reserved quota and admitted it."""

    namespace: str
    name: str
    gang: str
    workload: str
    created_at: float | None
    quota_reserved_at: float | None
    admitted_at: float | None
    #: GPUs of each pod of its pod sets (count x the pod template's requests)
    member_gpus: tuple[float, ...]


def _true_since(obj: Mapping[str, Any], kind: str) -> float | None:
    """When condition ``kind`` last became True (epoch s), None when it is not True."""
    c = _condition(obj, kind)
    return server_time(c.get("lastTransitionTime")) if c and c.get("status") == "True" else None


def _template_gpus(template: Mapping[str, Any]) -> float:
    total = 0.0
    for c in (template.get("spec") or {}).get("containers") or ():
        res = c.get("resources") or {}
        v = (res.get("requests") or {}).get(GPU) or (res.get("limits") or {}).get(GPU)
        if v:
            total += float(parse_quantity(v))
    return total


def workload_admissions(objs: Iterable[Mapping[str, Any]]) -> list[GangAdmission]:
    """Kueue Workloads of gangs (a pod set's template labelled ``hollowscale.io/gang``): their times.

    A condition counts when it is True (its ``lastTransitionTime``: a Workload evicted and admitted again
    shows its last admission); Kueue leaves both True once the Workload finished.
    """
    out: list[GangAdmission] = []
    for w in objs:
        meta = w.get("metadata") or {}
        sets = (w.get("spec") or {}).get("podSets") or ()
        labels: dict[str, str] = {}
        gpus: list[float] = []
        for ps in sets:
            template = ps.get("template") or {}
            labels = labels or dict((template.get("metadata") or {}).get("labels") or {})
            gpus += [_template_gpus(template)] * int(ps.get("count") or 0)
        if not labels.get(LABEL_GANG):
            continue
        out.append(GangAdmission(namespace=meta.get("namespace", ""), name=meta.get("name", ""),
                                 gang=labels[LABEL_GANG], workload=labels.get(LABEL_WORKLOAD, ""),
                                 created_at=server_time(meta.get("creationTimestamp")),
                                 quota_reserved_at=_true_since(w, "QuotaReserved"),
                                 admitted_at=_true_since(w, "Admitted"),
                                 member_gpus=tuple(gpus)))
    return out
