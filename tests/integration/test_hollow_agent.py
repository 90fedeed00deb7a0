"""The hollow agent against the real local control plane (no fake API server anywhere).

One agent process (200 GPU nodes, unique pool name, a NoSchedule taint so no other test's pods land
on them) is shared by the tests of this module, in order: nodes Ready; a Job completes; a failing
exit code makes the Job controller retry; a Deployment runs and scales down cleanly; the agent is
killed and restarted mid-run without losing or repeating a transition; a node whose heartbeats stop
turns NotReady and back; the agent deletes its nodes on exit.
"""

from __future__ import annotations

import ipaddress
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, watch
from waiting import wait_until

from hollow.process import AgentProcess, start_agent
from kubecore.config import client_configuration

pytestmark = pytest.mark.integration

NODES = 200
TAINT = "hollowscale.io/test"
ARTIFACTS = Path(__file__).parent.parent / ".artifacts"



@dataclass
class Env:
    kubeconfig: str
    prefix: str
    pool: str
    namespace: str
    pools_file: Path
    log_dir: Path
    api: client.ApiClient
    agent: AgentProcess | None = None
    starts: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    def start(self) -> AgentProcess:
        self.starts += 1
        self.agent = start_agent(self.kubeconfig, self.pools_file, self.log_dir / f"agent-{self.starts}.log",
                                 "--delete-nodes-on-exit", "--log-level", "INFO")
        self.agent.wait_healthy(120)
        return self.agent

    def nodes(self) -> list[client.V1Node]:
        return self.core.list_node(label_selector=f"hollowscale.io/pool={self.pool}").items

    def pod_template(self, policy: str, annotations: dict[str, str], labels: dict[str, str]) -> dict[str, Any]:
        return {
            "metadata": {"annotations": annotations, "labels": labels},
            "spec": {
                "restartPolicy": policy,
                "nodeSelector": {"hollowscale.io/pool": self.pool},
                "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
                "terminationGracePeriodSeconds": 30,
                "containers": [{"name": "main", "image": "registry.invalid/worker:1",
                                "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                                              "limits": {"nvidia.com/gpu": "1"}}}],
            },
        }


def ready(node: client.V1Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or ())


@pytest.fixture(scope="module")
def env(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    prefix = f"hst{uuid.uuid4().hex[:5]}"
    work = tmp_path_factory.mktemp("hollow")
    pools_file = work / "pools.yaml"
    pools_file.write_text(yaml.safe_dump({"pools": [{
        "name": f"{prefix}-v100",
        "count": NODES,
        "resources": {"cpu": "64", "memory": "512Gi", "pods": "110", "ephemeral-storage": "1Ti",
                      "nvidia.com/gpu": "8"},
        "labels": {"nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"},
        "taints": [{"key": TAINT, "value": prefix, "effect": "NoSchedule"}],
        "topology": {"zones": ["zone-a", "zone-b"], "racks_per_zone": 4},
        "lifecycle": {"startup_delay": "500ms", "run_duration": "forever"},
    }]}))
    api = client.ApiClient(client_configuration(str(cluster.kubeconfig)))
    e = Env(str(cluster.kubeconfig), prefix, f"{prefix}-v100", f"{prefix}-ns", pools_file,
            ARTIFACTS / f"hollow-{prefix}", api)
    core = e.core
    core.create_namespace({"metadata": {"name": e.namespace}})
    wait_until("the default service account", lambda: core.list_namespaced_service_account(
        e.namespace, field_selector="metadata.name=default").items, 60)
    e.start()
    try:
        yield e
    finally:
        if e.agent is not None:
            e.agent.stop()
        core.delete_namespace(e.namespace)
        for node in e.nodes():  # safety net if a test failed before the deletion test
            core.delete_node(node.metadata.name)


def test_200_gpu_nodes_ready_with_capacity_and_labels(env: Env) -> None:
    t0 = time.monotonic()
    nodes = wait_until("200 Ready nodes", lambda: [n for n in env.nodes() if ready(n)] if sum(
        ready(n) for n in env.nodes()) == NODES else None, 60)
    assert time.monotonic() - t0 < 60
    assert sorted(n.metadata.name for n in nodes) == sorted(f"{env.pool}-{i}" for i in range(NODES))
    cidrs = set()
    for n in nodes:
        assert n.status.capacity["nvidia.com/gpu"] == "8" and n.status.allocatable["nvidia.com/gpu"] == "8"
        assert n.status.capacity["cpu"] == "64" and n.status.capacity["memory"] == "512Gi"
        assert n.status.capacity["ephemeral-storage"] == "1Ti" and n.status.capacity["pods"] == "110"
        labels = n.metadata.labels
        assert labels["nvidia.com/gpu.product"] == "Tesla-V100-SXM2-32GB"
        assert labels["topology.kubernetes.io/zone"] in ("zone-a", "zone-b")
        assert labels["hollowscale.io/rack"].startswith(labels["topology.kubernetes.io/zone"] + "-rack-")
        assert {c.type: c.status for c in n.status.conditions} == {
            "Ready": "True", "MemoryPressure": "False", "DiskPressure": "False", "PIDPressure": "False"}
        assert any(t.key == TAINT and t.effect == "NoSchedule" for t in n.spec.taints)
        assert n.status.node_info.kubelet_version and n.status.daemon_endpoints.kubelet_endpoint.port == 10250
        cidrs.add(n.spec.pod_cidr)
    assert len(cidrs) == NODES
    coord = client.CoordinationV1Api(env.api)

    def leases() -> list[Any] | None:
        items = [lease for lease in coord.list_namespaced_lease("kube-node-lease").items
                 if lease.metadata.name.startswith(env.pool + "-")]
        return items if len(items) == NODES else None

    found = wait_until("a Lease per node", leases, 30)
    for lease in found:
        assert lease.spec.lease_duration_seconds == 40 and lease.spec.holder_identity == lease.metadata.name
        assert lease.metadata.owner_references[0].kind == "Node"
    metrics = env.agent.metrics() if env.agent else {}
    assert metrics["hollow_nodes_managed"] == NODES and metrics["hollow_nodes_registered"] == NODES
    assert metrics.get('hollow_node_registrations_total{result="created"}') == NODES


def _job(env: Env, name: str, completions: int, annotations: dict[str, str], backoff: int = 6,
         policy: str = "Never") -> None:
    batch = client.BatchV1Api(env.api)
    batch.create_namespaced_job(env.namespace, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"completions": completions, "parallelism": completions, "backoffLimit": backoff,
                 "template": env.pod_template(policy, annotations, {"test": name})}})


def _job_condition(env: Env, name: str, kind: str) -> client.V1Job | None:
    job = client.BatchV1Api(env.api).read_namespaced_job(name, env.namespace)
    for cond in job.status.conditions or ():
        if cond.type == kind and cond.status == "True":
            return job
    return None


def test_job_of_five_pods_completes(env: Env) -> None:
    _job(env, "five", 5, {"hollowscale.io/run-duration": "2s"})
    job = wait_until("Job five Complete", lambda: _job_condition(env, "five", "Complete"), 90)
    assert job.status.succeeded == 5 and not job.status.failed
    nodes = {n.metadata.name: n for n in env.nodes()}
    pods = env.core.list_namespaced_pod(env.namespace, label_selector="test=five").items
    assert len(pods) == 5
    ips = set()
    for pod in pods:
        assert pod.status.phase == "Succeeded"
        node = nodes[pod.spec.node_name]
        assert ipaddress.ip_address(pod.status.pod_ip) in ipaddress.ip_network(node.spec.pod_cidr)
        assert pod.status.host_ip == node.status.addresses[0].address
        conds = {c.type: c for c in pod.status.conditions}
        assert conds["PodScheduled"].status == "True"  # the scheduler's condition is kept
        assert conds["Initialized"].status == "True" and conds["Ready"].status == "False"
        term = pod.status.container_statuses[0].state.terminated
        assert term.exit_code == 0 and term.reason == "Completed" and pod.status.container_statuses[0].state.running is None
        run_s = (term.finished_at - term.started_at).total_seconds()
        assert run_s >= 1, run_s  # ran its 2 s (whole-second stamps); how late a loaded agent ends it is no bound
        ips.add(pod.status.pod_ip)
    assert len(ips) == 5


def test_exit_code_fails_pod_and_job_backoff_retries(env: Env) -> None:
    _job(env, "crash", 1, {"hollowscale.io/run-duration": "1s", "hollowscale.io/exit-code": "3"}, backoff=1)
    job = wait_until("Job crash Failed", lambda: _job_condition(env, "crash", "Failed"), 120)
    assert job.status.failed == 2 and not job.status.succeeded  # the first try and one retry
    pods = env.core.list_namespaced_pod(env.namespace, label_selector="test=crash").items
    assert len(pods) == 2
    for pod in pods:
        assert pod.status.phase == "Failed"
        assert pod.status.container_statuses[0].state.terminated.exit_code == 3
        assert pod.status.container_statuses[0].state.terminated.reason == "Error"


def test_deployment_stays_running_and_scales_down_cleanly(env: Env) -> None:
    apps = client.AppsV1Api(env.api)
    apps.create_namespaced_deployment(env.namespace, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"test": "web"}},
                 "template": env.pod_template("Always", {"hollowscale.io/run-duration": "2s"}, {"test": "web"})}})
    wait_until("3 available replicas", lambda: (apps.read_namespaced_deployment("web", env.namespace).status
                                                 .available_replicas or 0) == 3, 60)
    time.sleep(4)  # longer than the run duration: restartPolicy Always keeps running
    pods = env.core.list_namespaced_pod(env.namespace, label_selector="test=web").items
    assert len(pods) == 3 and all(p.status.phase == "Running" for p in pods)
    assert all(p.status.container_statuses[0].ready and p.status.container_statuses[0].restart_count == 0
               for p in pods)
    apps.patch_namespaced_deployment_scale("web", env.namespace, {"spec": {"replicas": 1}})
    # without a kubelet, deleted pods would stay Terminating forever: the agent must finish them off
    wait_until("scale-down to one pod", lambda: len(env.core.list_namespaced_pod(
        env.namespace, label_selector="test=web").items) == 1, 60)
    left = env.core.list_namespaced_pod(env.namespace, label_selector="test=web").items
    assert left[0].status.phase == "Running" and left[0].metadata.deletion_timestamp is None


