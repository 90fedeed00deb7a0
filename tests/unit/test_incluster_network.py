"""The in-cluster placement's two driver networks (:mod:`hollowscale.placements.incluster.network`): which one a
cluster's real nodes call for, where the pods reach the apiserver, and where the harness reaches the pods.

``discover`` reads the run's Services and the driver's nodes; here it reads them from a fake session that
answers those two GETs with objects shaped as the API server returns them (the real API server is in
``tests/integration/test_run_incluster_kind.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hollowscale.cluster.kind import KindCluster, KindRealNodes
from hollowscale.cluster.realnode.access import LocalRealNodes
from hollowscale.placements.incluster.network import (
    IN_CLUSTER_SERVER,
    KIND_OVERLAY,
    DriverNetworkError,
    HostNetwork,
    PodNetwork,
    agent_services,
    network_for,
    node_address,
)
from hollowscale.placements.incluster.render import LOCAL_OVERLAY


class _Answer:
    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc

    def raise_for_status(self) -> None:
        return None

    def json(self) -> dict[str, Any]:
        return self.doc


class _Session:
    """Answers GET .../services and GET /api/v1/nodes, recording what was asked."""

    def __init__(self, services: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        self.services, self.nodes = services, nodes
        self.asked: list[tuple[str, dict[str, str]]] = []

    def get(self, url: str, params: dict[str, str], timeout: float) -> _Answer:
        self.asked.append((url, params))
        return _Answer({"items": self.services if url.endswith("/services") else self.nodes})


def _service(name: str, ports: list[tuple[int, int]]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"type": "NodePort", "ports": [
        {"port": port, "nodePort": node_port} for port, node_port in ports]}}


def _node(name: str, ip: str, ready: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "addresses": [{"type": "Hostname", "address": name}, {"type": "InternalIP", "address": ip}]}}


def test_the_local_clusters_nodes_need_the_host_network_and_kinds_the_pod_network(tmp_path: Path) -> None:
    local = network_for(LocalRealNodes(("/run/a.sock",), ("127.0.0.1", 6443)), lambda n: 20000)
    assert isinstance(local, HostNetwork) and local.overlay == LOCAL_OVERLAY
    assert local.pod_server == "https://127.0.0.1:6443"
    kind = KindRealNodes(KindCluster(name="hollowscale", kubeconfig=tmp_path / "kc", created=True),
                         ("hollowscale-worker", "hollowscale-worker2"))
    pods = network_for(kind, lambda n: pytest.fail("a pod network chooses no host ports"))
    assert isinstance(pods, PodNetwork) and pods.overlay == KIND_OVERLAY
    assert pods.pod_server == IN_CLUSTER_SERVER  # the kubernetes Service, not the host's
    assert pods.choose_ports(2) is None


def test_host_network_addresses_are_the_chosen_loopback_ports() -> None:
    asked: list[int] = []
    net = HostNetwork(("127.0.0.1", 6443), lambda n: asked.append(n) or 30000)
    with pytest.raises(DriverNetworkError):
        net.locust_web()  # nothing chosen yet
    ports = net.choose_ports(2)
    assert asked == [5] and ports is not None  # 2 agents, the master, its web API, Prometheus
    assert net.agent_addresses(2) == ["127.0.0.1:30000", "127.0.0.1:30001"]
    assert (net.locust_web(), net.prometheus()) == ("http://127.0.0.1:30003", "http://127.0.0.1:30004")
    assert net.extra_objects(2) == []


def test_pod_network_reaches_each_shard_the_web_api_and_prometheus_at_node_ports() -> None:
    net = PodNetwork()
    assert [s["metadata"]["name"] for s in net.extra_objects(2)] == ["hollow-agent-0-control", "hollow-agent-1-control"]
    services = [_service("hollow-agent", []), _service("hollow-agent-0-control", [(8080, 31000)]),
                _service("hollow-agent-1-control", [(8080, 31001)]),
                _service("locust-master", [(5557, 31002), (8089, 31003)]), _service("prometheus", [(9090, 31004)])]
    session = _Session(services, [_node("w1", "10.89.0.3", ready=False), _node("w2", "10.89.0.4")])
    net.discover(session, "https://api", "hs-driver", "run-1")  # type: ignore[arg-type]
    assert session.asked == [("https://api/api/v1/namespaces/hs-driver/services",
                              {"labelSelector": "hollowscale.io/run=run-1"}),
                             ("https://api/api/v1/nodes", {"labelSelector": "hollowscale.io/node-kind=real"})]
    assert net.agent_addresses(2) == ["10.89.0.4:31000", "10.89.0.4:31001"]  # a Ready worker's address
    assert (net.locust_web(), net.prometheus()) == ("http://10.89.0.4:31003", "http://10.89.0.4:31004")


def test_pod_network_names_what_it_cannot_find() -> None:
    net = PodNetwork()
    with pytest.raises(DriverNetworkError, match="missing in hs-driver: prometheus"):
        net.discover(_Session([_service("locust-master", [(8089, 31003)])], [_node("w", "10.0.0.1")]),  # type: ignore[arg-type]
                     "https://api", "hs-driver", "r")
    with pytest.raises(DriverNetworkError, match="no node port for its port 8089"):
        net.discover(_Session([_service("locust-master", [(5557, 1)]), _service("prometheus", [(9090, 2)])],  # type: ignore[arg-type]
                              [_node("w", "10.0.0.1")]), "https://api", "hs-driver", "r")
    with pytest.raises(DriverNetworkError, match="no Ready node"):
        node_address([_node("w", "10.0.0.1", ready=False)])
    assert node_address([_node("w", "fd00::2")]) == "[fd00::2]"


def test_agent_services_select_one_shard_each() -> None:
    (svc,) = agent_services(1)
    assert svc["spec"] == {"type": "NodePort", "selector": {"statefulset.kubernetes.io/pod-name": "hollow-agent-0"},
                           "ports": [{"name": "control", "port": 8080, "targetPort": 8080}]}
