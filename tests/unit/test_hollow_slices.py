"""The agent publishes each DRA node's ResourceSlices once the node is registered: created, adopted when
they are this Node's already, replaced (by uid) when an earlier Node of the name owned them."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from hollow.api import Response
from hollow.clock import FakeClock
from hollow.metrics import Metrics
from hollow.nodes import NodeState
from hollow.pools import parse_pools
from hollow.sharding import Shard, assign
from hollow.slices import SliceManager


class FakeApi:
    """Slices by name; POST answers 409 for a name that exists."""

    def __init__(self) -> None:
        self.slices: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []

    async def request(self, verb: str, method: str, path: str, *, body: Any = None, **_: Any) -> Response:
        self.calls.append((verb, path))
        await asyncio.sleep(0)
        name = path.rsplit("/", 1)[1]
        if method == "POST":
            doc = orjson.loads(body)
            if doc["metadata"]["name"] in self.slices:
                return Response(409, b"{}")
            doc["metadata"]["uid"] = "slice-" + doc["metadata"]["name"]
            self.slices[doc["metadata"]["name"]] = doc
            return Response(201, orjson.dumps(doc))
        if method == "GET":
            got = self.slices.get(name)
            return Response(200, orjson.dumps(got)) if got else Response(404, b"{}")
        if method == "DELETE":
            self.slices.pop(name, None)
            return Response(200, b"{}")
        return Response(500, b"{}")


def _manager() -> tuple[SliceManager, FakeApi, dict[str, NodeState]]:
    pools = parse_pools({"pools": [
        {"name": "dra", "count": 2, "resources": {"cpu": "8", "memory": "8Gi", "nvidia.com/gpu": "4"},
         "gpus": {"expose": "dra"}},
        {"name": "counted", "count": 1, "resources": {"cpu": "8", "memory": "8Gi", "nvidia.com/gpu": "4"}}]}, "p")
    nodes = {s.name: NodeState(s, uid=f"uid-{s.name}") for s in assign(pools, Shard())}
    api = FakeApi()
    return SliceManager(api, FakeClock(0.0), Metrics(), nodes), api, nodes  # type: ignore[arg-type]


async def _run(mgr: SliceManager) -> None:
    for _ in range(3):
        mgr._timers.run_due()
        for _ in range(20):
            await asyncio.sleep(0)


async def test_dra_nodes_publish_owned_slices_counted_nodes_none() -> None:
    mgr, api, nodes = _manager()
    assert mgr.wanted == 2
    for name in nodes:
        mgr.add(name)
    await _run(mgr)
    assert sorted(api.slices) == ["dra-0-gpu.nvidia.com", "dra-1-gpu.nvidia.com"]
    owner = api.slices["dra-1-gpu.nvidia.com"]["metadata"]["ownerReferences"][0]
    assert owner["uid"] == "uid-dra-1" and owner["kind"] == "Node"
    assert len(api.slices["dra-0-gpu.nvidia.com"]["spec"]["devices"]) == 4
    assert set(mgr.published) == {"dra-0", "dra-1"}


async def test_existing_slices_are_adopted_or_replaced_by_owner() -> None:
    mgr, api, nodes = _manager()
    for name in ("dra-0", "dra-1"):
        mgr.add(name)
    await _run(mgr)
    nodes["dra-1"].uid = "uid-dra-1-again"  # the node was made again: its old slice is not its own
    api.calls.clear()
    mgr.add("dra-0")
    mgr.add("dra-1")
    await _run(mgr)
    verbs = [v for v, _ in api.calls]
    assert verbs.count("delete_resourceslice") == 1
    assert api.slices["dra-1-gpu.nvidia.com"]["metadata"]["ownerReferences"][0]["uid"] == "uid-dra-1-again"
    assert api.slices["dra-0-gpu.nvidia.com"]["metadata"]["ownerReferences"][0]["uid"] == "uid-dra-0"
    assert set(mgr.published) == {"dra-0", "dra-1"}
