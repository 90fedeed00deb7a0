"""The pools' topology levels as the figures walk them: which pool a node is in, its domain at each level
(the path of label values from the top level down, so rack ``r1`` of block ``b0`` is not rack ``r1`` of
block ``b1``), and the spread factor a pool gives a level.

The levels, labels and factors are defined once, in :class:`hollow.pools.Topology`; a node's domain is
read from the labels the API shows for it (what the scheduler sees), never recomputed from its index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hollow.pools import CLUSTER, PoolSpec

Levels = tuple[tuple[str, str], ...]


def applies(pools: Sequence[PoolSpec]) -> bool:
    """Whether any pool has topology levels (the placement figures are computed only then)."""
    return any(p.topology.level_labels() for p in pools)


class PoolLevels:
    """Node name -> its pool's levels (a node is ``<pool>-<index>``), for the pools that have levels."""

    def __init__(self, pools: Sequence[PoolSpec]) -> None:
        self._pools = sorted((p for p in pools if p.topology.level_labels()), key=lambda p: len(p.name), reverse=True)

    def pool(self, node: str) -> PoolSpec | None:
        """The pool with levels whose node this is, else None."""
        for p in self._pools:
            rest = node[len(p.name) + 1:]
            if node.startswith(p.name + "-") and rest.isdigit():
                return p
        return None

    def levels(self, node: str) -> Levels:
        """``(name, label)`` coarse to fine of the node's pool; () for a node of no pool with levels."""
        p = self.pool(node)
        return p.topology.level_labels() if p is not None else ()

    def names(self) -> list[str]:
        """Every level name of the pools, coarse to fine (pools' orders merged, first seen first)."""
        out: list[str] = []
        for p in sorted(self._pools, key=lambda p: p.name):
            out += [name for name, _ in p.topology.level_labels() if name not in out]
        return out

    def factor(self, node: str, level: str) -> float | None:
        """The spread factor the node's pool gives ``level`` (or ``cluster``); None outside the pools."""
        p = self.pool(node)
        if p is None:
            return None
        known = {name for name, _ in p.topology.level_labels()} | {CLUSTER}
        return p.topology.spread_factor(level) if level in known else None


def domain(levels: Levels, labels: Mapping[str, str], level: str) -> tuple[str, ...] | None:
    """The node's domain at ``level``: its label values from the top level down to it; None when the
    node's levels do not have ``level`` or the node lacks one of the labels."""
    path: list[str] = []
    for name, key in levels:
        value = labels.get(key)
        if value is None:
            return None
        path.append(value)
        if name == level:
            return tuple(path)
    return None


def inside(levels: Levels, level: str) -> list[str]:
    """The levels one of whose domains holds a gang whose smallest holding domain is at ``level``: that
    level and every coarser one (none for ``cluster`` or an unknown level)."""
    names = [name for name, _ in levels]
    return names[:names.index(level) + 1] if level in names else []
