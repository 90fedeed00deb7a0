"""Topology on the hollow agent: node labels, unhealthy nodes, and the spread factor on a gang's run
clock (fake clock, recording API), as tests/unit/test_hollow_gang.py does for the barrier itself."""

from __future__ import annotations

import asyncio
import math
import random
from typing import Any

from test_hollow_gang import _member as gang_member
from test_hollow_pods import RecordingApi, advance

from hollow.clock import FakeClock, rfc3339
from hollow.faults import FaultState
from hollow.gangs import GangRegistry, counted_at
from hollow.metrics import Metrics
from hollow.nodebody import NOT_READY_REASON, NodeIdentity, heartbeat_patch, node_body
from hollow.nodes import NodeManager, NodeState
from hollow.pods import PodController
from hollow.pools import HOSTNAME_LABEL, NVLINK_LABEL, TOPOLOGY_RACK_LABEL, UNHEALTHY_TAINT, parse_pools
from hollow.settings import AgentSettings
from hollow.sharding import Shard, assign, node_slot
from hollow.stages import default_stages, plan, pod_facts
from hollow.topology import SPREAD_CONDITION, NodeTopology

T0 = 1_700_000_000.0
RES = {"cpu": "8", "memory": "8Gi"}


def _pools(**topology: Any) -> Any:
    return parse_pools({"pools": [{"name": "nvl", "count": 36, "resources": RES,
                                   "topology": {"shape": "gb200-nvl72", **topology}},
                                  {"name": "plain", "count": 2, "resources": RES}]}, "t")


# --- node bodies ------------------------------------------------------------------------------------
def test_node_body_carries_the_topology_labels() -> None:
    pool = _pools()[0]
    labels = node_body(node_slot(pool, 18), T0, NodeIdentity())["metadata"]["labels"]
    assert labels[TOPOLOGY_RACK_LABEL] == "nvl-rack1" and labels[NVLINK_LABEL] == "nvl-rack1"
    assert labels[HOSTNAME_LABEL] == "nvl-18" and labels["hollowscale.io/pool"] == "nvl"
    plain = node_body(node_slot(_pools()[1], 0), T0, NodeIdentity())["metadata"]["labels"]
    assert TOPOLOGY_RACK_LABEL not in plain and NVLINK_LABEL not in plain


def test_unhealthy_nodes_register_notready_or_tainted() -> None:
    pool = _pools(unhealthy={"not_ready": 2, "tainted": 3})[0]
    not_ready, tainted = pool.unhealthy_nodes()
    slots = [node_slot(pool, i) for i in range(pool.count)]
    assert {s.index for s in slots if s.not_ready} == not_ready and {s.index for s in slots if s.tainted} == tainted
    for slot in slots:
        body = node_body(slot, T0, NodeIdentity())
        ready = next(c for c in body["status"]["conditions"] if c["type"] == "Ready")
        taints = [(t["key"], t.get("value"), t["effect"]) for t in body["spec"].get("taints", [])]
        assert (ready["status"], ready["reason"] == NOT_READY_REASON) == \
            (("False", True) if slot.not_ready else ("True", False)), slot.name
        assert (UNHEALTHY_TAINT in taints) == slot.tainted, slot.name
    hb = heartbeat_patch(T0 + 10, None, ready=False)["status"]["conditions"]
    assert [c["status"] for c in hb if c["type"] == "Ready"] == ["False"]
    assert [c["status"] for c in heartbeat_patch(T0 + 10)["status"]["conditions"] if c["type"] == "Ready"] == ["True"]


class _Api:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    async def request(self, verb: str, method: str, path: str, *, body: Any = None, **kw: Any) -> Any:
        from hollow.api import Response
        self.calls.append((verb, path, body() if callable(body) else body))
        await asyncio.sleep(0)
        return Response(201 if method == "POST" else 200, b'{"metadata": {"uid": "u", "resourceVersion": "1"}}')


