"""Topology on hollow nodes against the real control plane: labels, unhealthy nodes, and the spread factor.

One agent runs a pool of 6 nodes in 3 racks of 2 (levels rack > host), one node kept NotReady and
one tainted.  A gang of two placed (by the real scheduler, through a hostname node selector) on two
nodes of one rack runs its drawn run time; one placed on two racks runs ``SPREAD`` times as long
(spread factor ``cluster``), and both carry the TopologySpread condition saying so, read back from
the API.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from waiting import wait_until

from hollow.nodebody import NOT_READY_REASON
from hollow.pools import UNHEALTHY_TAINT
from hollow.process import AgentProcess, start_agent
from hollow.topology import SPREAD_CONDITION
from kubecore.config import client_configuration

pytestmark = pytest.mark.integration

TAINT = "hollowscale.io/test"
GANG = "hollowscale.io/gang"
GANG_MIN = "hollowscale.io/gang-min"
RACK = "example.com/rack"
RUN_S = 2
SPREAD = 3.0
ARTIFACTS = Path(__file__).parent.parent / ".artifacts"


class Env:
    """A namespace, the 6-node pool and its agent."""

    def __init__(self, kubeconfig: str, tmp: Path) -> None:
        self.prefix = f"hts{uuid.uuid4().hex[:5]}"
        self.pool = f"{self.prefix}-gpu"
        self.ns = f"{self.prefix}-ns"
        self.api = client.ApiClient(client_configuration(kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.coord = client.CoordinationV1Api(self.api)
        pools_file = tmp / "pools.yaml"
        pools_file.write_text(yaml.safe_dump({"pools": [{
            "name": self.pool, "count": 6,
            "resources": {"cpu": "96", "memory": "1Ti"},
            "taints": [{"key": TAINT, "value": self.prefix, "effect": "NoSchedule"}],
            "lifecycle": {"run_duration": "forever"},
            "topology": {"levels": [{"name": "rack", "label": RACK, "fanout": 2},
                                    {"name": "host", "label": "kubernetes.io/hostname"}],
                         "spread_factors": {"rack": 1.0, "cluster": SPREAD},
                         "unhealthy": {"not_ready": 1, "tainted": 1}},
        }]}))
        self.core.create_namespace({"metadata": {"name": self.ns}})
        self.agent: AgentProcess = start_agent(kubeconfig, pools_file, ARTIFACTS / f"hollow-{self.prefix}" / "agent.log",
                                               "--delete-nodes-on-exit")
        self.agent.wait_healthy(60)
        wait_until("default service account", lambda: self.core.list_namespaced_service_account(
            self.ns, field_selector="metadata.name=default").items, 60)
        wait_until("6 nodes registered, 5 of them Ready without the not-ready taint", lambda: len(
            [n for n in self.nodes() if schedulable(n)]) == 5 and len(self.nodes()) == 6, 60)

    def nodes(self) -> list[client.V1Node]:
        return list(self.core.list_node(label_selector=f"hollowscale.io/pool={self.pool}").items)

    def close(self) -> None:
        self.agent.stop()
        self.core.delete_namespace(self.ns)
        for node in self.nodes():
            self.core.delete_node(node.metadata.name)

    def member(self, name: str, gang: str, node: str) -> None:
        self.core.create_namespaced_pod(self.ns, {
            "metadata": {"name": name, "labels": {GANG: gang},
                         "annotations": {GANG_MIN: "2", "hollowscale.io/run-duration": f"{RUN_S}s"}},
            "spec": {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": node},
                     "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.invalid/trainer:1"}]}})

    def pod(self, name: str) -> client.V1Pod:
        return self.core.read_namespaced_pod(name, self.ns)


def ready(node: client.V1Node) -> client.V1NodeCondition | None:
    return next((c for c in node.status.conditions or () if c.type == "Ready"), None)


def schedulable(node: client.V1Node) -> bool:
    cond = ready(node)
    return cond is not None and cond.status == "True" and not any(
        t.key.startswith("node.kubernetes.io/") for t in node.spec.taints or ())


def ts(value: datetime) -> float:
    return value.timestamp()


@pytest.fixture
def env(cluster: Any, tmp_path: Path) -> Iterator[Env]:
    e = Env(str(cluster.kubeconfig), tmp_path)
    try:
        yield e
    finally:
        e.close()


def test_gang_across_racks_runs_spread_factor_times_longer(env: Env) -> None:
    nodes = env.nodes()
    conditions = {n.metadata.name: ready(n) for n in nodes}
    not_ready = [n for n in nodes if getattr(conditions[n.metadata.name], "status", None) == "False"]
    assert len(not_ready) == 1 and getattr(conditions[not_ready[0].metadata.name], "reason", None) == NOT_READY_REASON
    # kept NotReady, yet its Lease is renewed: nothing deletes it
    name = not_ready[0].metadata.name
    leases = wait_until("its Lease", lambda: env.coord.list_namespaced_lease(
        "kube-node-lease", field_selector=f"metadata.name={name}").items, 30)
    assert leases[0].spec.holder_identity == name
    key, value, effect = UNHEALTHY_TAINT
    tainted = [n for n in nodes if any((t.key, t.value, t.effect) == (key, value, effect)
                                       for t in n.spec.taints or ())]
    assert len(tainted) == 1 and tainted[0] is not not_ready[0]
    healthy = sorted((n for n in nodes if n not in not_ready and n not in tainted),
                     key=lambda n: int(n.metadata.name.rsplit("-", 1)[1]))
    racks: dict[str, list[str]] = {}
    for n in healthy:
        racks.setdefault(n.metadata.labels[RACK], []).append(n.metadata.name)
    assert {n.metadata.labels[RACK] for n in nodes} == {f"{env.pool}-rack{k}" for k in range(3)}
    same = next(names for names in racks.values() if len(names) == 2)  # 2 bad nodes leave a whole rack
    apart = [names[0] for names in racks.values()][:2]
    for i, node in enumerate(same):
        env.member(f"packed-{i}", "packed", node)
    for i, node in enumerate(apart):
        env.member(f"spread-{i}", "spread", node)
    names = ["packed-0", "packed-1", "spread-0", "spread-1"]
    wait_until("all four members Succeeded", lambda: all(env.pod(n).status.phase == "Succeeded" for n in names), 60)
    pods = {n: env.pod(n) for n in names}
    for gang, level, factor in (("packed", "rack", 1.0), ("spread", "cluster", SPREAD)):
        members = [pods[f"{gang}-{i}"] for i in range(2)]
        barrier = max(ts(p.status.start_time) for p in members)
        for p in members:
            cond = next(c for c in p.status.conditions if c.type == SPREAD_CONDITION)
            assert (cond.status, cond.reason, cond.message) == ("True", level, f"factor={factor:g}"), p.metadata.name
            ran = ts(p.status.container_statuses[0].state.terminated.finished_at) - barrier
            # bounded from below only (whole-second timestamps): a loaded machine may end them late,
            # never early; without the factor the spread gang would end after RUN_S (2 s), not 6 s
            assert ran >= factor * RUN_S - 1, (p.metadata.name, ran)
