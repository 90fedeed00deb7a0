"""Node registration, re-adoption and status refresh.

Registration is create-first: POST the Node with its full status; on 409 the node already exists (an
agent restart, or a second run) and is *adopted* by patching its status, never by GET-then-write, and
never deleted and recreated (no duplicates, no flapping Ready, pods bound to it keep running).  After
that only the conditions' heartbeat moves, every few minutes (the Lease carries liveness in between).
Only a hollow node (label ``hollowscale.io/hollow=true``) is adopted: a node of the same name that
someone else made is never patched or deleted, and registering it fails (:class:`ForeignNodeError`).
On exit (``--delete-nodes-on-exit``) the agent deletes exactly the nodes it registered or adopted, by
uid, so a node someone made again under that name meanwhile stays.

A watch on the hollow nodes (label ``hollowscale.io/hollow=true``) tells the manager what the
controller-manager did: a node of ours that it marked NotReady/Unknown while we were not faulting it
(the apiserver or the agent fell behind) posts Ready again at once, ahead of other work; a node someone
deleted is registered again.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hollow.api import STRATEGIC_MERGE_PATCH, ApiClient, backoff_delay
from hollow.clock import Clock
from hollow.faults import FaultState
from hollow.metrics import Metrics
from hollow.nodebody import NODE_LABEL, adopt_patch, heartbeat_patch, node_body
from hollow.settings import AgentSettings
from hollow.sharding import NodeSlot
from hollow.timers import TimedTasks

log = logging.getLogger("hollow.nodes")


class ForeignNodeError(RuntimeError):
    """A node of one of the pools' names exists and no hollow agent registered it (it is left as it is)."""


@dataclass
class NodeState:
    """What the agent knows about one of its nodes.

    Attributes:
        slot: identity, addresses, pool.
        uid: the Node's uid once registered ('' before).
        ready_since: wall seconds of a Ready transition the next status patch must report (after a
            heartbeat gap or a fault), else None (the stored transition time is kept).
        last_renew: monotonic seconds of the last acknowledged lease renewal (0 = never).
        lease_exists: the Lease is known to exist (renew it, do not POST it).
        lease_rv: the Lease's resourceVersion after our last write ('' = unknown: renew by merge patch,
            which answers with the current version; known: renew by update, as the kubelet does).
        recovering: a Ready status patch after a NotReady mark is pending (sent at heartbeat priority).
        needs_ready: marked NotReady while our own renewals were late; post Ready after the next renewal
            (posting it before would be contradicted at once, and only adds load to a struggling apiserver).
        foreign: the name now belongs to a node someone else made (found when registering it again): it
            is no longer refreshed, renewed or deleted.
    """

    slot: NodeSlot
    uid: str = ""
    ready_since: float | None = None
    last_renew: float = 0.0
    lease_exists: bool = False
    lease_rv: str = ""
    recovering: bool = False
    needs_ready: bool = False
    foreign: bool = False


