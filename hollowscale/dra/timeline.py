"""Watch-based timeline of every ResourceClaim of a run, with client-side ms timestamps (as the pod timeline
of :mod:`hollowscale.measure.timeline`, whose rules it follows: a transition is stamped with the receive
time of the first event showing it, records are keyed by uid, a relist's SYNC events change nothing
already known).

Per claim: ``created`` (first seen), ``allocated`` (``status.allocation`` set: the scheduler's PreBind),
``reserved`` (``status.reservedFor`` non-empty), ``released`` (the allocation gone again: the
resourceclaim controller deallocated it once its pods ended), ``deleted``; every allocation interval,
the devices of each allocation (pool, device, consumed memory), the pods ever reserved, and where the
claim came from: ``template`` (made by the controller-manager for a pod, annotation
``resource.kubernetes.io/pod-claim-name``), ``extended`` (made by the scheduler for an extended resource
request, annotation ``resource.kubernetes.io/extended-resource-claim``) or ``shared`` (created by the load).

The collector watches ``resourceclaims`` in the run's namespaces (every claim there is the run's: the
namespaces are claimed by the run, and generated claims do not always carry the run label).
"""

from __future__ import annotations

import csv
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from hollow.dra import memory_bytes
from kubecore.config import KubeEndpoint
from kubecore.watch import list_then_watch, session_for
from loadgen.workloads import LABEL_ROLE, LABEL_WORKLOAD

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
EXTENDED_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
CLAIMS_PATH = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"


@dataclass
class ClaimRecord:
    """What the timeline knows of one claim (times: client epoch ms)."""

    uid: str
    name: str
    namespace: str
    created_ms: float
    source: str  # template | extended | shared
    pod_uid: str = ""  # the pod it was made for (template and extended claims)
    workload: str = ""
    role: str = ""
    count: int = 1  # devices requested
    memory_request: int = 0  # bytes of a memory share per device (0: whole devices)
    allocated_ms: float | None = None
    reserved_ms: float | None = None
    released_ms: float | None = None
    deleted_ms: float | None = None
    allocations: int = 0
    #: allocation intervals [start_ms, end_ms or None]
    intervals: list[list[float | None]] = field(default_factory=list)
    #: devices of the current (or last) allocation: "pool/device"
    devices: list[str] = field(default_factory=list)
    #: memory each of those devices gives this claim (bytes; 0 = the whole device)
    consumed: list[int] = field(default_factory=list)
    reserved_pods: list[str] = field(default_factory=list)
    allocated_now: bool = False
    reserved_now: int = 0


def _request_shape(spec: dict[str, Any]) -> tuple[int, int]:
    """(devices, memory bytes per device) a claim asks for (its requests summed; ExactCount)."""
    count, memory = 0, 0
    for r in ((spec.get("devices") or {}).get("requests") or ()):
        exactly = r.get("exactly") or {}
        if not exactly and r.get("firstAvailable"):
            exactly = r["firstAvailable"][0]
        count += int(exactly.get("count") or 1)
        mem = ((exactly.get("capacity") or {}).get("requests") or {}).get("memory")
        if mem:
            memory = max(memory, memory_bytes(str(mem)))
    return max(count, 1), memory


