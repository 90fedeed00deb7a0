"""How the run's pods are networked in the driver cluster, and how the harness reaches them.

The in-cluster placement runs the same pods (``deploy/hollowscale/base``) on two kinds of driver, which
differ in their network, and this is the one place that knows how:

* :class:`HostNetwork`: the local cluster's real nodes.  The local cluster runs no kube-proxy and its
  apiserver listens on 127.0.0.1 only, so every pod uses the host network (``overlays/local-real-nodes``):
  each listens on 127.0.0.1 at a port the run chose free, the pods reach the apiserver at its loopback
  address, and so does the harness reach the pods.
* :class:`PodNetwork`: a cluster with a pod network, kube-proxy and DNS (kind's workers,
  ``overlays/kind-workers``).  The pods keep their own IPs and the base's ports and reach the apiserver
  through the ``kubernetes`` Service; the harness, outside the cluster, reaches Locust's web API,
  Prometheus and each agent's control port through NodePort Services at a node's address (kind's nodes are
  containers on a network this machine routes to).

:func:`network_for` picks one from the cluster's real nodes: a cluster that routes no Service to its pods
(``RealNodeAccess.pod_apiserver`` given) needs the host network.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import requests

from hollowscale.cluster.realnode.access import RealNodeAccess
from hollowscale.placements.incluster.render import DEPLOY_DIR, LOCAL_OVERLAY, Ports
from kubecore.namespaces import RUN_LABEL

KIND_OVERLAY = DEPLOY_DIR / "overlays" / "kind-workers"
#: the base's ports (deploy/hollowscale/base)
AGENT_PORT, LOCUST_WEB_PORT, PROMETHEUS_PORT = 8080, 8089, 9090
#: the apiserver as a pod on a pod network reaches it
IN_CLUSTER_SERVER = "https://kubernetes.default.svc:443"


class DriverNetworkError(RuntimeError):
    """The harness cannot reach the run's pods (a Service without its node port, no node address)."""


class DriverNetwork(Protocol):
    """One way of networking the run's pods (module docstring)."""

    @property
    def overlay(self) -> Path:
        """The shipped overlay the run renders over (``deploy/hollowscale/overlays/...``)."""
        ...

    @property
    def description(self) -> str:
        """What the report says the driver was."""
        ...

    @property
    def pod_server(self) -> str:
        """The target apiserver's URL as the pods reach it."""
        ...

    def choose_ports(self, shards: int) -> Ports | None:
        """The host ports of a host network (None: the base's own ports on the pods' IPs)."""
        ...

    def extra_objects(self, shards: int) -> list[dict[str, Any]]:
        """Objects of the run beside the overlay's (the run's namespace and label are added to them)."""
        ...

    def discover(self, http: requests.Session, server: str, namespace: str, run_id: str) -> None:
        """Once the pods are Ready: learn where the harness reaches them."""
        ...

    def agent_addresses(self, shards: int) -> list[str]:
        """Each agent shard's control server as ``host:port`` for the harness."""
        ...

    def locust_web(self) -> str:
        """The Locust master's web API, as a URL for the harness."""
        ...

    def prometheus(self) -> str:
        """The run's Prometheus, as a URL for the harness."""
        ...


class HostNetwork:
    """Pods on the nodes' own network, each at a port of 127.0.0.1 the run chose free (module docstring)."""

    def __init__(self, apiserver: tuple[str, int], free_ports: Callable[[int], int]) -> None:
        """``apiserver``: its loopback address; ``free_ports(count)``: the first of ``count`` consecutive free
        ports on 127.0.0.1 (:func:`~.deployment.consecutive_free_ports`)."""
        self.apiserver = apiserver
        self._free_ports = free_ports
        self.ports: Ports | None = None

    @property
    def overlay(self) -> Path:
        return LOCAL_OVERLAY

    @property
    def description(self) -> str:
        return "local cluster real nodes (overlays/local-real-nodes)"

    @property
    def pod_server(self) -> str:
        host, port = self.apiserver
        return f"https://{host}:{port}"

    def choose_ports(self, shards: int) -> Ports | None:
        base = self._free_ports(shards + 3)  # agents, then master, web, Prometheus
        self.ports = Ports(base, base + shards, base + shards + 1, base + shards + 2)
        return self.ports

    def extra_objects(self, shards: int) -> list[dict[str, Any]]:
        return []

    def discover(self, http: requests.Session, server: str, namespace: str, run_id: str) -> None:
        return None  # the ports were chosen before the pods existed

    def _ports(self) -> Ports:
        if self.ports is None:
            raise DriverNetworkError("the host ports are chosen when the pods are rendered")
        return self.ports

    def agent_addresses(self, shards: int) -> list[str]:
        return [f"127.0.0.1:{self._ports().agent_base + i}" for i in range(shards)]

    def locust_web(self) -> str:
        return f"http://127.0.0.1:{self._ports().locust_web}"

    def prometheus(self) -> str:
        return f"http://127.0.0.1:{self._ports().prometheus}"


