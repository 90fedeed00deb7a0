"""Batch scheduling figures: the Timeline fed real-shaped Job/Pod JSON (Kueue admission, eviction,
re-admission; DisruptionTarget), and :mod:`hollowscale.measure.batch` over synthetic records."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from hollowscale.measure.timeline import Timeline, TimelineCollector
from kubecore.config import KubeEndpoint
from kubecore.watch import SYNC, deleted_stub

RUN = "r1"


def _job(uid: str, *, suspend: bool, ns: str = "team-a", queue: str = "lq-a", parallelism: int = 2,
         gpus: str = "8", gang: str = "", gang_min: int | None = None, priority: str = "high",
         conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    labels = {"hollowscale.io/run": RUN, "hollowscale.io/workload": "train", "hollowscale.io/role": "worker",
              "hollowscale.io/instance": "train-0-1"}
    if queue:
        labels["kueue.x-k8s.io/queue-name"] = queue
    if gang:
        labels["hollowscale.io/gang"] = gang
    ann = {"hollowscale.io/gang-min": str(gang_min)} if gang_min is not None else {}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"uid": uid, "name": f"train-worker-{uid}", "namespace": ns, "labels": labels,
                     "annotations": ann, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"parallelism": parallelism, "completions": parallelism, "backoffLimit": 0, "suspend": suspend,
                 "template": {"metadata": {"labels": dict(labels, **{"hollowscale.io/gpus": gpus}),
                                           "annotations": dict(ann)},
                              "spec": {"restartPolicy": "Never", "priorityClassName": priority,
                                       "containers": [{"name": "main", "image": "x",
                                                       "resources": {"requests": {"nvidia.com/gpu": gpus},
                                                                     "limits": {"nvidia.com/gpu": gpus}}}]}}},
        "status": {"conditions": conditions or []},
    }


def _pod(uid: str, *, ns: str = "team-a", phase: str = "Pending", node: str = "",
         conditions: list[dict[str, Any]] | None = None, owner: str = "j1") -> dict[str, Any]:
    labels = {"hollowscale.io/run": RUN, "hollowscale.io/instance": "train-0-1", "hollowscale.io/gang": "pg-1",
              "kueue.x-k8s.io/queue-name": "lq-a"}
    spec: dict[str, Any] = {"priorityClassName": "low",
                            "containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"uid": uid, "name": f"p-{uid}", "namespace": ns, "labels": labels,
                         "annotations": {"hollowscale.io/gang-min": "2"},
                         "ownerReferences": [{"kind": "Job", "uid": owner, "controller": True}]},
            "spec": spec, "status": {"phase": phase, "conditions": conditions or []}}


# ------------------------------------------------------------------------------------------ Timeline
def test_job_admitted_evicted_readmitted_and_finished() -> None:
    tl = Timeline()
    tl.apply_job("ADDED", _job("j1", suspend=True, gang="pg-1", gang_min=2), 1000.0)
    tl.apply_job("MODIFIED", _job("j1", suspend=True, gang="pg-1", gang_min=2), 1500.0)  # Kueue: nothing yet
    tl.apply_job("MODIFIED", _job("j1", suspend=False), 3000.0)  # admitted
    tl.apply_job("MODIFIED", _job("j1", suspend=False), 3500.0)
    suspended = [{"type": "Suspended", "status": "True", "reason": "JobSuspended"}]
    tl.apply_job("MODIFIED", _job("j1", suspend=True, conditions=suspended), 9000.0)  # Kueue evicts
    tl.apply_job(SYNC, _job("j1", suspend=True, conditions=suspended), 9100.0)  # a relist: no change
    tl.apply_job("MODIFIED", _job("j1", suspend=False), 12000.0)  # re-admitted
    done = [{"type": "Complete", "status": "True"}]
    tl.apply_job("MODIFIED", _job("j1", suspend=False, conditions=done), 20000.0)
    tl.apply_job("DELETED", deleted_stub("j1", "team-a", "train-worker-j1"), 25000.0)
    j = tl.jobs["j1"]
    assert (j.namespace, j.queue, j.gang, j.gang_min, j.priority_class) == ("team-a", "lq-a", "pg-1", 2, "high")
    assert j.suspended_at_create and j.admitted_ms == 3000.0  # the first admission, not the re-admission
    assert (j.admissions, j.evictions, j.suspend_flips_ms) == (2, 1, [3000.0, 9000.0, 12000.0])
    assert not j.suspended and j.pods_expected == 2 and j.gpus == 8.0
    assert (j.finished_ms, j.outcome, j.deleted_ms) == (20000.0, "Complete", 25000.0)


def test_unqueued_job_is_admitted_at_creation() -> None:
    tl = Timeline()
    body = _job("j2", suspend=False, queue="", parallelism=4)
    body["spec"]["completions"] = 2  # no more than 2 pods at once
    tl.apply_job("ADDED", body, 1.0)
    j = tl.jobs["j2"]
    assert not j.suspended_at_create and j.admitted_ms is None and j.admissions == 0 and j.queue == ""
    assert j.pods_expected == 2 and j.replicas == 4


def test_pod_ready_and_disruption_target() -> None:
    tl = Timeline()
    tl.apply_pod("ADDED", _pod("p1"), 100.0)
    ready = [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}]
    tl.apply_pod("MODIFIED", _pod("p1", node="gpu-3", conditions=ready), 200.0)
    ready = [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]
    tl.apply_pod("MODIFIED", _pod("p1", phase="Running", node="gpu-3", conditions=ready), 300.0)
    tl.apply_pod("MODIFIED", _pod("p1", phase="Running", node="gpu-3", conditions=ready), 350.0)
    dis = [*ready, {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                    "message": "preempted by team-b/p-x"}]
    tl.apply_pod("MODIFIED", _pod("p1", phase="Running", node="gpu-3", conditions=dis), 400.0)
    dis2 = [*ready, {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}]
    tl.apply_pod("MODIFIED", _pod("p1", phase="Failed", node="gpu-3", conditions=dis2), 500.0)
    tl.apply_pod("DELETED", _pod("p1", phase="Failed", node="gpu-3", conditions=dis2), 600.0)
    p = tl.pods["p1"]
    assert (p.namespace, p.gang, p.gang_min, p.priority_class, p.queue) == ("team-a", "pg-1", 2, "low", "lq-a")
    assert (p.scheduled_ms, p.ready_ms, p.running_ms, p.finished_ms, p.deleted_ms) == (200.0, 300.0, 300.0, 500.0, 600.0)
    assert (p.disrupted_ms, p.disruption_reason) == (400.0, "PreemptionByScheduler")  # the first one
    assert p.gpus == 8.0 and p.phase == "Failed"


def test_bare_pod_workload_record_carries_the_batch_labels() -> None:
    tl = Timeline()
    body = _pod("b1")
    body["metadata"].pop("ownerReferences")
    tl.apply_pod("ADDED", body, 10.0)
    tl.apply_pod("DELETED", deleted_stub("b1", "team-a", "p-b1"), 20.0)
    j = tl.jobs["b1"]
    assert (j.kind, j.namespace, j.gang, j.gang_min, j.queue, j.pods_expected) == ("Pod", "team-a", "pg-1", 2, "lq-a", 1)
    assert j.deleted_ms == 20.0 and tl.pods["b1"].deleted_ms == 20.0


def test_csv_has_the_new_columns(tmp_path: Path) -> None:
    tl = Timeline()
    tl.apply_job("ADDED", _job("j1", suspend=True), 1.0)
    tl.apply_job("MODIFIED", _job("j1", suspend=False), 2.5)
    tl.apply_pod("ADDED", _pod("p1"), 3.0)
    pods_csv, jobs_csv = tl.write_csv(tmp_path)
    head, row = jobs_csv.read_text().splitlines()[:2]
    cols = dict(zip(head.split(","), row.split(","), strict=True))
    assert cols["admitted_ms"] == "2.5" and cols["suspend_flips_ms"] == "2.5" and cols["queue"] == "lq-a"
    assert cols["suspended_at_create"] == "True" and cols["evictions"] == "0" and cols["pods_expected"] == "2"
    phead = pods_csv.read_text().splitlines()[0].split(",")
    for c in ("namespace", "gang", "gang_min", "priority_class", "queue", "disrupted_ms", "disruption_reason", "ready_ms"):
        assert c in phead


def test_snapshot_copies_the_flip_list() -> None:
    tl = Timeline()
    tl.apply_job("ADDED", _job("j1", suspend=True), 1.0)
    tl.apply_job("MODIFIED", _job("j1", suspend=False), 2.0)
    _, jobs = tl.snapshot()
    jobs[0].suspend_flips_ms.append(99.0)
    assert tl.jobs["j1"].suspend_flips_ms == [2.0]


def test_collector_watch_paths() -> None:
    ep = KubeEndpoint(server="https://127.0.0.1:1")
    one = TimelineCollector(ep, "ns1", RUN)
    assert [p for _, p, _ in one.watches()] == ["/api/v1/namespaces/ns1/pods", "/apis/batch/v1/namespaces/ns1/jobs"]
    many = TimelineCollector(ep, ["team-a", "team-b"], RUN)
    assert many.cluster_wide and [p for _, p, _ in many.watches()] == ["/api/v1/pods", "/apis/batch/v1/jobs"]
    assert many.selector == f"hollowscale.io/run={RUN}"
    per_ns = TimelineCollector(ep, ["team-a", "team-b"], RUN, cluster_wide=False)
    assert len(per_ns.watches()) == 4
    assert TimelineCollector(ep, None, RUN).cluster_wide


def test_job_without_suspend_field_change_keeps_state() -> None:
    tl = Timeline()
    body = _job("j1", suspend=True)
    tl.apply_job("ADDED", body, 1.0)
    later = copy.deepcopy(body)
    later["spec"].pop("suspend")  # absent means false: admitted
    tl.apply_job("MODIFIED", later, 2.0)
    assert tl.jobs["j1"].admitted_ms == 2.0
