"""Node Leases: one per node in ``kube-node-lease``, renewed every lease/4 like the kubelet.

Renewals are spread evenly over the interval (node i of n at ``i/n`` of it) and each deadline gets a
small positive jitter that never accumulates (the next deadline counts from the nominal one), so ten
thousand nodes make a steady ~1,000 renewals/s at 40 s leases instead of bursts.  Deadlines that fall
within 50 ms of each other fire together (one wake-up of the agent for a batch of renewals).

A renewal is an update (PUT) of the whole Lease at the resourceVersion our last write returned, as
the kubelet renews, and in protobuf both ways, as the kubelet talks (:mod:`hollow.protobuf`); an
apiserver that refuses protobuf (415) gets JSON from then on; when that version is unknown (an
adopted Lease) or stale (409: someone else wrote it), a merge patch of ``spec.renewTime`` renews it
and tells the current version.  A missing Lease is created (owned by its Node, so it is
garbage-collected with it); no GET before a write, ever.

Renew lag (acknowledgement time minus deadline) is the agent's main health signal about itself.
"""

from __future__ import annotations

import logging
import random

import orjson

from hollow import protobuf
from hollow.api import JSON, MERGE_PATCH, ApiClient, Response
from hollow.clock import Clock
from hollow.faults import FaultState
from hollow.metrics import Metrics
from hollow.nodebody import LEASE_NAMESPACE, lease_body, lease_renew_bytes, lease_update_bytes
from hollow.nodes import NodeManager
from hollow.settings import HeartbeatSettings
from hollow.timers import TimedTasks

log = logging.getLogger("hollow.leases")
_LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases"
#: renewals due within this many seconds of each other fire in one wake-up (0.5% of a 10 s interval)
COALESCE_S = 0.05


def spread(names: list[str], start: float, interval: float) -> dict[str, float]:
    """First deadlines: node ``i`` of ``n`` at ``start + interval * i / n`` (evenly spread)."""
    n = max(1, len(names))
    return {name: start + interval * i / n for i, name in enumerate(names)}


