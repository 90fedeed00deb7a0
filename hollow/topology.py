"""What a gang's placement costs its training: the smallest topology domain holding all its members.

A data-parallel job whose workers share a rack (one NVLink or top-of-rack switch) synchronises its
gradients faster than one spread over racks or blocks; Volcano's task-topology measurements put VGG16
13-30 % faster packed.  The hollow kubelet models that cost: a gang member's run time is its drawn run
duration (``hollowscale.io/run-duration`` or the pool's distribution) times the *spread factor* of the
smallest domain that holds every member of its gang counted at the gang's barrier
(:mod:`hollow.gangs`), as the scheduler placed them.  The factors are the pools'
``topology.spread_factors`` (:meth:`hollow.pools.Topology.spread_factor`).

Everything here is a pure function of the pod objects (``spec.nodeName``) and the pools document that
every agent holds, so the members of one gang on several agents (sharding) reach the same level and
factor: a node's labels are recomputed from its name (``<pool>-<index>``), never read from the API.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hollow.bodies import PodCondition
from hollow.pools import CLUSTER, PoolSpec

#: the pod condition a gang member carries once its run time was stretched (status True, reason = the
#: level of the smallest domain holding its gang, or ``cluster``; message ``factor=<f>``)
SPREAD_CONDITION = "hollowscale.io/TopologySpread"


def spanned_level(level_labels: Sequence[tuple[str, str]], node_labels: Sequence[Mapping[str, str]]) -> str:
    """The name of the smallest level one of whose domains holds all the nodes, else ``cluster``.

    A domain is the path of values from the top level down: rack ``r1`` of block ``b0`` and rack ``r1``
    of block ``b1`` are two domains.  ``cluster`` also when there is no node, no level, or a node lacks
    one of the level labels.

    Args:
        level_labels: ``(name, label key)`` per level, coarse to fine (:meth:`hollow.pools.Topology.level_labels`).
        node_labels: each node's labels.
    """
    if not node_labels or not level_labels:
        return CLUSTER
    found = CLUSTER
    for name, key in level_labels:
        values = set()
        for labels in node_labels:
            value = labels.get(key)
            if value is None:
                return CLUSTER
            values.add(value)
        if len(values) != 1:
            return found
        found = name  # one domain at this level, under one domain of every coarser level
    return found


@dataclass(frozen=True)
class Spread:
    """A gang's placement cost: the level of the smallest domain holding it and the factor applied."""

    level: str
    factor: float


def spread_condition(spread: Spread, since: str) -> PodCondition:
    """The :data:`SPREAD_CONDITION` pod condition for a status patch; ``since`` (RFC 3339) is the gang's
    barrier, the moment the stretched run clock started (the same in every patch, so it never flaps)."""
    return PodCondition(type=SPREAD_CONDITION, status="True", reason=spread.level,
                        message=f"factor={spread.factor:g}", lastTransitionTime=since)


class NodeTopology:
    """Node name -> pool and index, from the pools document (the same on every agent)."""

    def __init__(self, pools: Iterable[PoolSpec]) -> None:
        self.pools = {p.name: p for p in pools}

    def locate(self, node: str) -> tuple[PoolSpec, int] | None:
        """The pool and index of a node of the pools, or None (a node that is not one of them)."""
        pool_name, sep, index = node.rpartition("-")
        pool = self.pools.get(pool_name) if sep else None
        if pool is None or not index.isdigit() or (len(index) > 1 and index[0] == "0"):
            return None
        i = int(index)
        return (pool, i) if i < pool.count else None

    def gang_spread(self, nodes: Iterable[str]) -> Spread | None:
        """The spread of a gang whose counted members run on ``nodes``; None when none of their pools
        has topology levels (factor 1, no condition).

        Members on nodes outside the pools, or on pools with other levels than the rest, make it
        ``cluster``.  The factor is the largest that the members' pools give the level (they normally
        are one pool), so it does not depend on the order of the nodes.
        """
        located = [self.locate(n) for n in nodes]
        known = [x for x in located if x is not None]
        pools = {p.name: p for p, _ in known if p.topology.resolved_levels()}
        if not pools:
            return None
        shapes = {p.topology.level_labels() for p in pools.values()}
        level = CLUSTER
        if len(shapes) == 1 and len(known) == len(located) and all(p.name in pools for p, _ in known):
            level = spanned_level(next(iter(shapes)), [p.topology_labels(i) for p, i in known])
        return Spread(level, max(p.topology.spread_factor(level) for p in pools.values()))


def without_levels(pools: Iterable[PoolSpec]) -> list[PoolSpec]:
    """The same pools without topology levels, shape or NVLink label (zones, racks, unhealthy nodes and
    everything else kept), for a bench that registers the same nodes with and without topology labels."""
    out = []
    for pool in pools:
        topo = pool.topology.model_copy(update={"levels": (), "shape": None, "nvlink_label": None,
                                                "spread_factors": {}})
        copy = pool.model_copy(update={"topology": topo})
        copy._first_ordinal = pool.first_ordinal
        out.append(copy)
    return out
