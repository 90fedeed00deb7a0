"""Golden lifecycles: what the pod controller does with real pod objects under a stage table.

For every pod fixture in ``tests/fixtures/hollow/pods/`` and every stage table (the shipped default,
and ``tests/fixtures/hollow/stages/custom.yaml`` named by the pool), the controller runs on a fake
clock from 2023-11-14T22:13:20Z for two minutes of fake time.  Every plan (stage, action, deadline)
and every write (status patch or DELETE, with the fields that matter) is recorded and compared with
``tests/fixtures/hollow/golden/<table>.json``, so any change of behaviour fails here and shows up
as a diff of a readable file.

Regenerate after an intended change with ``HOLLOW_UPDATE_GOLDEN=1 pytest tests/unit/test_hollow_golden.py``
and review the diff of the golden files.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from hollow.api import Response
from hollow.clock import FakeClock
from hollow.faults import FaultState
from hollow.metrics import Metrics
from hollow.nodes import NodeState
from hollow.pods import PodController
from hollow.pools import parse_pools
from hollow.sharding import Shard, assign
from hollow.stages import default_stages, load_stages

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hollow"
PODS = sorted((FIXTURES / "pods").glob("*.json"))
TABLES = {"default": None, "custom": "stages/custom.yaml"}
UPDATE = os.environ.get("HOLLOW_UPDATE_GOLDEN") == "1"
T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z, the fake clock's wall time at the start
HORIZON_S = 120.0


class Recorder:
    """The transport: records each request and answers 200 (what the controller decides is under test)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.calls: list[tuple[float, str, str, Any]] = []

    async def request(self, verb: str, method: str, path: str, *, body: Any = None, **_: Any) -> Response:
        if callable(body):
            body = body()
        if isinstance(body, bytes):
            body = orjson.loads(body)
        self.calls.append((self.clock.monotonic(), verb, path, body))
        await asyncio.sleep(0)
        return Response(200, b"{}")


def _pool_doc(table: str | None) -> dict[str, Any]:
    pool: dict[str, Any] = {
        "name": "gold", "count": 2, "resources": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8"},
        "lifecycle": {"startup_delay": "2s", "run_duration": {"dist": "uniform", "min": "5s", "max": "15s"}},
    }
    if table is not None:
        pool["stages"] = table
    return {"pools": [pool]}


def _write(body: Any, verb: str, path: str) -> dict[str, Any]:
    if verb == "delete_pod":
        return {"write": "delete", "path": path, "grace": body["gracePeriodSeconds"],
                "uid": body["preconditions"]["uid"]}
    status = body["status"]
    first = (status.get("containerStatuses") or [{}])[0]
    state = first.get("state") or {}
    terminated = state.get("terminated") or {}
    last = (first.get("lastState") or {}).get("terminated") or {}
    out: dict[str, Any] = {"write": "status", "phase": status.get("phase", "(unchanged)"),
                           "containers": [c["name"] for c in status.get("containerStatuses") or ()],
                           "state": sorted(k for k, v in state.items() if v is not None),
                           "restart_count": first.get("restartCount")}
    if terminated:
        out.update(exit_code=terminated["exitCode"], reason=terminated["reason"],
                   started=terminated["startedAt"], finished=terminated["finishedAt"])
    if last:
        out["last_exit_code"] = last["exitCode"]
    if "podIP" in status:
        out.update(pod_ip=status["podIP"], host_ip=status["hostIP"], start_time=status["startTime"])
    if status.get("initContainerStatuses"):
        out["init"] = {c["name"]: sorted(k for k, v in c["state"].items() if v is not None)
                       for c in status["initContainerStatuses"]}
    if status.get("conditions"):
        out["conditions"] = {c["type"]: c["status"] for c in status["conditions"]}
    return out


