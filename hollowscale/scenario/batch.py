"""The batch-scheduling part of a scenario: teams (tenants) with queues and quotas, priority classes,
and the variants one scenario is run under (default scheduler, gang, queues, gang + queues).

YAML shape (all optional; a scenario without them runs as before)::

    tenants:                         # teams: a namespace each, a Kueue ClusterQueue + LocalQueue each
      - name: team-a
        namespace: team-a            # default <cluster.namespace>-<name>
        share: 1                     # share of the arrivals
        weight: 1                    # fair-share weight; deserved share = weight / sum of weights
        cohort: gpus                 # ClusterQueues of one cohort lend and borrow unused quota
        quotas:                      # per flavor (a pool name): nominal quota per resource; unlisted = 0
          v100: {nvidia.com/gpu: 64, cpu: "1024", memory: 8Ti}
    cohorts:                         # optional Kueue Cohorts with quota of their own (borrowed by weight)
      - name: gpus
        quotas: {v100: {nvidia.com/gpu: 128}}
    priority_classes:                # PriorityClasses (and Kueue WorkloadPriorityClasses) the run creates
      - {name: online, value: 1000}
      - {name: teacher, value: 10}
    variants:                        # each runs on a fresh cluster with the same arrival seed
      - {name: default}
      - {name: gang, gang_scheduling: true}
      - {name: queues, kueue: true}
      - {name: gang-queues, gang_scheduling: true, kueue: true}
      - {name: kueue-tas, kueue: true, topology: kueue-required}

A variant sets ``gang_scheduling`` and ``kueue`` (the cluster's features and the load's rendering),
``preemption`` (whether a higher priority may preempt: PriorityClasses' ``preemptionPolicy`` and
the ClusterQueues' preemption policies) and ``topology``: how the workloads' ``topology`` renders
(:data:`loadgen.spec.TOPOLOGY_RENDERINGS`: ``none``, ``affinity`` (the default, as before),
``kueue-required``, ``kueue-preferred``, ``kueue-slice`` (Kueue's topology-aware scheduling: the run
makes a Kueue ``Topology`` per distinct level list of the pools and gives the flavors its name) or
``intree`` (the PodGroup's topology constraint)).

A workload's ``topology.level`` names a level of the pools it can land on (by its roles'
``node_selector`` against the pools' labels): the levels of a pool are its ``topology.levels`` (or
``shape``), else ``zone`` and ``rack`` of ``zones``/``racks_per_zone``; :func:`topology_keys` resolves
the names to node label keys for the load.  :func:`check_topology` says what does not fit.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field, StrictBool, StrictInt

from hollow.nodebody import POOL_LABEL, RACK_LABEL
from hollow.pools import PoolSpec
from hollowscale.scenario.dra import GPU_MODES
from kubecore.schema import DnsLabel, Quantity, Seconds, Spec, number, one_of, problem
from loadgen.spec import TOPOLOGY_RENDERINGS, Namespace, WorkloadSpec

ZONE_LABEL = "topology.kubernetes.io/zone"
Problems = list[tuple[tuple[str | int, ...], str]]


def _priority_value(v: int) -> int:
    # user PriorityClasses stop below system-cluster-critical's range
    if not -2_147_483_648 <= v <= 1_000_000_000:
        raise problem(f"expected a priority between -2147483648 and 1000000000 (user classes), got {v}")
    return v


class TenantSpec(Spec):
    """One team: its namespace, part of the arrivals, fair-share weight, cohort and quotas per flavor."""

    name: DnsLabel
    namespace: Namespace | None = None  # not one of the cluster's own (kube-system, default, ...)
    share: number(0, lo_open=True) = 1.0  # type: ignore[valid-type]
    weight: number(0, lo_open=True) = 1.0  # type: ignore[valid-type]
    cohort: DnsLabel = "hollowscale"
    quotas: dict[DnsLabel, dict[str, Quantity]] = Field(default_factory=dict)


class CohortSpec(Spec):
    """A Kueue Cohort holding quota of its own that its ClusterQueues borrow by fair share.

    With every tenant at 0 nominal quota and the capacity in the cohort, each team's share under
    saturation follows its fair-share weight (Kueue balances the weighted share of what is borrowed).
    """

    name: DnsLabel
    quotas: dict[DnsLabel, dict[str, Quantity]] = Field(default_factory=dict)


class PriorityClassSpec(Spec):
    """A PriorityClass the run creates (and deletes), with the Kueue WorkloadPriorityClass of the same name."""

    name: DnsLabel
    value: Annotated[StrictInt, AfterValidator(_priority_value)]
    description: str = ""


def _positive_seconds(value: float) -> float:
    if value <= 0:
        raise problem(f"expected a duration > 0s, got {value:g}s")
    return value


class PodsReadySpec(Spec):
    """Kueue's ``waitForPodsReady``: how long an admitted workload may wait for all its pods to be Ready, and
    what happens after (Kueue evicts it, suspending its Job, and requeues it after a backoff).

    Attributes:
        timeout: from admission to PodsReady (every pod Ready) before Kueue evicts and requeues it.
        recovery_timeout: after a Ready workload lost a pod (PodsReady false again: a pod failed and its
            replacement is awaited), how long before Kueue evicts and requeues it (Kueue's default: the timeout).
        backoff_base_s: the requeue delay's base: about ``base x 2^(n-1)`` before the n-th requeue (Kueue: 60).
        backoff_max_s: the longest requeue delay (Kueue: 3600).
        backoff_limit: requeues before Kueue deactivates the workload for good (Kueue: no limit).
        block_admission: no other workload of the ClusterQueue is admitted until this one's pods are Ready.
    """

    timeout: Annotated[Seconds, AfterValidator(_positive_seconds)] = 300.0
    recovery_timeout: Seconds | None = None
    backoff_base_s: number(1, 86400, integer=True) | None = None  # type: ignore[valid-type]
    backoff_max_s: number(1, 86400, integer=True) | None = None  # type: ignore[valid-type]
    backoff_limit: number(0, 1000, integer=True) | None = None  # type: ignore[valid-type]
    block_admission: StrictBool = False

    def to_kueue(self) -> dict[str, Any]:
        """The ``waitForPodsReady`` of Kueue's Configuration (config.kueue.x-k8s.io/v1beta2)."""
        doc: dict[str, Any] = {"timeout": f"{self.timeout:g}s", "blockAdmission": self.block_admission}
        if self.recovery_timeout is not None:
            doc["recoveryTimeout"] = f"{self.recovery_timeout:g}s"
        strategy = {key: int(value) for key, value in (("backoffBaseSeconds", self.backoff_base_s),
                                                        ("backoffMaxSeconds", self.backoff_max_s),
                                                        ("backoffLimitCount", self.backoff_limit))
                    if value is not None}
        if strategy:
            doc["requeuingStrategy"] = strategy
        return doc


class VariantSpec(Spec):
    """One way to run the scenario: which scheduling features are on, and how GPUs are asked for
    (``gpus``: counted | claims | extended, ``gpu_sharing``; see :mod:`hollowscale.scenario.dra`).

    Attributes:
        topology: how the workloads' ``topology`` renders: ``none`` (ignored: the baseline), ``affinity``
            (pod affinity, or the PodGroup's constraint for a required level of a gang with gang scheduling),
            ``kueue-required``/``kueue-preferred``/``kueue-slice`` (Kueue's topology-aware scheduling; needs
            ``kueue``), ``intree`` (the PodGroup's topology constraint; needs ``gang_scheduling``).
        jobset: the local cluster also runs JobSet (on when ``cluster.jobset`` is, whatever the variant says).
        workloads: the workloads this variant submits (names of ``workloads``; default all of them), so that
            variants can compare one job under different controllers or failure policies on the same load.
        kueue_pods_ready: Kueue's ``waitForPodsReady`` in this variant (:class:`PodsReadySpec`; needs ``kueue``),
            instead of ``cluster.kueue_pods_ready``.
    """

    name: DnsLabel
    gang_scheduling: StrictBool = False
    kueue: StrictBool = False
    jobset: StrictBool = False
    preemption: StrictBool = True
    gpus: one_of(*GPU_MODES) | None = None  # type: ignore[valid-type]
    gpu_sharing: StrictBool | None = None
    topology: one_of(*TOPOLOGY_RENDERINGS) = "affinity"  # type: ignore[valid-type]
    workloads: tuple[DnsLabel, ...] | None = None
    kueue_pods_ready: PodsReadySpec | None = None

    @property
    def kueue_tas(self) -> bool:
        """The variant places workloads with Kueue's topology-aware scheduling."""
        return str(self.topology).startswith("kueue-")


def check_quotas(where: tuple[str | int, ...], quotas: dict[str, dict[str, str]],
                 pool_allocatable: dict[str, dict[str, str]]) -> list[tuple[tuple[str | int, ...], str]]:
    """Quota flavors must be pools, quota resources resources of that pool."""
    out: list[tuple[tuple[str | int, ...], str]] = []
    for flavor, resources in quotas.items():
        if flavor not in pool_allocatable:
            out.append(((*where, flavor), f"expected a pool name ({', '.join(sorted(pool_allocatable))}) as the flavor, "
                                          f"got {flavor!r}"))
            continue
        for resource in resources:
            if resource not in pool_allocatable[flavor]:
                out.append(((*where, flavor, resource),
                            f"pool {flavor} has no {resource} (it has {', '.join(sorted(pool_allocatable[flavor]))})"))
    return out


def check_tenants(tenants: tuple[TenantSpec, ...], pool_allocatable: dict[str, dict[str, str]]) \
        -> list[tuple[tuple[str | int, ...], str]]:
    """Problems of the tenants against the pools: unique names and namespaces, quota flavors that are
    pools, quota resources that the pool has."""
    out: list[tuple[tuple[str | int, ...], str]] = []
    names: set[str] = set()
    for i, t in enumerate(tenants):
        if t.name in names:
            out.append((("tenants", i, "name"), f"duplicate tenant name {t.name!r}"))
        names.add(t.name)
        out += check_quotas(("tenants", i, "quotas"), t.quotas, pool_allocatable)
    return out


def check_variants(variants: tuple[VariantSpec, ...], workloads: tuple[WorkloadSpec, ...] = ()) \
        -> list[tuple[tuple[str | int, ...], str]]:
    """Unique names; a variant's ``workloads`` name some of the scenario's (at least one)."""
    out: list[tuple[tuple[str | int, ...], str]] = []
    seen: set[str] = set()
    names = [w.name for w in workloads]
    for i, v in enumerate(variants):
        if v.name in seen:
            out.append((("variants", i, "name"), f"duplicate variant name {v.name!r}"))
        seen.add(v.name)
        if v.workloads is not None:
            if not v.workloads:
                out.append((("variants", i, "workloads"), "expected at least one workload name (or leave it out: all)"))
            for j, name in enumerate(v.workloads):
                if name not in names:
                    out.append((("variants", i, "workloads", j),
                                f"expected one of workloads ({', '.join(names)}), got {name!r}"))
    return out


# ------------------------------------------------------------------------------------------------ topology


def pool_levels(p: PoolSpec) -> tuple[tuple[str, str], ...]:
    """A pool's topology levels (name, node label key), coarse to fine: its ``levels``/``shape``, else
    ``zone`` and ``rack`` of the round-robin ``zones``/``racks_per_zone`` (the two are exclusive)."""
    levels = p.topology.level_labels()
    if levels:
        return levels
    out: list[tuple[str, str]] = []
    if p.topology.zones:
        out.append(("zone", ZONE_LABEL))
    if p.topology.racks_per_zone:
        out.append(("rack", RACK_LABEL))
    return tuple(out)


def topology_keys(pools: tuple[PoolSpec, ...]) -> dict[str, str]:
    """Level name -> node label key over all pools (the load spec's ``topology_keys``); the first pool
    naming a level wins (:func:`check_topology` reports a level that two pools label differently)."""
    out: dict[str, str] = {}
    for p in pools:
        for name, key in pool_levels(p):
            out.setdefault(name, key)
    return out


def landing_pools(w: WorkloadSpec, pools: tuple[PoolSpec, ...]) -> list[PoolSpec]:
    """The pools a role of ``w`` can land on: its ``node_selector`` agrees with the pool's labels (with
    ``hollowscale.io/pool``: the pool's name unless its labels say otherwise; a key the pool does not set
    is not held against it, except ``nvidia.com/*``: a GPU model it lacks)."""
    out = []
    for p in pools:
        labels = {POOL_LABEL: p.name, **dict(p.labels)}
        if any(all(labels.get(k) == v for k, v in role.node_selector.items()
                   if k in labels or k.startswith("nvidia.com/")) for role in w.roles):
            out.append(p)
    return out


def check_topology(pools: tuple[PoolSpec, ...], workloads: tuple[WorkloadSpec, ...],
                   variants: tuple[VariantSpec, ...]) -> Problems:
    """Problems of the workloads' topology and the variants' rendering of it, one line each (a scenario
    without variants renders topology as ``affinity``)."""
    out: Problems = []
    labelled: dict[str, tuple[str, str]] = {}
    for pi, p in enumerate(pools):
        for name, key in pool_levels(p):
            first = labelled.setdefault(name, (p.name, key))
            if first[1] != key:
                out.append((("pools", pi, "topology"), f"level {name!r} is label {key} here and {first[1]} in pool "
                            f"{first[0]}: expected one label per level name (workloads name levels)"))
    for vi, v in enumerate(variants):
        if v.kueue_tas and not v.kueue:
            out.append((("variants", vi, "topology"), f"topology {v.topology} is Kueue's topology-aware scheduling: "
                        "expected kueue: true"))
        if v.topology == "intree" and not v.gang_scheduling:
            out.append((("variants", vi, "topology"), "topology intree is the PodGroup's topology constraint: expected "
                        "gang_scheduling: true"))
    intree = any(v.topology == "intree" for v in variants)
    kueue_tas = [v for v in variants if v.kueue_tas]
    for wi, w in enumerate(workloads):
        t = w.topology
        if t is None:
            continue
        where = ("workloads", wi, "topology")
        landing = landing_pools(w, pools)
        levels = {name: key for p in landing for name, key in pool_levels(p)}
        names = ", ".join(p.name for p in landing) or "none"
        if not levels:
            out.append((where, f"the pools it can land on ({names}) have no topology levels: expected pools with "
                        "topology levels (levels, shape, zones or racks_per_zone) or no topology"))
            continue
        for field_name in ("level", "slice_level"):
            level = getattr(t, field_name)
            if level is not None and level not in levels:
                out.append(((*where, field_name), f"expected a level of the pools it can land on ({names}: "
                            f"{', '.join(levels)}), got {level!r}"))
        if t.slice_size is not None:
            members = w.gang_min() or w.pods_per_instance()
            sizes = sorted({members, *(r.replicas for r in w.roles)})
            bad = [n for n in sizes if n % t.slice_size]
            if bad:
                out.append(((*where, "slice_size"), f"expected a divisor of the gang's member count and of each "
                            f"role's replicas ({', '.join(map(str, sizes))}), got {t.slice_size}"))
        if intree and w.gang is None:
            out.append((("workloads", wi, "gang"), "a variant renders topology intree (the PodGroup's topology "
                        "constraint): expected a gang"))
        if kueue_tas and not w.queued:
            out.append((("workloads", wi, "queued"), f"variant {kueue_tas[0].name} places it with Kueue's "
                        "topology-aware scheduling (Kueue admits queued Jobs): expected queued: true"))
        if kueue_tas and w.kind != "Job":
            out.append((("workloads", wi, "kind"), f"variant {kueue_tas[0].name} places it with Kueue: expected "
                        f"kind Job, got {w.kind}"))
        if kueue_tas and any(not p.topology.level_labels() for p in landing):
            out.append((where, f"variant {kueue_tas[0].name} makes a Kueue Topology of the pools' levels: expected "
                        f"topology levels or a shape on every pool it can land on ({names}), not zones/racks_per_zone"))
    return out
