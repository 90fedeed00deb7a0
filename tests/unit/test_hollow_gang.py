"""Gang barriers: the pure barrier rule, the registry, the planner's gate and the controller on a fake clock.

The same behaviour runs against the real control plane, with one and with two agents, in
tests/integration/test_hollow_gang_barrier.py.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_hollow_pods import RecordingApi, advance, writes

from hollow.clock import FakeClock, rfc3339
from hollow.faults import FaultState
from hollow.gangs import (
    ANN_CHECKPOINT,
    ANN_GANG_MIN,
    LABEL_GANG,
    GangRegistry,
    barrier_time,
    first_drop,
    member_interval,
    parse_checkpoint,
    saved_work,
)
from hollow.metrics import Metrics
from hollow.nodes import NodeState
from hollow.pods import PodController
from hollow.pools import PoolsError, parse_pools, pools_to_doc
from hollow.settings import AgentSettings
from hollow.sharding import Shard, assign
from hollow.stages import annotation_problems, default_stages, gang_min, plan, pod_facts

T0 = 1_700_000_000.0


# --- the barrier rule (pure) ------------------------------------------------------------------------
def test_barrier_is_the_nth_start_among_running_members() -> None:
    assert barrier_time([], 1) is None
    assert barrier_time([(10.0, None)], 2) is None
    assert barrier_time([(10.0, None), (14.0, None)], 2) == 14.0
    assert barrier_time([(14.0, None), (10.0, None), (12.0, None)], 2) == 12.0  # order of arrival is irrelevant
    assert barrier_time([(14.0, None), (10.0, None), (12.0, None)], 1) == 10.0
    assert barrier_time([(14.0, None), (10.0, None), (12.0, None)], 3) == 14.0
    assert barrier_time([(14.0, None), (10.0, None), (12.0, None)], 4) is None


def test_finished_members_count_only_while_they_ran() -> None:
    # a member that finished after the barrier still counts (restart safety: the others keep their barrier)
    assert barrier_time([(10.0, 30.0), (12.0, None)], 2) == 12.0
    assert barrier_time([(10.0, 30.0), (12.0, 30.0)], 2) == 12.0
    # a member that failed before the second one started does not: the gang is not complete
    assert barrier_time([(10.0, 11.0), (12.0, None)], 2) is None
    # ...until a replacement starts
    assert barrier_time([(10.0, 11.0), (12.0, None), (20.0, None)], 2) == 20.0
    # ended exactly when the other started: not running at that moment
    assert barrier_time([(10.0, 12.0), (12.0, None)], 2) is None
    # finished without a finish time (or before it started): never counted
    assert barrier_time([(10.0, 10.0), (12.0, None)], 1) == 12.0


def _member(uid: str, phase: str = "", start: float | None = None, end: float | None = None, gang: str = "g1",
            n: str | None = "2", ns: str = "ns", node: str = "g-0", duration: str = "3s",
            policy: str = "Never") -> dict[str, Any]:
    ann = {"hollowscale.io/run-duration": duration}
    if n is not None:
        ann[ANN_GANG_MIN] = n
    labels = {"job-name": "j"}
    if gang:
        labels[LABEL_GANG] = gang
    obj: dict[str, Any] = {
        "metadata": {"uid": uid, "name": "p-" + uid, "namespace": ns, "labels": labels, "annotations": ann,
                     "creationTimestamp": rfc3339(T0)},
        "spec": {"nodeName": node, "restartPolicy": policy, "containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": phase} if phase else {}}
    if start is not None:
        obj["status"]["startTime"] = rfc3339(start)
        state: dict[str, Any] = {"running": {"startedAt": rfc3339(start)}}
        if end is not None:
            state = {"terminated": {"exitCode": 0, "startedAt": rfc3339(start), "finishedAt": rfc3339(end)}}
        obj["status"]["containerStatuses"] = [{"name": "c", "restartCount": 0, "state": state}]
    return obj


def test_member_interval_reads_the_fields_the_agent_writes() -> None:
    assert member_interval(_member("a", "Pending")) is None
    assert member_interval(_member("a", "Pending", start=T0)) is None  # accepted, containers not running
    assert member_interval(_member("a", "Running", start=T0)) == (T0, None)
    assert member_interval(_member("a", "Succeeded", start=T0, end=T0 + 5)) == (T0, T0 + 5)
    failed = _member("a", "Failed", start=T0)
    failed["status"]["containerStatuses"] = []
    assert member_interval(failed) == (T0, T0)  # no finish time: never counted
    no_start = _member("a", "Running", start=T0)
    del no_start["status"]["startTime"]
    assert member_interval(no_start) == (T0, None)  # the container's startedAt


# --- the registry ---------------------------------------------------------------------------------
def test_registry_crosses_once_and_keeps_the_barrier() -> None:
    crossed: list[tuple[Any, float, list[str]]] = []
    reg = GangRegistry(lambda key, at, uids: crossed.append((key, at, sorted(uids))))
    reg.on_event("ADDED", _member("a", "Running", start=T0))
    reg.on_event("ADDED", _member("b", "Pending"))
    reg.on_event("ADDED", _member("x", "Running", start=T0, gang="other"))
    assert reg.barrier("ns", "g1") is None and crossed == [] and len(reg) == 3
    reg.on_event("MODIFIED", _member("b", "Running", start=T0 + 7))
    assert reg.barrier("ns", "g1") == T0 + 7
    assert crossed == [(("ns", "g1"), T0 + 7, ["a", "b"])]
    assert reg.barrier("other-ns", "g1") is None  # gangs are per namespace
    # members finish or go away: the barrier stays, no second crossing
    reg.on_event("MODIFIED", _member("a", "Succeeded", start=T0, end=T0 + 10))
    reg.on_event("DELETED", _member("a", "Succeeded", start=T0, end=T0 + 10))
    assert reg.barrier("ns", "g1") == T0 + 7 and len(crossed) == 1
    # the last member gone: the gang is forgotten
    reg.on_relisted({"x"})
    assert reg.barrier("ns", "g1") is None and set(reg.gangs) == {("ns", "other")}


def test_registry_failure_before_barrier_keeps_the_others_waiting() -> None:
    reg = GangRegistry()
    reg.on_event("ADDED", _member("a", "Running", start=T0))
    reg.on_event("MODIFIED", _member("a", "Failed", start=T0, end=T0 + 2))
    reg.on_event("ADDED", _member("b", "Running", start=T0 + 5))
    assert reg.barrier("ns", "g1") is None
    reg.on_event("ADDED", _member("a2", "Running", start=T0 + 9))  # the replacement
    assert reg.barrier("ns", "g1") == T0 + 9


def test_registry_ignores_unusable_annotations_and_relabelling() -> None:
    reg = GangRegistry()
    reg.on_event("ADDED", _member("a", "Running", start=T0, n="two"))
    assert len(reg) == 0
    reg.on_event("ADDED", _member("b", "Running", start=T0, n="2"))
    reg.on_event("MODIFIED", _member("b", "Running", start=T0, n="2", gang="g2"))
    assert set(reg.gangs) == {("ns", "g2")}


# --- attempts and checkpoints -----------------------------------------------------------------------
def _ckpt(obj: dict[str, Any], seconds: str = "30") -> dict[str, Any]:
    obj["metadata"]["annotations"][ANN_CHECKPOINT] = seconds
    return obj


def test_first_drop_and_saved_work_are_the_model() -> None:
    assert first_drop({"a": (10.0, None), "b": (12.0, None)}, 2, 12.0) is None
    assert first_drop({"a": (10.0, 40.0), "b": (12.0, None)}, 2, 12.0) == (40.0, ["a"])
    # a replacement starting when the other ends keeps no gap open: ends count before starts
    assert first_drop({"a": (10.0, 40.0), "b": (12.0, None), "c": (40.0, None)}, 2, 12.0) == (40.0, ["a"])
    assert first_drop({"a": (10.0, 40.0), "b": (12.0, 40.0)}, 2, 12.0) == (40.0, ["a", "b"])
    assert first_drop({"a": (10.0, 11.0), "b": (12.0, None)}, 1, 12.0) is None  # ended before: not counted
    assert saved_work(95.0, 30.0) == 90.0 and saved_work(90.0, 30.0) == 90.0 and saved_work(29.9, 30.0) == 0.0
    assert saved_work(95.0, None) == 0.0
    assert parse_checkpoint("30") == 30.0 and parse_checkpoint("x") is None and parse_checkpoint("0") is None
    assert parse_checkpoint(None) is None and parse_checkpoint("inf") is None


def test_a_failed_member_breaks_the_attempt_and_the_replacement_resumes_from_the_checkpoint() -> None:
    seen: list[tuple[float | None, list[str]]] = []
    reg = GangRegistry(lambda key, at, uids: seen.append((at, sorted(uids))))
    reg.on_event("ADDED", _ckpt(_member("a", "Running", start=T0)))
    reg.on_event("ADDED", _ckpt(_member("b", "Running", start=T0 + 10)))
    assert reg.barrier("ns", "g1") == T0 + 10 and reg.work_done("ns", "g1") == 0.0
    # b fails 75 s of work later: two checkpoints (60 s) saved, 15 s lost; a waits again
    reg.on_event("MODIFIED", _ckpt(_member("b", "Failed", start=T0 + 10, end=T0 + 85)))
    assert reg.barrier("ns", "g1") is None and reg.work_done("ns", "g1") == 60.0
    assert seen[-1] == (None, ["a", "b"])
    # the replacement (per index) runs: the next attempt starts; the saved work stays
    reg.on_event("ADDED", _ckpt(_member("b2", "Running", start=T0 + 95)))
    assert reg.barrier("ns", "g1") == T0 + 95 and reg.work_done("ns", "g1") == 60.0
    g = reg.gangs[("ns", "g1")]
    assert g.attempts == 2 and not g.completed
    # it completes: the barrier stays, later deletions change nothing
    reg.on_event("MODIFIED", _ckpt(_member("a", "Succeeded", start=T0, end=T0 + 135)))
    reg.on_event("DELETED", _ckpt(_member("b2", "Running", start=T0 + 95)))
    assert g.completed and reg.barrier("ns", "g1") == T0 + 95


def test_a_recreated_gang_resumes_from_its_saved_work_after_every_member_was_deleted() -> None:
    reg = GangRegistry(wall=lambda: T0 + 500)
    for uid in ("a", "b"):
        reg.on_event("ADDED", _ckpt(_member(uid, "Running", start=T0), "40"))
    # the whole JobSet is recreated: a member deleted while it ran ends at its deletionTimestamp
    deleting = _ckpt(_member("a", "Running", start=T0), "40")
    deleting["metadata"]["deletionTimestamp"] = rfc3339(T0 + 100)
    reg.on_event("MODIFIED", deleting)
    assert reg.barrier("ns", "g1") is None and reg.work_done("ns", "g1") == 80.0
    reg.on_event("DELETED", deleting)
    reg.on_event("DELETED", _ckpt(_member("b", "Running", start=T0), "40"))  # no timestamp: the wall clock
    assert ("ns", "g1") in reg.gangs and len(reg) == 0  # no members, but its saved work is kept
    for uid in ("c", "d"):
        reg.on_event("ADDED", _ckpt(_member(uid, "Running", start=T0 + 130), "40"))
    assert reg.barrier("ns", "g1") == T0 + 130 and reg.work_done("ns", "g1") == 80.0


def test_without_checkpoints_a_restart_starts_from_nothing() -> None:
    reg = GangRegistry()
    reg.on_event("ADDED", _member("a", "Running", start=T0))
    reg.on_event("ADDED", _member("b", "Running", start=T0))
    reg.on_event("MODIFIED", _member("b", "Failed", start=T0, end=T0 + 500))
    assert reg.work_done("ns", "g1") == 0.0


async def test_the_survivor_and_the_replacement_run_the_remaining_work_from_the_new_barrier() -> None:
    clock, api, ctl = _controller()
    feed(ctl, "ADDED", _ckpt(_member("a", "Running", start=T0, duration="100s")))
    feed(ctl, "ADDED", _ckpt(_member("b", "Running", start=T0, node="g-1", duration="100s")))
    await advance(clock, ctl, 50.0)
    assert _finishes(api) == []
    feed(ctl, "MODIFIED", _ckpt(_member("b", "Failed", start=T0, end=T0 + 50, node="g-1", duration="100s")))
    await advance(clock, ctl, 10.0)
    assert [f for f in _finishes(api) if f[1] == "p-a"] == []  # a waits for the gang, past its first plan
    feed(ctl, "ADDED", _ckpt(_member("c", "Running", start=T0 + 60, node="g-1", duration="100s")))
    # 30 s saved of 100: both run 70 s more from the new barrier (+60), not 100
    await advance(clock, ctl, 69.5)
    assert [f for f in _finishes(api) if f[1] != "p-b"] == []
    await advance(clock, ctl, 1.0)
    assert sorted(f for f in _finishes(api) if f[1] != "p-b") == [(130.0, "p-a"), (130.0, "p-c")]


# --- the planner's gate (pure) ----------------------------------------------------------------------
def _lifecycle() -> Any:
    return parse_pools({"pools": [{"name": "g", "count": 1, "resources": {"cpu": "8", "memory": "8Gi"}}]},
                       "t")[0].lifecycle


def test_plan_waits_for_the_barrier_only_where_the_run_clock_starts() -> None:
    lc = _lifecycle()
    running = pod_facts(_member("a", "Running", start=T0))
    assert running.gang == "g1" and gang_min(running) == 2
    ungated = plan(running, lc, T0 + 1, None, default_stages())
    assert ungated is not None and ungated.due_wall == T0 + 3
    assert plan(running, lc, T0 + 1, None, default_stages(), gated=True, barrier_at=None) is None
    at = plan(running, lc, T0 + 1, None, default_stages(), gated=True, barrier_at=T0 + 10)
    assert at is not None and at.stage.name == "pod-complete" and at.due_wall == T0 + 13
    # a member that started after the barrier counts from its own start
    late = plan(running, lc, T0 + 1, T0 + 0.5, default_stages(), gated=True, barrier_at=T0 - 20)
    assert late is not None and late.due_wall == T0 + 3.5
    # starting (anchor: binding) and deletion (anchor: now) do not wait for the gang
    pending = plan(pod_facts(_member("a", "Pending")), lc, T0, None, default_stages(), gated=True)
    assert pending is not None and pending.stage.action == "start"
    deleting = pod_facts(_member("a", "Running", start=T0))
    deleting = type(deleting)(**{**deleting.__dict__, "deleting": True})
    gone = plan(deleting, lc, T0, None, default_stages(), gated=True)
    assert gone is not None and gone.stage.action == "finalize"


def test_gang_membership_needs_label_and_usable_annotation() -> None:
    assert gang_min(pod_facts(_member("a", "Running", start=T0, gang=""))) is None
    assert gang_min(pod_facts(_member("a", "Running", start=T0, n=None))) is None
    bad = pod_facts(_member("a", "Running", start=T0, n="0"))
    assert gang_min(bad) is None
    assert any(ANN_GANG_MIN in p for p in annotation_problems(bad))
    assert annotation_problems(pod_facts(_member("a", "Running", start=T0))) == []


# --- the controller -------------------------------------------------------------------------------
def _controller(gang_barrier: bool = True, pool_gate: bool | None = None,
                shard: Shard | None = None) -> tuple[FakeClock, RecordingApi, PodController]:
    pool: dict[str, Any] = {"name": "g", "count": 2, "resources": {"cpu": "8", "memory": "8Gi"}}
    if pool_gate is not None:
        pool["lifecycle"] = {"gang_barrier": pool_gate}
    slots = assign(parse_pools({"pools": [pool]}, "t"), shard or Shard())
    clock = FakeClock(T0)
    api = RecordingApi(clock)
    nodes = {s.name: NodeState(s, uid="x") for s in slots}
    ctl = PodController(api, clock, Metrics(), FaultState(), nodes, gang_barrier=gang_barrier)  # type: ignore[arg-type]
    return clock, api, ctl


def feed(ctl: PodController, kind: str, obj: dict[str, Any]) -> None:
    """One change as the agent receives it: on the gang watch (labelled, bound pods), then the pod watch."""
    if ctl.gangs is not None and LABEL_GANG in obj["metadata"]["labels"] and obj["spec"].get("nodeName"):
        ctl.gangs.on_event(kind, obj)
    ctl.on_event(kind, obj)


def _finishes(api: RecordingApi) -> list[tuple[float, str]]:
    """(seconds since the start, pod) of each finish, to 0.1 s (the fake clock moves in 0.05 s steps)."""
    return [(math.floor((t - 1000.0) * 10 + 1e-6) / 10, path.split("/")[-2]) for t, verb, _, path, body in api.calls
            if verb == "patch_pod_status" and body["status"].get("phase") in ("Succeeded", "Failed")]


async def test_member_waits_for_a_member_on_another_agents_node() -> None:
    # shard 0/2 owns g-0; g-1 belongs to the other agent, whose pods arrive on the same watch
    clock, api, ctl = _controller(shard=Shard(0, 2))
    assert set(ctl.nodes) == {"g-0"}
    feed(ctl, "ADDED", _member("a", "Running", start=T0, node="g-0"))
    feed(ctl, "ADDED", _member("b", "Pending", node="g-1"))
    await advance(clock, ctl, 10.0)
    assert writes(api) == [] and "a" in ctl.records and "b" not in ctl.records  # a holds on, Running
    feed(ctl, "MODIFIED", _member("b", "Running", start=T0 + 10, node="g-1"))
    await advance(clock, ctl, 2.9)
    assert writes(api) == []
    await advance(clock, ctl, 0.2)
    assert _finishes(api) == [(13.0, "p-a")]  # barrier (b's start) + 3 s


async def test_both_local_members_finish_three_seconds_after_the_second_started() -> None:
    clock, api, ctl = _controller()
    feed(ctl, "ADDED", _member("a", "Pending", node="g-0"))
    await advance(clock, ctl, 0.5)
    assert writes(api) == [("patch_pod_status", "Running")]
    feed(ctl, "MODIFIED", _member("a", "Running", start=T0, node="g-0"))  # the echo of our write
    await advance(clock, ctl, 5.0)
    feed(ctl, "ADDED", _member("b", "Pending", node="g-1"))
    await advance(clock, ctl, 0.5)
    feed(ctl, "MODIFIED", _member("b", "Running", start=T0 + 5, node="g-1"))  # written at 5.55
    await advance(clock, ctl, 10.0)
    # a: the barrier (b's start, whole seconds as in the pod) + 3; b: its own precise start (5.55) + 3
    assert _finishes(api) == [(8.0, "p-a"), (8.5, "p-b")]
    assert len(writes(api)) == 4  # two starts, two finishes, nothing else


async def test_barrier_off_agent_wide_or_per_pool_restores_the_old_behaviour() -> None:
    for agent_on, pool_gate in ((False, None), (True, False)):
        clock, api, ctl = _controller(gang_barrier=agent_on, pool_gate=pool_gate)
        assert ctl.gangs is None  # nothing is tracked at all
        feed(ctl, "ADDED", _member("a", "Running", start=T0))
        await advance(clock, ctl, 3.5)
        assert _finishes(api) == [(3.0, "p-a")], (agent_on, pool_gate)
    clock, api, ctl = _controller(gang_barrier=False, pool_gate=True)  # a pool turns it on
    feed(ctl, "ADDED", _member("a", "Running", start=T0))
    await advance(clock, ctl, 3.5)
    assert _finishes(api) == []


async def test_pods_without_the_label_are_not_tracked() -> None:
    clock, api, ctl = _controller()
    feed(ctl, "ADDED", _member("a", "Running", start=T0, gang=""))
    feed(ctl, "ADDED", _member("b", "Running", start=T0, gang="", n=None, node="g-1"))
    await advance(clock, ctl, 3.5)
    assert ctl.gangs is not None and len(ctl.gangs) == 0
    assert sorted(_finishes(api)) == [(3.0, "p-a"), (3.0, "p-b")]


async def test_a_new_agent_process_computes_the_same_deadlines() -> None:
    # the gang crossed its barrier 20 s ago (b started at T0 - 20); the run duration is 30 s
    clock, api, ctl = _controller()
    lst = [_member("a", "Running", start=T0 - 60, duration="30s"),
           _member("b", "Running", start=T0 - 20, node="g-1", duration="30s"),
           _member("c", "Running", start=T0 - 60, node="g-1", gang="g2", n="3", duration="30s")]
    for obj in lst:  # the pod watch lists first, then the gang watch
        ctl.on_event("ADDED", obj)
    ctl.on_relisted({o["metadata"]["uid"] for o in lst})
    assert ctl.gangs is not None
    for obj in lst:
        ctl.gangs.on_event("ADDED", obj)
    ctl.gangs.on_relisted({o["metadata"]["uid"] for o in lst})
    await advance(clock, ctl, 10.5)
    assert sorted(_finishes(api)) == [(10.0, "p-a"), (10.0, "p-b")]  # not at once: barrier + 30 s
    await advance(clock, ctl, 60.0)
    assert len(_finishes(api)) == 2  # c's gang of 3 never completed


async def test_member_deleted_before_the_barrier_leaves_the_others_waiting() -> None:
    clock, api, ctl = _controller()
    feed(ctl, "ADDED", _member("a", "Running", start=T0, n="3"))
    feed(ctl, "ADDED", _member("b", "Running", start=T0, n="3", node="g-1"))
    feed(ctl, "DELETED", _member("b", "Running", start=T0, n="3", node="g-1"))
    await advance(clock, ctl, 20.0)
    assert _finishes(api) == []
    feed(ctl, "ADDED", _member("c", "Running", start=T0 + 20, n="3", node="g-1"))
    await advance(clock, ctl, 1.0)
    assert _finishes(api) == []  # a gang of 3 needs a third member
    feed(ctl, "ADDED", _member("d", "Running", start=T0 + 21, n="3", node="g-1"))
    await advance(clock, ctl, 3.5)
    assert sorted(_finishes(api)) == [(24.0, "p-a"), (24.0, "p-c"), (24.0, "p-d")]


# --- settings --------------------------------------------------------------------------------------
def test_pool_setting_is_validated_and_round_trips() -> None:
    base = {"name": "g", "count": 1, "resources": {"cpu": "8", "memory": "8Gi"}}
    assert parse_pools([base], "t")[0].lifecycle.gang_barrier is None
    assert "gang_barrier" not in pools_to_doc(parse_pools([base], "t"))["pools"][0]["lifecycle"]
    off = parse_pools([{**base, "lifecycle": {"gang_barrier": False}}], "t")
    assert off[0].lifecycle.gang_barrier is False
    assert parse_pools(pools_to_doc(off), "t") == off
    with pytest.raises(PoolsError, match=r"pools\[0\]\.lifecycle\.gang_barrier"):
        parse_pools([{**base, "lifecycle": {"gang_barrier": "no"}}], "t")
    assert AgentSettings().gang_barrier is True


def test_cli_flag_reaches_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hollow.agent
    import kubecore.config
    from hollow.cli import nodes_group

    seen: list[AgentSettings] = []
    monkeypatch.setattr(kubecore.config, "load_endpoint", lambda path: object())

    def run_agent(endpoint: object, pools: object, settings: AgentSettings) -> int:
        seen.append(settings)
        return 0

    monkeypatch.setattr(hollow.agent, "run_agent", run_agent)
    pools = tmp_path / "pools.yaml"
    pools.write_text("pools:\n  - {name: g, count: 1, resources: {cpu: '8', memory: 8Gi}}\n")
    args = ["run", "--kubeconfig", "k", "--pools", str(pools)]
    for extra, env, want in (([], {}, True), (["--no-gang-barrier"], {}, False),
                             ([], {"HOLLOW_GANG_BARRIER": "false"}, False)):
        result = CliRunner().invoke(nodes_group, args + extra, env=env)
        assert result.exit_code == 0, result.output
        assert seen[-1].gang_barrier is want, (extra, env)


def test_agent_watches_only_bound_gang_pods_and_only_when_needed() -> None:
    from hollow.agent import Agent
    from kubecore.config import KubeEndpoint

    pools = parse_pools([{"name": "g", "count": 2, "resources": {"cpu": "8", "memory": "8Gi"}}], "t")
    endpoint = KubeEndpoint(server="https://127.0.0.1:1")
    agent = Agent(endpoint, pools, AgentSettings())
    assert agent.gang_watch is not None and agent.gang_watch.handler is agent.pods.gangs
    assert agent.gang_watch.selectors == {"labelSelector": LABEL_GANG, "fieldSelector": "spec.nodeName!="}
    assert agent.pod_watch.selectors == {"fieldSelector": "spec.nodeName!="}  # unchanged: no extra work there
    assert Agent(endpoint, pools, AgentSettings(gang_barrier=False)).gang_watch is None


async def test_the_pod_watch_never_touches_the_registry() -> None:
    # gang members arrive on the gang watch; the pod controller's own event path is as before
    _, _, ctl = _controller()
    assert ctl.gangs is not None
    ctl.on_event("ADDED", _member("a", "Running", start=T0))
    ctl.on_event("ADDED", _member("b", "Running", start=T0 + 1, node="elsewhere"))
    assert len(ctl.gangs) == 0


def test_names_match_the_load_generator() -> None:
    # hollow imports only kubecore, so it spells the two names itself; they must stay equal
    from loadgen.workloads import ANN_GANG_MIN as LOADGEN_MIN
    from loadgen.workloads import LABEL_GANG as LOADGEN_LABEL

    assert (LABEL_GANG, ANN_GANG_MIN) == (LOADGEN_LABEL, LOADGEN_MIN)
