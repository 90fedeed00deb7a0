"""``--shard i/n``: which nodes of the pools this process owns, and where each node sits.

The split must be deterministic (n processes, each reading the same pools file, together own every node
exactly once), balanced per pool (a 200-node pool gives 100 to each of two shards), and stable under
edits of *other* pools (resizing pool A does not move pool B's nodes between processes, so a restarted
shard re-adopts the same nodes).  Hence: node ``index`` of pool ``P`` goes to shard
``(index + offset(P)) % n`` where ``offset`` is a stable hash of the pool name, so single-node pools
spread over the shards too.
"""

from __future__ import annotations

import ipaddress
import zlib
from dataclasses import dataclass

from hollow.pools import AUTO_NODE_NETWORK, AUTO_POD_NETWORK, PoolSpec


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (0-based)."""

    index: int = 0
    count: int = 1


def parse_shard(text: str) -> Shard:
    """Parse ``i/n`` with ``0 <= i < n``.

    Raises:
        ValueError: naming the text and the expected form.
    """
    try:
        left, right = text.split("/")
        shard = Shard(int(left), int(right))
    except ValueError:
        raise ValueError(f"expected a shard as i/n such as 0/4, got {text!r}") from None
    if shard.count < 1 or not 0 <= shard.index < shard.count:
        raise ValueError(f"expected a shard i/n with 0 <= i < n, got {text!r}")
    return shard


def shard_of(pool_name: str, index: int, count: int) -> int:
    """The shard that owns node ``index`` of pool ``pool_name`` among ``count`` shards."""
    return (index + zlib.crc32(pool_name.encode())) % count


@dataclass(frozen=True)
class NodeSlot:
    """Everything that identifies one node, derived only from the pools document.

    Attributes:
        pool: the pool it belongs to.
        index: index inside the pool.
        name: ``<pool>-<index>``.
        ordinal: index over all pools (automatic addresses use it).
        internal_ip: the node's InternalIP (also pods' hostIP).
        pod_cidr: the node's pod network.
        zone: topology zone or None.
        rack: rack label value or None.
        not_ready: the node is kept NotReady (``topology.unhealthy.not_ready`` picked it).
        tainted: the node carries :data:`hollow.pools.UNHEALTHY_TAINT` (``topology.unhealthy.tainted``).
    """

    pool: PoolSpec
    index: int
    name: str
    ordinal: int
    internal_ip: str
    pod_cidr: str
    zone: str | None
    rack: str | None
    not_ready: bool = False
    tainted: bool = False


def node_slot(pool: PoolSpec, index: int) -> NodeSlot:
    """Addresses and topology of node ``index`` of ``pool`` (pure)."""
    ordinal = pool.first_ordinal + index
    internal_ip = str(AUTO_NODE_NETWORK.network_address + ordinal + 1)
    if pool.pod_cidr is None:
        base = AUTO_POD_NETWORK.network_address + ordinal * 256
        pod_cidr = f"{base}/24"
    else:
        net = ipaddress.IPv4Network(pool.pod_cidr)
        size = 2 ** (32 - pool.pod_cidr_mask)
        pod_cidr = f"{net.network_address + index * size}/{pool.pod_cidr_mask}"
    zones = pool.topology.zones
    zone = zones[index % len(zones)] if zones else None
    rack = None
    if zones and pool.topology.racks_per_zone:
        rack = f"{zone}-rack-{(index // len(zones)) % pool.topology.racks_per_zone}"
    not_ready, tainted = pool.unhealthy_nodes()
    return NodeSlot(pool, index, pool.node_name(index), ordinal, internal_ip, pod_cidr, zone, rack,
                    index in not_ready, index in tainted)


def assign(pools: list[PoolSpec], shard: Shard) -> list[NodeSlot]:
    """The nodes that ``shard`` owns, in pool order then index order."""
    return [node_slot(pool, i) for pool in pools for i in range(pool.count)
            if shard_of(pool.name, i, shard.count) == shard.index]
