"""A hollow node starts a pod with DRA claims only once every claim is allocated and reserved for it,
after the prepare delay, as the kubelet's NodePrepareResources; it writes nothing to a claim.

The pod controller runs on a fake clock against a fake API that answers claim GETs from a dict the
test changes (what the scheduler and the resourceclaim controller would have written).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import orjson

from hollow.api import Response
from hollow.clock import FakeClock
from hollow.faults import FaultState
from hollow.metrics import Metrics
from hollow.nodes import NodeState
from hollow.pods import PodController
from hollow.pools import parse_pools
from hollow.sharding import Shard, assign
from hollow.stages import pod_claims, pod_facts

T0 = 1_700_000_000.0
POD: dict[str, Any] = {
    "metadata": {"uid": "pod-uid-1", "name": "trainer-0", "namespace": "team",
                 "creationTimestamp": "2023-11-14T22:13:19Z"},
    "spec": {"nodeName": "gold-0", "restartPolicy": "Never",
             "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-40g"}],
             "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}]},
    "status": {"phase": "Pending",
               "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2023-11-14T22:13:20Z"}],
               "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "trainer-0-gpu-x7k2p"}]},
}


class FakeApi:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.claims: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[float, str, str]] = []

    async def request(self, verb: str, method: str, path: str, *, body: Any = None, **_: Any) -> Response:
        self.calls.append((self.clock.monotonic(), verb, path))
        await asyncio.sleep(0)
        if verb == "get_resourceclaim":
            claim = self.claims.get(path.rsplit("/", 1)[1])
            return Response(404, b"{}") if claim is None else Response(200, orjson.dumps(claim))
        return Response(200, b"{}")


async def _drive(ctl: PodController, clock: FakeClock, until_s: float, on_tick: Any = None) -> None:
    start = clock.monotonic()
    while True:
        for _ in range(10_000):  # until every spawned step has finished: the clock moves only when idle
            await asyncio.sleep(0)
            if not ctl._tasks:
                break
        if on_tick is not None:
            on_tick(clock.monotonic() - start)
        due = ctl._timers.queue.next_due()
        if due is None or due - start > until_s:
            return
        clock.advance(max(0.0, due - clock.monotonic()))
        ctl._timers.run_due()


def _controller(prepare_delay: str = "3s") -> tuple[PodController, FakeApi, FakeClock]:
    pools = parse_pools({"pools": [{"name": "gold", "count": 1,
                                    "resources": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8"},
                                    "gpus": {"expose": "dra"},
                                    "lifecycle": {"startup_delay": "1s", "prepare_delay": prepare_delay}}]}, "p")
    clock = FakeClock(T0)
    api = FakeApi(clock)
    nodes = {s.name: NodeState(s, uid="node-uid") for s in assign(pools, Shard())}
    return PodController(api, clock, Metrics(), FaultState(), nodes), api, clock  # type: ignore[arg-type]


def _starts(api: FakeApi) -> list[float]:
    return [t for t, verb, _ in api.calls if verb == "patch_pod_status"]


async def test_pod_waits_for_allocation_and_reservation_then_prepare_then_startup() -> None:
    ctl, api, clock = _controller()
    t0 = clock.monotonic()
    claim = {"metadata": {"name": "trainer-0-gpu-x7k2p"}, "status": {}}
    api.claims["trainer-0-gpu-x7k2p"] = claim

    def scheduler(t: float) -> None:  # allocated at 5 s, reserved for the pod at 8 s
        if t >= 5:
            claim["status"]["allocation"] = {"devices": {"results": [{"device": "gpu-0"}]}}
        if t >= 8:
            claim["status"]["reservedFor"] = [{"resource": "pods", "name": "trainer-0", "uid": "pod-uid-1"}]

    ctl.on_event("ADDED", copy.deepcopy(POD))
    await _drive(ctl, clock, 60.0, scheduler)
    starts = _starts(api)
    assert starts, "the pod never started"
    # bound at T0 (its PodScheduled time): prepare due at 3 s, but the claim is ready only at 8 s; then
    # the startup delay (1 s) counts from the preparation
    assert 9.0 <= starts[0] - t0 <= 30.0  # the claim is read again with backoff (1 s doubling, at most 10 s)
    gets = [t for t, verb, _ in api.calls if verb == "get_resourceclaim"]
    assert gets and all(t - t0 >= 3.0 - 1e-9 for t in gets), "claims read before the prepare delay"
    assert all(verb in ("get_resourceclaim", "patch_pod_status") for _, verb, _ in api.calls), "a claim was written"
    assert ctl.records["pod-uid-1"].prepared_wall is not None


async def test_a_claim_reserved_for_another_pod_never_starts_the_pod() -> None:
    ctl, api, clock = _controller("0s")
    api.claims["trainer-0-gpu-x7k2p"] = {"status": {"allocation": {"devices": {}},
                                                    "reservedFor": [{"resource": "pods", "uid": "someone-else"}]}}
    ctl.on_event("ADDED", copy.deepcopy(POD))
    await _drive(ctl, clock, 120.0)
    assert not _starts(api)
    assert ctl.records["pod-uid-1"].prepare_tries > 3


async def test_pods_without_claims_start_after_the_startup_delay_alone() -> None:
    ctl, api, clock = _controller()
    pod = copy.deepcopy(POD)
    del pod["spec"]["resourceClaims"]
    del pod["status"]["resourceClaimStatuses"]
    t0 = clock.monotonic()
    ctl.on_event("ADDED", pod)
    await _drive(ctl, clock, 30.0)
    assert [round(t - t0, 3) for t in _starts(api)[:1]] == [1.0]
    assert not any(verb == "get_resourceclaim" for _, verb, _ in api.calls)


def test_claim_names_come_from_the_spec_the_controller_and_the_scheduler() -> None:
    spec = {"resourceClaims": [{"name": "a", "resourceClaimName": "shared"},
                               {"name": "b", "resourceClaimTemplateName": "t"},
                               {"name": "c", "resourceClaimTemplateName": "t"}]}
    status = {"resourceClaimStatuses": [{"name": "b", "resourceClaimName": "pod-b-x"}, {"name": "c"}],
              "extendedResourceClaimStatus": {"resourceClaimName": "pod-extended-y"}}
    assert pod_claims(spec, status) == (("a", "shared"), ("b", "pod-b-x"), ("", "pod-extended-y"))
    assert pod_claims({"resourceClaims": [{"name": "b", "resourceClaimTemplateName": "t"}]}, {}) == (("b", ""),)
    assert pod_facts(POD).claims == (("gpu", "trainer-0-gpu-x7k2p"),)
