"""Shard assignment: deterministic, complete, disjoint, balanced, stable; node addresses and topology."""

from __future__ import annotations

import ipaddress
from collections import Counter

import pytest

from hollow.pools import parse_pools
from hollow.sharding import Shard, assign, node_slot, parse_shard, shard_of


def _pools(counts: dict[str, int]):
    return parse_pools({"pools": [{"name": n, "count": c, "resources": {"cpu": "8", "memory": "8Gi"}}
                                  for n, c in counts.items()]}, "t")


def test_parse_shard() -> None:
    assert parse_shard("0/1") == Shard(0, 1)
    assert parse_shard("3/4") == Shard(3, 4)
    for bad in ("4/4", "-1/2", "1", "a/b", "0/0"):
        with pytest.raises(ValueError, match="i/n"):
            parse_shard(bad)


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_shards_partition_every_node_exactly_once(n: int) -> None:
    pools = _pools({"v100": 200, "a100": 37, "single": 1})
    owners: Counter[str] = Counter()
    per_pool: dict[tuple[int, str], int] = Counter()
    for i in range(n):
        for slot in assign(pools, Shard(i, n)):
            owners[slot.name] += 1
            per_pool[(i, slot.pool.name)] += 1
    assert len(owners) == 238 and set(owners.values()) == {1}
    for pool in pools:
        sizes = [per_pool[(i, pool.name)] for i in range(n)]
        assert max(sizes) - min(sizes) <= 1  # balanced per pool


def test_assignment_is_deterministic_and_stable_under_other_pool_edits() -> None:
    before = {s.name for s in assign(_pools({"a": 50, "b": 50}), Shard(1, 3))}
    assert before == {s.name for s in assign(_pools({"a": 50, "b": 50}), Shard(1, 3))}
    after = {s.name for s in assign(_pools({"a": 80, "b": 50}), Shard(1, 3))}
    assert {n for n in before if n.startswith("b-")} == {n for n in after if n.startswith("b-")}
    assert shard_of("b", 7, 3) == shard_of("b", 7, 3)


def test_single_node_pools_spread_over_shards() -> None:
    pools = _pools({f"p{i}": 1 for i in range(40)})
    sizes = [len(assign(pools, Shard(i, 4))) for i in range(4)]
    assert sum(sizes) == 40 and min(sizes) > 0


def test_addresses_are_unique_and_inside_their_networks() -> None:
    pools = parse_pools({"pools": [
        {"name": "a", "count": 300, "resources": {"cpu": "8", "memory": "8Gi"}},
        {"name": "b", "count": 4, "resources": {"cpu": "8", "memory": "8Gi"}, "pod_cidr": "172.20.0.0/24",
         "pod_cidr_mask_size": 26, "topology": {"zones": ["z1", "z2"], "racks_per_zone": 2}},
    ]}, "t")
    slots = assign(pools, Shard())
    assert len({s.internal_ip for s in slots}) == 304
    assert len({s.pod_cidr for s in slots}) == 304
    assert slots[0].pod_cidr == "10.0.0.0/24" and slots[299].pod_cidr == "10.1.43.0/24"
    b = [s for s in slots if s.pool.name == "b"]
    assert [s.pod_cidr for s in b] == ["172.20.0.0/26", "172.20.0.64/26", "172.20.0.128/26", "172.20.0.192/26"]
    assert all(ipaddress.ip_network(s.pod_cidr).subnet_of(ipaddress.ip_network("172.20.0.0/24")) for s in b)
    assert [(s.zone, s.rack) for s in b] == [("z1", "z1-rack-0"), ("z2", "z2-rack-0"),
                                             ("z1", "z1-rack-1"), ("z2", "z2-rack-1")]
    assert node_slot(pools[1], 0).internal_ip == "100.64.1.45"  # ordinal 300 -> .0.0 + 301