class ClaimTimeline:
    """The claim records and the logic that applies watch events to them (no I/O: unit-testable)."""

    def __init__(self) -> None:
        self.claims: dict[str, ClaimRecord] = {}
        self.events = 0
        self.lock = threading.Lock()

    def apply(self, typ: str, obj: dict[str, Any], t: float) -> None:
        meta = obj.get("metadata") or {}
        uid = meta.get("uid")
        if not uid:
            return
        self.events += 1
        rec = self.claims.get(uid)
        if rec is None and typ == "DELETED" and not obj.get("spec"):
            return  # a relist's stub of a claim never seen
        if rec is None:
            ann = meta.get("annotations") or {}
            labels = meta.get("labels") or {}
            owners = [o for o in meta.get("ownerReferences") or () if o.get("kind") == "Pod"]
            source = "extended" if ann.get(EXTENDED_ANNOTATION) == "true" else \
                "template" if POD_CLAIM_ANNOTATION in ann else "shared"
            count, memory = _request_shape(obj.get("spec") or {})
            rec = self.claims[uid] = ClaimRecord(
                uid=uid, name=meta.get("name", ""), namespace=meta.get("namespace", ""), created_ms=t, source=source,
                pod_uid=owners[0].get("uid", "") if owners else "", workload=labels.get(LABEL_WORKLOAD, ""),
                role=labels.get(LABEL_ROLE, ""), count=count, memory_request=memory)
        status = obj.get("status")
        if status is not None or typ != "DELETED":
            self._status(rec, status or {}, t)
        if typ == "DELETED" and rec.deleted_ms is None:
            rec.deleted_ms = t
            if rec.allocated_now:  # deleted while allocated: the allocation ends with it
                rec.allocated_now = False
                rec.intervals[-1][1] = t
                rec.released_ms = rec.released_ms or t

    @staticmethod
    def _status(rec: ClaimRecord, status: dict[str, Any], t: float) -> None:
        allocation = status.get("allocation")
        if allocation and not rec.allocated_now:
            rec.allocated_now = True
            rec.allocations += 1
            rec.intervals.append([t, None])
            if rec.allocated_ms is None:
                rec.allocated_ms = t
            results = (allocation.get("devices") or {}).get("results") or ()
            rec.devices = [f"{r.get('pool', '')}/{r.get('device', '')}" for r in results]
            rec.consumed = [memory_bytes(str(((r.get("consumedCapacity") or {}).get("memory")) or 0))
                            for r in results]
        elif not allocation and rec.allocated_now:
            rec.allocated_now = False
            rec.intervals[-1][1] = t
            rec.released_ms = t
        reserved = status.get("reservedFor") or ()
        rec.reserved_now = len(reserved)
        if reserved and rec.reserved_ms is None:
            rec.reserved_ms = t
        for r in reserved:
            uid = r.get("uid")
            if uid and uid not in rec.reserved_pods:
                rec.reserved_pods.append(uid)

    def snapshot(self) -> list[ClaimRecord]:
        with self.lock:
            return [ClaimRecord(**asdict(c)) for c in self.claims.values()]

    def allocated_now(self) -> int:
        """Claims allocated at the last event seen."""
        with self.lock:
            return sum(1 for c in self.claims.values() if c.allocated_now)

    def write_csv(self, path: Path) -> Path:
        cols = [f.name for f in fields(ClaimRecord)]
        with path.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(cols)
            for c in self.snapshot():
                w.writerow([";".join(map(str, v)) if isinstance(v, list) else ("" if v is None else v)
                            for v in (getattr(c, k) for k in cols)])
        return path


class ClaimCollector:
    """Watches the run's namespaces' ResourceClaims in threads (one per namespace) into a :class:`ClaimTimeline`."""

    def __init__(self, endpoint: KubeEndpoint, namespaces: Sequence[str], timeline: ClaimTimeline | None = None):
        self.endpoint = endpoint
        self.namespaces = list(namespaces)
        self.timeline = timeline or ClaimTimeline()
        self.restarts: list[str] = []
        self._stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        for ns in self.namespaces:
            th = threading.Thread(target=self._run, args=(CLAIMS_PATH.format(ns=ns),), name=f"claims-{ns}", daemon=True)
            th.start()
            self.threads.append(th)

    def _run(self, path: str) -> None:
        s = session_for(self.endpoint, 1)
        tl = self.timeline

        def restarted(why: str) -> None:
            if not why.startswith("watch ended"):
                self.restarts.append(why)

        for typ, obj, t in list_then_watch(s, self.endpoint.server, path, self._stop.is_set, on_restart=restarted):
            with tl.lock:
                tl.apply(typ, obj, t)

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        for th in self.threads:
            th.join(timeout=timeout_s)