class LeaseManager(TimedTasks[str]):
    """Renews the Leases of every node of a :class:`NodeManager`.

    ``rng`` draws each renewal's jitter; a test passes a seeded one to get the same renewals every run.
    """

    def __init__(self, api: ApiClient, clock: Clock, heartbeat: HeartbeatSettings, metrics: Metrics,
                 faults: FaultState, nodes: NodeManager, rng: random.Random | None = None) -> None:
        super().__init__(clock, coalesce=COALESCE_S)
        self.rng = rng or random.Random()
        self.api = api
        self.clock = clock
        self.hb = heartbeat
        self.metrics = metrics
        self.faults = faults
        self.nodes = nodes
        self._renew_s = heartbeat.renew_s
        self._lease_s = heartbeat.lease_s
        self._nominal: dict[str, float] = {}
        self._inflight: set[str] = set()
        self.recent_lags: list[float] = []
        self._ok = metrics.lease_renewals.labels("renewed")
        self._created = metrics.lease_renewals.labels("created")
        self._err = metrics.lease_renewals.labels("error")
        self._skipped = metrics.lease_renewals.labels("skipped_inflight")
        #: write Leases in protobuf (as the kubelet does) until the apiserver says it takes no protobuf
        self.protobuf = True

    def plan_phases(self, start: float) -> None:
        """Give every node its place on one grid: node ``i`` of ``n`` at ``start + renew * i / n``."""
        self._nominal = spread(list(self.nodes.nodes), start, self._renew_s)

    def add(self, name: str) -> None:
        """Start renewing ``name`` (just registered) at its first grid point from now on."""
        interval = self._renew_s
        now = self.clock.monotonic()
        nominal = self._nominal.get(name, now)
        if nominal < now:
            nominal += interval * ((now - nominal) // interval + 1)
        self._nominal[name] = nominal
        self._timers.schedule(name, nominal)

    def renew_now(self, name: str) -> None:
        """Renew ``name`` as soon as possible (fault recovery); the regular cadence is unchanged."""
        self._timers.schedule(name, self.clock.monotonic())

    def _schedule_next(self, name: str) -> None:
        interval = self._renew_s
        nominal = self._nominal.get(name, self.clock.monotonic()) + interval
        now = self.clock.monotonic()
        if nominal < now:  # we fell behind by more than an interval: skip the missed ones, keep the phase
            nominal += interval * ((now - nominal) // interval + 1)
        self._nominal[name] = nominal
        self._timers.schedule(name, nominal + self.rng.uniform(0.0, self.hb.renew_jitter * interval))

    def _fire(self, name: str, due: float) -> None:
        self._schedule_next(name)
        if name in self._inflight:
            self._skipped.inc()
            return
        self._inflight.add(name)
        self._spawn(self._renew(name, due))

    async def _renew(self, name: str, due: float) -> None:
        try:
            await self._renew_once(name, due)
        finally:
            self._inflight.discard(name)

    async def _renew_once(self, name: str, due: float) -> None:
        state = self.nodes.nodes[name]
        start = self.clock.monotonic()
        if not state.uid or self.faults.stopped(name, start):
            return
        wall = self.clock.wall

        def renew() -> bytes:  # stamped when the request leaves, not when it queued
            return lease_renew_bytes(wall())

        ok = False
        created = False
        path = f"{_LEASES}/{name}"
        resp: Response | None = None
        if state.lease_exists:
            if state.lease_rv:
                resp = await self._write("update_lease", "PUT", path, name, state.uid, state.lease_rv)
            if resp is None or resp.status == 409:  # version unknown, or someone else wrote the Lease
                resp = await self.api.request("patch_lease", "PATCH", path, body=renew,
                                              content_type=MERGE_PATCH, priority=0)
            ok = resp.ok
            if resp.status == 404:
                state.lease_exists = False
                self.nodes.refresh_now(name)  # a 404 on the node too means it was deleted: re-register
        if not state.lease_exists:
            resp = await self._write("create_lease", "POST", _LEASES, name, state.uid, "")
            if resp.status == 201:
                ok = created = True
            elif resp.status == 409:
                resp = await self.api.request("patch_lease", "PATCH", path, body=renew,
                                              content_type=MERGE_PATCH, priority=0)
                ok = resp.ok
        if resp is None or not ok:
            state.lease_rv = ""
            self._err.inc()
            if resp is not None:
                log.debug("lease %s: renewal failed (%s %s)", name, resp.status, resp.message())
            return
        state.lease_rv = resp.resource_version()
        state.lease_exists = True
        acked = self.clock.monotonic()
        lag = max(0.0, acked - due)
        self.metrics.lease_renew_lag.observe(lag)
        self.recent_lags.append(lag)
        (self._created if created else self._ok).inc()
        state.last_renew = acked
        if state.needs_ready:  # marked NotReady while we lagged: now that we are current, say Ready
            state.needs_ready = False
            self.nodes.refresh_now(name, transition=True)

    async def _write(self, verb: str, method: str, path: str, name: str, node_uid: str, rv: str) -> Response:
        """Create (``rv`` empty) or update the whole Lease, in protobuf while the apiserver takes it."""
        wall, lease_s = self.clock.wall, self._lease_s
        if self.protobuf:
            def proto() -> bytes:  # stamped when the request leaves, not when it queued
                return protobuf.lease(name, LEASE_NAMESPACE, node_uid, lease_s, wall(), rv)

            resp = await self.api.request(verb, method, path, body=proto, content_type=protobuf.PROTOBUF,
                                          accept=protobuf.PROTOBUF, priority=0)
            if resp.status != 415:
                return resp
            log.warning("the apiserver refuses protobuf Leases (415: %s); renewing in JSON", resp.message())
            self.protobuf = False

        def as_json() -> bytes:
            if rv:
                return lease_update_bytes(name, node_uid, lease_s, rv, wall())
            return orjson.dumps(lease_body(name, node_uid, lease_s, wall()))

        return await self.api.request(verb, method, path, body=as_json, content_type=JSON, priority=0)

    def take_recent_lags(self) -> list[float]:
        """Lags recorded since the last call (for the self-monitor's p99)."""
        lags, self.recent_lags = self.recent_lags, []
        return lags

    def backlog(self) -> int:
        """Renewals in flight (a growing number means the apiserver or the agent falls behind)."""
        return len(self._inflight)
