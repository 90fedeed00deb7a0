"""Topology levels on hollow pools: the spec (shapes, validation with every problem at once, the
document round trip), the labels each node gets, the unhealthy pick, and the spanned level of a gang."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hollow.pools import (
    BLOCK_LABEL,
    CLUSTER,
    HOSTNAME_LABEL,
    NVLINK_LABEL,
    TOPOLOGY_RACK_LABEL,
    PoolSpec,
    parse_pools,
    pools_to_doc,
)
from hollow.topology import NodeTopology, spanned_level
from kubecore.schema import SpecError

RES = {"cpu": "8", "memory": "64Gi"}


def _pool(count: int, topology: dict[str, Any], name: str = "gpu", **more: Any) -> dict[str, Any]:
    return {"name": name, "count": count, "resources": dict(RES), "topology": topology, **more}


def _one(count: int, topology: dict[str, Any], name: str = "gpu") -> PoolSpec:
    return parse_pools([_pool(count, topology, name)], "f.yaml")[0]


LEVELS: list[dict[str, Any]] = [{"name": "block", "label": "example.com/block", "fanout": 2},
          {"name": "rack", "label": "example.com/rack", "fanout": 3},
          {"name": "host", "label": HOSTNAME_LABEL}]


# ------------------------------------------------------------------------------------------- shapes


def test_gb200_shape_racks_of_18_with_nvlink_equal_to_the_rack() -> None:
    pool = _one(36, {"shape": "gb200-nvl72"}, "nvl")
    assert pool.topology.level_labels() == (("rack", TOPOLOGY_RACK_LABEL), ("host", HOSTNAME_LABEL))
    assert pool.topology_labels(17) == {TOPOLOGY_RACK_LABEL: "nvl-rack0", HOSTNAME_LABEL: "nvl-17",
                                        NVLINK_LABEL: "nvl-rack0"}
    assert pool.topology_labels(18) == {TOPOLOGY_RACK_LABEL: "nvl-rack1", HOSTNAME_LABEL: "nvl-18",
                                        NVLINK_LABEL: "nvl-rack1"}


def test_kueue_perf_shape_is_blocks_of_10_racks_of_64() -> None:
    pool = _one(1280, {"shape": "kueue-perf"}, "k")
    assert pool.topology.level_labels() == (("block", BLOCK_LABEL), ("rack", TOPOLOGY_RACK_LABEL),
                                            ("host", HOSTNAME_LABEL))
    assert pool.topology_labels(63) == {BLOCK_LABEL: "k-block0", TOPOLOGY_RACK_LABEL: "k-rack0", HOSTNAME_LABEL: "k-63"}
    assert pool.topology_labels(64)[TOPOLOGY_RACK_LABEL] == "k-rack1"
    assert pool.topology_labels(639)[BLOCK_LABEL] == "k-block0"
    assert pool.topology_labels(640) == {BLOCK_LABEL: "k-block1", TOPOLOGY_RACK_LABEL: "k-rack10",
                                         HOSTNAME_LABEL: "k-640"}
    assert NVLINK_LABEL not in pool.topology_labels(0)


def test_dgx_blocks_shape_is_blocks_of_8_racks_of_32() -> None:
    pool = _one(512, {"shape": "dgx-blocks", "nvlink_label": "example.com/nvlink"}, "dgx")
    assert [n for n, _ in pool.topology.level_labels()] == ["block", "rack", "host"]
    assert pool.topology_labels(255)[BLOCK_LABEL] == "dgx-block0"
    assert pool.topology_labels(256) == {BLOCK_LABEL: "dgx-block1", TOPOLOGY_RACK_LABEL: "dgx-rack8",
                                         HOSTNAME_LABEL: "dgx-256", "example.com/nvlink": "dgx-rack8"}
    assert pool.topology_labels(31)[TOPOLOGY_RACK_LABEL] == "dgx-rack0"
    assert pool.topology_labels(32)[TOPOLOGY_RACK_LABEL] == "dgx-rack1"


def test_own_levels_with_values_and_no_levels_at_all() -> None:
    levels = copy.deepcopy(LEVELS)
    levels[1]["values"] = ["r0", "r1", "r0", "r1"]  # repeated under different blocks: allowed
    pool = _one(12, {"levels": levels})
    assert pool.topology_labels(2) == {"example.com/block": "gpu-block0", "example.com/rack": "r0",
                                       HOSTNAME_LABEL: "gpu-2"}
    assert pool.topology_labels(5) == {"example.com/block": "gpu-block0", "example.com/rack": "r1",
                                       HOSTNAME_LABEL: "gpu-5"}
    assert pool.topology_labels(6) == {"example.com/block": "gpu-block1", "example.com/rack": "r0",
                                       HOSTNAME_LABEL: "gpu-6"}
    plain = _one(5, {"zones": ["a"]})
    assert plain.topology_labels(3) == {} and plain.topology.level_labels() == ()


def test_spread_factor_defaults_and_overrides() -> None:
    topo = _one(640, {"shape": "kueue-perf", "spread_factors": {"rack": 1.5, "cluster": 2}}).topology
    assert (topo.spread_factor("host"), topo.spread_factor("rack"), topo.spread_factor("block"),
            topo.spread_factor(CLUSTER)) == (1.0, 1.5, 1.3, 2.0)
    assert _one(18, {"shape": "gb200-nvl72"}).topology.spread_factor("rack") == 1.13
    with pytest.raises(ValueError, match="expected a level name or cluster"):
        topo.spread_factor("zone")


def test_unhealthy_pick_is_seeded_by_the_pool_name_and_disjoint() -> None:
    pool = _one(100, {"unhealthy": {"not_ready": 3, "tainted": 2}})
    not_ready, tainted = pool.unhealthy_nodes()
    assert len(not_ready) == 3 and len(tainted) == 2 and not not_ready & tainted
    assert all(0 <= i < 100 for i in not_ready | tainted)
    again = parse_pools(pools_to_doc([pool]), "g")[0]
    assert again.unhealthy_nodes() == (not_ready, tainted)
    assert _one(100, {"unhealthy": {"not_ready": 3, "tainted": 2}}, "other").unhealthy_nodes() != (not_ready, tainted)
    assert _one(10, {}).unhealthy_nodes() == (frozenset(), frozenset())


# ------------------------------------------------------------------------------------------- validation


def _errors(topology: dict[str, Any], count: int = 12, **more: Any) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_pools([_pool(1, {}, "ok"), _pool(count, topology, **more)], "my-pools.yaml")
    return str(info.value).splitlines()


def _levels(**changes: Any) -> list[dict[str, Any]]:
    levels = copy.deepcopy(LEVELS)
    for key, value in changes.items():
        i, field = key.split("_", 1)
        if value is ...:
            del levels[int(i[1:])][field]
        else:
            levels[int(i[1:])][field] = value
    return levels


@pytest.mark.parametrize(
    ("topology", "line"),
    [
        ({"levels": _levels(l1_values=["r0", "r1", "r0", "r0"])},
         "pools[1].topology.levels[1].values[3]: expected a value not used by another rack of one block "
         "(values[2]), got 'r0'"),
        ({"levels": _levels(l0_values=["b", "b"])},
         "pools[1].topology.levels[0].values[1]: expected a value not used by another block of the pool "
         "(values[0]), got 'b'"),
        ({"levels": _levels(l1_label=...)}, "pools[1].topology.levels[1].label: is required"),
        ({"levels": _levels(l1_fanout=...)}, "pools[1].topology.levels[1].fanout: is required on every level but "
                                             "the last (how many host domains one rack holds)"),
        ({"levels": _levels(l2_fanout=4)}, "pools[1].topology.levels[2].fanout: expected none on the last level "
                                           "(one node per host), got 4"),
        ({"levels": _levels(l0_fanout=0)}, "pools[1].topology.levels[0].fanout: expected an integer >= 1, got 0"),
        ({"levels": _levels(l2_values=["a"] * 12)}, "pools[1].topology.levels[2].values: expected no values on the "
                                                    "kubernetes.io/hostname level"),
        ({"levels": _levels(l1_name="block")}, "pools[1].topology.levels[1].name: expected a name not used by "
                                               "levels[0], got 'block'"),
        ({"levels": _levels(l1_label="example.com/block")},
         "pools[1].topology.levels[1].label: expected a label key not used by levels[0], got 'example.com/block'"),
        ({"levels": LEVELS, "shape": "dgx-blocks"},
         "pools[1].topology.shape: expected shape or levels, not both (got shape 'dgx-blocks' and 3 levels)"),
        ({"shape": "nvl"}, "pools[1].topology.shape: expected one of kueue-perf, gb200-nvl72, dgx-blocks, got 'nvl'"),
        ({"levels": LEVELS, "zones": ["a"]},
         "pools[1].topology.levels: expected no zones or racks_per_zone with nested levels"),
        ({"shape": "gb200-nvl72", "zones": ["a"], "racks_per_zone": 2},
         "pools[1].topology.shape: expected no zones or racks_per_zone with nested levels"),
        ({"levels": LEVELS, "spread_factors": {"zone": 1.2}},
         "pools[1].topology.spread_factors.zone: expected a level name or cluster (block, rack, host, cluster), "
         "got 'zone'"),
        ({"spread_factors": {"cluster": 1.2}},
         "pools[1].topology.spread_factors.cluster: expected a level name or cluster (none without levels"),
        ({"levels": LEVELS, "spread_factors": {"rack": 0.9}},
         "pools[1].topology.spread_factors.rack: expected a number >= 1, got 0.9"),
        ({"levels": LEVELS[1:], "nvlink_label": "example.com/rack"},
         "pools[1].topology.nvlink_label: expected a label key no level uses, got 'example.com/rack'"),
        ({"levels": LEVELS[2:], "nvlink_label": "example.com/nvlink"},
         "pools[1].topology.nvlink_label: expected at least two levels"),
        ({"levels": LEVELS, "unhealthy": {"not_ready": 10, "tainted": 3}},
         "pools[1].topology.unhealthy: expected at most 12 unhealthy nodes (not_ready + tainted <= the pool's "
         "count), got 13"),
        ({"unhealthy": {"not_ready": -1}}, "pools[1].topology.unhealthy.not_ready: expected an integer >= 0, got -1"),
        ({"levels": _levels(l0_fanout=4)},
         "pools[1].topology.levels: expected levels whose fanouts divide the pool's count: each block holds 12 "
         "nodes (4 x 3), so count must be a multiple of 12, got count 18"),
        ({"levels": _levels(l1_values=["r0", "r1"])},
         "pools[1].topology.levels[1].values: expected 4 values (one per rack of the pool's 12 nodes), got 2"),
    ],
)
def test_errors_name_file_field_and_expectation(topology: dict[str, Any], line: str) -> None:
    lines = _errors(topology, 18 if "fanouts divide" in line else 12)
    assert any(x.startswith(f"my-pools.yaml: {line}") for x in lines), lines


def test_fanouts_that_do_not_divide_the_count_say_what_each_top_domain_needs() -> None:
    lines = _errors({"shape": "gb200-nvl72"}, 20)
    assert lines == ["my-pools.yaml: pools[1].topology.shape: expected levels whose fanouts divide the pool's "
                     "count: each rack holds 18 nodes (18), so count must be a multiple of 18, got count 20"]


def test_every_topology_problem_is_reported_at_once() -> None:
    levels = _levels(l1_name="block", l2_fanout=2)
    levels[0]["values"] = ["x", "x"]
    lines = _errors({"levels": levels, "zones": ["a"], "shape": "dgx-blocks", "nvlink_label": "example.com/block",
                     "spread_factors": {"zone": 1.5, "rack": 0.5}})
    paths = [x.split(": ")[1] for x in lines]
    assert sorted(paths) == sorted([
        "pools[1].topology.shape", "pools[1].topology.shape", "pools[1].topology.levels[1].name",
        "pools[1].topology.levels[2].fanout", "pools[1].topology.levels[0].values[1]",
        "pools[1].topology.spread_factors.zone", "pools[1].topology.spread_factors.rack"]), lines
    lines = _errors({"levels": levels, "nvlink_label": "example.com/block", "spread_factors": {"zone": 1.5}})
    paths = [x.split(": ")[1] for x in lines]
    assert sorted(paths) == sorted([
        "pools[1].topology.levels[1].name", "pools[1].topology.levels[2].fanout",
        "pools[1].topology.levels[0].values[1]", "pools[1].topology.nvlink_label",
        "pools[1].topology.spread_factors.zone"]), lines


def test_count_problems_and_label_collisions_together() -> None:
    lines = _errors({"levels": LEVELS, "unhealthy": {"not_ready": 21}}, 20,
                    labels={"example.com/rack": "mine"})
    paths = [x.split(": ")[1] for x in lines]
    assert sorted(paths) == sorted(["pools[1].topology.levels", "pools[1].topology.unhealthy",
                                    "pools[1].labels.example.com/rack"]), lines


def test_default_values_longer_than_a_label_value_are_refused() -> None:
    name = "p" * 48
    levels = [{"name": "r" * 20, "label": "example.com/rack", "fanout": 1}, {"name": "host", "label": HOSTNAME_LABEL}]
    lines = _errors({"levels": levels}, 12, name=name)
    assert any(".topology.levels[0].name: expected a shorter pool or level name" in x for x in lines), lines


# ------------------------------------------------------------------------------------------- round trip


def test_round_trip_through_the_agents_document() -> None:
    levels = _levels(l1_values=["r0", "r1", "r0", "r1"])
    pools = parse_pools([
        _pool(12, {"levels": levels, "nvlink_label": "example.com/nvl", "region": "eu",
                   "spread_factors": {"rack": 1.2, "cluster": 1.5}, "unhealthy": {"not_ready": 1, "tainted": 2}}),
        _pool(36, {"shape": "gb200-nvl72"}, "nvl"),
        _pool(256, {"shape": "dgx-blocks", "unhealthy": {"tainted": 4}}, "dgx"),
        _pool(3, {"zones": ["a", "b"], "racks_per_zone": 1}, "plain"),
    ], "f.yaml")
    doc = pools_to_doc(pools)
    again = parse_pools(yaml.safe_load(yaml.safe_dump(doc)), "again")
    assert again == pools
    assert [p.topology_labels(5) for p in again] == [p.topology_labels(5) for p in pools]
    assert pools_to_doc(again) == doc


# ------------------------------------------------------------------------------------------- spanned level

RACK_HOST = (("block", "b"), ("rack", "r"), ("host", "h"))


def test_spanned_level_is_the_smallest_common_domain() -> None:
    n1 = {"b": "b0", "r": "r0", "h": "n1"}
    n2 = {"b": "b0", "r": "r0", "h": "n2"}
    n3 = {"b": "b0", "r": "r1", "h": "n3"}
    n4 = {"b": "b1", "r": "r0", "h": "n4"}
    assert spanned_level(RACK_HOST, [n1]) == "host"
    assert spanned_level(RACK_HOST, [n1, n1]) == "host"
    assert spanned_level(RACK_HOST, [n1, n2]) == "rack"
    assert spanned_level(RACK_HOST, [n1, n3]) == "block"
    assert spanned_level(RACK_HOST, [n1, n2, n3]) == "block"
    assert spanned_level(RACK_HOST, [n1, n4]) == CLUSTER
    # the same rack value under two blocks is two racks, not one
    assert spanned_level(RACK_HOST, [n2, n4]) == CLUSTER
    assert spanned_level(RACK_HOST[1:], [n2, n4]) == "rack"  # without the block level they are one rack
    assert spanned_level(RACK_HOST, [n1, {"b": "b0", "r": "r0"}]) == CLUSTER  # a label missing
    assert spanned_level(RACK_HOST, []) == CLUSTER and spanned_level((), [n1]) == CLUSTER


def test_gang_spread_from_node_names() -> None:
    pools = parse_pools([_pool(36, {"shape": "gb200-nvl72", "spread_factors": {"cluster": 1.6}}, "nvl"),
                         _pool(36, {"shape": "gb200-nvl72"}, "nvl2"),
                         _pool(4, {}, "plain")], "f")
    topo = NodeTopology(pools)
    one = topo.gang_spread(["nvl-0", "nvl-17"])
    assert one is not None and (one.level, one.factor) == ("rack", 1.13)
    two = topo.gang_spread(["nvl-17", "nvl-18"])
    assert two is not None and (two.level, two.factor) == (CLUSTER, 1.6)
    host = topo.gang_spread(["nvl-3", "nvl-3"])
    assert host is not None and (host.level, host.factor) == ("host", 1.0)
    # a node outside the pools, or on a pool without levels: cluster, the largest factor of the pools
    for nodes in (["nvl-0", "kind-worker"], ["nvl-0", "plain-1"], ["nvl-0", "nvl-36"], ["nvl-0", "nvl-01"]):
        spread = topo.gang_spread(nodes)
        assert spread is not None and (spread.level, spread.factor) == (CLUSTER, 1.6), nodes
    both = topo.gang_spread(["nvl2-0", "nvl-0"])
    assert both is not None and (both.level, both.factor) == (CLUSTER, 1.6)
    assert topo.gang_spread(["plain-0", "plain-1"]) is None
    assert topo.gang_spread(["kind-worker"]) is None
    assert topo.gang_spread(["nvl-17", "nvl-18"]) == topo.gang_spread(["nvl-18", "nvl-17"])


def test_without_levels_keeps_everything_but_the_topology_labels() -> None:
    from hollow.sharding import node_slot
    from hollow.topology import without_levels

    pools = parse_pools([_pool(3, {"zones": ["a"]}, "first"),
                         _pool(36, {"shape": "gb200-nvl72", "region": "eu", "unhealthy": {"tainted": 2}}, "nvl")], "f")
    bare = without_levels(pools)
    assert [p.first_ordinal for p in bare] == [0, 3]
    assert bare[1].topology_labels(5) == {} and bare[1].topology.level_labels() == ()
    assert bare[1].topology.region == "eu" and bare[1].unhealthy_nodes() == pools[1].unhealthy_nodes()
    assert bare[0] == pools[0]
    slot, bare_slot = node_slot(pools[1], 7), node_slot(bare[1], 7)
    assert (slot.internal_ip, slot.pod_cidr, slot.tainted) == (bare_slot.internal_ip, bare_slot.pod_cidr, bare_slot.tainted)


@st.composite
def _topologies(draw: st.DrawFn) -> tuple[int, dict[str, Any]]:
    """A valid pool count and topology: levels or a shape, factors, unhealthy nodes."""
    if draw(st.booleans()):
        shape = draw(st.sampled_from(["kueue-perf", "gb200-nvl72", "dgx-blocks"]))
        count = {"kueue-perf": 640, "gb200-nvl72": 18, "dgx-blocks": 256}[shape] * draw(st.integers(0, 3))
        topo: dict[str, Any] = {"shape": shape}
        names = [n for n, _ in parse_pools([_pool(count, topo)], "s")[0].topology.level_labels()]
    else:
        fanouts = draw(st.lists(st.integers(1, 4), min_size=0, max_size=3))
        names = [f"l{i}" for i in range(len(fanouts) + 1)]
        levels: list[dict[str, Any]] = [{"name": n, "label": f"example.com/{n}", "fanout": f}
                                        for n, f in zip(names, fanouts, strict=False)]
        levels.append({"name": names[-1], "label": HOSTNAME_LABEL})
        top = draw(st.integers(0, 3))
        count = top * math.prod(fanouts)
        if len(levels) >= 2 and draw(st.booleans()):
            levels[0]["values"] = [f"v{k}" for k in range(top)]
        topo = {"levels": levels}
        if len(levels) >= 2 and draw(st.booleans()):
            topo["nvlink_label"] = "example.com/nvl"
    keys = draw(st.lists(st.sampled_from([*names, CLUSTER]), unique=True, max_size=3))
    topo["spread_factors"] = {k: draw(st.floats(1, 3)) for k in keys}
    bad = draw(st.integers(0, count))
    topo["unhealthy"] = {"not_ready": bad // 2, "tainted": bad - bad // 2}
    return count, topo


@settings(max_examples=100, deadline=None)
@given(_topologies())
def test_round_trip_property(case: tuple[int, dict[str, Any]]) -> None:
    count, topo = case
    pools = parse_pools([_pool(count, topo)], "generated")
    again = parse_pools(yaml.safe_load(yaml.safe_dump(pools_to_doc(pools))), "written")
    assert again == pools
    if count:
        assert again[0].topology_labels(count - 1) == pools[0].topology_labels(count - 1)
