"""The batch-scheduling floor on a real local cluster: in-tree gang scheduling (Workload/PodGroup),
Kueue (queues, cohort, fair sharing, webhooks, metrics), JobSet (its webhooks, controller and metrics), and
``down`` leaving nothing behind.

One private cluster (``gang_scheduling=True, kueue=True, jobset=True``) in tmp_path for the module, with one
hollow agent running two GPU pools (one per test, each tainted so no other pod lands there).
"""

from __future__ import annotations

import copy
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from waiting import wait_until

from hollow.process import AgentProcess, start_agent
from hollowscale.cluster.binaries import jobset_binary, kueue_binary
from hollowscale.cluster.gang import GANG_GATES
from hollowscale.cluster.local import ClusterInfo, LocalCluster
from hollowscale.measure.prom import PrometheusServer, targets_from_metrics
from hollowscale.versions import JOBSET_VERSION, KUEUE_VERSION
from kubecore.config import client_configuration
from loadgen.spec import LoadSpec, parse_load_spec
from loadgen.workloads import WorkloadMix

pytestmark = [pytest.mark.integration, pytest.mark.root]

ARTIFACTS = Path(__file__).parent.parent / ".artifacts"
GPU = "nvidia.com/gpu"
TAINT = "hollowscale.io/batch-test"
V1A2 = ("scheduling.k8s.io", "v1alpha2")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")


class Batch:
    """The module's cluster, its client, the agent and the two pools."""

    def __init__(self, local: LocalCluster, info: ClusterInfo, api: client.ApiClient, agent: AgentProcess,
                 gang_pool: str, kueue_pool: str, started_s: float) -> None:
        self.local, self.info, self.api, self.agent = local, info, api, agent
        self.gang_pool, self.kueue_pool, self.started_s = gang_pool, kueue_pool, started_s
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.custom = client.CustomObjectsApi(api)


def _schedulable(n: client.V1Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in n.status.conditions) and not any(
        t.key.startswith("node.kubernetes.io/") for t in n.spec.taints or ())


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Batch]:
    for what, binary in (("Kueue", kueue_binary()), ("JobSet", jobset_binary())):
        if not os.access(binary, os.X_OK):
            pytest.fail(f"{what} binary missing: {binary} -- run `make setup-test` (or "
                        f"`hollowscale setup --{what.lower()}`) first", pytrace=False)
    root = tmp_path_factory.mktemp("batch")
    local = LocalCluster(root / "c", gang_scheduling=True, kueue=True, jobset=True)
    started = time.monotonic()
    info = local.up(timeout_s=180)
    started_s = time.monotonic() - started
    prefix = f"bt{uuid.uuid4().hex[:5]}"
    gang_pool, kueue_pool = f"{prefix}-gang", f"{prefix}-kueue"
    pools = root / "pools.yaml"
    pools.write_text(yaml.safe_dump({"pools": [{
        "name": name, "count": 2,
        "resources": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: "8"},
        "taints": [{"key": TAINT, "value": name, "effect": "NoSchedule"}],
        "lifecycle": {"run_duration": "forever"},
    } for name in (gang_pool, kueue_pool)]}))
    agent = None
    try:
        agent = start_agent(info.kubeconfig, pools, ARTIFACTS / f"hollow-{prefix}.log", "--delete-nodes-on-exit")
        agent.wait_healthy(60)
        api = client.ApiClient(client_configuration(str(info.kubeconfig)))
        core = client.CoreV1Api(api)
        wait_until("4 hollow GPU nodes Ready and schedulable", lambda: (lambda items: len(items) == 4 and all(
            _schedulable(n) for n in items))(core.list_node(label_selector="hollowscale.io/pool").items), 90)
        yield Batch(local, info, api, agent, gang_pool, kueue_pool, started_s)
    finally:
        if agent is not None:
            agent.stop()
        _keep_logs(local)
        local.down()


def _keep_logs(local: LocalCluster) -> None:
    """The component logs, kept for post-mortems (before ``down`` removes the cluster dir)."""
    logs = local.dir / "logs"
    if logs.exists():
        target = ARTIFACTS / "batch-cluster-logs"
        target.mkdir(parents=True, exist_ok=True)
        for log in logs.iterdir():
            (target / log.name).write_bytes(log.read_bytes())


def _namespace(b: Batch, name: str) -> str:
    b.core.create_namespace({"metadata": {"name": name}})
    wait_until(f"default ServiceAccount in {name}", lambda: b.core.list_namespaced_service_account(
        name, field_selector="metadata.name=default").items, 60)
    return name