async def _run(pod: dict[str, Any], table: str | None) -> dict[str, Any]:
    pools = parse_pools(_pool_doc(table), "golden-pools.yaml", base_dir=FIXTURES)
    clock = FakeClock(T0)
    start = clock.monotonic()
    api = Recorder(clock)
    nodes = {s.name: NodeState(s, uid=f"node-uid-{s.index}") for s in assign(pools, Shard())}
    ctl = PodController(api, clock, Metrics(), FaultState(), nodes)  # type: ignore[arg-type]
    uid = pod["metadata"]["uid"]
    timeline: list[dict[str, Any]] = []
    last_plan: tuple[Any, ...] | None = None
    seen_calls = 0

    def rel(t: float) -> float:
        return round(t - start, 3)

    async def settle() -> None:
        nonlocal last_plan, seen_calls
        for _ in range(10):
            await asyncio.sleep(0)
        for t, verb, path, body in api.calls[seen_calls:]:
            timeline.append({"t": rel(t), **_write(body, verb, path)})
        seen_calls = len(api.calls)
        rec = ctl.records.get(uid)
        due = ctl._timers.queue.due_of(uid)
        plan = (rec.action if rec else None, None if due is None else rel(due))
        if plan != last_plan:
            timeline.append({"t": rel(clock.monotonic()), "next": plan[0], "due": plan[1]})
            last_plan = plan

    ctl.on_event("ADDED", pod)
    await settle()
    while True:
        due = ctl._timers.queue.next_due()
        if due is None or due - start > HORIZON_S:
            break
        clock.advance(max(0.0, due - clock.monotonic()))
        ctl._timers.run_due()
        await settle()
    return {"timeline": timeline}


def _golden(name: str) -> Path:
    return FIXTURES / "golden" / f"{name}.json"


@pytest.mark.parametrize("table", list(TABLES))
async def test_lifecycle_matches_golden(table: str) -> None:
    got = {path.stem: await _run(json.loads(path.read_text()), TABLES[table]) for path in PODS}
    golden = _golden(table)
    if UPDATE:
        golden.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert golden.exists(), f"{golden} missing: run with HOLLOW_UPDATE_GOLDEN=1 and review it"
    want = json.loads(golden.read_text())
    assert sorted(got) == sorted(want), "pod fixtures and golden entries differ"
    for name in want:
        assert got[name] == want[name], f"{table}/{name} changed (HOLLOW_UPDATE_GOLDEN=1 regenerates)"


def test_golden_inputs_cover_the_cases() -> None:
    assert {p.stem for p in PODS} == {"pending-bound", "running-onfailure", "deleting", "annotated", "restart"}
    custom = load_stages(FIXTURES / "stages" / "custom.yaml")
    assert [s.name for s in custom] != [s.name for s in default_stages()]
    pool = parse_pools(_pool_doc(TABLES["custom"]), "p", base_dir=FIXTURES)[0]
    assert pool.stages == custom


def test_golden_files_hold_what_each_table_means() -> None:
    """Spot checks, in words, of the recorded timelines (so a regenerated golden file is read, not trusted)."""
    default = json.loads(_golden("default").read_text())
    custom = json.loads(_golden("custom").read_text())

    def writes(doc: dict[str, Any], pod: str) -> list[tuple[float, str, Any]]:
        return [(e["t"], e["write"], e.get("phase") if e["write"] == "status" else None)
                for e in doc[pod]["timeline"] if "write" in e]

    # bound 1 s before the start, startup 2 s: Running at +1 s (default: counted from binding) ...
    assert writes(default, "pending-bound")[0] == (1.0, "status", "Running")
    # ... and at +2 s when the custom table counts from when the agent saw the pod
    assert writes(custom, "pending-bound")[0] == (2.0, "status", "Running")
    # annotations: start 1.5 s after binding, run 90 s, exit 2 -> Failed
    ann = [e for e in default["annotated"]["timeline"] if "write" in e]
    assert [(e["t"], e["phase"]) for e in ann] == [(1.5, "Running"), (91.5, "Failed")]
    assert ann[1]["exit_code"] == 2 and ann[0]["init"] == {"proxy": ["running"], "setup": ["terminated"]}
    # a deleting service pod: terminated with exit 0, then DELETE with grace 0, at once (default) ...
    assert [w[1:] for w in writes(default, "deleting")] == [("status", "Succeeded"), ("delete", None)]
    assert writes(default, "deleting")[0][0] == 0.0
    # ... after the startup delay with the custom table
    assert writes(custom, "deleting")[0][0] == 2.0
    # OnFailure with exit 1 every 4 s: restarts in place, the count goes up by one each time
    restarts = [e for e in default["restart"]["timeline"] if e.get("write") == "status"]
    assert [e["t"] for e in restarts[:3]] == [3.0, 7.0, 11.0]
    assert [e["restart_count"] for e in restarts[:3]] == [2, 3, 4] and restarts[0]["last_exit_code"] == 1