class PodRecorder:
    """Records every status a test watch sees for pods with a label, in a thread."""

    def __init__(self, env: Env, selector: str) -> None:
        self.env = env
        self.selector = selector
        self.seen: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        w = watch.Watch()
        while not self.stop.is_set():
            for ev in w.stream(self.env.core.list_namespaced_pod, self.env.namespace,
                               label_selector=self.selector, timeout_seconds=5):
                pod = ev["object"]
                cs = (pod.status.container_statuses or [None])[0]
                self.seen[pod.metadata.uid].append({
                    "phase": pod.status.phase, "ip": pod.status.pod_ip,
                    "started": cs.state.running.started_at if cs and cs.state.running else None,
                    "restarts": cs.restart_count if cs else 0, "name": pod.metadata.name})
                if self.stop.is_set():
                    break


def test_agent_killed_and_restarted_mid_run_loses_and_repeats_nothing(env: Env) -> None:
    before = {n.metadata.name: next(c.last_transition_time for c in n.status.conditions if c.type == "Ready")
              for n in env.nodes()}
    recorder = PodRecorder(env, "test=restart")
    _job(env, "restart", 10, {"hollowscale.io/run-duration": "8s", "hollowscale.io/startup-delay": "1s"})
    wait_until("some pods Running", lambda: sum(p.status.phase == "Running" for p in env.core.list_namespaced_pod(
        env.namespace, label_selector="test=restart").items) >= 3, 60, every=0.2)
    assert env.agent is not None
    env.agent.kill()  # SIGKILL: no goodbye
    time.sleep(3)
    env.start()
    job = wait_until("Job restart Complete", lambda: _job_condition(env, "restart", "Complete"), 120)
    recorder.stop.set()
    recorder.thread.join(15)
    assert job.status.succeeded == 10 and not job.status.failed
    assert len(recorder.seen) == 10
    order = {None: 0, "Pending": 0, "Running": 1, "Succeeded": 2, "Failed": 2}
    for uid, states in recorder.seen.items():
        assert states[-1]["phase"] == "Succeeded", (uid, states)
        phases = [order[s["phase"]] for s in states]
        assert phases == sorted(phases), states  # never backwards
        starts = {s["started"] for s in states if s["started"] is not None}
        ips = {s["ip"] for s in states if s["ip"]}
        assert len(starts) == 1 and len(ips) == 1, states  # started once, one IP: no repeated transition
        assert all(s["restarts"] == 0 for s in states)
    after = {n.metadata.name: next(c.last_transition_time for c in n.status.conditions if c.type == "Ready")
             for n in env.nodes()}
    assert after == before  # re-adopted: no node re-created, no Ready flap
    metrics = env.agent.metrics() if env.agent else {}
    assert metrics.get('hollow_node_registrations_total{result="adopted"}') == NODES


