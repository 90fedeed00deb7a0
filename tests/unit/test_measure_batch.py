"""Batch scheduling figures: the Timeline fed real-shaped Job/Pod JSON (Kueue admission, eviction,
re-admission; DisruptionTarget), and :mod:`hollowscale.batch.figures` over synthetic records."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hollowscale.batch.figures import BATCH_SOURCES, batch_measurements
from hollowscale.batch.promfigures import batch_crosscheck, batch_prom_series, kueue_figures, scheduler_batch_figures
from hollowscale.measure.prom import PromQueries
from hollowscale.measure.timeline import JobRecord, PodRecord, Timeline, TimelineCollector
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
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "uid": owner,
                                              "controller": True}]},
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
    assert (p.owner_kind, p.owner_uid, p.owner_api) == ("Job", "j1", "batch/v1")
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


# ------------------------------------------------------------------------------------------ batch figures
T0 = 1_000_000.0


def s(x: float) -> float:
    """T0 + x seconds, in ms."""
    return T0 + x * 1000.0


def job(uid: str, inst: str, ns: str = "team-a", *, created: float, gpus: float = 8.0, expected: int = 2,
        gang: str = "", gang_min: int | None = None, queue: str = "", pc: str = "", flips: list[float] | None = None,
        finished: float | None = None, outcome: str = "") -> JobRecord:
    flips = flips or []
    queued = bool(queue)
    suspended = queued if len(flips) % 2 == 0 else not queued
    return JobRecord(uid, uid, "Job", "train", "worker", inst, gpus, expected, created, finished, outcome,
                     namespace=ns, queue=queue, gang=gang, gang_min=gang_min, priority_class=pc,
                     suspended_at_create=queued, admitted_ms=flips[0] if queued and flips else None,
                     admissions=sum(1 for k in range(len(flips)) if (k % 2 == 0) == queued),
                     evictions=sum(1 for k in range(len(flips)) if (k % 2 == 0) != queued),
                     suspend_flips_ms=list(flips), suspended=suspended, pods_expected=expected)


def pod(uid: str, inst: str, owner: str, ns: str = "team-a", *, created: float, sched: float | None = None,
        run: float | None = None, fin: float | None = None, deleted: float | None = None, phase: str = "",
        gpus: float = 8.0, gang: str = "", gang_min: int | None = None, pc: str = "", node: str = "v100-0",
        disrupted: float | None = None, reason: str = "") -> PodRecord:
    if not phase:
        phase = "Succeeded" if fin is not None else ("Running" if run is not None else "Pending")
    return PodRecord(uid=uid, name=uid, workload="train", role="worker", instance=inst, owner_kind="Job",
                     owner_uid=owner, gpus=gpus, created_ms=created, scheduled_ms=sched, running_ms=run,
                     finished_ms=fin, deleted_ms=deleted, node=node if sched is not None else "", phase=phase,
                     namespace=ns, gang=gang, gang_min=gang_min, priority_class=pc,
                     disrupted_ms=disrupted, disruption_reason=reason)


def measure(pods: list[PodRecord], jobs: list[JobRecord], end_s: float = 100.0, **kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"gpus_by_flavor": {"v100": 64.0}, "deserved_share": {}, "start_ms": T0,
                            "end_ms": s(end_s), "step_s": 1.0}
    args.update(kw)
    return batch_measurements(pods, jobs, **args)


def gang_whole() -> tuple[list[PodRecord], list[JobRecord]]:
    """Queued gang of 2 x 8 GPUs: admitted at 5 s, both bound at 8 s, running at 9 s, done at 31 s."""
    j = job("ja", "gang-1", created=s(0), gang="pg-a", gang_min=2, queue="lq-a", pc="high", flips=[s(5)],
            finished=s(31), outcome="Complete")
    ps = [pod(f"pa{k}", "gang-1", "ja", created=s(6), sched=s(8), run=s(9), fin=s(30), gang="pg-a", gang_min=2,
              pc="high") for k in (1, 2)]
    return ps, [j]


def half_started() -> tuple[list[PodRecord], list[JobRecord]]:
    """No gang: one member of 8 GPUs bound at 11 s, the second at 31 s (20 s x 8 GPUs wasted)."""
    j = job("jb", "half-1", "team-b", created=s(10), pc="low", finished=s(51), outcome="Complete")
    ps = [pod("pb1", "half-1", "jb", "team-b", created=s(10), sched=s(11), run=s(12), fin=s(50), pc="low"),
          pod("pb2", "half-1", "jb", "team-b", created=s(10), sched=s(31), run=s(32), fin=s(50), pc="low")]
    return ps, [j]


def deadlocked() -> tuple[list[PodRecord], list[JobRecord]]:
    """Gang of 3 needing 3, admitted at 39 s; one member bound at 40 s, the others never."""
    j = job("jc", "dead-1", "team-c", created=s(35), expected=3, gang="pg-c", gang_min=3, queue="lq-a", pc="high",
            flips=[s(39)])
    ps = [pod("pc1", "dead-1", "jc", "team-c", created=s(39), sched=s(40), run=s(41), gang="pg-c", gang_min=3,
              pc="high")]
    ps += [pod(f"pc{k}", "dead-1", "jc", "team-c", created=s(39), gang="pg-c", gang_min=3, pc="high") for k in (2, 3)]
    return ps, [j]


def test_gang_that_starts_whole_has_no_partial_time() -> None:
    pods, jobs = gang_whole()
    m = measure(pods, jobs)["measurements"]
    assert m["partial_jobs"]["max"] == 0 and m["partial_jobs"]["instances_ever_partial"] == 0
    assert m["wasted_gpu_seconds"] == 0.0 and m["deadlocked_jobs"]["count"] == 0
    st = m["job_steps_s"]
    assert st["created_to_admitted"]["p50"] == 5.0 and st["admitted_to_all_bound"]["p50"] == 3.0
    assert st["all_bound_to_all_running"]["p99"] == 1.0 and st["all_running_to_finished"]["p50"] == 22.0
    assert st["created_to_finished"]["p90"] == 31.0 and st["created_to_all_running"]["count"] == 1
    assert m["instances"] == {"total": 1, "completed": 1, "failed": 0, "unfinished": 0, "queued": 1, "gang": 1,
                              "services_skipped": 0}
    assert m["jobs_completed_per_hour"] == 36.0  # 1 in 100 s
    assert m["crosscheck_counts"]["gangs_started"] == 1 and m["crosscheck_counts"]["gang_schedules"] == 1
    assert m["crosscheck_counts"]["kueue_admissions"] == 1


def test_job_started_half_way_wastes_its_held_gpus() -> None:
    pods, jobs = half_started()
    out = measure(pods, jobs)
    m, ser = out["measurements"], out["series"]
    assert m["wasted_gpu_seconds"] == 160.0
    assert m["partial_jobs"]["max"] == 1 and m["partial_jobs"]["instances_ever_partial"] == 1
    assert sum(ser["partial_jobs"]) == 20 and ser["partial_jobs"][11] == 1 and ser["partial_jobs"][31] == 0
    assert ser["partial_gpus"][20] == 8.0 and m["deadlocked_jobs"]["count"] == 0
    assert m["job_steps_s"]["admitted_to_all_bound"]["p50"] == 21.0  # unqueued: admitted at creation
    assert m["job_steps_s"]["created_to_admitted"]["p50"] == 0.0


def test_deadlocked_gang_is_partial_to_the_end() -> None:
    pods, jobs = deadlocked()
    out = measure(pods, jobs)
    m, ser = out["measurements"], out["series"]
    assert m["deadlocked_jobs"] == {"count": 1, "gpus_held": 8.0, "instances": ["team-c/dead-1"]}
    assert m["wasted_gpu_seconds"] == 480.0  # 8 GPUs from 40 s to 100 s
    assert ser["partial_jobs"][-1] == 1 and sum(ser["partial_jobs"]) == 61
    assert m["instances"]["unfinished"] == 1 and m["job_steps_s"]["admitted_to_all_bound"]["count"] == 0
    assert m["crosscheck_counts"]["gangs"] == 1 and m["crosscheck_counts"]["gangs_started"] == 0


def test_everything_together_adds_up() -> None:
    parts = [gang_whole(), half_started(), deadlocked()]
    pods = [p for ps, _ in parts for p in ps]
    jobs = [j for _, js in parts for j in js]
    m = measure(pods, jobs)["measurements"]
    assert m["wasted_gpu_seconds"] == 640.0 and m["partial_jobs"]["max"] == 1
    assert m["accounting"]["ok"] and (m["accounting"]["completed"], m["accounting"]["unfinished"]) == (2, 1)


def test_queue_wait_per_queue_and_priority_class() -> None:
    parts = [gang_whole(), half_started(), deadlocked()]
    pods = [p for ps, _ in parts for p in ps]
    jobs = [j for _, js in parts for j in js]
    # one more queued job, still waiting at the end
    jobs.append(job("jw", "wait-1", "team-b", created=s(50), queue="lq-b", pc="low"))
    qw = measure(pods, jobs)["measurements"]["queue_wait_s"]
    assert qw["by_queue"]["lq-a"] == {"p50": 4.0, "p99": 5.0, "count": 2, "waiting_at_end": 0}
    assert qw["by_queue"]["(none)"] == {"p50": 21.0, "p99": 21.0, "count": 1, "waiting_at_end": 0}  # created->all bound
    assert qw["by_queue"]["lq-b"] == {"p50": None, "p99": None, "count": 0, "waiting_at_end": 1}
    assert qw["by_priority_class"]["high"]["p99"] == 5.0 and qw["by_priority_class"]["high"]["count"] == 2
    assert qw["by_priority_class"]["low"] == {"p50": 21.0, "p99": 21.0, "count": 1, "waiting_at_end": 1}


def tenant_pods() -> list[PodRecord]:
    """16 GPUs. 0-10 s: a 4, b 8, c 4; 10-20 s: a 8, b 4, c 4; team-b has 8 GPUs pending throughout."""
    return [
        pod("a1", "ia1", "x", "team-a", created=s(0), sched=s(0), run=s(0), fin=s(10), gpus=4),
        pod("a2", "ia2", "x", "team-a", created=s(10), sched=s(10), run=s(10), fin=s(20), gpus=8),
        pod("b1", "ib1", "x", "team-b", created=s(0), sched=s(0), run=s(0), fin=s(10), gpus=8),
        pod("b2", "ib2", "x", "team-b", created=s(10), sched=s(10), run=s(10), fin=s(20), gpus=4),
        pod("c1", "ic1", "x", "team-c", created=s(0), sched=s(0), run=s(0), fin=s(20), gpus=4),
        pod("bp", "ib3", "x", "team-b", created=s(0), deleted=s(20), gpus=8),
    ]


def test_tenant_shares_under_saturation_vs_deserved_1_2_1() -> None:
    out = measure(tenant_pods(), [], end_s=20, gpus_by_flavor={"v100": 16.0},
                  deserved_share={"team-a": 1, "team-b": 2, "team-c": 1})
    ts, ser = out["measurements"]["tenant_share"], out["series"]
    assert ts["gpus_total"] == 16.0 and ts["saturated_samples"] == 20 and ts["samples"] == 21
    a, b, c = (ts["by_tenant"][k] for k in ("team-a", "team-b", "team-c"))
    assert (a["deserved_pct"], b["deserved_pct"], c["deserved_pct"]) == (25.0, 50.0, 25.0)
    assert (a["mean_share_pct"], b["mean_share_pct"], c["mean_share_pct"]) == (37.5, 37.5, 25.0)
    assert (a["deviation_pct"], b["deviation_pct"], c["deviation_pct"]) == (50.0, -25.0, 0.0)
    assert b["contending_samples"] == 20 and a["contending_samples"] == 0
    assert ts["max_deviation_pct"] == 50.0
    assert ser["saturated"][:20] == [1] * 20 and ser["saturated"][20] == 0
    assert ser["tenant_share_pct"]["team-b"][0] == 50.0 and ser["tenant_share_pct"]["team-b"][10] == 25.0
    assert ts["allocation_by_flavor"]["v100"]["max_pct"] == 100.0
    assert out["measurements"]["instances"]["services_skipped"] == 6  # pods without a Job record


def test_no_saturation_below_90_percent_or_without_demand() -> None:
    pods = [p for p in tenant_pods() if p.uid != "c1"]  # 12 of 16 allocated: 75%
    ts = measure(pods, [], end_s=20, gpus_by_flavor={"v100": 16.0}, deserved_share={"team-a": 1})["measurements"]
    assert ts["tenant_share"]["saturated_samples"] == 0 and ts["tenant_share"]["max_deviation_pct"] is None
    pods = [p for p in tenant_pods() if p.uid != "bp"]  # full, but nobody waits
    ts = measure(pods, [], end_s=20, gpus_by_flavor={"v100": 16.0}, deserved_share={"team-a": 1})["measurements"]
    assert ts["tenant_share"]["saturated_samples"] == 0


def test_queued_jobs_count_as_pending_demand() -> None:
    pods = [p for p in tenant_pods() if p.uid != "bp"]
    jobs = [job("q", "iq", "team-b", created=s(0), queue="lq-b", expected=1, gpus=8)]  # suspended throughout
    ts = measure(pods, jobs, end_s=20, gpus_by_flavor={"v100": 16.0},
                 deserved_share={"team-a": 1, "team-b": 2, "team-c": 1})["measurements"]["tenant_share"]
    assert ts["saturated_samples"] == 20 and ts["by_tenant"]["team-b"]["contending_samples"] == 20


def preemption_world() -> tuple[list[PodRecord], list[JobRecord]]:
    jobs = [
        # D: Kueue evicts at 20 s, re-admits at 60 s; the second pod completes
        job("jd", "pre-d", created=s(1), expected=1, queue="lq-a", pc="low", flips=[s(2), s(20), s(60)],
            finished=s(81), outcome="Complete"),
        # E: unqueued; its pod is preempted by the scheduler, the replacement completes
        job("je", "pre-e", created=s(1), expected=1, pc="low", finished=s(70), outcome="Complete"),
        # F: evicted at 30 s and never re-admitted
        job("jf", "pre-f", created=s(1), expected=1, queue="lq-a", pc="low", flips=[s(3), s(30)]),
        # G: fails outright
        job("jg", "fail-g", created=s(1), expected=1, pc="high", finished=s(9), outcome="Failed"),
    ]
    pods = [
        pod("d1", "pre-d", "jd", created=s(2), sched=s(3), run=s(4), deleted=s(21), phase="Running", pc="low"),
        pod("d2", "pre-d", "jd", created=s(60), sched=s(61), run=s(62), fin=s(80), pc="low"),
        pod("e1", "pre-e", "je", created=s(1), sched=s(2), run=s(3), fin=s(11), deleted=s(12), phase="Failed",
            disrupted=s(10), reason="PreemptionByScheduler", pc="low"),
        pod("e2", "pre-e", "je", created=s(11), sched=s(40), run=s(41), fin=s(69), pc="low"),
        pod("f1", "pre-f", "jf", created=s(3), sched=s(4), run=s(5), fin=s(31), deleted=s(32), phase="Failed",
            disrupted=s(30), reason="EvictionByEvictionAPI", pc="low"),
        pod("g1", "fail-g", "jg", created=s(1), sched=s(2), run=s(3), fin=s(8), phase="Failed", pc="high"),
    ]
    return pods, jobs


def test_preemption_and_accounting() -> None:
    pods, jobs = preemption_world()
    m = measure(pods, jobs)["measurements"]
    pre = m["preemption"]
    assert pre["pods_disrupted"] == {"total": 2, "by_reason": {"EvictionByEvictionAPI": 1, "PreemptionByScheduler": 1},
                                     "by_priority_class": {"low": {"EvictionByEvictionAPI": 1,
                                                                   "PreemptionByScheduler": 1}}}
    assert pre["jobs_evicted"] == {"evictions": 2, "jobs": 2, "readmitted_jobs": 1, "by_priority_class": {"low": 2}}
    assert pre["instances_preempted"] == {"total": 3, "completed": 2, "failed": 0, "unfinished": 1, "readmitted": 1}
    acc = m["accounting"]
    assert acc["ok"] and acc["problems"] == []
    assert (acc["instances"], acc["completed"], acc["failed"], acc["unfinished"]) == (4, 2, 1, 1)
    assert acc["preempted_once_each"] == 3  # D was admitted twice and counts once
    cc = m["crosscheck_counts"]
    assert (cc["kueue_admissions"], cc["kueue_evictions"], cc["pods_preempted_by_scheduler"]) == (3, 2, 1)
    # D's step to all bound counts from its first admission; E's first member failed, its replacement counts
    assert m["instances"]["completed"] == 2 and m["job_steps_s"]["created_to_finished"]["count"] == 2


def test_accounting_flags_pods_of_unseen_jobs_and_broken_flips() -> None:
    pods, jobs = preemption_world()
    pods.append(pod("z1", "pre-z", "j-unseen", created=s(5)))
    volcano = pod("v1", "pre-v", "vj", created=s(5))
    volcano.owner_api = "batch.volcano.sh/v1alpha1"  # not a batch/v1 Job: not watched, not an orphan
    pods.append(volcano)
    jobs[0].evictions += 1  # as if an eviction were counted twice
    acc = measure(pods, jobs)["measurements"]["accounting"]
    assert not acc["ok"] and acc["problem_count"] == 2
    assert any("never saw" in p for p in acc["problems"]) and any("alternate" in p for p in acc["problems"])


def test_timeline_to_batch_round_trip() -> None:
    """A Job admitted, evicted and re-admitted through the Timeline is one instance, evicted once."""
    tl = Timeline()
    tl.apply_job("ADDED", _job("j1", suspend=True, parallelism=1), s(0))
    tl.apply_job("MODIFIED", _job("j1", suspend=False, parallelism=1), s(2))
    tl.apply_pod("ADDED", _pod("p1"), s(3))
    tl.apply_pod("MODIFIED", _pod("p1", phase="Running", node="v100-1"), s(4))
    tl.apply_job("MODIFIED", _job("j1", suspend=True, parallelism=1), s(10))
    tl.apply_pod("DELETED", _pod("p1", phase="Running", node="v100-1"), s(11))
    tl.apply_job("MODIFIED", _job("j1", suspend=False, parallelism=1), s(20))
    tl.apply_pod("ADDED", _pod("p2"), s(21))
    tl.apply_pod("MODIFIED", _pod("p2", phase="Succeeded", node="v100-1"), s(25))
    tl.apply_job("MODIFIED", _job("j1", suspend=False, parallelism=1,
                                  conditions=[{"type": "Complete", "status": "True"}]), s(26))
    pods, jobs = tl.snapshot()
    m = measure(pods, jobs, end_s=30)["measurements"]
    assert m["instances"]["total"] == 1 and m["instances"]["completed"] == 1
    assert m["preemption"]["jobs_evicted"]["evictions"] == 1 and m["accounting"]["ok"]
    assert m["crosscheck_counts"]["kueue_admissions"] == 2
    assert m["queue_wait_s"]["by_queue"]["lq-a"]["p50"] == 2.0


def test_sources_name_every_measurement() -> None:
    out = measure(*gang_whole())
    assert set(out["measurements"]) == set(BATCH_SOURCES) == set(out["sources"])


# ------------------------------------------------------------------------------------------ batchprom
class FakeProm(PromQueries):
    """Canned answers by query substring (first match wins); records every query like PromQueries."""

    def __init__(self, answers: list[tuple[str, list[dict[str, Any]]]]):
        self.log = []
        self.answers = answers

    def _answer(self, query: str) -> list[dict[str, Any]]:
        return next((a for sub, a in self.answers if sub in query), [])

    def instant(self, query: str, at: float, purpose: str) -> list[dict[str, Any]]:
        self.log.append({"query": query, "time": at, "purpose": purpose})
        return self._answer(query)

    def range(self, query: str, start: float, end: float, step_s: float, purpose: str) -> list[dict[str, Any]]:
        self.log.append({"query": query, "start": start, "end": end, "purpose": purpose})
        return self._answer(query)


def raw(labels: dict[str, str], samples: list[tuple[float, float]]) -> dict[str, Any]:
    return {"metric": labels, "values": [[t, str(v)] for t, v in samples]}


def one(labels: dict[str, str], v: float) -> dict[str, Any]:
    return {"metric": labels, "value": [0, str(v)]}


def test_kueue_figures_sum_counters_across_a_restart() -> None:
    pq = FakeProm([
        ("kueue_build_info", [one({}, 1)]),
        ("kueue_admitted_workloads_total[", [
            raw({"cluster_queue": "cq-a", "priority_class": "high"}, [(90, 2), (110, 5), (120, 1), (130, 3)]),
            raw({"cluster_queue": "cq-b", "priority_class": "low"}, [(150, 4)])]),
        ("kueue_evicted_workloads_total[", []),
        ("histogram_quantile(0.5, sum by (le) (increase(kueue_admission_wait_time_seconds", [one({}, 2.5)]),
        ("sum by (cluster_queue, status)", [one({"cluster_queue": "cq-a", "status": "active"}, 3)]),
        ("max_over_time", [one({"cluster_queue": "cq-a"}, 7)]),
    ])
    k = kueue_figures(pq, 100.0, 200.0)
    a = k["admitted_workloads"]
    # cq-a: 2 -> 5 (+3), reset to 1 (+1), -> 3 (+2); cq-b appears in the window with 4
    assert a["total"] == 10.0 and a["resets"] == 1
    assert a["by_cluster_queue"] == {"cq-a": 6.0, "cq-b": 4.0} and a["by_priority_class"] == {"high": 6.0, "low": 4.0}
    assert a["query"] == f"kueue_admitted_workloads_total[{100 + 300}s]"
    assert k["evicted_workloads"]["total"] == 0.0  # Kueue is scraped: an absent counter is 0
    assert k["admission_wait_s"]["p50"] == 2.5 and k["pending_workloads"]["max"] == {"cq-a": 7.0}
    assert k["pending_workloads"]["at_end"] == {"cq-a": {"active": 3.0}}


def test_scheduler_figures_without_podgroup_metrics_are_none_not_zero() -> None:
    pq = FakeProm([('up{job="scheduler"}', [one({}, 1)])])
    f = scheduler_batch_figures(pq, 0.0, 60.0)
    assert not f["podgroups_available"] and f["podgroup_attempts"]["total"] is None
    assert f["preemption_victims"]["total"] == 0.0  # scraped, no preemption
    pq = FakeProm([('up{job="scheduler"}', [one({}, 1)]),
                   ("podgroup_scheduling_algorithm_duration_seconds_count", [one({}, 4)]),
                   ("scheduler_podgroup_schedule_attempts_total[", [
                       raw({"result": "scheduled", "profile": "default-scheduler"}, [(10, 3)]),
                       raw({"result": "unschedulable", "profile": "default-scheduler"}, [(-5, 1), (10, 6)])])])
    f = scheduler_batch_figures(pq, 0.0, 60.0)
    assert f["podgroups_available"] and f["podgroup_attempts"]["by_result"] == {"scheduled": 3.0, "unschedulable": 5.0}


def test_batch_crosscheck_verdicts() -> None:
    counts = {"kueue_admissions": 10, "kueue_evictions": 2, "gang_schedules": 4, "pods_preempted_by_scheduler": 3}
    kueue = {"admitted_workloads": {"total": 10.0, "query": "qa"}, "evicted_workloads": {"total": 3.0, "query": "qe"}}
    sched = {"podgroup_attempts": {"total": 9.0, "by_result": {"scheduled": 5.0}, "query": "qp"},
             "preemption_victims": {"total": None, "query": "qv"}}
    cc = batch_crosscheck(counts, kueue, sched, tolerance_pct=5.0)
    c = cc["checks"]
    assert c["kueue_admissions"]["agree"] is True and c["kueue_admissions"]["diff_pct"] == 0.0
    assert c["kueue_evictions"]["agree"] is False and "DISAGREE" in c["kueue_evictions"]["verdict"]
    assert c["gang_schedules"]["agree"] is True and c["gang_schedules"]["relation"] == "prom_at_least"
    assert c["scheduler_preemption_victims"]["agree"] is None
    assert cc["agree"] is False
    assert batch_crosscheck({}, None, None, 5.0) == {"checks": {}, "agree": None}


@pytest.mark.integration  # starts a process
def test_promql_parses(tmp_path: Path) -> None:
    """Every query the batch functions send is valid PromQL (promtool comes with Debian's prometheus,
    which `make setup` installs)."""
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool missing: run `make setup` (it installs Debian's prometheus)"
    pq = FakeProm([])
    kueue_figures(pq, 0.0, 600.0)
    scheduler_batch_figures(pq, 0.0, 600.0)
    batch_prom_series(pq, 0.0, 600.0, 5.0)
    # a rule must be an instant vector: wrap the raw-sample range selectors as Prometheus would accept them
    exprs = [e["query"] if not e["query"].endswith("s]") else f"last_over_time({e['query']})" for e in pq.log]
    rules = {"groups": [{"name": "g", "rules": [{"record": f"r{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    f = tmp_path / "rules.yaml"
    f.write_text(yaml.safe_dump(rules))
    res = subprocess.run([promtool, "check", "rules", str(f)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


def test_bindings_of_one_gang_a_moment_apart_are_not_a_partial_start() -> None:
    """Both members of a gang bound 0.4 s apart (one cycle, two watch events): not partial; the same
    members 2.5 s apart are."""
    def two(gap_s: float) -> dict[str, Any]:
        j = job("jg", "g-1", created=s(0), gang="pg", gang_min=2, finished=s(40), outcome="Complete")
        ps = [pod("p1", "g-1", "jg", created=s(0), sched=s(5), run=s(6), fin=s(30), gang="pg", gang_min=2),
              pod("p2", "g-1", "jg", created=s(0), sched=s(5 + gap_s), run=s(6 + gap_s), fin=s(30), gang="pg",
                  gang_min=2)]
        return measure(ps, [j])["measurements"]

    blip = two(0.4)
    assert blip["partial_jobs"]["instances_ever_partial"] == 0 and blip["wasted_gpu_seconds"] == 0.0
    real = two(2.5)
    assert real["partial_jobs"]["instances_ever_partial"] == 1 and real["wasted_gpu_seconds"] == 20.0


def test_the_batch_report_names_the_schedulers_pod_group_retry_loop_from_its_rate() -> None:
    """Recorded from make bench-gang-profile (gang-contention, 244 s window): the gang variant's scheduler
    answered 342,957 pod-group attempts unschedulable (the retry loop), the same load with
    SchedulerPopFromBackoffQ off 463; the row appears at RETRY_LOOP_PER_S and above only."""
    from hollowscale.batch.report import RETRY_LOOP_PER_S, retry_loop_words, tables

    assert retry_loop_words(342_957, 244.0) is not None and "1,406 unschedulable" in str(retry_loop_words(342_957, 244.0))
    assert retry_loop_words(463, 244.0) is None
    assert retry_loop_words(RETRY_LOOP_PER_S * 10, 10.0) is not None
    assert retry_loop_words(RETRY_LOOP_PER_S * 10 - 1, 10.0) is None
    assert retry_loop_words(None, 10.0) is None and retry_loop_words(5000, None) is None

    def rows(unschedulable: float, window: list[float] | None) -> list[list[str]]:
        summary = {"measurements": {
            "batch": {"instances": {"total": 1}},
            "batch_prometheus": {"scheduler": {"podgroups_available": True, "podgroup_attempts": {
                "total": unschedulable + 35, "by_result": {"scheduled": 35, "unschedulable": unschedulable}}}}}}
        if window is not None:
            summary["prometheus"] = {"window": window}
        return [r for t in tables(summary) for r in t[2]]

    loop = [r for r in rows(342_957, [0.0, 244.0]) if r[0] == "scheduler pod-group retry loop"]
    assert len(loop) == 1 and loop[0][1].startswith("1,406 unschedulable pod-group attempts/s")
    assert not [r for r in rows(463, [0.0, 244.0]) if r[0] == "scheduler pod-group retry loop"]
    assert not [r for r in rows(342_957, None) if r[0] == "scheduler pod-group retry loop"]


def test_a_jobset_instance_restarted_is_judged_by_its_current_jobs_and_settles() -> None:
    """A JobSet's restart deletes its failed and unfinished Jobs and makes new ones: the instance completed (not
    failed), and the deleted Jobs count as done for the settle (they will never finish)."""
    from hollowscale.batch.figures import analyse

    tl = Timeline()
    failed = [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]
    done = [{"type": "Complete", "status": "True"}]
    tl.apply_job("ADDED", _job("old-w", suspend=False, queue=""), 1000.0)
    tl.apply_job("ADDED", _job("old-l", suspend=False, queue=""), 1000.0)
    tl.apply_job("MODIFIED", _job("old-w", suspend=False, queue="", conditions=failed), 5000.0)
    tl.apply_job("DELETED", _job("old-w", suspend=False, queue="", conditions=failed), 5500.0)
    tl.apply_job("DELETED", _job("old-l", suspend=False, queue=""), 5500.0)  # deleted before it finished
    for uid in ("new-w", "new-l"):
        tl.apply_job("ADDED", _job(uid, suspend=False, queue=""), 6000.0)
    assert (tl.counts()["jobs"], tl.counts()["jobs_done"]) == (4, 2)
    for uid in ("new-w", "new-l"):
        tl.apply_job("MODIFIED", _job(uid, suspend=False, queue="", conditions=done), 9000.0)
    assert tl.counts()["jobs_done"] == 4
    pods, jobs = tl.snapshot()
    (inst,), _ = analyse(pods, jobs, 0.0, 10000.0)
    assert (inst.outcome, inst.finished_ms) == ("completed", 9000.0)
