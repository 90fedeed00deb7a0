"""Watch-based timeline of every pod and workload object of a run, with client-side ms timestamps.

Two watches (pods; jobs), filtered by the run's ``hollowscale.io/run`` label, each in its own thread.
Each event is stamped with the time the collector received it (epoch ms); a record keeps the first
time it saw each transition:

* pods: ``created`` (first seen), ``scheduled`` (``spec.nodeName`` set), ``running`` (phase Running or
  later), ``finished`` (Succeeded/Failed), ``deleted``.
* workload objects (Jobs, and bare Pods, which are their own workload object): ``created``,
  ``finished`` with ``Complete``/``Failed``.

Records are keyed by uid and a transition is recorded once, so the SYNC events of a relist (after a
410 or an apiserver restart) change nothing already known; the metadata-only DELETED events a relist
synthesises for objects deleted meanwhile set ``deleted`` only (see :func:`kubecore.watch.list_then_watch`).

The collector also measures itself: events/s handled, and the lag between a chunk arriving and its
events being applied (``apply_lag_ms``), so the benchmark can show it keeps up.
"""

from __future__ import annotations

import csv
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from kubecore.config import KubeEndpoint
from kubecore.quantity import parse_quantity
from kubecore.watch import SYNC, list_then_watch, now_ms, session_for
from loadgen.workloads import LABEL_INSTANCE, LABEL_ROLE, LABEL_RUN, LABEL_WORKLOAD


@dataclass
class PodRecord:
    uid: str
    name: str
    workload: str
    role: str
    instance: str
    owner_kind: str  # Job | ReplicaSet | "" (bare pod)
    owner_uid: str
    gpus: float
    created_ms: float
    server_created: str = ""
    scheduled_ms: float | None = None
    running_ms: float | None = None
    finished_ms: float | None = None
    deleted_ms: float | None = None
    node: str = ""
    phase: str = "Pending"
    exit_code: int | None = None


@dataclass
class JobRecord:
    uid: str
    name: str
    kind: str  # Job | Pod
    workload: str
    role: str
    instance: str
    gpus: float
    replicas: int
    created_ms: float
    finished_ms: float | None = None
    outcome: str = ""  # Complete | Failed | ""


@dataclass
class CollectorStats:
    events: int = 0
    sync_objects: int = 0
    restarts: list[str] = field(default_factory=list)
    max_apply_lag_ms: float = 0.0
    apply_lag_sum_ms: float = 0.0
    busy_s: float = 0.0


