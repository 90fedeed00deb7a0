"""Training jobs through faults, end to end on a real local control plane with JobSet (issue 36).

One run of 16 hollow 8-GPU nodes: Indexed Jobs with ``backoffLimitPerIndex`` and JobSets with ``Recreate``,
4-pod training gangs that checkpoint every 20 s, and one pod of each kind crashed (exit 137) mid-run by a
fault aimed at its workload.  The test keeps its own watch of the run's pods on the API server, and checks
from it:

* the JobSet whose worker failed was restarted whole: every pod it ran before the fault is gone and as
  many new pods (new UIDs) ran after it; the Job replaced only the failed index: the other pods kept their
  UIDs and ran through;
* each job recovered and completed, and its recovery time recomputed from the test's own watch
  (:func:`hollowscale.training.recovery.attempts_of`) agrees with the report within 5%;
* after the run no JobSet, Job, Workload or pod of the run is left.

A second run drains a node under an Indexed Job that allows no failure per index: the Job completes only because
its ``podFailurePolicy`` ignores the eviction's ``DisruptionTarget``.  A third has Kueue evict and requeue a Job
that does not recover within its ``waitForPodsReady`` recovery timeout.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from clirun import run_cli
from waiting import wait_until

from hollowscale.cluster.binaries import jobset_binary
from hollowscale.cluster.local import LocalCluster
from hollowscale.training.recovery import attempts_of, member_runs
from kubecore.config import load_endpoint
from kubecore.watch import list_then_watch, session_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration]
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
RUN_LABEL = "hollowscale.io/run"
ARTIFACTS = ROOT / "tests" / ".artifacts"


def _workload(name: str, kind: str, **extra: Any) -> dict[str, Any]:
    roles = [{"name": "worker", "replicas": 4}] if kind == "Job" else [{"name": "leader", "replicas": 1},
                                                                       {"name": "workers", "replicas": 3}]
    for role in roles:
        role.update(resources={"cpu": "96", "memory": "768Gi", "nvidia.com/gpu": "8"}, tolerations=[GPU_TOLERATION])
    return {"name": name, "kind": kind, "share": 1, "run_duration": "60s", "same_duration": True,
            "checkpoint_interval": "20s", "gang": {"min_members": "all"}, "roles": roles, **extra}


def _scenario(cluster_dir: Path) -> dict[str, Any]:
    return {
        "name": "training-faults-it",
        "cluster": {"backend": "local", "dir": str(cluster_dir), "namespace": "hs-train-it", "jobset": True},
        "agents": {"shards": 1, "ready_timeout_s": "120s"},
        "pools": [{"name": "tfi", "count": 16, "resources": {"cpu": "128", "memory": "1Ti", "pods": "110",
                                                             "nvidia.com/gpu": "8"},
                   "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}],
        "workloads": [
            _workload("job", "Job", backoff_limit_per_index=2, pod_failure_policy={"ignore_disruptions": True}),
            _workload("jobset", "JobSet", backoff_limit=0,
                      failure_policy={"max_restarts": 3, "restart_strategy": "Recreate"})],
        # 4 instances in the first 6 s (the seed gives Job, Job, JobSet, JobSet), every gang whole well before the
        # faults at 11 s
        "arrival": {"curve": "constant", "rate": 0.67, "duration_s": "12s", "per_user_rate": 0.67, "seed": 36,
                    "max_instances": 4},
        "faults": [{"type": "pod-failures", "at_s": "11s", "workload": "job", "count": 1, "exit_code": 137,
                    "seed": 1},
                   {"type": "pod-failures", "at_s": "11.5s", "workload": "jobset", "count": 1, "exit_code": 137,
                    "seed": 2}],
        "measurements": {"settle_timeout_s": "240s"},
        "slo_defaults": False,
        "timeout_s": "600s",
    }


class PodWatch:
    """The test's own record of the run's pods, from its own watch on the API server (receive times, ms)."""

    def __init__(self, kubeconfig: Path) -> None:
        self.endpoint = load_endpoint(str(kubeconfig))
        self.pods: dict[str, dict[str, Any]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        session = session_for(self.endpoint, 1)
        for typ, obj, t in list_then_watch(session, self.endpoint.server, "/api/v1/pods", self._stop.is_set,
                                           label_selector=RUN_LABEL):
            meta = obj.get("metadata") or {}
            rec = self.pods.setdefault(meta.get("uid", ""), {"created": t, "labels": meta.get("labels") or {},
                                                             "name": meta.get("name", "")})
            status = obj.get("status") or {}
            node = (obj.get("spec") or {}).get("nodeName")
            if node:
                rec["node"] = node
            for cond in status.get("conditions") or []:
                if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
                    rec.setdefault("disruption", cond.get("reason", ""))
            phase = status.get("phase")
            if phase:
                rec["phase"] = phase
            if phase in ("Running", "Succeeded", "Failed"):
                rec.setdefault("running", t)
            if phase in ("Succeeded", "Failed"):
                rec.setdefault("finished", t)
            if meta.get("deletionTimestamp"):
                rec.setdefault("deleting", t)
            if typ == "DELETED":
                rec.setdefault("deleted", t)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def members(self, instance: str) -> list[SimpleNamespace]:
        """The instance's pods as :mod:`hollowscale.training.recovery` reads them."""
        return [SimpleNamespace(uid=uid, running_ms=r.get("running"), finished_ms=r.get("finished"),
                                deleting_ms=r.get("deleting"), deleted_ms=r.get("deleted"), phase=r.get("phase", ""),
                                node=r.get("node"), disruption=r.get("disruption"))
                for uid, r in self.pods.items() if r["labels"].get("hollowscale.io/instance") == instance]