def _gpu_pod(name: str, pool: str, gpus: int = 8, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {"hollowscale.io/run-duration": "forever"}},
            "spec": {"nodeSelector": {"hollowscale.io/pool": pool},
                     "tolerations": [{"key": TAINT, "operator": "Exists"}],
                     "containers": [{"name": "main", "image": "hollow/train",
                                     "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}],
                     **spec}}


def _bound(b: Batch, ns: str, names: list[str]) -> list[str]:
    return [p.metadata.name for p in b.core.list_namespaced_pod(ns).items
            if p.metadata.name in names and p.spec.node_name]


# ------------------------------------------------------------------------------------------------ gang
def test_gang_is_held_until_all_members_fit(batch: Batch) -> None:
    b = batch
    assert b.info.features["gang_scheduling"] is True
    for comp in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert b.info.features["feature_gates"][comp] == [f"{g}=true" for g in GANG_GATES]
        assert f"--feature-gates={','.join(f'{g}=true' for g in GANG_GATES)}" in b.info.flags[comp]
    assert b.info.features["feature_gates_dropped"] == {}  # v1.36.3: every binary knows every gate
    assert "--runtime-config=scheduling.k8s.io/v1alpha2=true" in b.info.flags["kube-apiserver"]
    ns = _namespace(b, f"gang-{uuid.uuid4().hex[:5]}")
    # one of the 2 nodes (8 GPUs each) is taken by a blocker: a gang of 2 x 8 GPUs fits only after it goes
    b.core.create_namespaced_pod(ns, _gpu_pod("blocker", b.gang_pool))
    wait_until("the blocker bound", lambda: _bound(b, ns, ["blocker"]), 60)
    group, version = V1A2
    b.custom.create_namespaced_custom_object(group, version, ns, "workloads", {
        "apiVersion": f"{group}/{version}", "kind": "Workload", "metadata": {"name": "train"},
        "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}]}})
    b.custom.create_namespaced_custom_object(group, version, ns, "podgroups", {
        "apiVersion": f"{group}/{version}", "kind": "PodGroup", "metadata": {"name": "train-0"},
        "spec": {"podGroupTemplateRef": {"workload": {"workloadName": "train", "podGroupTemplateName": "workers"}},
                 "schedulingPolicy": {"gang": {"minCount": 2}}}})
    members = ["worker-0", "worker-1"]
    for name in members:
        b.core.create_namespaced_pod(ns, _gpu_pod(name, b.gang_pool, schedulingGroup={"podGroupName": "train-0"}))
    # held: only 1 of 2 fits, and the gang binds none (without gangs the scheduler would bind one)
    deadline = time.monotonic() + 12
    while time.monotonic() < deadline:
        assert _bound(b, ns, members) == [], "a member of an incomplete gang was bound"
        time.sleep(0.5)
    pods = {p.metadata.name: p for p in b.core.list_namespaced_pod(ns).items}
    assert all(pods[m].status.phase == "Pending" for m in members)
    held = b.custom.get_namespaced_custom_object(group, version, ns, "podgroups", "train-0")
    print("PodGroup status while held:", json.dumps(held.get("status", {})))
    freed = time.monotonic()
    b.core.delete_namespaced_pod("blocker", ns, grace_period_seconds=0)
    wait_until("both gang members bound", lambda: sorted(_bound(b, ns, members)) == members, 90)
    print(f"gang of 2 bound {time.monotonic() - freed:.1f}s after the blocker was deleted")
    nodes = {p.spec.node_name for p in b.core.list_namespaced_pod(ns).items if p.metadata.name in members}
    assert len(nodes) == 2
    pg = b.custom.get_namespaced_custom_object(group, version, ns, "podgroups", "train-0")
    print("PodGroup status:", json.dumps(pg.get("status", {})))


# ------------------------------------------------------------------------------------------------ kueue
def _cq(name: str, weight: str, gpus: int) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"cohortName": "hs-cohort", "namespaceSelector": {}, "fairSharing": {"weight": weight},
                     "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                         {"name": "hs-gpu", "resources": [{"name": GPU, "nominalQuota": gpus}]}]}]}}


def _job(name: str, queue: str, gpus: int, suspend: bool | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "parallelism": 1, "completions": 1, "backoffLimit": 0,
        "template": {"metadata": {"annotations": {"hollowscale.io/run-duration": "forever"}},
                     "spec": {"restartPolicy": "Never",
                              "containers": [{"name": "main", "image": "hollow/train",
                                              "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}]}},
    }
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}}, "spec": spec}


def test_kueue_admits_by_quota_across_a_fair_sharing_cohort(batch: Batch) -> None:
    b = batch
    kq = b.info.features["kueue"]
    assert kq["version"] == KUEUE_VERSION and kq["frameworks"] == ["batch/job"]
    assert {"mjob.kb.io", "vjob.kb.io", "vworkload.kb.io"} <= set(kq["webhooks"])
    print(f"cluster with gang gates and Kueue ready in {b.started_s:.1f}s")
    group, version = KUEUE
    b.custom.create_cluster_custom_object(group, version, "resourceflavors", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "hs-gpu"},
        "spec": {"nodeLabels": {"hollowscale.io/pool": b.kueue_pool},
                 "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}]}})
    # quota 8 GPUs of the pool's 16 (quota, not capacity, limits admission): 2 nominal per queue and 4
    # that the cohort itself lends, which the queues borrow by fair share (weights 2 and 1)
    b.custom.create_cluster_custom_object(group, version, "cohorts", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "hs-cohort"},
        "spec": {"resourceGroups": [{"coveredResources": [GPU], "flavors": [
            {"name": "hs-gpu", "resources": [{"name": GPU, "nominalQuota": 4}]}]}]}})
    b.custom.create_cluster_custom_object(group, version, "clusterqueues", _cq("cq-a", "2", 2))
    b.custom.create_cluster_custom_object(group, version, "clusterqueues", _cq("cq-b", "1", 2))
    queues = {"a": _namespace(b, f"team-a-{uuid.uuid4().hex[:5]}"), "b": _namespace(b, f"team-b-{uuid.uuid4().hex[:5]}")}
    for team, ns in queues.items():
        b.custom.create_namespaced_custom_object(group, version, ns, "localqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": f"lq-{team}"},
            "spec": {"clusterQueue": f"cq-{team}"}})
    submitted = time.monotonic()
    for i in range(4):
        for team, ns in queues.items():
            # half are created suspended, half not: Kueue's webhook suspends those (as in a real install)
            created = b.batch.create_namespaced_job(ns, _job(f"j{i}", f"lq-{team}", 2, True if i % 2 else None))
            assert created.spec.suspend is True, "the Job webhook did not suspend a queued Job"

    def admitted() -> dict[str, list[str]]:
        return {team: sorted(j.metadata.name for j in b.batch.list_namespaced_job(ns).items if not j.spec.suspend)
                for team, ns in queues.items()}

    wait_until("8 GPUs of quota admitted (4 nominal, 4 borrowed)", lambda: sum(map(len, admitted().values())) == 4, 60)
    print(f"first 4 Jobs admitted (unsuspended) {time.monotonic() - submitted:.1f}s after submission")
    time.sleep(3)  # nothing more is admitted: the cohort's quota is spent
    now = admitted()
    assert sum(map(len, now.values())) == 4 and all(now.values()), now
    print("admitted per queue:", now)
    for team in queues:
        cq = b.custom.get_cluster_custom_object(group, version, "clusterqueues", f"cq-{team}")
        st = cq.get("status", {})
        assert st.get("admittedWorkloads") == len(now[team]) and st.get("pendingWorkloads") == 4 - len(now[team])
        print(f"cq-{team}: admitted {st.get('admittedWorkloads')}, pending {st.get('pendingWorkloads')}, "
              f"fairSharing {st.get('fairSharing')}")
        if len(now[team]) > 1:  # borrowing from the cohort: the queue's weighted share is above 0
            assert int(st.get("fairSharing", {}).get("weightedShare", 0)) > 0, st
    # admitted Jobs' pods run on the flavor's nodes (nodeSelector and toleration injected by Kueue)
    wait_until("admitted Jobs' pods bound to the pool", lambda: sum(
        1 for ns in queues.values() for p in b.core.list_namespaced_pod(ns).items
        if p.spec.node_name and p.spec.node_name.startswith(b.kueue_pool)) == 4, 60)
    # with WorkloadWithJob on, the Job controller also gives Kueue's Jobs in-tree Workloads/PodGroups
    pgs = b.custom.list_namespaced_custom_object(*V1A2, queues["a"], "podgroups")["items"]
    grouped = [p.spec.scheduling_group is not None if hasattr(p.spec, "scheduling_group") else "?"
               for p in b.core.list_namespaced_pod(queues["a"]).items]
    print(f"in-tree PodGroups for team a's Jobs: {len(pgs)}; pods with schedulingGroup: {grouped}")
    # finishing one of team b's Jobs frees 2 GPUs: exactly one more workload is admitted
    done = now["b"][0]
    b.batch.delete_namespaced_job(done, queues["b"], propagation_policy="Background")
    wait_until("one more Job admitted after quota is freed",
               lambda: sum(map(len, admitted().values())) == 4 and admitted() != now, 60)
    _check_kueue_metrics(b)


def _check_kueue_metrics(b: Batch) -> None:
    url = b.info.metrics["kueue"]
    token_file = b.info.metrics_tokens["kueue"]
    ctx = ssl.create_default_context(cafile=str(b.info.ca_file))
    with pytest.raises(urllib.error.HTTPError) as denied:
        urllib.request.urlopen(url, context=ctx, timeout=10)
    assert denied.value.code in (401, 403)
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token_file.read_text().strip()}"})
    with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
        text = resp.read().decode()
    assert "kueue_admitted_workloads_total" in text and 'cluster_queue="cq-a"' in text
    prom = PrometheusServer(b.local.dir.parent / "prometheus",
                            [t for t in targets_from_metrics(b.info.metrics, str(b.info.ca_file), str(b.info.admin_cert),
                                                             str(b.info.admin_key), tokens=b.info.metrics_tokens)
                             if t.job == "kueue"], interval_s=1.0)
    prom.start()
    try:
        health = prom.wait_scraped(30)
        assert health == {"kueue": "up"}, health
        with urllib.request.urlopen(f"{prom.url}/api/v1/query?query=sum(kueue_admitted_workloads_total)",
                                    timeout=10) as r:
            result = json.loads(r.read())["data"]["result"]
        assert result and float(result[0]["value"][1]) >= 4
    finally:
        prom.stop()