def _gpus(pod_spec: dict[str, Any]) -> float:
    total = 0.0
    for c in pod_spec.get("containers") or []:
        req = ((c.get("resources") or {}).get("requests") or {}).get("nvidia.com/gpu")
        lim = ((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")
        v = req or lim
        if v:
            total += float(parse_quantity(v))
    return total


class Timeline:
    """The records and the logic that applies watch events to them (no I/O: unit-testable)."""

    def __init__(self) -> None:
        self.pods: dict[str, PodRecord] = {}
        self.jobs: dict[str, JobRecord] = {}
        self.stats = CollectorStats()
        self.lock = threading.Lock()

    # ---- pods
    def apply_pod(self, typ: str, pod: dict[str, Any], t: float) -> None:
        meta = pod.get("metadata") or {}
        uid = meta.get("uid")
        if not uid:
            return
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        rec = self.pods.get(uid)
        if rec is None and typ == "DELETED":  # never seen (e.g. a relist's synthetic DELETED, metadata only)
            return
        if rec is None:
            labels = meta.get("labels") or {}
            owners = meta.get("ownerReferences") or []
            owner = next((o for o in owners if o.get("controller")), owners[0] if owners else {})
            rec = PodRecord(
                uid=uid, name=meta.get("name", ""), workload=labels.get(LABEL_WORKLOAD, ""),
                role=labels.get(LABEL_ROLE, ""), instance=labels.get(LABEL_INSTANCE, ""),
                owner_kind=owner.get("kind", ""), owner_uid=owner.get("uid", ""), gpus=_gpus(spec),
                created_ms=t, server_created=meta.get("creationTimestamp", ""),
            )
            self.pods[uid] = rec
            if not owners:  # a bare pod is its own workload object
                self.jobs.setdefault(uid, JobRecord(uid, rec.name, "Pod", rec.workload, rec.role, rec.instance,
                                                    rec.gpus, 1, t))
        node = spec.get("nodeName")
        if node and rec.scheduled_ms is None:
            rec.scheduled_ms = t
            rec.node = node
        phase = status.get("phase") or rec.phase
        rec.phase = phase
        if phase in ("Running", "Succeeded", "Failed") and rec.running_ms is None:
            rec.running_ms = t
            if rec.scheduled_ms is None:  # scheduled and started between two events we saw
                rec.scheduled_ms = t
        if phase in ("Succeeded", "Failed") and rec.finished_ms is None:
            rec.finished_ms = t
            for cs in status.get("containerStatuses") or []:
                term = (cs.get("state") or {}).get("terminated")
                if term is not None:
                    rec.exit_code = term.get("exitCode")
            job = self.jobs.get(uid)
            if job is not None and job.finished_ms is None:
                job.finished_ms = t
                job.outcome = "Complete" if phase == "Succeeded" else "Failed"
        if typ == "DELETED" and rec.deleted_ms is None:
            rec.deleted_ms = t

    # ---- jobs
    def apply_job(self, typ: str, job: dict[str, Any], t: float) -> None:
        meta = job.get("metadata") or {}
        uid = meta.get("uid")
        if not uid:
            return
        rec = self.jobs.get(uid)
        if rec is None and typ == "DELETED":  # never seen: nothing to record
            return
        if rec is None:
            labels = meta.get("labels") or {}
            spec = job.get("spec") or {}
            tmpl = ((spec.get("template") or {}).get("spec")) or {}
            rec = JobRecord(uid, meta.get("name", ""), "Job", labels.get(LABEL_WORKLOAD, ""),
                            labels.get(LABEL_ROLE, ""), labels.get(LABEL_INSTANCE, ""), _gpus(tmpl),
                            int(spec.get("parallelism") or 1), t)
            self.jobs[uid] = rec
        if rec.finished_ms is None:
            for c in (job.get("status") or {}).get("conditions") or []:
                if c.get("status") == "True" and c.get("type") in ("Complete", "Failed"):
                    rec.finished_ms = t
                    rec.outcome = c["type"]
                    break

    def counts(self) -> dict[str, int]:
        with self.lock:
            jobs = list(self.jobs.values())
            pods = list(self.pods.values())
        return {
            "pods": len(pods),
            "pods_pending": sum(1 for p in pods if p.scheduled_ms is None and p.deleted_ms is None),
            "pods_running": sum(1 for p in pods if p.running_ms is not None and p.finished_ms is None),
            "jobs": len(jobs),
            "jobs_done": sum(1 for j in jobs if j.finished_ms is not None),
            "jobs_failed": sum(1 for j in jobs if j.outcome == "Failed"),
        }

    def snapshot(self) -> tuple[list[PodRecord], list[JobRecord]]:
        with self.lock:
            return [PodRecord(**asdict(p)) for p in self.pods.values()], [JobRecord(**asdict(j)) for j in self.jobs.values()]

    def write_csv(self, folder: Path) -> list[Path]:
        pods, jobs = self.snapshot()
        out = []
        for name, cls, rows in (("timeline_pods.csv", PodRecord, pods), ("timeline_jobs.csv", JobRecord, jobs)):
            path = folder / name
            with path.open("w", newline="") as fh:
                w = csv.writer(fh)
                cols = [f.name for f in fields(cls)]
                w.writerow(cols)
                for r in rows:
                    w.writerow([getattr(r, c) if getattr(r, c) is not None else "" for c in cols])
            out.append(path)
        return out


class TimelineCollector:
    """Runs the two watches in threads and feeds a :class:`Timeline`."""

    def __init__(self, endpoint: KubeEndpoint, namespace: str, run_id: str, timeline: Timeline | None = None):
        self.endpoint = endpoint
        self.namespace = namespace
        self.selector = f"{LABEL_RUN}={run_id}"
        self.timeline = timeline or Timeline()
        self._stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.started_ms = 0.0

    def start(self) -> None:
        self.started_ms = now_ms()
        ns = self.namespace
        for name, path, apply in (
            ("pods", f"/api/v1/namespaces/{ns}/pods", self.timeline.apply_pod),
            ("jobs", f"/apis/batch/v1/namespaces/{ns}/jobs", self.timeline.apply_job),
        ):
            th = threading.Thread(target=self._run, args=(path, apply), name=f"timeline-{name}", daemon=True)
            th.start()
            self.threads.append(th)

    def _run(self, path: str, apply: Any) -> None:
        s = session_for(self.endpoint, 1)
        tl = self.timeline
        st = tl.stats

        def restarted(why: str) -> None:
            if not why.startswith("watch ended"):
                st.restarts.append(why)

        for typ, obj, t in list_then_watch(s, self.endpoint.server, path, self._stop.is_set, self.selector,
                                           on_restart=restarted):
            t0 = time.perf_counter()
            with tl.lock:
                apply(typ, obj, t)
            st.events += 1
            if typ == SYNC:
                st.sync_objects += 1
            t1 = time.perf_counter()
            st.busy_s += t1 - t0
            lag = now_ms() - t
            st.apply_lag_sum_ms += lag
            if lag > st.max_apply_lag_ms:
                st.max_apply_lag_ms = lag

    def stop(self, timeout_s: float = 15.0) -> None:
        self._stop.set()
        for th in self.threads:
            th.join(timeout=timeout_s)
