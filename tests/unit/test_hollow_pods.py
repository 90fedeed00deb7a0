"""The pod controller's decisions, driven by watch events on a fake clock.

The transport here is a recorder (unit level); the same behaviour runs against the real control plane
in tests/integration/test_hollow_agent.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from hollow.api import Response
from hollow.clock import FakeClock, rfc3339
from hollow.faults import FaultState
from hollow.metrics import Metrics
from hollow.nodes import NodeState
from hollow.pods import PodController
from hollow.pools import parse_pools
from hollow.sharding import Shard, assign


class RecordingApi:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.calls: list[tuple[float, str, str, str, Any]] = []
        self.status: dict[str, int] = {}

    async def request(self, verb: str, method: str, path: str, *, body: Any = None, **kw: Any) -> Response:
        if callable(body):
            body = body()
        if isinstance(body, bytes):
            body = orjson.loads(body)
        self.calls.append((self.clock.monotonic(), verb, method, path, body))
        await asyncio.sleep(0)
        return Response(self.status.get(verb, 200), b"{}")


def setup(lifecycle: dict | None = None) -> tuple[FakeClock, RecordingApi, PodController, FaultState]:
    pool: dict = {"name": "g", "count": 2, "resources": {"cpu": "8", "memory": "8Gi"}}
    if lifecycle:
        pool["lifecycle"] = lifecycle
    slots = assign(parse_pools({"pools": [pool]}, "t"), Shard())
    clock = FakeClock()
    api = RecordingApi(clock)
    faults = FaultState()
    ctl = PodController(api, clock, Metrics(), faults, {s.name: NodeState(s, uid="x") for s in slots})  # type: ignore[arg-type]
    return clock, api, ctl, faults


def pod(clock: FakeClock, phase: str = "", policy: str = "Never", ann: dict | None = None, node: str = "g-0",
        uid: str = "u1", deleting: bool = False, started_ago: float | None = None, restarts: int = 0) -> dict:
    now = clock.wall()
    obj: dict = {"metadata": {"uid": uid, "name": "p-" + uid, "namespace": "ns", "annotations": ann or {},
                              "creationTimestamp": rfc3339(now)},
                 "spec": {"nodeName": node, "restartPolicy": policy, "containers": [{"name": "c", "image": "i"}]},
                 "status": {"phase": phase} if phase else {}}
    if deleting:
        obj["metadata"]["deletionTimestamp"] = rfc3339(now)
    if started_ago is not None:
        obj["status"]["containerStatuses"] = [{"name": "c", "restartCount": restarts,
                                               "state": {"running": {"startedAt": rfc3339(now - started_ago)}}}]
    return obj


async def advance(clock: FakeClock, ctl: PodController, seconds: float, step: float = 0.05) -> None:
    """Move fake time forward in small steps, firing due timers and letting writes complete."""
    end = clock.monotonic() + seconds
    while clock.monotonic() < end - 1e-9:
        clock.advance(min(step, end - clock.monotonic()))
        ctl._timers.run_due()
        for _ in range(5):
            await asyncio.sleep(0)


def writes(api: RecordingApi) -> list[tuple[str, str]]:
    out = []
    for _, verb, _, _, body in api.calls:
        if verb == "patch_pod_status":
            out.append((verb, body["status"].get("phase", "restart")))
        else:
            out.append((verb, ""))
    return out


async def test_full_lifecycle_once_and_stale_events_ignored() -> None:
    clock, api, ctl, _ = setup({"startup_delay": "2s", "run_duration": "10s"})
    ctl.on_event("ADDED", pod(clock, "Pending"))
    await advance(clock, ctl, 1.0)
    assert writes(api) == []  # startup delay not over
    await advance(clock, ctl, 2.0)
    assert writes(api) == [("patch_pod_status", "Running")]
    body = api.calls[0][4]
    assert body["metadata"] == {"uid": "u1"}
    assert body["status"]["podIP"].startswith("10.0.0.") and body["status"]["hostIP"] == "100.64.0.1"
    assert {c["type"] for c in body["status"]["conditions"]} >= {"Ready", "ContainersReady", "Initialized"}
    # the watch now delivers an event from *before* our write: it must not start the pod again
    ctl.on_event("MODIFIED", pod(clock, "Pending"))
    await advance(clock, ctl, 5.0)
    assert writes(api) == [("patch_pod_status", "Running")]
    ctl.on_event("MODIFIED", pod(clock, "Running", started_ago=5.0))
    await advance(clock, ctl, 6.0)
    assert writes(api) == [("patch_pod_status", "Running"), ("patch_pod_status", "Succeeded")]
    done = api.calls[-1][4]["status"]["containerStatuses"][0]
    assert done["state"]["running"] is None and done["state"]["terminated"]["exitCode"] == 0
    ctl.on_event("MODIFIED", pod(clock, "Succeeded"))
    await advance(clock, ctl, 60.0)
    assert len(api.calls) == 2  # nothing more, no no-op patches


async def test_exit_code_annotation_fails_pod_and_on_failure_restarts() -> None:
    clock, api, ctl, _ = setup()
    ctl.on_event("ADDED", pod(clock, "Running", ann={"hollowscale.io/run-duration": "3s",
                                                     "hollowscale.io/exit-code": "3"}, started_ago=0))
    await advance(clock, ctl, 4.0)
    assert writes(api) == [("patch_pod_status", "Failed")]
    assert api.calls[0][4]["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
    clock2, api2, ctl2, _ = setup()
    ctl2.on_event("ADDED", pod(clock2, "Running", policy="OnFailure", started_ago=0,
                               ann={"hollowscale.io/run-duration": "3s", "hollowscale.io/exit-code": "3"}))
    await advance(clock2, ctl2, 4.0)
    assert writes(api2) == [("patch_pod_status", "restart")]
    status = api2.calls[0][4]["status"]["containerStatuses"][0]
    assert status["restartCount"] == 1 and status["lastState"]["terminated"]["exitCode"] == 3


async def test_always_stays_running_and_deletion_finalises() -> None:
    clock, api, ctl, _ = setup({"run_duration": "1s"})
    ctl.on_event("ADDED", pod(clock, "Running", policy="Always", started_ago=0))
    await advance(clock, ctl, 30.0)
    assert writes(api) == []
    ctl.on_event("MODIFIED", pod(clock, "Running", policy="Always", started_ago=30, deleting=True))
    await advance(clock, ctl, 1.0)
    assert writes(api) == [("patch_pod_status", "Succeeded"), ("delete_pod", "")]
    assert api.calls[1][4] == {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                               "preconditions": {"uid": "u1"}}
    ctl.on_event("MODIFIED", pod(clock, "Succeeded", policy="Always", deleting=True))
    await advance(clock, ctl, 5.0)
    assert len(api.calls) == 2  # DELETE sent once


async def test_terminal_pod_deleted_without_status_patch_and_gone_pods_dropped() -> None:
    clock, api, ctl, _ = setup()
    ctl.on_event("ADDED", pod(clock, "Failed", deleting=True))
    await advance(clock, ctl, 1.0)
    assert writes(api) == [("delete_pod", "")]
    api.status["patch_pod_status"] = 404
    ctl.on_event("ADDED", pod(clock, "", uid="u2"))
    await advance(clock, ctl, 1.0)
    ctl.on_event("ADDED", pod(clock, "", uid="u2"))  # replays do not retry a pod the API says is gone
    await advance(clock, ctl, 5.0)
    assert [c[1] for c in api.calls].count("patch_pod_status") == 1


async def test_other_agents_pods_are_ignored_and_relist_forgets() -> None:
    clock, api, ctl, _ = setup()
    ctl.on_event("ADDED", pod(clock, "", node="elsewhere-0"))
    ctl.on_event("ADDED", pod(clock, "Running", policy="Always", uid="u9", started_ago=0))
    assert list(ctl.records) == ["u9"]
    ctl.on_relisted(set())
    assert ctl.records == {}
    await advance(clock, ctl, 2.0)
    assert api.calls == []


async def test_heartbeat_fault_freezes_pods_until_it_ends() -> None:
    clock, api, ctl, faults = setup()
    faults.stop_heartbeats(["g-0"], clock.monotonic() + 20)
    ctl.on_event("ADDED", pod(clock, ""))
    await advance(clock, ctl, 10.0)
    assert api.calls == []
    await advance(clock, ctl, 15.0)
    assert writes(api) == [("patch_pod_status", "Running")]


async def test_pod_failure_fault_crashes_a_share_of_running_pods() -> None:
    clock, api, ctl, _ = setup()
    for i in range(20):
        ctl.on_event("ADDED", pod(clock, "Running", policy="Never", uid=f"u{i:02d}", started_ago=0))
    failed = ctl.fail_running(0.25, 137, seed=7)
    assert len(failed) == 5 and all(name.startswith("ns/p-u") for name in failed)
    await advance(clock, ctl, 1.0)
    codes = [c[4]["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] for c in api.calls]
    assert codes == [137] * 5


async def test_own_status_writes_are_recognised_once_and_forgotten_on_relist() -> None:
    clock, api, ctl, _ = setup()
    versions = iter(range(100, 200))

    async def answer(verb: str, method: str, path: str, *, body: Any = None, **kw: Any) -> Response:
        await RecordingApi.request(api, verb, method, path, body=body, **kw)
        return Response(200, b'{"kind":"Pod","metadata":{"name":"p","resourceVersion":"%d"}}' % next(versions))

    api.request = answer  # type: ignore[method-assign]
    ctl.on_event("ADDED", pod(clock, ann={"hollowscale.io/run-duration": "5s"}))
    await advance(clock, ctl, 1.0)
    assert writes(api) == [("patch_pod_status", "Running")]
    assert ctl.is_own_write("100")  # the Running write's echo: the watcher skips it unparsed
    assert not ctl.is_own_write("100")  # once only
    assert not ctl.is_own_write("99")  # someone else's write is handed on
    await advance(clock, ctl, 6.0)
    assert writes(api)[-1] == ("patch_pod_status", "Succeeded") and ctl.is_own_write("101")
    ctl._wrote(Response(200, b'{"metadata":{"resourceVersion":"7"}}'))
    ctl.on_list_start()  # a relist: echoes from before it will never come
    assert not ctl.is_own_write("7")


def test_resource_version_is_found_without_parsing() -> None:
    from hollow.api import resource_version_of

    line = (b'{"type":"MODIFIED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"n",'
            b'"uid":"u","resourceVersion":"4242","annotations":{"x":"{\\"resourceVersion\\":\\"1\\"}"}}}}')
    assert resource_version_of(line) == "4242"
    assert orjson.loads(line)["object"]["metadata"]["resourceVersion"] == "4242"
    assert resource_version_of(b'{"metadata":{"name":"p"}}') == ""
    assert Response(200, b'{"metadata": {"resourceVersion": "9"}}').resource_version() == "9"


async def test_a_pod_deleted_with_grace_zero_gets_no_writes_unless_finalizers_hold_it() -> None:
    clock, api, ctl, _ = setup()
    ctl.on_event("ADDED", pod(clock))
    await advance(clock, ctl, 1.0)
    assert writes(api) == [("patch_pod_status", "Running")]
    forced = pod(clock, phase="Running", deleting=True, started_ago=1.0)
    forced["metadata"]["deletionGracePeriodSeconds"] = 0  # the apiserver removes it in the same request
    ctl.on_event("MODIFIED", forced)
    await advance(clock, ctl, 5.0)
    assert len(api.calls) == 1  # no terminated patch, no DELETE: both would be answered 404
    held = pod(clock, phase="Running", deleting=True, started_ago=1.0, uid="u2")
    held["metadata"].update(deletionGracePeriodSeconds=0, finalizers=["batch.kubernetes.io/job-tracking"])
    ctl.on_event("MODIFIED", held)  # a finalizer keeps the object: the kubelet reports and deletes it
    await advance(clock, ctl, 5.0)
    assert [(v, m) for _, v, m, _, _ in api.calls[1:]] == [("patch_pod_status", "PATCH"), ("delete_pod", "DELETE")]
