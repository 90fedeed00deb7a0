"""A run's real distillation jobs: create them, follow them, fault them, read what they did.

Per job (see :mod:`hollowscale.scenario.distill`): the teacher Deployment and Service are created
before the load and must be Ready before it starts (a student with no teacher would only wait); the
student Job is created ``start_at_s`` after the load starts.  While the run lasts, a monitor thread
samples once a second how many teacher endpoints the Service's EndpointSlices list as ready and how
many teacher pods exist, so the report can show the teacher count over time beside the student's
samples/s.  Faults (``teacher-kill``: delete one Ready teacher pod with no grace, as a lost machine;
``teacher-scale``: set the Deployment's replicas through its scale subresource, as
``kubectl scale`` does) go through the API like a user's.

At the end the student's log (read through the API: ``pods/log``, served by the real kubelet) gives
its progress lines and its result line (accuracy, samples/s, lost samples); pod timestamps give the
scheduling delays.  Everything the run created is deleted afterwards, each object by the uid its
creation returned (one someone made again under the name meanwhile stays); a fault kills only a pod
that carries this run's label.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import requests

from hollowscale.distilljobs.figures import job_report
from hollowscale.distilljobs.manifests import (
    JOB_LABEL,
    RenderSettings,
    render_job,
    student_name,
    teacher_name,
)
from hollowscale.scenario.distill import DistillJobSpec
from kubecore.namespaces import RUN_LABEL

#: API collection of each kind the manifests hold
COLLECTIONS = {
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "Service": "/api/v1/namespaces/{ns}/services",
    "Job": "/apis/batch/v1/namespaces/{ns}/jobs",
    "Workload": "/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/workloads",
    "PodGroup": "/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/podgroups",
    "ResourceClaimTemplate": "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates",
    "ResourceClaim": "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims",
}
#: what a gang job creates only when its student is due (its members must come together)
GANG_KINDS = ("Workload", "PodGroup", "Deployment", "Service", "Job")
JSON = {"Content-Type": "application/json"}


class DistillJobError(RuntimeError):
    """A distillation job could not be created or never became ready."""


@dataclass
class TeacherSample:
    """One monitor tick of one job: wall time, ready endpoints, teacher pods (not terminating)."""

    t: float
    ready_endpoints: int
    pods: int


@dataclass
class JobState:
    """What the run knows about one job while it lasts."""

    spec: DistillJobSpec
    objects: list[dict[str, Any]]
    created: list[tuple[str, str, str]] = field(default_factory=list)  # (collection URL, name, uid), creation order
    student_created_at: float | None = None
    teachers: list[TeacherSample] = field(default_factory=list)
    teacher_pods_seen: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> last teacher pod doc
    events: list[dict[str, Any]] = field(default_factory=list)


class DistillJobs:
    """The distillation jobs of one run (see the module docstring)."""

    def __init__(self, session: requests.Session, server: str, jobs: tuple[DistillJobSpec, ...],
                 settings: RenderSettings, log: Callable[[str], None] = print) -> None:
        self.http = session
        self.server = server
        self.settings = settings
        self.ns = settings.namespace
        self.log = log
        self.jobs = {j.name: JobState(j, render_job(j, settings)) for j in jobs}
        self._stop = threading.Event()
        self._monitor: threading.Thread | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------------ create
    def _url(self, kind: str) -> str:
        return self.server + COLLECTIONS[kind].format(ns=self.ns)

    def _create(self, state: JobState, doc: dict[str, Any]) -> None:
        url = self._url(doc["kind"])
        r = self.http.post(url, data=orjson.dumps(doc), headers=JSON, timeout=30)
        if r.status_code not in (200, 201):
            raise DistillJobError(f"job {state.spec.name}: creating {doc['kind']} {doc['metadata']['name']} in "
                                  f"{self.ns}: HTTP {r.status_code} {r.text[:300]}")
        state.created.append((url, doc["metadata"]["name"], str(r.json()["metadata"]["uid"])))

    def create_teachers(self) -> None:
        """RBAC, teacher Deployment and Service of every job (the student comes later).

        A gang job gets only its RBAC here: its teachers come with its student (:meth:`create_student`).
        """
        for state in self.jobs.values():
            for doc in state.objects:
                if doc["kind"] == "Job" or (self.settings.gang and doc["kind"] in GANG_KINDS):
                    continue
                self._create(state, doc)

    def wait_teachers_ready(self, timeout_s: float, sleep: Callable[[float], None]) -> None:
        """Until every job's Deployment has all replicas ready and its Service lists them (gang jobs: at once,
        their teachers start with their student)."""
        if self.settings.gang:
            return
        deadline = time.monotonic() + timeout_s
        pending = set(self.jobs)
        while pending:
            for name in sorted(pending):
                state = self.jobs[name]
                dep = self._get(f"{self._url('Deployment')}/{teacher_name(name)}") or {}
                ready = (dep.get("status") or {}).get("readyReplicas") or 0
                if ready >= state.spec.teachers and len(self._ready_endpoints(name)) >= state.spec.teachers:
                    pending.discard(name)
                    self.log(f"distill job {name}: {ready} teacher(s) ready")
            if not pending:
                return
            if time.monotonic() > deadline:
                why = {n: self._pod_problems(f"{JOB_LABEL}={n},app.kubernetes.io/component=teacher") for n in pending}
                raise DistillJobError(f"teachers not ready after {timeout_s:g}s: {why}")
            sleep(1.0)

    def create_student(self, name: str) -> None:
        """The student Job of ``name`` (called from a timer at the job's ``start_at_s``)."""
        state = self.jobs[name]
        kinds = GANG_KINDS if self.settings.gang else ("Job",)
        try:
            for doc in state.objects:
                if doc["kind"] in kinds:
                    self._create(state, doc)
            state.student_created_at = time.time()
            self.log(f"distill job {name}: student created")
        except (DistillJobError, requests.RequestException) as exc:
            state.events.append({"t": time.time(), "event": "student-create-failed", "error": str(exc)})
            self.log(f"distill job {name}: student not created: {exc}")

    # ------------------------------------------------------------------------------------ follow
    def _get(self, url: str, params: dict[str, str] | None = None) -> dict[str, Any] | None:
        r = self.http.get(url, params=params, timeout=15)
        if r.status_code == 404:
            return None
        r.raise_for_status()
        doc: dict[str, Any] = r.json()
        return doc

    def _pods(self, selector: str) -> list[dict[str, Any]]:
        doc = self._get(f"{self.server}/api/v1/namespaces/{self.ns}/pods", {"labelSelector": selector}) or {}
        return list(doc.get("items") or [])

    def _pod_problems(self, selector: str) -> list[str]:
        """One line per pod that is not Ready: its phase and the reasons of waiting containers/conditions."""
        out = []
        for p in self._pods(selector):
            st = p.get("status") or {}
            reasons = [c.get("state", {}).get("waiting", {}).get("reason") for c in st.get("containerStatuses") or []]
            reasons += [c.get("message") for c in st.get("conditions") or [] if c.get("status") == "False" and c.get("message")]
            out.append(f"{p['metadata']['name']}: {st.get('phase')} {[r for r in reasons if r]}")
        return out or ["no pods"]

    def _ready_endpoints(self, name: str) -> set[str]:
        doc = self._get(f"{self.server}/apis/discovery.k8s.io/v1/namespaces/{self.ns}/endpointslices",
                        {"labelSelector": f"kubernetes.io/service-name={teacher_name(name)}"}) or {}
        ready: set[str] = set()
        for s in doc.get("items") or []:
            for ep in s.get("endpoints") or []:
                if (ep.get("conditions") or {}).get("ready") is False:
                    continue
                ready.update(ep.get("addresses") or [])
        return ready

    def start_monitor(self, period_s: float = 1.0) -> None:
        """Sample teacher endpoints and pods every ``period_s`` in a thread until :meth:`stop_monitor`."""
        def loop() -> None:
            while not self._stop.wait(period_s):
                self.sample()

        self._monitor = threading.Thread(target=loop, name="distill-monitor", daemon=True)
        self._monitor.start()

    def sample(self) -> None:
        """One monitor tick (errors are skipped: a stalled apiserver leaves a gap, not a crash)."""
        for name, state in self.jobs.items():
            try:
                eps = self._ready_endpoints(name)
                teachers = self._pods(f"{JOB_LABEL}={name},app.kubernetes.io/component=teacher")
            except (requests.RequestException, ValueError):
                continue
            with self._lock:
                for p in teachers:
                    state.teacher_pods_seen[p["metadata"]["name"]] = p
                alive = [p for p in teachers if not p["metadata"].get("deletionTimestamp")]
                state.teachers.append(TeacherSample(time.time(), len(eps), len(alive)))

    def stop_monitor(self) -> None:
        self._stop.set()
        if self._monitor is not None:
            self._monitor.join(timeout=10)

    # ------------------------------------------------------------------------------------ faults
    def kill_teacher(self, name: str) -> dict[str, Any]:
        """Delete the oldest Ready teacher pod of ``name`` with no grace period; returns the fault's record."""
        state = self.jobs[name]
        selector = f"{JOB_LABEL}={name},app.kubernetes.io/component=teacher,{RUN_LABEL}={self.settings.run_id}"
        pods = [p for p in self._pods(selector) if not p["metadata"].get("deletionTimestamp") and _ready(p)]
        entry: dict[str, Any] = {"t": time.time(), "event": "teacher-kill", "job": name}
        if not pods:
            entry["error"] = "no Ready teacher pod to kill"
        else:
            victim = min(pods, key=lambda p: p["metadata"]["creationTimestamp"])
            pod = victim["metadata"]["name"]
            r = self.http.delete(f"{self.server}/api/v1/namespaces/{self.ns}/pods/{pod}",
                                 data=orjson.dumps({"gracePeriodSeconds": 0,
                                                    "preconditions": {"uid": victim["metadata"]["uid"]}}),
                                 headers=JSON, timeout=30)
            entry.update({"pod": pod, "node": victim["spec"].get("nodeName"), "status": r.status_code})
        state.events.append(entry)
        return entry

    def scale_teachers(self, name: str, replicas: int) -> dict[str, Any]:
        """Set the teacher Deployment's replicas through ``deployments/scale`` (what ``kubectl scale`` does)."""
        state = self.jobs[name]
        r = self.http.patch(f"{self._url('Deployment')}/{teacher_name(name)}/scale",
                            data=orjson.dumps({"spec": {"replicas": replicas}}),
                            headers={"Content-Type": "application/merge-patch+json"}, timeout=30)
        entry = {"t": time.time(), "event": "teacher-scale", "job": name, "replicas": replicas, "status": r.status_code}
        if r.status_code != 200:
            entry["error"] = r.text[:300]
        state.events.append(entry)
        return entry

    # ------------------------------------------------------------------------------------ end
    def students_done(self) -> bool:
        """Every student Job has finished (Complete or Failed) or was never created."""
        for name, state in self.jobs.items():
            if state.student_created_at is None:
                if not any(e["event"] == "student-create-failed" for e in state.events):
                    return False
                continue
            job = self._get(f"{self._url('Job')}/{student_name(name)}") or {}
            conds = {c["type"]: c["status"] for c in (job.get("status") or {}).get("conditions") or []}
            finished = conds.get("Complete") == "True" or conds.get("Failed") == "True"
            if not finished and time.time() - state.student_created_at < state.spec.timeout_s:
                return False
        return True

    def student_log(self, pod: str) -> str:
        """The student container's log of ``pod``, "" when it cannot be read."""
        r = self.http.get(f"{self.server}/api/v1/namespaces/{self.ns}/pods/{pod}/log",
                          params={"container": "student"}, timeout=60)
        return r.text if r.status_code == 200 else ""

    def report(self, t0: float) -> list[dict[str, Any]]:
        """Each job's section of the run report (see :func:`hollowscale.distilljobs.figures.job_report`)."""
        out = []
        for name, state in self.jobs.items():
            job_doc: dict[str, Any] = {}
            student: dict[str, Any] | None = None
            log = ""
            try:
                students = self._pods(f"{JOB_LABEL}={name},app.kubernetes.io/component=student")
                student = max(students, key=lambda p: p["metadata"]["creationTimestamp"]) if students else None
                log = self.student_log(student["metadata"]["name"]) if student else ""
                job_doc = self._get(f"{self._url('Job')}/{student_name(name)}") or {}
            except requests.RequestException as exc:
                state.events.append({"t": time.time(), "event": "report-failed", "error": str(exc)})
            with self._lock:
                teachers = list(state.teacher_pods_seen.values())
                samples = list(state.teachers)
            out.append(job_report(state.spec, t0, log, student_pod=student,
                                  teacher_pods=teachers, teacher_samples=[(s.t, s.ready_endpoints, s.pods) for s in samples],
                                  events=state.events, job_created=(job_doc.get("metadata") or {}).get("creationTimestamp"),
                                  pod_name=student["metadata"]["name"] if student else None))
        return out

    def delete_all(self) -> list[str]:
        """Delete what this run created, newest first, by uid (pods go with their Job/ReplicaSet); returns
        errors.  A 409 is an object of that name that is not the run's (the uid precondition failed): left."""
        errors: list[str] = []
        self.stop_monitor()
        for state in self.jobs.values():
            for url, name, uid in reversed(state.created):
                options = {"propagationPolicy": "Background", "preconditions": {"uid": uid}}
                try:
                    r = self.http.delete(f"{url}/{name}", data=orjson.dumps(options), headers=JSON, timeout=30)
                    if r.status_code not in (200, 202, 404, 409):
                        errors.append(f"deleting {url}/{name}: HTTP {r.status_code} {r.text[:200]}")
                except requests.RequestException as exc:
                    errors.append(f"deleting {url}/{name}: {exc}")
        return errors


def _ready(pod: dict[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)
