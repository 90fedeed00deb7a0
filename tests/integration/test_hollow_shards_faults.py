"""Two shards behave as one agent, and the pod-failure fault crashes running pods (real control plane)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from waiting import wait_until

from hollow.process import AgentProcess, start_agent
from kubecore.config import client_configuration

pytestmark = pytest.mark.integration

NODES = 20
ARTIFACTS = Path(__file__).parent.parent / ".artifacts"



@pytest.fixture(scope="module")
def shards(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[client.ApiClient, str, str,
                                                                                         list[AgentProcess]]]:
    prefix = f"hss{uuid.uuid4().hex[:5]}"
    pool = f"{prefix}-a100"
    pools_file = tmp_path_factory.mktemp("shards") / "pools.yaml"
    pools_file.write_text(yaml.safe_dump({"pools": [{
        "name": pool, "count": NODES,
        "resources": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"},
        "taints": [{"key": "hollowscale.io/test", "value": prefix, "effect": "NoSchedule"}],
        "lifecycle": {"run_duration": "forever"},
    }]}))
    api = client.ApiClient(client_configuration(str(cluster.kubeconfig)))
    core = client.CoreV1Api(api)
    ns = f"{prefix}-ns"
    core.create_namespace({"metadata": {"name": ns}})
    wait_until("default service account", lambda: core.list_namespaced_service_account(
        ns, field_selector="metadata.name=default").items, 60)
    agents = [start_agent(cluster.kubeconfig, pools_file, ARTIFACTS / f"hollow-{prefix}" / f"shard-{i}.log",
                          "--shard", f"{i}/2", "--delete-nodes-on-exit") for i in range(2)]
    try:
        for agent in agents:
            agent.wait_healthy(60)
        yield api, pool, ns, agents
    finally:
        for agent in agents:
            agent.stop()
        core.delete_namespace(ns)
        for node in core.list_node(label_selector=f"hollowscale.io/pool={pool}").items:
            core.delete_node(node.metadata.name)


def test_two_shards_split_the_pool_and_run_one_job(shards: Any) -> None:
    api, pool, ns, agents = shards
    core = client.CoreV1Api(api)
    managed = [a.metrics()["hollow_nodes_managed"] for a in agents]
    assert sum(managed) == NODES and min(managed) >= NODES // 2 - 1

    def schedulable(n: client.V1Node) -> bool:
        # Ready, and the not-ready taint that admission puts on every new node already lifted by the
        # node lifecycle controller (until then the scheduler skips the node)
        return any(c.type == "Ready" and c.status == "True" for c in n.status.conditions) and not any(
            t.key.startswith("node.kubernetes.io/") for t in n.spec.taints or ())

    nodes = wait_until("all nodes Ready and schedulable", lambda: (lambda items: items if len(items) == NODES and all(
        schedulable(n) for n in items) else None)(core.list_node(label_selector=f"hollowscale.io/pool={pool}").items), 60)
    assert len({n.metadata.name for n in nodes}) == NODES
    batch = client.BatchV1Api(api)
    batch.create_namespaced_job(ns, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "spread"},
        "spec": {"completions": NODES, "parallelism": NODES, "template": {
            "metadata": {"annotations": {"hollowscale.io/run-duration": "1s"}},
            "spec": {"restartPolicy": "Never", "nodeSelector": {"hollowscale.io/pool": pool},
                     "tolerations": [{"key": "hollowscale.io/test", "operator": "Exists"}],
                     "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                                    "whenUnsatisfiable": "DoNotSchedule",
                                                    "labelSelector": {"matchLabels": {"job-name": "spread"}}}],
                     "containers": [{"name": "main", "image": "registry.invalid/w:1"}]}}}})
    # one pod per node (maxSkew 1 over hostnames), so both shards' nodes get work
    wait_until("Job spread Complete", lambda: (batch.read_namespaced_job("spread", ns).status.succeeded or 0) == NODES,
               60)
    transitions = [a.metrics().get('hollow_pod_transitions_total{phase="Succeeded"}', 0.0) for a in agents]
    placed = sorted(p.spec.node_name for p in core.list_namespaced_pod(ns, label_selector="job-name=spread").items)
    assert len(set(placed)) == NODES
    assert transitions == [NODES / 2, NODES / 2], (transitions, placed)  # each shard ran its own nodes' pods


def test_pod_failure_fault_crashes_running_pods(shards: Any) -> None:
    api, pool, ns, agents = shards
    core = client.CoreV1Api(api)
    batch = client.BatchV1Api(api)
    batch.create_namespaced_job(ns, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "victims"},
        "spec": {"completions": 4, "parallelism": 4, "backoffLimit": 20, "template": {
            "metadata": {"annotations": {"hollowscale.io/run-duration": "forever"}},
            "spec": {"restartPolicy": "Never", "nodeSelector": {"hollowscale.io/pool": pool},
                     "tolerations": [{"key": "hollowscale.io/test", "operator": "Exists"}],
                     "containers": [{"name": "main", "image": "registry.invalid/w:1"}]}}}})

    def running() -> list[client.V1Pod]:
        return [p for p in core.list_namespaced_pod(ns, label_selector="job-name=victims").items
                if p.status.phase == "Running"]

    wait_until("4 victims Running", lambda: len(running()) == 4, 60)
    answers = [a.post("/faults/pod-failures", {"fraction": 1.0, "exit_code": 137, "duration_s": 0}) for a in agents]
    crashed = sorted(name for ans in answers for name in ans["failed_now"])
    assert len(crashed) == 4 and all(ans["exit_code"] == 137 for ans in answers)

    def failed() -> list[client.V1Pod]:
        return [p for p in core.list_namespaced_pod(ns, label_selector="job-name=victims").items
                if p.status.phase == "Failed"]

    wait_until("4 victims Failed", lambda: len(failed()) == 4, 30)
    for pod in failed():
        assert f"{ns}/{pod.metadata.name}" in crashed
        assert pod.status.container_statuses[0].state.terminated.exit_code == 137
    # the Job controller counts the crashes (it replaces them after its own exponential backoff)
    wait_until("Job counts 4 failures", lambda: (batch.read_namespaced_job("victims", ns).status.failed or 0) == 4, 30)
