"""Gang members wait for each other (real control plane, real scheduler, real agents).

Two hollow nodes with 8 GPUs each; a gang of two members of 8 GPUs (``hollowscale.io/gang-min: "2"``,
run duration 3 s).  While only one member can run, it stays Running past its run duration, holding
its node; once the second runs, both finish about 3 s later.  Once with one agent and a blocker pod
that holds the second node, once with two agent shards (one node each) and the members in two Jobs
(a student and a teacher), so the barrier is seen across agents.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from waiting import wait_until

from hollow.process import AgentProcess, start_agent
from kubecore.config import client_configuration

pytestmark = pytest.mark.integration

TAINT = "hollowscale.io/test"
GANG = "hollowscale.io/gang"
GANG_MIN = "hollowscale.io/gang-min"
RUN_S = 3
ARTIFACTS = Path(__file__).parent.parent / ".artifacts"


class Env:
    """A namespace, a 2-node pool of 8-GPU nodes and the agents that run it."""

    def __init__(self, kubeconfig: str, tmp: Path, shards: int) -> None:
        self.prefix = f"hgb{uuid.uuid4().hex[:5]}"
        self.pool = f"{self.prefix}-h100"
        self.ns = f"{self.prefix}-ns"
        self.api = client.ApiClient(client_configuration(kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        pools_file = tmp / "pools.yaml"
        pools_file.write_text(yaml.safe_dump({"pools": [{
            "name": self.pool, "count": 2,
            "resources": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"},
            "taints": [{"key": TAINT, "value": self.prefix, "effect": "NoSchedule"}],
            "lifecycle": {"run_duration": "forever"},
        }]}))
        self.core.create_namespace({"metadata": {"name": self.ns}})
        self.agents: list[AgentProcess] = []
        for i in range(shards):
            self.agents.append(start_agent(kubeconfig, pools_file, ARTIFACTS / f"hollow-{self.prefix}" / f"shard-{i}.log",
                                           "--shard", f"{i}/{shards}", "--delete-nodes-on-exit"))
        for agent in self.agents:
            agent.wait_healthy(60)
        wait_until("default service account", lambda: self.core.list_namespaced_service_account(
            self.ns, field_selector="metadata.name=default").items, 60)
        wait_until("2 nodes Ready and schedulable", lambda: len(
            [n for n in self.core.list_node(label_selector=f"hollowscale.io/pool={self.pool}").items
             if schedulable(n)]) == 2, 60)

    def close(self) -> None:
        for agent in self.agents:
            agent.stop()
        self.core.delete_namespace(self.ns)
        for node in self.core.list_node(label_selector=f"hollowscale.io/pool={self.pool}").items:
            self.core.delete_node(node.metadata.name)

    def template(self, labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
        return {"metadata": {"labels": labels, "annotations": annotations},
                "spec": {"restartPolicy": "Never", "nodeSelector": {"hollowscale.io/pool": self.pool},
                         "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
                         "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "main", "image": "registry.invalid/trainer:1",
                                         "resources": {"requests": {"nvidia.com/gpu": "8"},
                                                       "limits": {"nvidia.com/gpu": "8"}}}]}}

    def member(self, gang: str) -> dict[str, Any]:
        return self.template({GANG: gang}, {GANG_MIN: "2", "hollowscale.io/run-duration": f"{RUN_S}s"})

    def pod(self, name: str) -> client.V1Pod:
        return self.core.read_namespaced_pod(name, self.ns)


def schedulable(node: client.V1Node) -> bool:
    # Ready, and the not-ready taint of a new node already lifted (until then the scheduler skips it)
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or ()) and not any(
        t.key.startswith("node.kubernetes.io/") for t in node.spec.taints or ())


def ts(value: datetime) -> float:
    return value.timestamp()


def finished(pod: client.V1Pod) -> float:
    return ts(pod.status.container_statuses[0].state.terminated.finished_at)


@pytest.fixture
def one_agent(cluster: Any, tmp_path: Path) -> Iterator[Env]:
    env = Env(str(cluster.kubeconfig), tmp_path, 1)
    try:
        yield env
    finally:
        env.close()


@pytest.fixture
def two_shards(cluster: Any, tmp_path: Path) -> Iterator[Env]:
    env = Env(str(cluster.kubeconfig), tmp_path, 2)
    try:
        yield env
    finally:
        env.close()


def test_first_member_holds_its_node_until_the_second_runs(one_agent: Env) -> None:
    env = one_agent
    blocker = env.template({}, {"hollowscale.io/run-duration": "forever"})
    env.core.create_namespaced_pod(env.ns, {**blocker, "metadata": {**blocker["metadata"], "name": "blocker"}})
    wait_until("blocker Running", lambda: env.pod("blocker").status.phase == "Running", 30)
    for name in ("m0", "m1"):
        body = env.member("g1")
        env.core.create_namespaced_pod(env.ns, {**body, "metadata": {**body["metadata"], "name": name}})
    first = wait_until("one member Running", lambda: next(
        (p for p in (env.pod("m0"), env.pod("m1")) if p.status.phase == "Running"), None), 30)
    second = "m1" if first.metadata.name == "m0" else "m0"
    started = ts(first.status.start_time)
    # well past its run duration: still Running (holding its 8 GPUs), the other member still Pending
    time.sleep(max(0.0, started + RUN_S + 2.5 - time.time()))
    assert env.pod(first.metadata.name).status.phase == "Running"
    assert env.pod(second).status.phase == "Pending"
    env.core.delete_namespaced_pod("blocker", env.ns)
    wait_until("both members Succeeded", lambda: all(
        env.pod(n).status.phase == "Succeeded" for n in ("m0", "m1")), 40)
    a, b = env.pod(first.metadata.name), env.pod(second)
    barrier = ts(b.status.start_time)
    assert barrier - started >= RUN_S + 2  # the second member started long after the first one's run would have ended
    for pod in (a, b):  # both ran their whole RUN_S after the barrier, none before it (whole-second timestamps;
        # bounded from below only: how late a loaded machine ends them says nothing about the barrier)
        assert finished(pod) - barrier >= RUN_S - 1, (pod.metadata.name, finished(pod) - barrier)
    assert finished(a) - started >= 2 * RUN_S


def test_members_on_two_shards_see_each_other(two_shards: Env) -> None:
    env = two_shards
    nodes = sorted(n.metadata.name for n in env.core.list_node(label_selector=f"hollowscale.io/pool={env.pool}").items)
    assert [a.metrics()["hollow_nodes_managed"] for a in env.agents] == [1, 1]
    # a student and its teacher in two Jobs; 8 GPUs each, so they land on different nodes (= shards)
    for job in ("student", "teacher"):
        template = env.member("distill-0")
        env.batch.create_namespaced_job(env.ns, {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": job, "labels": {GANG: "distill-0"}},
            "spec": {"completions": 1, "parallelism": 1, "backoffLimit": 0, "template": template}})
        if job == "student":
            student = wait_until("student Running", lambda: next(
                (p for p in env.core.list_namespaced_pod(env.ns, label_selector="job-name=student").items
                 if p.status.phase == "Running"), None), 30)
            started = ts(student.status.start_time)
            time.sleep(max(0.0, started + RUN_S + 2.5 - time.time()))
            assert env.core.read_namespaced_pod(student.metadata.name, env.ns).status.phase == "Running"

    def done() -> list[client.V1Pod] | None:
        pods = env.core.list_namespaced_pod(env.ns, label_selector=GANG).items
        return pods if len(pods) == 2 and all(p.status.phase == "Succeeded" for p in pods) else None

    pods = {p.metadata.labels["job-name"]: p for p in wait_until("both Jobs' pods Succeeded", done, 40)}
    assert sorted(p.spec.node_name for p in pods.values()) == nodes  # one member on each shard's node
    barrier = ts(pods["teacher"].status.start_time)
    for pod in pods.values():  # both ran their whole RUN_S after the barrier (from below only, as above)
        assert finished(pod) - barrier >= RUN_S - 1, (pod.metadata.name, finished(pod) - barrier)
    metrics = [a.metrics() for a in env.agents]
    assert [m.get('hollow_pod_transitions_total{phase="Succeeded"}', 0.0) for m in metrics] == [1.0, 1.0]
    # each agent saw both members on its gang watch (ADDED from the list or the watch, then updates)
    for m in metrics:
        assert sum(v for k, v in m.items() if k.startswith('hollow_watch_events_total{resource="gang_pods"')) >= 2
