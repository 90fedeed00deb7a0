"""Deleting a Lease on exit (hollow/nodes.py ``NodeManager._delete_lease``): ours goes whatever version we last
knew, someone else's stays.  CI once found a Lease left behind because the last renewal had failed (its
version unknown), and the Lease was then left to the garbage collector."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import orjson

from hollow.api import Response
from hollow.nodes import NodeManager, NodeState

OURS = "node-uid-1"


class FakeLeases:
    """One Lease: a DELETE with a stale resourceVersion precondition answers 409, as the apiserver does."""

    def __init__(self, rv: str, owner: str) -> None:
        self.lease: dict[str, Any] | None = {"metadata": {"name": "n1", "resourceVersion": rv,
                                                          "ownerReferences": [{"kind": "Node", "uid": owner}]}}
        self.calls: list[str] = []

    async def request(self, verb: str, method: str, path: str, *, body: Any = None, **_: Any) -> Response:
        self.calls.append(method)
        await asyncio.sleep(0)
        if self.lease is None:
            return Response(404, b"{}")
        if method == "GET":
            return Response(200, orjson.dumps(self.lease))
        if method == "DELETE":
            if body["preconditions"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
                return Response(409, b"{}")
            self.lease = None
            return Response(200, b"{}")
        return Response(500, b"{}")


def _delete(api: FakeLeases, known_rv: str) -> None:
    state = NodeState(slot=None, uid=OURS, lease_exists=True, lease_rv=known_rv)  # type: ignore[arg-type]
    asyncio.run(NodeManager._delete_lease(SimpleNamespace(api=api), "n1", state))  # type: ignore[arg-type]


def test_our_lease_goes_at_the_version_we_last_wrote() -> None:
    api = FakeLeases("7", OURS)
    _delete(api, "7")
    assert api.lease is None and api.calls == ["DELETE"]


def test_our_lease_goes_when_its_version_is_unknown_or_stale() -> None:
    for known in ("", "5"):  # a failed renewal left it unknown; a late renewal moved it on
        api = FakeLeases("9", OURS)
        _delete(api, known)
        assert api.lease is None, known


def test_a_lease_owned_by_another_node_stays() -> None:
    api = FakeLeases("9", "someone-elses-node")
    _delete(api, "")
    assert api.lease is not None and api.calls == ["GET"]
    _delete(api, "5")
    assert api.lease is not None and api.calls == ["GET", "DELETE", "GET"]