def agent_service_name(shard: int) -> str:
    """The NodePort Service of agent shard ``shard``'s control port."""
    return f"hollow-agent-{shard}-control"


def agent_services(shards: int) -> list[dict[str, Any]]:
    """A NodePort Service per agent shard, selecting that one pod (the StatefulSet's pod-name label)."""
    return [{"apiVersion": "v1", "kind": "Service",
             "metadata": {"name": agent_service_name(i), "labels": {"app.kubernetes.io/name": "hollow-agent"}},
             "spec": {"type": "NodePort", "selector": {"statefulset.kubernetes.io/pod-name": f"hollow-agent-{i}"},
                      "ports": [{"name": "control", "port": AGENT_PORT, "targetPort": AGENT_PORT}]}}
            for i in range(shards)]


def node_port(service: dict[str, Any], port: int) -> int:
    """The node port the API server gave ``service``'s ``port``."""
    for p in (service.get("spec") or {}).get("ports") or []:
        if p.get("port") == port and p.get("nodePort"):
            return int(p["nodePort"])
    raise DriverNetworkError(f"Service {service['metadata']['name']} has no node port for its port {port}")


def node_address(nodes: list[dict[str, Any]]) -> str:
    """An InternalIP of the first Ready node among ``nodes`` (the driver's own nodes), for node ports."""
    for node in nodes:
        status = node.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        ips = [a["address"] for a in status.get("addresses") or [] if a.get("type") == "InternalIP"]
        if ready and ips:
            return f"[{ips[0]}]" if ":" in ips[0] else ips[0]
    raise DriverNetworkError("no Ready node of the driver has an InternalIP to reach its node ports at")


class PodNetwork:
    """Pods on the cluster's pod network, reached through NodePort Services (module docstring)."""

    def __init__(self, node_selector: str = "hollowscale.io/node-kind=real") -> None:
        """``node_selector``: the driver's nodes (the overlay's), one of whose addresses the harness uses."""
        self.node_selector = node_selector
        self.host: str | None = None
        self.ports: dict[str, int] = {}

    @property
    def overlay(self) -> Path:
        return KIND_OVERLAY

    @property
    def description(self) -> str:
        return "kind workers on the pod network (overlays/kind-workers)"

    @property
    def pod_server(self) -> str:
        return IN_CLUSTER_SERVER

    def choose_ports(self, shards: int) -> Ports | None:
        return None

    def extra_objects(self, shards: int) -> list[dict[str, Any]]:
        return agent_services(shards)

    def discover(self, http: requests.Session, server: str, namespace: str, run_id: str) -> None:
        got = http.get(f"{server}/api/v1/namespaces/{namespace}/services",
                       params={"labelSelector": f"{RUN_LABEL}={run_id}"}, timeout=30)
        got.raise_for_status()
        services = {s["metadata"]["name"]: s for s in got.json().get("items") or []}
        wanted = {"locust-master": LOCUST_WEB_PORT, "prometheus": PROMETHEUS_PORT}
        wanted.update({name: AGENT_PORT for name in services if name.startswith("hollow-agent-")
                       and name.endswith("-control")})
        missing = sorted(set(wanted) - set(services))
        if missing:
            raise DriverNetworkError(f"Services of the run missing in {namespace}: {', '.join(missing)}")
        self.ports = {name: node_port(services[name], port) for name, port in wanted.items()}
        nodes = http.get(f"{server}/api/v1/nodes", params={"labelSelector": self.node_selector}, timeout=30)
        nodes.raise_for_status()
        self.host = node_address(nodes.json().get("items") or [])

    def _at(self, service: str) -> str:
        if self.host is None or service not in self.ports:
            raise DriverNetworkError(f"{service}: node ports are known once the pods are Ready (discover)")
        return f"{self.host}:{self.ports[service]}"

    def agent_addresses(self, shards: int) -> list[str]:
        return [self._at(agent_service_name(i)) for i in range(shards)]

    def locust_web(self) -> str:
        return f"http://{self._at('locust-master')}"

    def prometheus(self) -> str:
        return f"http://{self._at('prometheus')}"


def network_for(real_nodes: RealNodeAccess, free_ports: Callable[[int], int]) -> DriverNetwork:
    """The host network where the cluster routes no Service to its pods (the local cluster), else the pod
    network."""
    apiserver = real_nodes.pod_apiserver
    return HostNetwork(apiserver, free_ports) if apiserver is not None else PodNetwork()