def test_node_whose_heartbeats_stop_turns_notready_and_back(env: Env) -> None:
    assert env.agent is not None
    answer = env.agent.post("/faults/heartbeat-loss", {"fraction": 1 / NODES, "duration_s": 70, "seed": 1})
    assert answer["count"] == 1
    name = answer["nodes"][0]
    t0 = time.monotonic()

    def node() -> client.V1Node:
        return env.core.read_node(name)

    wait_until(f"{name} NotReady", lambda: not ready(node()), 180, every=1.0)
    went_down = time.monotonic() - t0
    assert went_down >= 35, went_down  # the controller-manager's 50 s grace decides, not us (from below only)
    wait_until(f"{name} tainted unreachable", lambda: any(
        t.key == "node.kubernetes.io/unreachable" for t in node().spec.taints or ()), 20, every=1.0)
    others = [n for n in env.nodes() if n.metadata.name != name]
    assert all(ready(n) for n in others)
    wait_until(f"{name} Ready again", lambda: ready(node()), 70 - (time.monotonic() - t0) + 30, every=1.0)
    wait_until(f"{name} untainted", lambda: not any(
        t.key.startswith("node.kubernetes.io/") for t in node().spec.taints or ()), 30, every=1.0)


def test_delete_nodes_on_exit(env: Env) -> None:
    assert env.agent is not None
    assert env.agent.stop() == 0
    env.agent = None
    assert env.nodes() == []
    coord = client.CoordinationV1Api(env.api)
    assert not [x for x in coord.list_namespaced_lease("kube-node-lease").items
                if x.metadata.name.startswith(env.pool + "-")]