def _leftovers(kubeconfig: Path, run_id: str) -> dict[str, int]:
    endpoint = load_endpoint(str(kubeconfig))
    session = session_for(endpoint, 1)
    selector = f"{RUN_LABEL}={run_id}"
    paths = {"pods": "/api/v1/pods", "jobs": "/apis/batch/v1/jobs",
             "jobsets": "/apis/jobset.x-k8s.io/v1alpha2/jobsets",
             "workloads": "/apis/scheduling.k8s.io/v1alpha2/workloads"}
    out = {}
    for kind, path in paths.items():
        r = session.get(endpoint.server + path, params={"labelSelector": selector, "limit": 1}, timeout=30)
        out[kind] = len(r.json().get("items") or []) if r.ok else (0 if r.status_code == 404 else -1)
    return out


def _wait_nothing_left(kubeconfig: Path, run_id: str) -> None:
    """The run deleted its namespace and the namespace controller empties it: wait for that, then no pod, Job,
    JobSet or Workload of the run may be left."""
    left: dict[str, int] = {}

    def gone() -> bool:
        left.update(_leftovers(kubeconfig, run_id))
        return all(v == 0 for v in left.values())

    try:
        wait_until("the run's pods, Jobs, JobSets and Workloads gone", gone, 180)
    except AssertionError:
        pytest.fail(f"left after the run: {left}")


def test_jobs_recover_from_crashed_pods_as_their_controllers_restart_them(tmp_path: Path) -> None:
    if not os.access(jobset_binary(), os.X_OK):
        pytest.fail(f"JobSet binary missing: {jobset_binary()} -- run `make setup-test` first", pytrace=False)
    local = LocalCluster(tmp_path / "c", jobset=True)
    info = local.up(timeout_s=180)
    watch = PodWatch(info.kubeconfig)
    try:
        scen = tmp_path / "training-faults-it.yaml"
        scen.write_text(yaml.safe_dump(json.loads(json.dumps(_scenario(tmp_path / "c"))), sort_keys=False))  # no aliases
        out = tmp_path / "reports"
        r = run_cli([sys.executable, "-m", "hollowscale.run", str(scen), "--out", str(out), "--quiet"], 600,
                    cwd=ROOT)
        found = (out / "latest").resolve() / "summary.json"
        assert found.is_file(), (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "training-faults-summary.json").write_bytes(found.read_bytes())  # for a post-mortem
        summary = json.loads(found.read_text())
        assert summary["complete"], (r.stdout[-3000:], r.stderr[-3000:])
        _wait_nothing_left(info.kubeconfig, summary["run_id"])
    finally:
        watch.stop()
        local.down()

    training = summary["measurements"]["training"]
    fired = [f for e in summary["faults"] for f in e["firings"]]
    assert len(fired) == 2 and all(len(f["pods"]) == 1 for f in fired), summary["faults"]
    rows = {r["fault"]: r for r in training["faults"]}
    assert sorted(rows) == [0, 1], training["faults"]
    for i, firing in enumerate(sorted(fired, key=lambda f: f["t_ms"])):
        row = rows[i]
        t, crashed = firing["t_ms"], firing["pods"][0]
        pods = watch.members(row["instance"])
        before = [p for p in pods if p.running_ms is not None and p.running_ms <= t]
        after = [p for p in pods if p.running_ms is not None and p.running_ms > t]
        assert crashed in {p.uid for p in before}
        if row["workload"] == "jobset":  # restarted whole: every pod of before gone, 4 new ones ran
            assert len(before) == 4 and all(p.deleted_ms is not None for p in before), before
            assert len(after) == 4 and not {p.uid for p in after} & {p.uid for p in before}, after
        else:  # the failed index only: the other 3 ran through with their UIDs, one replacement
            assert len(after) == 1, after
            assert all(p.phase == "Succeeded" for p in before if p.uid != crashed), before
        attempts = attempts_of(member_runs(pods), 4, max(p.deleted_ms or 0 for p in pods) + 1)
        assert [a.ended for a in attempts] == ["broken", "completed"], attempts
        mine = (attempts[1].start_ms - t) / 1000.0
        assert row["recovered"] is True and abs(row["recovered_s"] - mine) <= 0.05 * mine, (row, mine)
        assert row["reaction_s"] is not None and 0 <= row["reaction_s"] <= row["recovered_s"], row
        assert row["lost_work_s"] < 20.0 and row["wasted_gpu_s"] > 0, row
    jobs = {j["instance"]: j for j in training["jobs"]}
    assert {rows[0]["instance"], rows[1]["instance"]} <= set(jobs)
    assert all(jobs[rows[i]["instance"]]["restarts"] == 1 for i in (0, 1)), jobs
    s = training["summary"]
    assert s["unrecovered"] == 0 and 0 < s["ettr"] < 1, s
    md = ((out / "latest").resolve() / "summary.md").read_text()
    assert "## Training jobs through failures" in md


