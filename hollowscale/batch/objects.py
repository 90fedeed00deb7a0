"""The cluster objects a batch scenario needs before its load: priority classes and Kueue's queues.

From the scenario's ``priority_classes`` and ``tenants`` (see :mod:`hollowscale.scenario.batch`):

* a ``PriorityClass`` per class (``preemptionPolicy: Never`` in a variant without preemption) and,
  with Kueue, a ``WorkloadPriorityClass`` of the same name and value;
* with Kueue: a ``ResourceFlavor`` per pool (its labels as ``nodeLabels``, its taints as
  ``nodeTaints``, so a pod lands in the flavor of the pool its selector names), a ``ClusterQueue`` per
  tenant (its namespace only; the tenant's cohort and fair-share weight; one resource group covering
  every resource the workloads request, every pool a flavor, nominal quota as the tenant gives it and
  0 elsewhere; preemption within the queue and reclaim within the cohort unless the variant turns
  preemption off) and a ``LocalQueue`` in the tenant's namespace;
* with Kueue's topology-aware scheduling (a ``kueue-*`` topology variant): a Kueue ``Topology`` per
  distinct list of the pools' level label keys (coarse to fine, ``kubernetes.io/hostname`` last as Kueue
  requires), named after the first pool with that list (:func:`topology_name`), created before the
  flavors, and each such pool's ``ResourceFlavor`` naming it in ``topologyName`` (a TAS flavor needs
  ``nodeLabels``: the pool's labels, else ``hollowscale.io/pool``).  Kueue then admits a Job whose pod
  template asks for a level, gates its pods (``kueue.x-k8s.io/topology``, added to the Job's template
  when Kueue starts it: no pod webhook) and ungates each with a ``nodeSelector`` of its assigned domain.

Every object carries the run label.  :class:`BatchObjects` creates them in order and deletes exactly
those it created, newest first, each by the uid its creation returned (one that someone deleted and
made again under the name meanwhile is not ours and stays); an object of the same name that the run
did not create stops the run (it is never changed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import requests

from hollowscale.scenario import Scenario
from kubecore.namespaces import RUN_LABEL

KUEUE_API = "kueue.x-k8s.io/v1beta2"


class BatchObjectError(RuntimeError):
    """An object the run needs exists and was not created by this run."""


def cluster_queue_name(tenant: str) -> str:
    return f"{tenant}-cq"[:63]


def covered_resources(sc: Scenario) -> list[str]:
    """Every resource a workload of the scenario requests (what a ClusterQueue must cover)."""
    return sorted({r for w in sc.workloads for role in w.roles for r in role.resources})


def priority_objects(sc: Scenario, run_id: str) -> list[dict[str, Any]]:
    """PriorityClasses (and WorkloadPriorityClasses with Kueue) of the scenario."""
    labels = {RUN_LABEL: run_id}
    out: list[dict[str, Any]] = []
    for pc in sc.priority_classes:
        out.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                    "metadata": {"name": pc.name, "labels": labels}, "value": pc.value,
                    "preemptionPolicy": "PreemptLowerPriority" if sc.preemption else "Never",
                    "globalDefault": False, "description": pc.description or f"hollowscale run {run_id}"})
        if sc.cluster.kueue:
            out.append({"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass",
                        "metadata": {"name": pc.name, "labels": labels}, "value": pc.value,
                        "description": pc.description or f"hollowscale run {run_id}"})
    return out


def volcano_objects(sc: Scenario, run_id: str) -> list[dict[str, Any]]:
    """A Volcano ``Queue`` per tenant (its fair-share ``weight``, reclaimable), on clusters that run Volcano."""
    if not sc.cluster.volcano:
        return []
    return [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
             "metadata": {"name": next(tl.queue_name for tl in sc.load.tenants if tl.name == t.name),
                          "labels": {RUN_LABEL: run_id}},
             "spec": {"weight": max(1, round(t.weight)), "reclaimable": True}} for t in sc.tenants]


def topology_name(pool: str) -> str:
    """The Kueue Topology of the pools sharing ``pool``'s level list (``pool`` is the first of them)."""
    return f"{pool}-topology"[:63]