# ------------------------------------------------------------------------------------------------ down
def _mount_lines(needle: str) -> list[str]:
    out = []
    for mi in Path("/proc").glob("[0-9]*/mountinfo"):
        try:
            out += [f"{mi.parent.name}: {ln}" for ln in mi.read_text().splitlines() if needle in ln]
        except OSError:
            continue
    return out


# ------------------------------------------------------------------------------------------------ JobSet
def _jobset_load(ns: str, pool: str, targets: tuple[str, ...] = ("workers",)) -> LoadSpec:
    """A JobSet workload as a scenario writes it: one role ``workers`` of 2 pods (no GPU, 2 s each) on
    ``pool``, failing the JobSet when a Job of ``targets`` fails."""
    return parse_load_spec({
        "name": "jobset-test", "namespace": ns,
        "workloads": [{"name": "train", "kind": "JobSet", "run_duration": "2s", "roles": [{
            "name": "workers", "replicas": 2, "resources": {"cpu": "1"}, "node_selector": {"hollowscale.io/pool": pool},
            "tolerations": [{"key": TAINT, "operator": "Exists"}]}],
            "failure_policy": {"max_restarts": 1, "rules": [{"action": "FailJobSet", "target_roles": list(targets)}]}}],
        "arrival": {"curve": "constant", "rate": 1, "duration_s": "1s", "seed": 36}}, "jobset-test.yaml")