class NodeManager(TimedTasks[str]):
    """Registers the agent's nodes and keeps their status fresh.

    ``rng`` draws where in the first interval each node's first refresh falls, and the registration
    retries' backoff; a test passes a seeded one to get the same timing every run.
    """

    def __init__(self, api: ApiClient, clock: Clock, settings: AgentSettings, metrics: Metrics,
                 faults: FaultState, slots: list[NodeSlot], rng: random.Random | None = None) -> None:
        super().__init__(clock)
        self.rng = rng or random.Random()
        self.api = api
        self.clock = clock
        self.settings = settings
        self.metrics = metrics
        self.faults = faults
        self.nodes: dict[str, NodeState] = {s.name: NodeState(s) for s in slots}
        self.registered = asyncio.Event()
        self._reregistering: set[str] = set()
        #: name -> uid of the nodes registered when the node watch's current LIST was sent
        self._uids_at_list: dict[str, str] = {}
        #: called with a node's name once it is registered again after someone deleted it
        self.on_reregistered: Callable[[str], None] | None = None
        self.stopping = False
        metrics.nodes_managed.set(len(self.nodes))

    async def _register(self, state: NodeState) -> None:
        """Create the node, or adopt it on 409; retried with backoff until it succeeds or is cancelled."""
        slot = state.slot
        attempt = 0
        while True:
            now = self.clock.wall()
            # heartbeat priority: a node not yet registered is as down as one whose lease is late, and
            # renewals of the first nodes must not starve the registration of the rest
            resp = await self.api.request("create_node", "POST", "/api/v1/nodes", priority=0,
                                          body=node_body(slot, now, self.settings.identity))
            if resp.status == 201:
                state.uid = resp.json()["metadata"]["uid"]
                self.metrics.node_registrations.labels("created").inc()
                return
            if resp.status == 409:
                existing = await self.api.request("get_node", "GET", f"/api/v1/nodes/{slot.name}", priority=0)
                if existing.status == 404:  # deleted between our POST and GET: create again
                    continue
                if existing.ok and ((existing.json().get("metadata") or {}).get("labels") or {}).get(
                        NODE_LABEL) != "true":
                    raise ForeignNodeError(
                        f"node {slot.name} exists and no hollow agent registered it (no {NODE_LABEL}=true label): "
                        "it is left as it is; rename the pool or remove that node")
                patch = adopt_patch(slot, now, self.settings.identity)
                resp = await self.api.request("patch_node_status", "PATCH", f"/api/v1/nodes/{slot.name}/status",
                                              body=patch, content_type=STRATEGIC_MERGE_PATCH, priority=0)
                if resp.ok:
                    state.uid = resp.json()["metadata"]["uid"]
                    self.metrics.node_registrations.labels("adopted").inc()
                    return
                if resp.status == 404:  # deleted between our POST and PATCH: create again
                    continue
            self.metrics.node_registrations.labels("error").inc()
            attempt += 1
            if attempt in (1, 5) or attempt % 20 == 0:
                log.warning("node %s: registration failed (%s %s); retrying", slot.name, resp.status,
                            resp.message())
            await asyncio.sleep(backoff_delay(min(attempt, 6), 0.2, 10.0, self.rng))

    async def register_all(self, on_registered: Callable[[str], None] | None = None) -> None:
        """Register every node (bounded by the API client's concurrency), then start status refreshes.

        ``on_registered(name)`` runs as each node is registered (the lease manager starts renewing it).
        """
        registered = 0

        async def one(state: NodeState) -> None:
            nonlocal registered
            await self._register(state)
            registered += 1
            self.metrics.nodes_registered.set(registered)
            if on_registered is not None:
                on_registered(state.slot.name)

        await asyncio.gather(*(one(s) for s in self.nodes.values()))
        # first refresh spread evenly over one interval, so refreshes never come in a burst
        interval = self.settings.heartbeat.status_s
        now = self.clock.monotonic()
        n = max(1, len(self.nodes))
        for i, name in enumerate(self.nodes):
            self._timers.schedule(name, now + interval * (i + self.rng.random()) / n)
        self.registered.set()
        log.info("%d nodes registered", len(self.nodes))

    def _fire(self, name: str, due: float) -> None:
        self._spawn(self._refresh(name))

    def refresh_now(self, name: str, transition: bool = False) -> None:
        """Post the node's Ready status right away (after a heartbeat gap or a fault).

        ``transition``: the node was (probably) marked NotReady, so Ready becomes True *now*.
        """
        if transition:
            state = self.nodes[name]
            state.ready_since = self.clock.wall()
            state.recovering = True
        self._timers.schedule(name, self.clock.monotonic())

    # --- node watch (WatchHandler) ---------------------------------------------------------------
    def on_event(self, kind: str, obj: dict[str, Any]) -> None:
        """React to what the control plane did to our nodes."""
        meta = obj.get("metadata") or {}
        name = meta.get("name", "")
        state = self.nodes.get(name)
        if state is None or not state.uid or self.stopping:
            return
        if kind == "DELETED":
            if meta.get("uid") == state.uid:
                self.reregister(name)
            return
        if state.recovering or state.slot.not_ready or self.faults.stopped(name, self.clock.monotonic()):
            return  # (a node kept NotReady is meant to be so)
        for cond in (obj.get("status") or {}).get("conditions") or ():
            if cond.get("type") == "Ready":
                if cond.get("status") != "True":
                    now = self.clock.monotonic()
                    if state.last_renew and now - state.last_renew < 2 * self.settings.heartbeat.renew_s:
                        log.warning("node %s was marked Ready=%s (%s); posting Ready", name, cond.get("status"),
                                    cond.get("reason"))
                        self.refresh_now(name, transition=True)
                    else:
                        state.needs_ready = True
                return

    def on_list_start(self) -> None:
        """The node watch sends a LIST: remember which nodes were registered (with which uid) before it."""
        self._uids_at_list = {name: s.uid for name, s in self.nodes.items() if s.uid}

    def on_relisted(self, uids: set[str]) -> None:
        """Register again the nodes deleted while the watch was down.

        Only nodes registered before the LIST was sent count: one registered while it was in flight
        (at startup, or re-registered after a deletion) may be missing from it without being gone.
        """
        if self.stopping:
            return
        before = self._uids_at_list
        for name, state in self.nodes.items():
            if (state.uid and state.uid not in uids and before.get(name) == state.uid
                    and name not in self._reregistering):
                self.reregister(name)

    async def _refresh(self, name: str) -> None:
        state = self.nodes[name]
        if state.foreign:
            return
        now_m = self.clock.monotonic()
        interval = self.settings.heartbeat.status_s
        if self.faults.stopped(name, now_m):
            self._timers.schedule(name, now_m + interval)
            return
        since = state.ready_since
        wall = self.clock.wall
        resp = await self.api.request("patch_node_status", "PATCH", f"/api/v1/nodes/{name}/status",
                                      body=lambda: heartbeat_patch(wall(), since, not state.slot.not_ready),
                                      content_type=STRATEGIC_MERGE_PATCH, priority=0 if state.recovering else 1)
        if resp.ok:
            if state.ready_since == since:
                state.ready_since = None
                state.recovering = False
            self.metrics.node_status_updates.labels("ok").inc()
            self._timers.schedule(name, self.clock.monotonic() + interval)
            return
        self.metrics.node_status_updates.labels(str(resp.status)).inc()
        if resp.status == 404:
            self.reregister(name)
        self._timers.schedule(name, self.clock.monotonic() + min(interval, 10.0))

    async def delete_lost(self, name: str) -> bool:
        """Delete a lost node's Node (by uid) and Lease, and forget its uid so that neither its deletion nor
        a 404 registers it again (:attr:`hollow.faults.FaultState.lost`); True when it was deleted."""
        state = self.nodes[name]
        uid = state.uid
        if not uid:
            return False
        resp = await self.api.request("delete_node", "DELETE", f"/api/v1/nodes/{name}", retry=True,
                                      body={"preconditions": {"uid": uid}})
        if not resp.ok and resp.status != 404:
            log.warning("lost node %s: delete failed (%s %s); left registered", name, resp.status, resp.message())
            return False
        await self._delete_lease(name, state)
        state.uid = ""
        return True

    def reregister(self, name: str) -> None:
        """The node vanished (someone deleted it): register it again, once at a time; a lost node waits for
        its repair (the fault registers it then)."""
        if name in self._reregistering or self.faults.is_lost(name):
            return
        self._reregistering.add(name)
        state = self.nodes[name]
        state.lease_exists = False

        async def again() -> None:
            try:
                log.warning("node %s was deleted; registering it again", name)
                await self._register(state)
                if self.on_reregistered is not None:
                    self.on_reregistered(name)
            except ForeignNodeError as exc:  # someone made their own node of that name: let it be
                state.uid, state.foreign = "", True
                log.error("%s", exc)
            finally:
                self._reregistering.discard(name)

        self._spawn(again())

    def backlog(self) -> int:
        """Status refreshes past their deadline."""
        now = self.clock.monotonic()
        nxt = self._timers.queue.next_due()
        return 0 if nxt is None or nxt > now else len(self._tasks)

    async def delete_all(self, timeout_s: float = 120.0) -> None:
        """Delete the Nodes this agent registered or adopted and their Leases (``--delete-nodes-on-exit``),
        giving up after ``timeout_s``.

        By uid (a DELETE precondition): a node someone deleted and made again under the name is not ours
        and stays (409).  A Lease goes by the resourceVersion of our last write where we know it, else
        (a renewal failed or was cancelled) by the version it has now, once read and seen to be owned by
        our node; one owned by anything else stays.
        """
        ours = {name: state for name, state in self.nodes.items() if state.uid}

        async def one(name: str, state: NodeState) -> None:
            resp = await self.api.request("delete_node", "DELETE", f"/api/v1/nodes/{name}", retry=True,
                                          body={"preconditions": {"uid": state.uid}})
            if resp.status == 409:
                log.warning("node %s is not the one this agent registered any more (uid changed): left as it is",
                            name)
                return
            await self._delete_lease(name, state)

        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.gather(*(one(n, s) for n, s in ours.items()))
            log.info("deleted %d nodes", len(ours))
        except TimeoutError:
            log.warning("gave up deleting nodes after %.0fs (is the apiserver up?)", timeout_s)

    async def _delete_lease(self, name: str, state: NodeState) -> None:
        """Delete ``name``'s Lease at the resourceVersion of our last write.  When that version is unknown
        (the last renewal failed or was cancelled at stop) or stale (409: a renewal cancelled at stop
        landed after it), read the Lease and delete it at its current version if it is owned by the node
        we registered (its ownerReference carries our node's uid), so nothing of ours waits for the
        garbage collector and nothing of anyone else's is touched."""
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
        rv = state.lease_rv
        for _ in range(3):
            if not rv:
                current = await self.api.request("get_lease", "GET", path)
                if not current.ok:  # 404: no Lease to delete
                    return
                meta = current.json().get("metadata") or {}
                owners = {ref.get("uid") for ref in meta.get("ownerReferences") or []}
                if state.uid not in owners:
                    log.warning("lease %s is not owned by the node this agent registered: left as it is", name)
                    return
                rv = meta.get("resourceVersion", "")
                if not rv:
                    return
            resp = await self.api.request("delete_lease", "DELETE", path,
                                          body={"preconditions": {"resourceVersion": rv}})
            if resp.status != 409:
                return
            rv = ""

    async def stop(self) -> None:
        """Cancel in-flight refreshes."""
        self.stopping = True
        await super().stop()