def kueue_topologies(sc: Scenario, run_id: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Kueue ``Topology`` objects (one per distinct level list of the pools) and pool -> topology name,
    when the scenario's variant renders topology for Kueue; ``([], {})`` otherwise."""
    if not sc.cluster.kueue or not str(sc.load.topology).startswith("kueue-"):
        return [], {}
    by_levels: dict[tuple[str, ...], str] = {}
    out: list[dict[str, Any]] = []
    of_pool: dict[str, str] = {}
    for p in sc.pools:
        keys = tuple(key for _, key in p.topology.level_labels())
        if not keys:
            continue
        if keys not in by_levels:
            by_levels[keys] = topology_name(p.name)
            out.append({"apiVersion": KUEUE_API, "kind": "Topology",
                        "metadata": {"name": by_levels[keys], "labels": {RUN_LABEL: run_id}},
                        "spec": {"levels": [{"nodeLabel": k} for k in keys]}})
        of_pool[p.name] = by_levels[keys]
    return out, of_pool


def kueue_objects(sc: Scenario, run_id: str) -> list[dict[str, Any]]:
    """Topologies (TAS variants), ResourceFlavors, ClusterQueues and LocalQueues for the scenario's
    tenants (empty without Kueue)."""
    if not sc.cluster.kueue or not sc.tenants:
        return []
    labels = {RUN_LABEL: run_id}
    out, topology_of = kueue_topologies(sc, run_id)
    for p in sc.pools:
        spec: dict[str, Any] = {"nodeLabels": dict(p.labels) or {"hollowscale.io/pool": p.name}}
        if p.name in topology_of:
            spec["topologyName"] = topology_of[p.name]
        if p.taints:
            spec["nodeTaints"] = [{"key": t.key, "value": t.value, "effect": t.effect} for t in p.taints]
        out.append({"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": p.name, "labels": labels},
                    "spec": spec})
    resources = covered_resources(sc)

    def groups(quotas: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
        flavors = []
        for p in sc.pools:
            quota = dict(quotas.get(p.name, {}))
            flavors.append({"name": p.name, "resources": [{"name": r, "nominalQuota": str(quota.get(r, "0"))}
                                                          for r in resources]})
        return [{"coveredResources": resources, "flavors": flavors}]

    for c in sc.cohorts:
        out.append({"apiVersion": KUEUE_API, "kind": "Cohort", "metadata": {"name": c.name, "labels": labels},
                    "spec": {"resourceGroups": groups(dict(c.quotas))}})
    for t in sc.tenants:
        never = {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "Never"}}
        preempt = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                   "borrowWithinCohort": {"policy": "LowerPriority"}}
        out.append({"apiVersion": KUEUE_API, "kind": "ClusterQueue",
                    "metadata": {"name": cluster_queue_name(t.name), "labels": labels},
                    "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": t.namespace}},
                             "cohortName": t.cohort, "queueingStrategy": "BestEffortFIFO",
                             "resourceGroups": groups(dict(t.quotas)),
                             "fairSharing": {"weight": f"{t.weight:g}"},
                             "preemption": preempt if sc.preemption else never}})
        out.append({"apiVersion": KUEUE_API, "kind": "LocalQueue",
                    "metadata": {"name": next(tl.queue_name for tl in sc.load.tenants if tl.name == t.name),
                                 "namespace": t.namespace, "labels": labels},
                    "spec": {"clusterQueue": cluster_queue_name(t.name)}})
    return out


_PLURAL = {"PriorityClass": "priorityclasses", "WorkloadPriorityClass": "workloadpriorityclasses",
           "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues",
           "Cohort": "cohorts", "Queue": "queues", "Topology": "topologies"}


def object_path(obj: dict[str, Any], name: bool = False) -> str:
    """The REST path of an object's collection (or of the object itself with ``name``)."""
    group_version = obj["apiVersion"]
    base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    ns = obj["metadata"].get("namespace")
    path = f"{base}/namespaces/{ns}/{_PLURAL[obj['kind']]}" if ns else f"{base}/{_PLURAL[obj['kind']]}"
    return f"{path}/{obj['metadata']['name']}" if name else path


@dataclass
class BatchObjects:
    """Creates the objects in order and deletes what it created."""

    session: requests.Session
    server: str
    run_id: str
    created: list[dict[str, Any]] = field(default_factory=list)

    def create(self, objects: list[dict[str, Any]]) -> None:
        for obj in objects:
            r = self.session.post(self.server + object_path(obj), json=obj, timeout=30)
            if r.status_code == 409:
                existing = self.session.get(self.server + object_path(obj, name=True), timeout=30)
                owner = ((existing.json().get("metadata") or {}).get("labels") or {}).get(RUN_LABEL) \
                    if existing.ok else None
                raise BatchObjectError(
                    f"{obj['kind']} {obj['metadata']['name']} already exists and "
                    + (f"belongs to run {owner}" if owner else "was not created by hollowscale")
                    + "; the run never changes what it did not create: delete it or rename the scenario's "
                    "tenants/priority classes")
            if not r.ok:
                raise BatchObjectError(f"creating {obj['kind']} {obj['metadata']['name']}: HTTP {r.status_code}: "
                                       f"{r.text[:300]}")
            self.created.append({**obj, "metadata": {**obj["metadata"], "uid": r.json()["metadata"]["uid"]}})

    def delete_all(self) -> list[str]:
        """Delete what this run created, newest first, by uid; returns the errors (empty when all went).

        A 409 is an object of that name that is not the one the run created (the uid precondition failed):
        it is left as it is, and not an error.
        """
        errors = []
        for obj in reversed(self.created):
            try:
                r = self.session.delete(self.server + object_path(obj, name=True), timeout=30,
                                        json={"preconditions": {"uid": obj["metadata"]["uid"]}})
                if r.status_code not in (200, 202, 404, 409):
                    errors.append(f"deleting {obj['kind']} {obj['metadata']['name']}: HTTP {r.status_code}")
            except requests.RequestException as exc:
                errors.append(f"deleting {obj['kind']} {obj['metadata']['name']}: {exc}")
        self.created.clear()
        return errors
