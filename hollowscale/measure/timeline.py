"""Watch-based timeline of every pod and workload object of a run, with client-side ms timestamps.

Watches of pods and Jobs filtered by the run's ``hollowscale.io/run`` label, each in its own thread:
one namespace (a watch per resource on it), or several (one cluster-wide watch per resource with the
label selector, see :class:`TimelineCollector`).
Each event is stamped with the time the collector received it (epoch ms); a record keeps the first
time it saw each transition:

* pods: ``created`` (first seen), ``scheduled`` (``spec.nodeName`` set), ``running`` (phase Running or
  later), ``finished`` (Succeeded/Failed), ``deleted``.
* workload objects (Jobs, and bare Pods, which are their own workload object): ``created``,
  ``finished`` with ``Complete``/``Failed``, ``deleted``.

Batch scheduling adds, read from the same events (one pass over a few labels and conditions per event):

* pods: ``namespace`` (the tenant), ``gang`` (label ``hollowscale.io/gang``, the PodGroup's name),
  ``gang_min`` (annotation ``hollowscale.io/gang-min``), ``priority_class`` (``spec.priorityClassName``),
  ``queue`` (label ``kueue.x-k8s.io/queue-name`` when the Job template carries it), ``ready_ms`` (first
  event with condition Ready=True), ``disrupted_ms``/``disruption_reason`` (first event with condition
  DisruptionTarget=True: preemption by the scheduler, eviction, Kueue), ``deleting_ms`` (first event with a
  ``deletionTimestamp``: its containers are being stopped).
* Jobs: the same labels (``queue`` from the Job's own label), ``suspended_at_create``, ``admitted_ms``
  (first event where a Job created suspended has ``spec.suspend`` false: Kueue admitted it; None for
  Jobs created unsuspended, admitted at creation), ``suspend_flips_ms`` (every later change of
  ``spec.suspend``, so queued intervals can be rebuilt), ``admissions`` (changes to unsuspended),
  ``evictions`` (changes back to suspended: Kueue evicts by suspending), ``pods_expected``.

Timestamps are the collector's receive times of the first event showing a transition; a transition
that happened and was undone between two events the collector saw (e.g. during a relist) is not seen.

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
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from kubecore.config import KubeEndpoint
from kubecore.quantity import parse_quantity
from kubecore.watch import SYNC, list_then_watch, now_ms, session_for
from loadgen.workloads import (
    ANN_GANG_MIN,
    LABEL_GANG,
    LABEL_GPUS,
    LABEL_INSTANCE,
    LABEL_KUEUE_PRIORITY,
    LABEL_KUEUE_QUEUE,
    LABEL_ROLE,
    LABEL_RUN,
    LABEL_WORKLOAD,
)


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
    namespace: str = ""
    gang: str = ""  # label hollowscale.io/gang (PodGroup name); "" when not gang-scheduled
    gang_min: int | None = None  # annotation hollowscale.io/gang-min
    priority_class: str = ""  # spec.priorityClassName
    queue: str = ""  # label kueue.x-k8s.io/queue-name, when the Job template carries it
    ready_ms: float | None = None  # first event with condition Ready=True
    disrupted_ms: float | None = None  # first event with condition DisruptionTarget=True
    disruption_reason: str = ""  # that condition's reason (PreemptionByScheduler, EvictionByEvictionAPI, ...)
    owner_api: str = ""  # the controller owner's apiVersion (batch/v1 Job, batch.volcano.sh/v1alpha1 Job, ...)
    deleting_ms: float | None = None  # first event with metadata.deletionTimestamp (its containers are stopping)


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
    namespace: str = ""
    queue: str = ""  # label kueue.x-k8s.io/queue-name ("" for Jobs that bypass Kueue)
    gang: str = ""
    gang_min: int | None = None
    priority_class: str = ""  # template spec.priorityClassName, else label kueue.x-k8s.io/priority-class
    suspended_at_create: bool = False  # spec.suspend at the first event seen
    admitted_ms: float | None = None  # first event with spec.suspend false, for Jobs created suspended
    admissions: int = 0  # changes of spec.suspend to false (first admission and re-admissions)
    evictions: int = 0  # changes of spec.suspend back to true (Kueue evicts by suspending)
    suspend_flips_ms: list[float] = field(default_factory=list)  # the times of both kinds of change, in order
    suspended: bool = False  # spec.suspend at the last event seen
    pods_expected: int = 1  # pods running at once when admitted: min(parallelism, completions); 1 for a bare pod
    deleted_ms: float | None = None

    @property
    def superseded(self) -> bool:
        """Deleted during the run before it completed: a JobSet restarting deleted it and made a new one (the
        figures are taken before the run's teardown deletes anything), so its instance's outcome is its
        successor's."""
        return self.deleted_ms is not None and self.outcome != "Complete"


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


def _held_gpus(spec: dict[str, Any], labels: dict[str, Any]) -> float:
    """``nvidia.com/gpu`` requested, else the GPUs a pod holds through its own DRA claim (loadgen's
    ``hollowscale.io/gpus`` label: whole devices of a claim of its own; 0 for a memory share)."""
    counted = _gpus(spec)
    if counted or not spec.get("resourceClaims"):
        return counted
    try:
        return float(labels.get(LABEL_GPUS) or 0)
    except ValueError:
        return 0.0


def _int_or_none(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _csv_cell(v: Any) -> Any:
    """None -> empty; a list of times -> ``;``-joined."""
    if v is None:
        return ""
    if isinstance(v, list):
        return ";".join(f"{x:g}" if isinstance(x, float) else str(x) for x in v)
    return v


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
            ann = meta.get("annotations") or {}
            rec = PodRecord(
                uid=uid, name=meta.get("name", ""), workload=labels.get(LABEL_WORKLOAD, ""),
                role=labels.get(LABEL_ROLE, ""), instance=labels.get(LABEL_INSTANCE, ""),
                owner_kind=owner.get("kind", ""), owner_uid=owner.get("uid", ""), gpus=_held_gpus(spec, labels),
                created_ms=t, server_created=meta.get("creationTimestamp", ""), owner_api=owner.get("apiVersion", ""),
                namespace=meta.get("namespace", ""), gang=labels.get(LABEL_GANG, ""),
                gang_min=_int_or_none(ann.get(ANN_GANG_MIN)),
                priority_class=spec.get("priorityClassName") or labels.get(LABEL_KUEUE_PRIORITY, ""),
                queue=labels.get(LABEL_KUEUE_QUEUE, ""),
            )
            self.pods[uid] = rec
            if not owners:  # a bare pod is its own workload object
                self.jobs.setdefault(uid, JobRecord(
                    uid, rec.name, "Pod", rec.workload, rec.role, rec.instance, rec.gpus, 1, t,
                    namespace=rec.namespace, queue=rec.queue, gang=rec.gang, gang_min=rec.gang_min,
                    priority_class=rec.priority_class))
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
        if rec.disrupted_ms is None:  # one pass over the few conditions: Ready and DisruptionTarget
            for c in status.get("conditions") or ():
                ctype = c.get("type")
                if ctype == "Ready":
                    if rec.ready_ms is None and c.get("status") == "True":
                        rec.ready_ms = t
                elif ctype == "DisruptionTarget" and c.get("status") == "True":
                    rec.disrupted_ms = t
                    rec.disruption_reason = c.get("reason", "")
        if rec.deleting_ms is None and meta.get("deletionTimestamp"):
            rec.deleting_ms = t
        if typ == "DELETED" and rec.deleted_ms is None:
            rec.deleted_ms = t
            job = self.jobs.get(uid)
            if job is not None and job.deleted_ms is None:
                job.deleted_ms = t

    # ---- jobs
    def apply_job(self, typ: str, job: dict[str, Any], t: float) -> None:
        meta = job.get("metadata") or {}
        uid = meta.get("uid")
        if not uid:
            return
        rec = self.jobs.get(uid)
        if rec is None and typ == "DELETED":  # never seen: nothing to record
            return
        spec = job.get("spec")
        if rec is None:
            labels = meta.get("labels") or {}
            spec = spec or {}
            template = spec.get("template") or {}
            tmpl = template.get("spec") or {}
            tmeta = template.get("metadata") or {}
            tlabels = tmeta.get("labels") or {}
            tann = tmeta.get("annotations") or {}
            ann = meta.get("annotations") or {}
            parallelism = int(spec.get("parallelism") or 1)
            completions = spec.get("completions")
            suspended = bool(spec.get("suspend"))
            rec = JobRecord(uid, meta.get("name", ""), "Job", labels.get(LABEL_WORKLOAD, ""),
                            labels.get(LABEL_ROLE, ""), labels.get(LABEL_INSTANCE, ""), _held_gpus(tmpl, tlabels),
                            parallelism, t,
                            namespace=meta.get("namespace", ""), queue=labels.get(LABEL_KUEUE_QUEUE, ""),
                            gang=labels.get(LABEL_GANG) or tlabels.get(LABEL_GANG, ""),
                            gang_min=_int_or_none(ann.get(ANN_GANG_MIN) or tann.get(ANN_GANG_MIN)),
                            priority_class=tmpl.get("priorityClassName") or labels.get(LABEL_KUEUE_PRIORITY, ""),
                            suspended_at_create=suspended, suspended=suspended,
                            pods_expected=min(parallelism, int(completions)) if completions is not None else parallelism)
            self.jobs[uid] = rec
        elif spec is not None:  # a relist's DELETED stub has no spec: it changes nothing here
            suspended = bool(spec.get("suspend"))
            if suspended != rec.suspended:
                rec.suspended = suspended
                rec.suspend_flips_ms.append(t)
                if suspended:
                    rec.evictions += 1
                else:
                    rec.admissions += 1
                    if rec.admitted_ms is None and rec.suspended_at_create:
                        rec.admitted_ms = t
        if typ == "DELETED" and rec.deleted_ms is None:
            rec.deleted_ms = t
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
            "pods_running": sum(1 for p in pods if p.running_ms is not None and p.finished_ms is None
                                and p.deleted_ms is None),
            "jobs": len(jobs),
            # a workload object deleted before it finished (a JobSet's restart) never will: done for the settle
            "jobs_done": sum(1 for j in jobs if j.finished_ms is not None or j.deleted_ms is not None),
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
                    w.writerow([_csv_cell(getattr(r, c)) for c in cols])
            out.append(path)
        return out


class TimelineCollector:
    """Runs the pod and Job watches in threads and feeds a :class:`Timeline`.

    ``namespace`` is one namespace (str), several (a sequence: the run's tenants), or None (every
    namespace).  How it watches (``cluster_wide``):

    * one namespace (the default for a str): a watch per resource on
      ``/api/v1/namespaces/<ns>/pods`` and ``/apis/batch/v1/namespaces/<ns>/jobs``, as before;
    * several or None (the default for a sequence or None): ONE watch per resource on the cluster-wide
      collection with the run's label selector (``/api/v1/pods?labelSelector=hollowscale.io/run=<id>``).
      The run label is on every object of the run, so nothing is missed, and the apiserver answers from
      its watch cache (it filters by label for each pod event of the cluster, which in a scale-test
      cluster are nearly all the run's), where N namespaces would cost N x 2 threads, connections and
      LISTs.  Objects of namespaces not in the list are skipped (a set lookup), so both modes record
      the same objects.  Needs cluster-scope list/watch on pods and Jobs; on a cluster where the
      credentials only reach the run's namespaces, pass ``cluster_wide=False``: one watch per
      namespace and resource.
    """

    def __init__(self, endpoint: KubeEndpoint, namespace: str | Sequence[str] | None, run_id: str,
                 timeline: Timeline | None = None, *, cluster_wide: bool | None = None):
        self.endpoint = endpoint
        self.namespace = namespace
        self.namespaces: list[str] = [namespace] if isinstance(namespace, str) else list(namespace or [])
        self.cluster_wide = (len(self.namespaces) != 1) if cluster_wide is None else cluster_wide
        if not self.cluster_wide and not self.namespaces:
            raise ValueError("a per-namespace timeline collector needs at least one namespace")
        self.selector = f"{LABEL_RUN}={run_id}"
        self.timeline = timeline or Timeline()
        self._stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.started_ms = 0.0

    def watches(self) -> list[tuple[str, str, Any]]:
        """(thread name, collection path, apply function) of each watch this collector runs."""
        tl = self.timeline
        if self.cluster_wide:
            return [("pods", "/api/v1/pods", tl.apply_pod), ("jobs", "/apis/batch/v1/jobs", tl.apply_job)]
        out: list[tuple[str, str, Any]] = []
        for ns in self.namespaces:
            out.append((f"pods-{ns}", f"/api/v1/namespaces/{ns}/pods", tl.apply_pod))
            out.append((f"jobs-{ns}", f"/apis/batch/v1/namespaces/{ns}/jobs", tl.apply_job))
        return out

    def start(self) -> None:
        self.started_ms = now_ms()
        for name, path, apply in self.watches():
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

        only = set(self.namespaces) if self.cluster_wide and self.namespaces else None
        for typ, obj, t in list_then_watch(s, self.endpoint.server, path, self._stop.is_set, self.selector,
                                           on_restart=restarted):
            if only is not None and (obj.get("metadata") or {}).get("namespace") not in only:
                continue
            t0 = time.perf_counter()
            with tl.lock:
                apply(typ, obj, t)
                st.events += 1  # under the lock: several watch threads count here
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
