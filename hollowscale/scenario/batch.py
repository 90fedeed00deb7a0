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

A variant sets ``gang_scheduling`` and ``kueue`` (the cluster's features and the load's rendering),
and ``preemption`` (whether a higher priority may preempt: PriorityClasses' ``preemptionPolicy`` and
the ClusterQueues' preemption policies).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, StrictBool, StrictInt

from hollowscale.scenario.dra import GPU_MODES
from kubecore.schema import DnsLabel, Quantity, Spec, number, one_of, problem
from loadgen.spec import Namespace


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


class VariantSpec(Spec):
    """One way to run the scenario: which scheduling features are on, and how GPUs are asked for
    (``gpus``: counted | claims | extended, ``gpu_sharing``; see :mod:`hollowscale.scenario.dra`)."""

    name: DnsLabel
    gang_scheduling: StrictBool = False
    kueue: StrictBool = False
    preemption: StrictBool = True
    gpus: one_of(*GPU_MODES) | None = None  # type: ignore[valid-type]
    gpu_sharing: StrictBool | None = None


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


def check_variants(variants: tuple[VariantSpec, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    out: list[tuple[tuple[str | int, ...], str]] = []
    seen: set[str] = set()
    for i, v in enumerate(variants):
        if v.name in seen:
            out.append((("variants", i, "name"), f"duplicate variant name {v.name!r}"))
        seen.add(v.name)
    return out
