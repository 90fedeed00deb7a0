"""The agent's current code against statuses recorded from a real kubelet (v1.36.3), offline.

``tests/fixtures/hollow/fidelity/<case>.json`` hold, per case of tests/integration/test_hollow_fidelity.py,
the pod as the apiserver admitted it (metadata and spec) and every status the real kubelet published for it (recorded by that test with
``HOLLOW_RECORD_FIDELITY=1``; nothing in them is written by hand).  Here the pod controller runs the
same pod on a fake clock; each status patch it sends is applied to the pod as the apiserver would
(strategic merge: conditions by type, other lists replaced, null deletes), and the resulting timeline
is compared with the real one by :func:`hollow.fidelity.compare`, with the allow-list of docs/hollow-fidelity.md.  So a
change to the agent's status code that loses fidelity fails here without a cluster.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from hollow.api import Response
from hollow.clock import FakeClock, parse_rfc3339, rfc3339
from hollow.faults import FaultState
from hollow.fidelity import compare, left_out_paths
from hollow.metrics import Metrics
from hollow.nodes import NodeState
from hollow.pods import PodController
from hollow.pools import parse_pools
from hollow.sharding import Shard, assign

ROOT = Path(__file__).resolve().parents[2]
RECORDED = sorted((ROOT / "tests" / "fixtures" / "hollow" / "fidelity").glob("*.json"))
HORIZON_S = 60.0


def merge_status(status: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Strategic merge of a pod status patch: conditions by type, other lists whole, dicts deep, null deletes."""
    out = copy.deepcopy(status)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif key == "conditions":
            conds = {c["type"]: c for c in out.get("conditions") or ()}
            order = [c["type"] for c in out.get("conditions") or ()]
            for c in value:
                merged = {**conds.get(c["type"], {}), **c}
                conds[c["type"]] = {k: v for k, v in merged.items() if v is not None}
                if c["type"] not in order:
                    order.append(c["type"])
            out["conditions"] = [conds[t] for t in order]
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_status(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


class ApplyingApi:
    """The transport: applies each status patch to the pod (as the apiserver would) and keeps the timeline."""

    def __init__(self, pod: dict[str, Any]) -> None:
        self.pod = pod
        self.timeline = [copy.deepcopy(pod["status"])]
        self.deleted = False

    async def request(self, verb: str, method: str, path: str, *, body: Any = None, **_: Any) -> Response:
        if isinstance(body, bytes):
            body = orjson.loads(body)
        if verb == "patch_pod_status":
            self.pod["status"] = merge_status(self.pod["status"], body["status"])
            self.timeline.append(copy.deepcopy(self.pod["status"]))
        elif verb == "delete_pod":
            self.deleted = True
        await asyncio.sleep(0)
        return Response(200, b"{}")


def _first_scheduled(real: list[dict[str, Any]]) -> dict[str, Any]:
    """The status the hollow node would find: the real pod's as the scheduler left it (before any kubelet write)."""
    for s in real:
        if any(c.get("type") == "PodScheduled" for c in s.get("conditions") or ()) and not s.get("containerStatuses"):
            return copy.deepcopy(s)
    raise AssertionError("the recording has no status between binding and the kubelet's first write")


async def _hollow_timeline(doc: dict[str, Any]) -> list[dict[str, Any]]:
    real = doc["real"]
    spec = doc["pod"]
    pod = {"metadata": {**spec["metadata"], "uid": "0000-recorded", "namespace": "ns"},
           "spec": {**spec["spec"], "nodeName": "g-0"}, "status": _first_scheduled(real)}
    scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    clock = FakeClock(parse_rfc3339(scheduled["lastTransitionTime"]))
    pool = {"name": "g", "count": 1, "resources": {"cpu": "8", "memory": "32Gi"},
            "lifecycle": {"startup_delay": "1s", "run_duration": "forever"}}
    slots = assign(parse_pools({"pools": [pool]}, "t"), Shard())
    api = ApplyingApi(pod)
    ctl = PodController(api, clock, Metrics(), FaultState(), {s.name: NodeState(s, uid="x") for s in slots})  # type: ignore[arg-type]
    ctl.on_event("ADDED", copy.deepcopy(pod))
    delete_at = doc.get("delete_after_ready_s")
    ready_seen_at: float | None = None
    start = clock.monotonic()
    while clock.monotonic() - start < HORIZON_S and not api.deleted:
        clock.advance(0.25)
        ctl._timers.run_due()
        for _ in range(5):
            await asyncio.sleep(0)
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in pod["status"].get("conditions") or ())
        if delete_at is not None and ready and ready_seen_at is None:
            ready_seen_at = clock.monotonic()
        if delete_at is not None and ready_seen_at is not None and clock.monotonic() - ready_seen_at >= delete_at \
                and "deletionTimestamp" not in pod["metadata"]:
            pod["metadata"]["deletionTimestamp"] = rfc3339(clock.wall())
            pod["metadata"]["deletionGracePeriodSeconds"] = doc["delete_grace"]
            ctl.on_event("MODIFIED", copy.deepcopy(pod))
        if pod["status"].get("phase") in ("Succeeded", "Failed") and delete_at is None:
            break
    return api.timeline


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
async def test_current_hollow_code_matches_the_recorded_kubelet(path: Path) -> None:
    doc = json.loads(path.read_text())
    hollow = await _hollow_timeline(doc)
    result = compare(doc["real"], hollow, left_out_paths((ROOT / "docs" / "hollow-fidelity.md").read_text()))
    assert result.ok, f"{path.stem}: hollow differs from the recorded kubelet:\n{result.describe()}"


def test_recordings_exist_for_every_case() -> None:
    assert {p.stem for p in RECORDED} == {"success", "failure", "probe", "delete"}