def test_jobset_webhooks_controller_and_metrics_as_installed(batch: Batch) -> None:
    """A JobSet as loadgen renders it passes JobSet's CRD schema and webhooks (served by URL with the cluster
    CA; the defaulting one fills what it leaves out), the controller makes its Job, the hollow kubelet runs
    the pods to completion, the JobSet completes; a bad one is refused by the validating webhook; its
    metrics answer the reader's token only."""
    b = batch
    features = b.info.features["jobset"]
    assert features["version"] == JOBSET_VERSION and features["namespace"] == "jobset-system"
    assert sorted(features["webhooks"]) == ["mjobset.kb.io", "mpod.kb.io", "vjobset.kb.io", "vpod.kb.io"]
    assert b.info.client_qps["jobset"] == (500.0, 500)  # JobSet's own defaults in the default profile
    ns = _namespace(b, f"jobset-{uuid.uuid4().hex[:5]}")
    (sub,) = WorkloadMix(_jobset_load(ns, b.gang_pool), f"js{uuid.uuid4().hex[:5]}").next_instance()
    bad = copy.deepcopy(sub.body)
    bad["metadata"]["name"] = "bad"
    bad["spec"]["failurePolicy"]["rules"][0]["targetReplicatedJobs"] = ["nope"]  # past loadgen's own check
    with pytest.raises(client.ApiException) as refused:
        b.custom.create_namespaced_custom_object(*JOBSET, ns, "jobsets", bad)
    assert refused.value.status in (400, 422) and "'nope' in failure policy does not appear" in refused.value.body
    b.custom.create_namespaced_custom_object(*JOBSET, ns, "jobsets", sub.body)
    name = sub.body["metadata"]["name"]
    stored = b.custom.get_namespaced_custom_object(*JOBSET, ns, "jobsets", name)
    assert stored["spec"]["successPolicy"]["operator"] == "All"  # set by the defaulting webhook
    assert stored["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] == "Indexed"
    assert stored["spec"]["failurePolicy"]["rules"][0]["name"] == "rule0"

    def completed() -> bool:
        js = b.custom.get_namespaced_custom_object(*JOBSET, ns, "jobsets", name)
        return any(c["type"] == "Completed" and c["status"] == "True"
                   for c in (js.get("status") or {}).get("conditions") or ())

    wait_until("the JobSet Completed", completed, 90)
    jobs = b.batch.list_namespaced_job(ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items
    assert [j.metadata.name for j in jobs] == [f"{name}-workers-0"]
    assert jobs[0].metadata.labels["hollowscale.io/role"] == "workers"  # the run's labels reach its Jobs
    pods = b.core.list_namespaced_pod(ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items
    assert len(pods) == 2 and all(p.status.phase == "Succeeded" and p.spec.node_name for p in pods)
    token = Path(b.local.dir / "jobset" / "metrics-token").read_text().strip()
    url = b.info.metrics["jobset"]
    ctx = ssl.create_default_context(cafile=str(b.info.ca_file))
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, context=ctx, timeout=10) as resp:
        body = resp.read().decode()
    assert 'controller_runtime_reconcile_total{controller="jobset",result="success"}' in body
    with pytest.raises(urllib.error.HTTPError) as anonymous:
        urllib.request.urlopen(url, context=ctx, timeout=10)
    assert anonymous.value.code in (401, 403)


def test_kueue_metrics_cert_only_in_its_namespace_and_down_leaves_nothing(batch: Batch) -> None:
    b = batch
    cli = [sys.executable, "-c", "from hollowscale.cli import main; main()"]
    status = subprocess.run([*cli, "cluster", "status", "--dir", str(b.local.dir)],
                            capture_output=True, text=True, timeout=60)
    assert f"Kueue {KUEUE_VERSION}" in status.stdout and "gang:       on" in status.stdout, status.stdout
    assert "kueue " in status.stdout and "fair sharing on" in status.stdout
    kueue_pid = b.local.components()["kueue"].pid
    ours = Path(f"/proc/{kueue_pid}/mountinfo").read_text()
    assert " /etc " in ours and "hollowscale-kueue-etc" in ours  # Kueue's own view: the overlay
    assert Path(f"/proc/{kueue_pid}/root/etc/kueue/metrics/certs/tls.crt").exists()
    assert not Path("/etc/kueue").exists()  # the machine's /etc is untouched
    assert str(b.local.dir) not in Path("/proc/self/mountinfo").read_text()
    # the same cluster, asked for with other features, is refused
    from hollowscale.cluster.local import ClusterError

    with pytest.raises(ClusterError, match="has features gang-scheduling, kueue, jobset, this asks for none"):
        LocalCluster(b.local.dir).up()
    pids = dict(b.info.pids)
    b.agent.stop()
    _keep_logs(b.local)
    stopped = b.local.down()
    assert "kueue" in stopped and "jobset" in stopped
    for name, pid in pids.items():
        assert not Path(f"/proc/{pid}").exists() or _zombie_or_other(pid), f"{name} (pid {pid}) still runs"
    # Kueue's mounts live in its own mount namespace, which the kernel takes down only as the process's last
    # thread exits: once (CI, 2026-12-07) the pid check above passed and Kueue's mountinfo still listed them
    # a moment later. Wait for that event, bounded, then assert.
    wait_until("Kueue's mount namespace gone", lambda: not _mount_lines("hollowscale-kueue"), 30)
    assert _mount_lines(str(b.local.dir)) == []
    assert _mount_lines("hollowscale-kueue") == []
    assert not Path("/etc/kueue").exists() and not b.local.dir.exists()


def _zombie_or_other(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"
