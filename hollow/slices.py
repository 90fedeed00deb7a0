"""DRA ResourceSlices of the agent's nodes: published once a node is registered, again if it is re-made.

A node of a pool whose GPUs are DRA devices (``gpus.expose: dra|both``, :mod:`hollow.dra`) publishes
its pool's slices right after its registration, as a kubelet plugin does once its kubelet registered the
node: one POST per slice, owned by the Node (the garbage collector deletes them with it), at the
agent's lower priority, so that slices wait behind node registrations and heartbeats, never ahead of
them.  The creates are pipelined (every node's publish is started as its registration ends and they
share the agent's concurrency bound), never sent one after the other.

Re-adoption (an agent restart, a second run) finds the slices there (409): a slice owned by this Node
(same uid) is adopted as it is; one owned by an earlier Node of the name (its uid differs) is deleted
by its uid and created again.  A failed publish is retried with backoff.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import orjson

from hollow.api import ApiClient, backoff_delay
from hollow.clock import Clock
from hollow.dra import API_VERSION, node_slices
from hollow.metrics import Metrics
from hollow.nodebody import NODE_LABEL
from hollow.nodes import NodeState
from hollow.timers import TimedTasks

log = logging.getLogger("hollow.slices")
PATH = f"/apis/{API_VERSION}/resourceslices"


class SliceManager(TimedTasks[str]):
    """Publishes the ResourceSlices of the agent's DRA nodes.

    ``rng`` draws the retries' backoff; a test passes a seeded one to get the same retries every run.
    """

    def __init__(self, api: ApiClient, clock: Clock, metrics: Metrics, nodes: dict[str, NodeState],
                 rng: random.Random | None = None) -> None:
        super().__init__(clock)
        self.rng = rng or random.Random()
        self.api = api
        self.clock = clock
        self.metrics = metrics
        self.nodes = nodes
        self.published: dict[str, str] = {}  # node -> the node uid its slices belong to
        self.wanted = sum(1 for n in nodes if self.wants(n))
        self._attempts: dict[str, int] = {}

    def wants(self, name: str) -> bool:
        """The node's pool publishes slices."""
        state = self.nodes.get(name)
        return state is not None and state.slot.pool.dra is not None

    def add(self, name: str) -> None:
        """The node was registered (or registered again): publish its slices now."""
        if self.wants(name):
            self.published.pop(name, None)
            self.metrics.slices_published.set(len(self.published))
            self._timers.schedule(name, self.clock.monotonic())

    def _fire(self, name: str, due: float) -> None:
        self._spawn(self._publish(name))

    def bodies(self, name: str) -> list[dict[str, Any]]:
        """The slices of node ``name`` (its pool's rendering with the node's uid)."""
        state = self.nodes[name]
        pool = state.slot.pool
        gpus = pool.dra
        assert gpus is not None
        return node_slices(name, state.uid, state.slot.ordinal, gpus, pool.gpu_count, labels={NODE_LABEL: "true"})

    async def _publish(self, name: str) -> None:
        state = self.nodes[name]
        uid = state.uid
        if not uid or state.foreign:
            return
        ok = True
        for body in self.bodies(name):
            ok = await self._one(body, uid) and ok
            if state.uid != uid:  # re-registered meanwhile: that registration publishes again
                return
        if ok:
            self.published[name] = uid
            self._attempts.pop(name, None)
            self.metrics.slices_published.set(len(self.published))
            if len(self.published) == self.wanted:
                log.info("ResourceSlices of %d nodes published", len(self.published))
            return
        attempt = self._attempts[name] = self._attempts.get(name, 0) + 1
        self._timers.schedule(name, self.clock.monotonic() + backoff_delay(min(attempt, 6), 0.5, 30.0, self.rng))

    async def _one(self, body: dict[str, Any], uid: str) -> bool:
        """Create one slice, or adopt or replace the one of its name; True when it is ours now."""
        name = body["metadata"]["name"]
        data = orjson.dumps(body)
        for _ in range(3):
            resp = await self.api.request("create_resourceslice", "POST", PATH, body=data)
            if resp.status == 201:
                self.metrics.slice_writes.labels("created").inc()
                return True
            if resp.status != 409:
                break
            got = await self.api.request("get_resourceslice", "GET", f"{PATH}/{name}")
            if got.status == 404:
                continue
            if not got.ok:
                break
            meta = got.json().get("metadata") or {}
            if any(o.get("uid") == uid for o in meta.get("ownerReferences") or ()):
                self.metrics.slice_writes.labels("adopted").inc()
                return True
            # an earlier Node of this name owned it: the garbage collector would delete it; do it now
            gone = await self.api.request("delete_resourceslice", "DELETE", f"{PATH}/{name}",
                                          body={"preconditions": {"uid": meta.get("uid")}})
            if gone.ok or gone.status in (404, 409):
                self.metrics.slice_writes.labels("replaced").inc()
                continue
            break
        self.metrics.slice_writes.labels("error").inc()
        log.warning("ResourceSlice %s: not published (%s %s); retrying", name, resp.status, resp.message())
        return False
