"""A hollow node starts a pod with DRA claims only once every claim is allocated and reserved for it,
after the prepare delay, as the kubelet's NodePrepareResources; it writes nothing to a claim.

The pod controller runs on a fake clock against a fake API that answers claim GETs with the claim as it
is at the moment of the read (what the scheduler and the resourceclaim controller would have written by
then). Its retries are jittered: the exact start is checked with the jitter pinned at each end of its
range and in the middle, and seeded draws are checked against bounds derived from the backoff's own
definition (``prepare_retry_s``, ``RETRY_JITTER``), never a window picked by hand.
"""

from __future__ import annotations

import asyncio
import copy
import random
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from hollow.api import Response
from hollow.clock import FakeClock
from hollow.faults import FaultState
from hollow.metrics import Metrics
from hollow.nodes import NodeState
from hollow.pods import RETRY_JITTER, PodController, prepare_retry_s
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
    """Answers claim GETs with the claim as it is at the moment of the read: ``claim_at(seconds since T0)``
    (what the scheduler and the resourceclaim controller would have written by then)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.claims: dict[str, dict[str, Any]] = {}
        self.claim_at: Callable[[float], dict[str, Any]] | None = None
        self.t0 = clock.monotonic()  # T0 on the wall clock
        self.calls: list[tuple[float, str, str]] = []

    async def request(self, verb: str, method: str, path: str, *, body: Any = None, **_: Any) -> Response:
        self.calls.append((self.clock.monotonic(), verb, path))
        await asyncio.sleep(0)
        if verb == "get_resourceclaim":
            name = path.rsplit("/", 1)[1]
            claim = self.claim_at(self.clock.monotonic() - self.t0) if self.claim_at else self.claims.get(name)
            return Response(404, b"{}") if claim is None else Response(200, orjson.dumps(claim))
        return Response(200, b"{}")


class FixedDraw(random.Random):
    """A generator whose every draw is ``value``: the retry jitter pinned at one point of its range."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


async def _drive(ctl: PodController, clock: FakeClock, until_s: float) -> None:
    start = clock.monotonic()
    while True:
        for _ in range(10_000):  # until every spawned step has finished: the clock moves only when idle
            await asyncio.sleep(0)
            if not ctl._tasks:
                break
        due = ctl._timers.queue.next_due()
        if due is None or due - start > until_s:
            return
        clock.advance(max(0.0, due - clock.monotonic()))
        ctl._timers.run_due()


def _controller(prepare_delay: str = "3s", rng: random.Random | None = None) -> tuple[PodController, FakeApi, FakeClock]:
    pools = parse_pools({"pools": [{"name": "gold", "count": 1,
                                    "resources": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8"},
                                    "gpus": {"expose": "dra"},
                                    "lifecycle": {"startup_delay": f"{STARTUP_S:g}s",
                                                  "prepare_delay": prepare_delay}}]}, "p")
    clock = FakeClock(T0)
    api = FakeApi(clock)
    nodes = {s.name: NodeState(s, uid="node-uid") for s in assign(pools, Shard())}
    ctl = PodController(api, clock, Metrics(), FaultState(), nodes, rng=rng or random.Random(0))  # type: ignore[arg-type]
    return ctl, api, clock


def _starts(api: FakeApi) -> list[float]:
    return [t for t, verb, _ in api.calls if verb == "patch_pod_status"]


# The pod is bound at T0 (its PodScheduled time); its claim is allocated at 5 s and reserved for it at 8 s;
# the prepare delay is 3 s and the startup delay 1 s, counted from the preparation.
PREPARE_S, ALLOCATED_S, RESERVED_S, STARTUP_S = 3.0, 5.0, 8.0, 1.0


def _claim_at(seconds: float) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if seconds >= ALLOCATED_S:
        status["allocation"] = {"devices": {"results": [{"device": "gpu-0"}]}}
    if seconds >= RESERVED_S:
        status["reservedFor"] = [{"resource": "pods", "name": "trainer-0", "uid": "pod-uid-1"}]
    return {"metadata": {"name": "trainer-0-gpu-x7k2p"}, "status": status}


def _start_with_factor(factor: float) -> float:
    """When the pod starts if every retry waits its nominal backoff times ``factor``: read at the prepare
    delay, then again after each ``prepare_retry_s(tries) * factor`` until a read finds the claim reserved."""
    t, tries = PREPARE_S, 0
    while t < RESERVED_S:
        tries += 1
        t += prepare_retry_s(tries) * factor
    return t + STARTUP_S


def _start_bounds() -> tuple[float, float]:
    """[earliest, latest) start over every jitter draw, from the backoff's definition: the first read at or
    after the reservation succeeds; the last read that can fail is the k-th whose earliest time (every wait
    at its shortest) is still before the reservation, and it can fall just before it, followed by its
    longest wait."""
    low, high = RETRY_JITTER
    earliest_read, tries, latest = PREPARE_S, 0, RESERVED_S
    while earliest_read < RESERVED_S:
        tries += 1
        latest = max(latest, RESERVED_S + prepare_retry_s(tries) * high)
        earliest_read += prepare_retry_s(tries) * low
    return RESERVED_S + STARTUP_S, latest + STARTUP_S


async def _run_pod(rng: random.Random) -> tuple[PodController, FakeApi, float]:
    ctl, api, clock = _controller(rng=rng)
    api.claim_at = _claim_at
    t0 = clock.monotonic()
    ctl.on_event("ADDED", copy.deepcopy(POD))
    await _drive(ctl, clock, 60.0)
    starts = _starts(api)
    assert starts, "the pod never started"
    return ctl, api, starts[0] - t0


@pytest.mark.parametrize("draw", [0.0, 0.5, 1.0 - 1e-12], ids=["shortest", "nominal", "longest"])
async def test_pod_waits_for_allocation_and_reservation_then_prepare_then_startup(draw: float) -> None:
    ctl, api, start = await _run_pod(FixedDraw(draw))
    low, high = RETRY_JITTER
    assert start == pytest.approx(_start_with_factor(low + (high - low) * draw))
    gets = [t - api.t0 for t, verb, _ in api.calls if verb == "get_resourceclaim"]
    assert gets[0] == pytest.approx(PREPARE_S), "claims read before the prepare delay"
    assert gets[-1] >= RESERVED_S and all(t < RESERVED_S for t in gets[:-1]), "read again after it was ready"
    assert all(verb in ("get_resourceclaim", "patch_pod_status") for _, verb, _ in api.calls), "a claim was written"
    assert ctl.records["pod-uid-1"].prepared_wall == pytest.approx(T0 + gets[-1])


async def test_any_jitter_starts_the_pod_within_the_bounds_the_backoff_allows() -> None:
    earliest, latest = _start_bounds()
    assert (earliest, latest) == (9.0, 21.0)  # 8 s + 1 s; the 4th read (at 6.5 s at the earliest) + 1.5 x 8 s + 1 s
    for seed in range(100):
        _, _, start = await _run_pod(random.Random(seed))
        assert earliest <= start < latest, f"seed {seed}: started at {start:.3f} s"


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