async def test_agent_keeps_a_notready_node_notready() -> None:
    pools = parse_pools({"pools": [{"name": "g", "count": 3, "resources": RES,
                                    "topology": {"unhealthy": {"not_ready": 1}}}]}, "t")
    (bad,) = pools[0].unhealthy_nodes()[0]
    clock, api = FakeClock(T0), _Api()
    nodes = NodeManager(api, clock, AgentSettings(shard=Shard()), Metrics(), FaultState(),  # type: ignore[arg-type]
                        assign(pools, Shard()), rng=random.Random(0))
    for name, state in nodes.nodes.items():
        state.uid = "uid-" + name
        state.last_renew = clock.monotonic()
    # the control plane reports every node NotReady: the agent reposts Ready except for the one kept NotReady
    for name, state in nodes.nodes.items():
        nodes.on_event("MODIFIED", {"metadata": {"name": name, "uid": state.uid},
                                    "status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    nodes._timers.run_due()
    for _ in range(5):
        await asyncio.sleep(0)
    posted = sorted(path.split("/")[-2] for verb, path, _ in api.calls if verb == "patch_node_status")
    assert posted == sorted(n for n in nodes.nodes if n != f"g-{bad}")
    # its own heartbeat says NotReady
    await nodes._refresh(f"g-{bad}")
    body = api.calls[-1][2]
    assert [c["status"] for c in body["status"]["conditions"] if c["type"] == "Ready"] == ["False"]


# --- the spread factor on the run clock ------------------------------------------------------------
def _member(uid: str, phase: str, node: str, start: float | None = None, duration: str = "10s",
            n: str = "2", gang: str = "g1", end: float | None = None, policy: str = "Never") -> dict[str, Any]:
    """A gang member pod as the agent writes it (test_hollow_gang's builder), bound to ``node``."""
    return gang_member(uid, phase, start=start, end=end, gang=gang, n=n, node=node, duration=duration,
                       policy=policy)


def test_registry_fixes_the_spread_of_the_members_counted_at_the_barrier() -> None:
    reg = GangRegistry(topology=NodeTopology(_pools()))
    reg.on_event("ADDED", _member("a", "Running", "nvl-17", start=T0))
    reg.on_event("ADDED", _member("b", "Running", "nvl-0", start=T0 + 2))
    spread = reg.spread("ns", "g1")
    assert spread is not None and (spread.level, spread.factor) == ("rack", 1.13)
    # a member that failed before the barrier does not count; its replacement does
    reg.on_event("ADDED", _member("c", "Running", "nvl-1", start=T0, gang="g2"))
    reg.on_event("MODIFIED", _member("c", "Failed", "nvl-1", start=T0, end=T0 + 1, gang="g2"))
    reg.on_event("ADDED", _member("d", "Running", "nvl-18", start=T0 + 5, gang="g2"))
    assert reg.spread("ns", "g2") is None
    reg.on_event("ADDED", _member("e", "Running", "nvl-19", start=T0 + 6, gang="g2"))
    spread = reg.spread("ns", "g2")
    assert spread is not None and spread.level == "rack"  # c (rack 0) ran no more: d and e share rack 1
    assert reg.spread("ns", "nope") is None
    assert counted_at({"x": (1.0, None), "y": (1.0, 2.0), "z": (3.0, None), "w": None}, 2.0) == ["x"]
    # without topology levels there is no spread
    plain = GangRegistry(topology=None)
    plain.on_event("ADDED", _member("a", "Running", "nvl-17", start=T0))
    plain.on_event("ADDED", _member("b", "Running", "nvl-18", start=T0))
    assert plain.barrier("ns", "g1") == T0 and plain.spread("ns", "g1") is None


def test_agents_sharing_a_gang_reach_the_same_spread_whatever_they_saw_first() -> None:
    objs = [_member("a", "Running", "nvl-17", start=T0), _member("b", "Running", "nvl-18", start=T0 + 1),
            _member("c", "Running", "nvl-30", start=T0 + 1, n="3")]
    seen = set()
    for order in ([0, 1, 2], [2, 1, 0], [1, 2, 0]):
        reg = GangRegistry(topology=NodeTopology(_pools()))
        for i in order:
            reg.on_event("ADDED", objs[i])
        seen.add(reg.spread("ns", "g1"))
    assert len(seen) == 1 and next(iter(seen)) is not None


def test_plan_stretches_only_a_crossed_gangs_run() -> None:
    lc = _pools()[0].lifecycle
    running = pod_facts(_member("a", "Running", "nvl-0", start=T0))
    at = plan(running, lc, T0 + 1, None, default_stages(), gated=True, barrier_at=T0 + 10, run_factor=1.3)
    assert at is not None and at.due_wall == T0 + 10 + 13.0
    assert plan(running, lc, T0 + 1, None, default_stages(), gated=True, barrier_at=None, run_factor=1.3) is None
    ungated = plan(running, lc, T0 + 1, None, default_stages(), run_factor=1.3)
    assert ungated is not None and ungated.due_wall == T0 + 10  # not a gated member: no factor


def _controller(pools: Any, shard: Shard | None = None) -> tuple[FakeClock, RecordingApi, PodController]:
    slots = assign(pools, shard or Shard())
    clock = FakeClock(T0)
    api = RecordingApi(clock)
    nodes = {s.name: NodeState(s, uid="x") for s in slots}
    ctl = PodController(api, clock, Metrics(), FaultState(), nodes, pools=pools)  # type: ignore[arg-type]
    return clock, api, ctl


def _feed(ctl: PodController, kind: str, obj: dict[str, Any]) -> None:
    assert ctl.gangs is not None
    ctl.gangs.on_event(kind, obj)
    ctl.on_event(kind, obj)


def _terminal(api: RecordingApi) -> dict[str, tuple[float, Any]]:
    """pod -> (seconds since the start to 0.1 s, its spread condition or None) of each terminal patch."""
    out = {}
    for t, verb, _, path, body in api.calls:
        if verb == "patch_pod_status" and body["status"].get("phase") in ("Succeeded", "Failed"):
            cond = [c for c in body["status"].get("conditions", ()) if c["type"] == SPREAD_CONDITION]
            out[path.split("/")[-2]] = (math.floor((t - 1000.0) * 10 + 1e-6) / 10, cond[0] if cond else None)
    return out


async def _two_members(nodes: tuple[str, str], pools: Any) -> dict[str, tuple[float, Any]]:
    """Members a and b of a gang of 2 (10 s run) on ``nodes``, already Running since T0 and T0 + 2."""
    clock, api, ctl = _controller(pools)
    _feed(ctl, "ADDED", _member("a", "Running", nodes[0], start=T0))
    await advance(clock, ctl, 2.0)
    _feed(ctl, "ADDED", _member("b", "Running", nodes[1], start=T0 + 2))
    await advance(clock, ctl, 20.0)
    return _terminal(api)


async def test_a_gang_across_two_racks_runs_factor_times_longer_than_one_in_a_rack() -> None:
    pools = _pools(spread_factors={"cluster": 1.5})
    one_rack = await _two_members(("nvl-0", "nvl-17"), pools)
    two_racks = await _two_members(("nvl-17", "nvl-18"), pools)
    # the barrier is b's start (2 s); the runs take 10 s x 1.13 (one rack) and 10 s x 1.5 (two racks)
    assert {k: v[0] for k, v in one_rack.items()} == {"p-a": 13.3, "p-b": 13.3}
    assert {k: v[0] for k, v in two_racks.items()} == {"p-a": 17.0, "p-b": 17.0}
    for got, level, factor in ((one_rack, "rack", "1.13"), (two_racks, "cluster", "1.5")):
        for _, cond in got.values():
            assert cond == {"type": SPREAD_CONDITION, "status": "True", "reason": level,
                            "message": f"factor={factor}", "lastTransitionTime": rfc3339(T0 + 2)}
    same_host = await _two_members(("nvl-5", "nvl-5"), pools)
    assert {k: (v[0], v[1]["reason"]) for k, v in same_host.items()} == {"p-a": (12.0, "host"), "p-b": (12.0, "host")}


async def test_pools_without_levels_keep_factor_one_and_write_no_condition() -> None:
    pools = parse_pools({"pools": [{"name": "plain", "count": 2, "resources": RES}]}, "t")
    got = await _two_members(("plain-0", "plain-1"), pools)
    assert got == {"p-a": (12.0, None), "p-b": (12.0, None)}


async def test_members_on_two_agents_get_the_same_factor() -> None:
    pools = _pools()
    finished: dict[str, tuple[float, Any]] = {}
    for shard in (Shard(0, 2), Shard(1, 2)):
        clock, api, ctl = _controller(pools, shard)
        for obj in (_member("a", "Running", "nvl-17", start=T0), _member("b", "Running", "nvl-20", start=T0 + 2)):
            _feed(ctl, "ADDED", obj)
        await advance(clock, ctl, 20.0)
        finished.update(_terminal(api))
    assert set(finished) == {"p-a", "p-b"}  # each agent finished its own member
    assert {(v[1]["reason"], v[1]["message"]) for v in finished.values()} == {("cluster", "factor=1.3")}
    assert {v[0] for v in finished.values()} == {15.0}