def test_a_drained_node_evicts_a_job_pod_that_the_job_ignores_as_a_disruption(tmp_path: Path) -> None:
    """``node-drain`` for real: the node a Job's pod runs on is cordoned and the pod evicted through the Eviction
    API (the API server marks it ``DisruptionTarget``).  The Job allows no failure per index
    (``backoffLimitPerIndex: 0``), so it completes only because its ``podFailurePolicy`` ignores disruptions; the
    replacement runs on another node while this one is cordoned, the node is uncordoned at its repair, and the
    recovery recomputed from the test's own pod watch agrees with the report within 5%."""
    local = LocalCluster(tmp_path / "c")
    info = local.up(timeout_s=180)
    watch = PodWatch(info.kubeconfig)
    drained_node: dict[str, Any] = {}
    try:
        doc = _scenario(tmp_path / "c")
        doc.update(name="training-drain-it")
        doc["cluster"] = {"backend": "local", "dir": str(tmp_path / "c"), "namespace": "hs-drain-it"}
        doc["pools"][0]["count"] = 8
        doc["workloads"] = [_workload("job", "Job", backoff_limit_per_index=0,
                                      pod_failure_policy={"ignore_disruptions": True})]
        doc["arrival"] = {"curve": "constant", "rate": 0.5, "duration_s": "12s", "per_user_rate": 0.5, "seed": 36,
                          "max_instances": 1}
        doc["faults"] = [{"type": "node-drain", "at_s": "11s", "workload": "job", "count": 1,
                          "repair_after_s": "20s", "seed": 1}]
        scen = tmp_path / "training-drain-it.yaml"
        scen.write_text(yaml.safe_dump(json.loads(json.dumps(doc)), sort_keys=False))  # no aliases
        out = tmp_path / "reports"
        r = run_cli([sys.executable, "-m", "hollowscale.run", str(scen), "--out", str(out), "--quiet"], 600,
                    cwd=ROOT)
        found = (out / "latest").resolve() / "summary.json"
        assert found.is_file(), (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
        summary = json.loads(found.read_text())
        assert summary["complete"], (summary.get("incomplete_reason"), summary.get("errors"))
        (firing,) = [f for e in summary["faults"] for f in e["firings"]]
        (node,) = firing["nodes"]
        session = session_for(load_endpoint(str(info.kubeconfig)), 1)
        got = session.get(f"{info.server}/api/v1/nodes/{node}", timeout=30)
        drained_node.update(got.json() if got.ok else {"status": got.status_code})
        _wait_nothing_left(info.kubeconfig, summary["run_id"])  # the watch sees every pod of the run to its end
    finally:
        watch.stop()
        local.down()

    (response,) = firing["responses"]
    assert response["node"] == node and response["cordon"] == 200, response
    assert [e["status"] for e in response["evictions"]] == [201], response  # one pod of the Job, evicted
    assert not (drained_node.get("spec") or {}).get("unschedulable"), drained_node  # uncordoned at its repair
    b = summary["measurements"]["batch"]
    assert b["instances"]["completed"] == b["instances"]["total"] == 1, b["instances"]
    (row,) = summary["measurements"]["training"]["faults"]
    pods = watch.members(row["instance"])
    t = firing["t_ms"]
    evicted = [p for p in pods if p.node == node and p.running_ms is not None and p.running_ms <= t]
    assert len(evicted) == 1 and evicted[0].disruption == "EvictionByEvictionAPI", pods
    after = [p for p in pods if p.running_ms is not None and p.running_ms > t]
    assert len(after) == 1 and after[0].node != node, after  # the replacement, not on the cordoned node
    attempts = attempts_of(member_runs(pods), 4, max(p.deleted_ms or 0 for p in pods) + 1)
    assert [a.ended for a in attempts] == ["broken", "completed"], attempts
    mine = (attempts[1].start_ms - t) / 1000.0
    assert row["recovered"] is True and abs(row["recovered_s"] - mine) <= 0.05 * mine, (row, mine)


@pytest.mark.root  # Kueue runs in its own mount namespace
def test_kueue_evicts_a_job_that_does_not_recover_in_time_and_admits_it_again(tmp_path: Path) -> None:
    """The kueue-requeue variant's mechanism: a queued Indexed Job whose crashed pod is replaced only after the
    Job controller's backoff (about 10 s) is evicted by Kueue's waitForPodsReady after its 3 s recovery
    timeout (suspended: every pod goes), requeued after a 2 s backoff, admitted again, and completes from its
    checkpoint."""
    doc = _scenario(tmp_path / "unused")
    doc["name"] = "training-requeue-it"
    doc["cluster"] = {"backend": "local", "namespace": "hs-requeue-it", "kueue": True,
                      "kueue_pods_ready": {"timeout": "2m", "recovery_timeout": "3s", "backoff_base_s": 2,
                                           "backoff_max_s": 10}}
    doc["pools"][0]["count"] = 12
    doc["workloads"] = [dict(_workload("job", "Job", backoff_limit_per_index=2,
                                       pod_failure_policy={"ignore_disruptions": True}), queued=True)]
    doc["tenants"] = [{"name": "ml", "quotas": {"tfi": {"cpu": "1536", "memory": "12Ti", "nvidia.com/gpu": 96}}}]
    # 2 Jobs in the first 4 s, both Ready (Kueue's PodsReady) well before the fault at 11 s: a pod of a Job not yet
    # Ready would meet the 2 min timeout instead of the recovery timeout
    doc["arrival"] = {"curve": "constant", "rate": 0.5, "duration_s": "12s", "per_user_rate": 0.5, "seed": 36,
                      "max_instances": 2}
    doc["faults"] = [{"type": "pod-failures", "at_s": "11s", "workload": "job", "count": 1, "exit_code": 137,
                      "seed": 1}]
    scen = tmp_path / "training-requeue-it.yaml"
    scen.write_text(yaml.safe_dump(json.loads(json.dumps(doc)), sort_keys=False))  # no aliases
    out = tmp_path / "reports"
    r = run_cli([sys.executable, "-m", "hollowscale.run", str(scen), "--out", str(out), "--quiet"], 600, cwd=ROOT)
    found = (out / "latest").resolve() / "summary.json"
    assert found.is_file(), (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    s = json.loads(found.read_text())
    assert s["complete"], (s.get("incomplete_reason"), s.get("errors"))
    assert s["cluster"]["features"]["kueue"]["wait_for_pods_ready"]["recoveryTimeout"] == "3s"
    b = s["measurements"]["batch"]
    assert b["instances"]["completed"] == b["instances"]["total"] >= 1, b["instances"]
    evicted = b["preemption"]["jobs_evicted"]
    assert evicted["evictions"] >= 1 and evicted["readmitted_jobs"] >= 1, evicted
    reasons = s["measurements"]["batch_prometheus"]["kueue"]["evicted_workloads"]["by_reason"]
    assert reasons.get("PodsReadyTimeout", 0) >= 1, reasons
    (row,) = s["measurements"]["training"]["faults"]
    assert row["recovered"] is True and row["recovered_s"] > 3.0, row  # not before Kueue's eviction and requeue
