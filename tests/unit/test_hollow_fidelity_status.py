"""Hollow pod statuses against what the kubelet (v1.36) writes: probe timing, terminal reasons,
observedGeneration, resources, and the bytes each write costs.

The kubelet's code each check follows is named in the test; the differential test against a real
kubelet is tests/integration/test_hollow_fidelity.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import orjson
import pytest

from hollow.api import Response
from hollow.clock import FakeClock, rfc3339
from hollow.faults import FaultState
from hollow.metrics import Metrics
from hollow.nodes import NodeState
from hollow.podresources import pod_resource_fields
from hollow.pods import PodController, ready_due
from hollow.podstatus import ready_patch, restarted_patch, running_patch, terminated_patch
from hollow.pools import parse_pools
from hollow.probes import container_ready_delay, pod_ready_delay, probe_pass_delay
from hollow.sharding import Shard, assign
from hollow.stages import pod_facts

T0 = 1_700_000_000.0
SA_MOUNT = {"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            "readOnly": True}


def container(name: str = "main", probe: dict[str, Any] | None = None, startup: dict[str, Any] | None = None,
              resources: dict[str, Any] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "registry.invalid/worker:1", "volumeMounts": [SA_MOUNT]}
    if resources is None:
        resources = {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    if resources:
        c["resources"] = resources
    if probe is not None:
        c["readinessProbe"] = {"exec": {"command": ["true"]}, **probe}
    if startup is not None:
        c["startupProbe"] = {"exec": {"command": ["true"]}, **startup}
    return c


def pod_obj(containers: list[dict[str, Any]] | None = None, phase: str = "Pending", generation: int = 1,
            observed: int = 0, uid: str = "0f9c1b7e-3c55-4a3e-9d7b-2b1e9f6a1c10", node: str = "g-0",
            policy: str = "Never", started_ago: float | None = None, now: float = T0, ready: bool = False,
            **spec: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": rfc3339(now - 1)}]}
    if observed:
        status["observedGeneration"] = observed
    if started_ago is not None:
        status["containerStatuses"] = [{"name": "main", "restartCount": 0, "ready": ready,
                                        "state": {"running": {"startedAt": rfc3339(now - started_ago)}}}]
        status["conditions"].append({"type": "ContainersReady", "status": "True" if ready else "False"})
    return {"metadata": {"uid": uid, "name": "p1", "namespace": "ns", "generation": generation,
                         "creationTimestamp": rfc3339(now - 2)},
            "spec": {"nodeName": node, "restartPolicy": policy, "containers": containers or [container()], **spec},
            "status": status}


def conds(body: Any) -> dict[str, tuple[str, str | None]]:
    return {c["type"]: (c["status"], c.get("reason")) for c in body["status"].get("conditions") or ()}


# --- the probe timing model (pkg/kubelet/prober/worker.go) ---------------------------------------

@pytest.mark.parametrize(("probe", "delay"), [
    ({}, 0.0),                                                   # defaults: period 10, no initial delay
    ({"initialDelaySeconds": 5, "periodSeconds": 10}, 10.0),     # skipped at 0 s, passes at the 10 s tick
    ({"initialDelaySeconds": 10, "periodSeconds": 10}, 10.0),    # int(10.0) < 10 is false: the 10 s tick counts
    ({"initialDelaySeconds": 7, "periodSeconds": 2}, 8.0),       # ticks 0 2 4 6 8
    ({"initialDelaySeconds": 0, "periodSeconds": 3, "successThreshold": 3}, 6.0),  # passes at 0, 3, 6
    ({"initialDelaySeconds": 4, "periodSeconds": 2, "successThreshold": 2}, 6.0),
])
def test_probe_passes_at_the_first_tick_after_the_initial_delay(probe: dict[str, Any], delay: float) -> None:
    assert probe_pass_delay(probe) == delay


def test_startup_probe_gates_readiness_and_the_slowest_container_counts() -> None:
    assert container_ready_delay(container()) == (None, False)
    assert container_ready_delay(container(probe={"initialDelaySeconds": 3, "periodSeconds": 5})) == (5.0, False)
    # the startup probe passes at 20 s; readiness (no delay) then passes at once
    assert container_ready_delay(container(probe={}, startup={"initialDelaySeconds": 20, "periodSeconds": 10})) \
        == (20.0, True)
    assert container_ready_delay(container(startup={"initialDelaySeconds": 1, "periodSeconds": 1})) == (1.0, True)
    assert pod_ready_delay([container("a"), container("b", probe={"initialDelaySeconds": 15})]) == (20.0, False)
    assert pod_ready_delay([container("a")]) == (None, False)


# --- the patches -----------------------------------------------------------------------------------

def test_running_with_a_readiness_probe_is_not_ready_and_the_ready_patch_follows() -> None:
    facts = pod_facts(pod_obj([container(probe={"initialDelaySeconds": 5, "periodSeconds": 10})]))
    assert facts.ready_delay == 10.0
    body = running_patch(facts, T0, "10.0.0.5", "100.64.0.1")
    cs = body["status"]["containerStatuses"][0]
    assert (cs["ready"], cs["started"]) == (False, True)
    msg = "containers with unready status: [main]"  # generate.go: fmt %s of []string
    got = {c["type"]: (c["status"], c.get("reason"), c.get("message")) for c in body["status"]["conditions"]}
    assert got["ContainersReady"] == got["Ready"] == ("False", "ContainersNotReady", msg)
    assert got["Initialized"] == ("True", None, None) and got["PodReadyToStartContainers"] == ("True", None, None)
    ready = ready_patch(dataclasses.replace(facts, observed_generation=1), T0 + 10, T0)
    rc = {c["type"]: c for c in ready["status"]["conditions"]}
    # strategic merge: null deletes the NotReady reason and message
    assert rc["Ready"] == {"type": "Ready", "status": "True", "lastTransitionTime": rfc3339(T0 + 10),
                           "reason": None, "message": None}
    cs = ready["status"]["containerStatuses"][0]
    assert (cs["ready"], cs["started"], cs["state"]) == (True, True, {"running": {"startedAt": rfc3339(T0)}})
    assert "phase" not in ready["status"] and "observedGeneration" not in ready["status"]


def test_without_probes_ready_at_once_and_a_startup_probe_holds_started() -> None:
    body = running_patch(pod_facts(pod_obj()), T0, "10.0.0.5", "100.64.0.1")
    assert conds(body)["Ready"] == ("True", None) and body["status"]["containerStatuses"][0]["ready"] is True
    facts = pod_facts(pod_obj([container(startup={"periodSeconds": 1})]))
    cs = running_patch(facts, T0, "10.0.0.5", "100.64.0.1")["status"]["containerStatuses"][0]
    assert (cs["ready"], cs["started"]) == (False, False)


def test_terminal_reasons_are_the_kubelets() -> None:
    facts = dataclasses.replace(pod_facts(pod_obj()), phase="Running", observed_generation=1)
    failed = conds(terminated_patch(facts, T0, 3))
    assert failed["Ready"] == failed["ContainersReady"] == ("False", "PodFailed")
    assert "Initialized" not in failed  # stays True without a reason (generate.go), nothing to write
    done = terminated_patch(facts, T0, 0)
    ok = conds(done)
    assert ok["Ready"] == ok["ContainersReady"] == ("False", "PodCompleted")
    assert ok["Initialized"] == ("True", "PodCompleted")
    init = next(c for c in done["status"]["conditions"] if c["type"] == "Initialized")
    assert "lastTransitionTime" not in init  # True before and after: the stored transition time stays
    cs = done["status"]["containerStatuses"][0]
    assert cs["state"]["terminated"]["exitCode"] == 0 and cs["state"]["terminated"]["reason"] == "Completed"


def test_observed_generation_is_written_when_the_status_does_not_carry_it_yet() -> None:
    facts = pod_facts(pod_obj(generation=3))
    body = running_patch(facts, T0, "10.0.0.5", "100.64.0.1")
    assert body["status"]["observedGeneration"] == 3
    assert {c["type"]: c.get("observedGeneration") for c in body["status"]["conditions"]} == {
        "PodReadyToStartContainers": 3, "Initialized": 3, "ContainersReady": 3, "Ready": 3, "PodScheduled": 3}
    sched = next(c for c in body["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "lastTransitionTime" not in sched  # the binding's transition time is kept
    # the status already carries generation 3: the merge and the apiserver keep it, nothing to send
    current = pod_facts(pod_obj(generation=3, observed=3, phase="Running", started_ago=1))
    for patch in (terminated_patch(current, T0, 0), restarted_patch(current, T0, 1), ready_patch(current, T0)):
        assert "observedGeneration" not in patch["status"]
        assert all("observedGeneration" not in c for c in patch["status"].get("conditions") or ())
    # the spec changed since (generation 4): the next write reports it
    bumped = pod_facts(pod_obj(generation=4, observed=3, phase="Running", started_ago=1))
    done = terminated_patch(bumped, T0, 3)
    assert done["status"]["observedGeneration"] == 4
    assert {c["type"]: c.get("observedGeneration") for c in done["status"]["conditions"]} == {
        "PodReadyToStartContainers": 4, "ContainersReady": 4, "Ready": 4, "Initialized": 4}


def test_container_resources_are_the_spec_and_written_in_every_container_status() -> None:
    spec = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}
    facts = dataclasses.replace(pod_facts(pod_obj([container(resources=spec)])), observed_generation=1)
    for patch in (running_patch(facts, T0, "10.0.0.5", "h"), ready_patch(facts, T0),
                  terminated_patch(facts, T0, 0), restarted_patch(facts, T0, 1)):
        cs = patch["status"]["containerStatuses"][0]
        assert cs["resources"] == spec and cs["allocatedResources"] == spec["requests"]
    bare = pod_facts(pod_obj([container(resources={})]))
    cs = running_patch(bare, T0, "i", "h")["status"]["containerStatuses"][0]
    assert cs["resources"] == {} and "allocatedResources" not in cs  # the kubelet: {} and omitted


def test_pod_level_resources_follow_the_sidecar_formula() -> None:
    one = pod_facts(pod_obj())
    assert pod_resource_fields(one) == {
        "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
        "allocatedResources": {"cpu": "1", "nvidia.com/gpu": "1"}}
    sidecar = {"name": "proxy", "image": "i", "restartPolicy": "Always",
               "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}
    setup = {"name": "setup", "image": "i", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}
    obj = pod_obj([container("a", resources={"requests": {"cpu": "1", "memory": "512Mi"}}),
                   container("b", resources={"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}})],
                  initContainers=[sidecar, setup])
    fields = pod_resource_fields(pod_facts(obj))
    # apps + sidecar: cpu 1.75, memory 576Mi; setup with the sidecar started before it: cpu 3.25, 1088Mi
    assert fields["allocatedResources"] == {"cpu": "3250m", "memory": "1088Mi"}
    assert fields["resources"] == {"requests": {"cpu": "3250m", "memory": "1088Mi"}, "limits": {"cpu": "1"}}
    # pod-level resources take precedence for the resources they name
    obj["spec"]["resources"] = {"requests": {"cpu": "8"}}
    assert pod_resource_fields(pod_facts(obj))["allocatedResources"] == {"cpu": "8", "memory": "1088Mi"}
    no_requests = pod_facts(pod_obj([container(resources={})]))
    assert pod_resource_fields(no_requests) == {"resources": {}}


def test_bytes_per_write_stay_within_budget() -> None:
    """The reference pod (one container, cpu + GPU, the service-account mount): bytes per status write.

    The figures in docs/hollow-fidelity.md are these; a change that grows a write fails here
    (update both after measuring).  Before the fidelity fields (commit b3c0131) the same pod's writes
    were Running 930, Succeeded 891, Failed 884 bytes.
    """
    facts = pod_facts(pod_obj())
    running = len(orjson.dumps(running_patch(facts, T0, "10.0.0.5", "192.168.0.1")))
    after = dataclasses.replace(facts, phase="Running", observed_generation=1)
    succeeded = len(orjson.dumps(terminated_patch(after, T0 + 10, 0)))
    failed = len(orjson.dumps(terminated_patch(after, T0 + 10, 3)))
    assert running <= 1312 and succeeded <= 1035 and failed <= 959, (running, succeeded, failed)


# --- the controller: Ready after the probe, restart-safe -------------------------------------------

class RecordingApi:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.calls: list[tuple[float, str, Any]] = []

    async def request(self, verb: str, method: str, path: str, *, body: Any = None, **kw: Any) -> Response:
        self.calls.append((self.clock.wall(), verb, body))
        await asyncio.sleep(0)
        return Response(200, b"{}")


def controller(startup: str = "2s", run: str = "30s") -> tuple[FakeClock, RecordingApi, PodController]:
    pool = {"name": "g", "count": 1, "resources": {"cpu": "8", "memory": "8Gi"},
            "lifecycle": {"startup_delay": startup, "run_duration": run}}
    slots = assign(parse_pools({"pools": [pool]}, "t"), Shard())
    clock = FakeClock(T0)
    api = RecordingApi(clock)
    ctl = PodController(api, clock, Metrics(), FaultState(), {s.name: NodeState(s, uid="x") for s in slots})  # type: ignore[arg-type]
    return clock, api, ctl


async def advance(clock: FakeClock, ctl: PodController, seconds: float, step: float = 0.25) -> None:
    end = clock.monotonic() + seconds
    while clock.monotonic() < end - 1e-9:
        clock.advance(min(step, end - clock.monotonic()))
        ctl._timers.run_due()
        for _ in range(5):
            await asyncio.sleep(0)


def summary(api: RecordingApi) -> list[tuple[float, str, str]]:
    out = []
    for t, verb, body in api.calls:
        if verb == "patch_pod_status":
            c = conds(body)
            out.append((round(t - T0, 2), body["status"].get("phase", "-"), c.get("Ready", ("-", None))[0]))
    return out


async def test_ready_comes_when_the_probe_would_pass_then_the_run_ends() -> None:
    clock, api, ctl = controller()
    probe = {"initialDelaySeconds": 5, "periodSeconds": 4}  # passes at the 8 s tick
    ctl.on_event("ADDED", pod_obj([container(probe=probe)], now=clock.wall()))
    await advance(clock, ctl, 45)
    # bound at -1 s, startup 2 s: Running at +1 s (not ready), Ready at +9 s, done at +31 s
    assert summary(api) == [(1.0, "Running", "False"), (9.0, "-", "True"), (31.0, "Succeeded", "False")]


async def test_a_stage_due_before_the_probe_goes_first_and_no_ready_write_follows() -> None:
    clock, api, ctl = controller(run="3s")
    ctl.on_event("ADDED", pod_obj([container(probe={"initialDelaySeconds": 30})], now=clock.wall()))
    await advance(clock, ctl, 60)
    assert summary(api) == [(1.0, "Running", "False"), (4.0, "Succeeded", "False")]


async def test_a_restarted_agent_writes_ready_at_the_same_moment_from_the_pod_object() -> None:
    clock, api, ctl = controller(run="forever")
    probe = {"initialDelaySeconds": 20, "periodSeconds": 10}
    # the pod was started 12 s ago by an earlier agent process, not ready yet: ready 8 s from now
    obj = pod_obj([container(probe=probe)], phase="Running", observed=1, started_ago=12, now=clock.wall())
    facts = pod_facts(obj)
    assert ready_due(facts, None) == pytest.approx(clock.wall() + 8)
    ctl.on_event("ADDED", obj)
    await advance(clock, ctl, 7.5)
    assert api.calls == []
    await advance(clock, ctl, 1.0)
    assert summary(api) == [(8.0, "-", "True")]
    # the echo of an older write (not ready) does not make it write Ready again
    ctl.on_event("MODIFIED", obj)
    await advance(clock, ctl, 30)
    assert len(api.calls) == 1


async def test_a_failing_run_with_on_failure_restarts_not_ready_until_the_probe_passes() -> None:
    clock, api, ctl = controller(run="10s")
    obj = pod_obj([container(probe={"initialDelaySeconds": 2, "periodSeconds": 2})], policy="OnFailure",
                  now=clock.wall())
    obj["metadata"]["annotations"] = {"hollowscale.io/exit-code": "1"}
    ctl.on_event("ADDED", obj)
    await advance(clock, ctl, 16)
    # Running +1 (not ready), Ready +3, exit 1 at +11 restarts not ready, Ready again +13
    assert summary(api) == [(1.0, "Running", "False"), (3.0, "-", "True"), (11.0, "-", "False"), (13.0, "-", "True")]
