"""One run's in-cluster deployment: images, least-privilege credentials, the pods, their end.

What ``hollowscale run`` does with ``agents.placement: in-cluster`` (driver = the cluster's real nodes: the
local cluster's, or a kind cluster's workers; target = the same cluster, reached through its kubeconfig):

1. images: the agent and Prometheus images are built (cached by content) and put into every real node's
   container runtime (no registry: :class:`hollowscale.cluster.realnode.access.RealNodeAccess`);
2. the driver namespace is claimed (created by the run, or an existing one used as it is);
3. target side: ``deploy/hollowscale/target`` rendered with the run's suffix (ServiceAccounts,
   least-privilege roles, a RoleBinding per load namespace) and created; a short-lived token per
   ServiceAccount (TokenRequest) becomes the kubeconfig in the pods' Secrets;
4. driver side: the overlay of the driver's network (:mod:`~.network`: ``local-real-nodes`` on a host
   network with free host ports, ``kind-workers`` on a pod network with NodePort Services) rendered with the
   run's namespace, label, replicas, pools, load spec and Secrets, and created; then every pod must be Ready
   (a pod that cannot start ends the run with its reason and log), and the harness learns where it reaches
   them;
5. the load starts through the Locust master's web API once the hollow nodes are Ready;
6. teardown: the driver objects go first (each agent deletes its nodes when its pod is stopped), the
   run waits for its pods to be gone, deletes any hollow node of the scenario still there, then the
   target objects, then the namespace if the run created it.  Only what the run's record names is
   deleted (:class:`hollowscale.placements.incluster.objects.ObjectLedger`).
"""

from __future__ import annotations

import random
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
import yaml

from hollow.nodebody import NODE_LABEL
from hollowscale.cluster.realnode.access import LocalRealNodes, NoRealNodes, RealNodeAccess
from hollowscale.placements.incluster import pods as podwait
from hollowscale.placements.incluster.locustweb import LocustMaster
from hollowscale.placements.incluster.network import DriverNetwork, DriverNetworkError, network_for
from hollowscale.placements.incluster.objects import ObjectLedger
from hollowscale.placements.incluster.render import (
    RunManifestSettings,
    kustomize,
    place_target_objects,
    service_account,
    token_kubeconfig,
    without_secret_data,
    write_driver_kustomization,
    write_target_kustomization,
)
from hollowscale.scenario import Scenario
from kubecore.config import KubeEndpoint
from kubecore.namespaces import NamespaceClaim, claim_namespace, release_namespace
from kubecore.watch import list_all, session_for

Log = Callable[[str], None]


class InClusterError(RuntimeError):
    """The in-cluster placement cannot run here (what is missing and what to do)."""


def driver_namespace(sc: Scenario) -> str:
    """The namespace of the run's pods in the driver cluster."""
    return f"{sc.cluster.namespace}-driver"[:63]


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for the local ports of outgoing connections (``ip_local_port_range``)."""
    try:
        lo, hi = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def consecutive_free_ports(count: int, tries: int = 200, low: int = 10000) -> int:
    """The first of ``count`` consecutive loopback ports that were free a moment ago.

    Chosen below the ephemeral range: a port from it can be taken at any moment as the local end of
    some outgoing connection on this shared machine (an agent pod once failed to bind such a port),
    and the pods bind theirs only seconds later.
    """
    lo, hi = ephemeral_range()
    top = lo - count if lo - count > low else 65535 - count
    start = low if lo - count > low else hi + 1
    rng = random.Random()
    for _ in range(tries):
        base = rng.randint(start, top)
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise InClusterError(f"no {count} consecutive free ports on 127.0.0.1 after {tries} tries")


def local_real_nodes(kubeconfig: Path, server: str) -> RealNodeAccess:
    """The real nodes of the local cluster ``kubeconfig`` belongs to (its folder holds the cluster's state and
    the server matches), for ``cluster.backend: existing`` pointed at one; :class:`NoRealNodes` otherwise."""
    from hollowscale.cluster.local import LocalCluster

    try:
        info = LocalCluster(kubeconfig.resolve().parent).info()
    except Exception:  # not a local cluster folder at all
        return NoRealNodes()
    if info is None or info.server.rstrip("/") != server.rstrip("/") or not info.real_nodes:
        return NoRealNodes()
    return LocalRealNodes.at([str(n.containerd_socket) for n in info.real_nodes], server)


class InClusterDeployment:
    """The pods of one run's in-cluster placement and everything they need (see the module docstring)."""

    def __init__(self, sc: Scenario, endpoint: KubeEndpoint, kubeconfig: Path, run_id: str, run_dir: Path,
                 log: Log, real_nodes: RealNodeAccess | None = None) -> None:
        """``real_nodes``: the cluster's, as its backend knows them (kind's workers, the local cluster's);
        None or none known: those of the local cluster ``kubeconfig`` belongs to, if it is one."""
        self.sc = sc
        self.endpoint = endpoint
        self.kubeconfig = kubeconfig
        self.run_id = run_id
        self.dir = run_dir / "incluster"
        self.log = log
        self.http = session_for(endpoint, 4)
        self.server = endpoint.server
        self.settings: RunManifestSettings | None = None
        self.claim: NamespaceClaim | None = None
        self.target = ObjectLedger(self.http, self.server, self.dir / "created-target.json")
        self.driver = ObjectLedger(self.http, self.server, self.dir / "created-driver.json")
        self.timings: dict[str, float] = {}
        self.images: list[dict[str, Any]] = []
        self.pod_times: list[dict[str, Any]] = []
        self.teardown_facts: dict[str, Any] = {}
        self.real_nodes: RealNodeAccess = real_nodes if real_nodes is not None else NoRealNodes()
        self.network: DriverNetwork | None = None

    # ------------------------------------------------------------------------------------ setup
    def check(self) -> None:
        """The driver is the cluster's real nodes (its backend's, or the local cluster's behind ``existing``);
        they choose the network (:func:`~.network.network_for`)."""
        if not self.real_nodes.count:
            self.real_nodes = local_real_nodes(self.kubeconfig, self.server)
        if not self.real_nodes.count:
            raise InClusterError(
                f"agents.placement: in-cluster runs on the cluster's real nodes, and {self.kubeconfig} "
                f"({self.server}) has none hollowscale knows: use cluster.backend: kind (its workers), or start a "
                "local cluster with `hollowscale cluster up --real-nodes 1` and point cluster.kubeconfig at its "
                "kubeconfig (for another driver cluster, apply deploy/hollowscale/base yourself: see its "
                "kustomization.yaml)")
        self.network = network_for(self.real_nodes, consecutive_free_ports)

    def prepare_images(self) -> tuple[str, str]:
        """Build the agent and Prometheus images and put them into every real node; their names."""
        from hollowscale.images import build_images

        t = time.monotonic()
        built = build_images(["agent", "prometheus"], progress=self.log)
        self.timings["image_build_s"] = round(time.monotonic() - t, 3)
        t = time.monotonic()
        self.real_nodes.load_images(built, self.log)
        self.timings["image_import_s"] = round(time.monotonic() - t, 3)
        self.images = [{"name": b.name, "digest": b.digest, "size": b.size, "cached": b.cached} for b in built]
        return built[0].name, built[1].name

    def _token(self, namespace: str, name: str) -> str:
        seconds = max(600, int(self.sc.timeout_s) + 900)
        r = self.http.post(f"{self.server}/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                           json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                 "spec": {"expirationSeconds": seconds}}, timeout=30)
        if r.status_code not in (200, 201):
            raise InClusterError(f"TokenRequest for {namespace}/{name}: HTTP {r.status_code} {r.text[:300]}")
        return str(r.json()["status"]["token"])

    def deploy(self, sleep: Callable[[float], None], report: Callable[[int, int], None] | None = None) -> None:
        """Images, namespace, target RBAC and tokens, the driver's objects; every pod Ready."""
        t0 = time.monotonic()
        network = self.network
        assert network is not None, "check() chooses the network before deploy()"
        agent_image, prom_image = self.prepare_images()
        self.claim = claim_namespace(self.http, self.server, driver_namespace(self.sc), self.run_id, log=self.log)
        pod_server = network.pod_server
        self.settings = RunManifestSettings(
            namespace=self.claim.name, run_id=self.run_id, shards=self.sc.agents.shards,
            locust_workers=self.sc.agents.locust_workers, agent_image=agent_image, prometheus_image=prom_image,
            ports=network.choose_ports(self.sc.agents.shards), overlay=network.overlay,
            target_server=pod_server.split("://", 1)[1].rstrip("/"),
            load_namespaces=tuple(self.sc.namespaces), agent_args=tuple(self.sc.agents.args),
            scrape_interval_s=self.sc.measurements.scrape_interval_s,
            token_seconds=max(600, int(self.sc.timeout_s) + 900),
            delete_nodes_on_exit=self.sc.agents.delete_nodes_on_exit)
        s = self.settings
        self.dir.mkdir(parents=True, exist_ok=True)
        # the kustomizations hold the target's tokens and CA: in the run's own folder, not the temp folder
        with tempfile.TemporaryDirectory(prefix=".kustomize-", dir=self.dir) as scratch:
            target_docs = place_target_objects(kustomize(write_target_kustomization(Path(scratch) / "target", s)), s)
            self.log(f"in-cluster: creating {len(target_docs)} target object(s) (ServiceAccounts, least-privilege roles)")
            self.target.create_all(target_docs)
            ca = Path(self.endpoint.ca_file).read_text() if self.endpoint.ca_file else None
            tokens = {role: self._token(*service_account(target_docs, role)) for role in ("agent", "load", "metrics")}
            kubeconfigs = {f"hollowscale-target-{role}": token_kubeconfig(pod_server, ca, tokens[role],
                                                                          f"hollowscale-{role}")
                           for role in ("agent", "load")}
            metrics = {"token": tokens["metrics"], "ca.crt": ca or "", "server": s.target_server}
            folder = write_driver_kustomization(Path(scratch) / "driver", s, self.sc.pools_doc(), self.sc.load.to_doc(),
                                                kubeconfigs, metrics, network.extra_objects(s.shards))
            driver_docs = kustomize(folder)
        (self.dir / "manifests.yaml").write_text(yaml.safe_dump_all(
            without_secret_data(target_docs + driver_docs), sort_keys=False))
        self.log(f"in-cluster: creating {len(driver_docs)} object(s) in namespace {s.namespace} "
                 f"({s.shards} agent shard(s), Locust master + {s.locust_workers} worker(s), Prometheus)")
        t_apply = time.monotonic()
        self.driver.create_all(driver_docs)
        self.timings["setup_s"] = round(t_apply - t0, 3)
        pods = podwait.wait_ready(self.http, self.server, s.namespace, self.run_id, self.expected_pods, 300.0,
                                  sleep, report)
        self.timings["pods_ready_s"] = round(time.monotonic() - t_apply, 3)
        self.pod_times = podwait.start_times(pods)
        network.discover(self.http, self.server, s.namespace, self.run_id)
        spread = ", ".join(f"{p['name']} on {p['node']}" for p in self.pod_times if p["name"].startswith("hollow-agent-"))
        self.log(f"in-cluster: {len(pods)} pods Ready in {self.timings['pods_ready_s']:.1f}s ({spread})")

    @property
    def expected_pods(self) -> int:
        assert self.settings is not None
        return self.settings.shards + self.settings.locust_workers + 2  # + master + Prometheus

    def pods(self) -> list[dict[str, Any]]:
        assert self.settings is not None
        return podwait.run_pods(self.http, self.server, self.settings.namespace, self.run_id)

    # ------------------------------------------------------------------------------------ parts
    def locust(self) -> LocustMaster:
        assert self.network is not None
        return LocustMaster(self.network.locust_web())

    def agent_addresses(self) -> list[str]:
        """Each agent shard's control server (``host:port``) as the harness reaches it; [] before the pods."""
        if self.settings is None or self.network is None:
            return []
        try:
            return self.network.agent_addresses(self.settings.shards)
        except DriverNetworkError:  # the pods are not Ready yet: the harness does not know where they are
            return []

    def prometheus_url(self) -> str:
        assert self.network is not None
        return self.network.prometheus()

    def start_load(self, sleep: Callable[[float], None], timeout_s: float = 60.0) -> str:
        """Once every worker joined the master: ``POST /swarm``; the master's message."""
        assert self.settings is not None
        master = self.locust()
        deadline = time.monotonic() + timeout_s
        while (joined := master.worker_count()) < self.settings.locust_workers:
            if time.monotonic() > deadline:
                raise InClusterError(f"{joined}/{self.settings.locust_workers} Locust workers joined the master "
                                     f"after {timeout_s:g}s")
            sleep(0.5)
        return master.start()

    # ------------------------------------------------------------------------------------ teardown
    def _hollow_nodes_left(self) -> list[str]:
        names = self.sc.node_names()
        return sorted(n["metadata"]["name"] for n in list_all(self.http, self.server, "/api/v1/nodes",
                                                              label_selector=f"{NODE_LABEL}=true")
                      if n["metadata"]["name"] in names)

    def save_logs(self, folder: Path) -> list[str]:
        """Every pod's log (and its previous container's, after a restart) into ``folder``; the files."""
        if self.settings is None:
            return []
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        try:
            pods = self.pods()
        except requests.RequestException:
            return []
        for pod in pods:
            name = pod["metadata"]["name"]
            restarted = any(cs.get("restartCount", 0) for cs in (pod.get("status") or {}).get("containerStatuses") or [])
            for previous in (False, True) if restarted else (False,):
                text = podwait.log_tail(self.http, self.server, self.settings.namespace, name, lines=100_000,
                                        previous=previous)
                path = folder / f"{name}{'.previous' if previous else ''}.log"
                path.write_text(text)
                written.append(path.name)
        return written

    def teardown(self, sleep: Callable[[float], None] = time.sleep, grace_s: float = 180.0,
                 logs: Path | None = None) -> list[str]:
        """Delete everything the run created, driver first (agents delete their nodes), target last;
        the pods' logs are saved into ``logs`` first."""
        t0 = time.monotonic()
        if logs is not None:
            self.save_logs(logs)
        errors = self.driver.delete_all(self.log)
        left = self.driver.wait_gone(grace_s, sleep) if self.driver.created else []
        pods_left: list[str] = []
        if self.settings is not None:
            try:
                deadline = time.monotonic() + grace_s
                while (pods_left := [p["metadata"]["name"] for p in self.pods()]) and time.monotonic() < deadline:
                    sleep(1.0)
            except requests.RequestException as exc:
                errors.append(f"listing the run's pods: {exc}")
        if left or pods_left:
            errors.append(f"in-cluster objects still there after {grace_s:g}s: "
                          f"{', '.join([o.text() for o in left] + pods_left)}")
        self.teardown_facts["driver_deleted_s"] = round(time.monotonic() - t0, 3)
        nodes_deleted = 0
        if self.driver.created:  # the agents ran: nodes they could not delete in their grace period go now
            try:
                for name in self._hollow_nodes_left():
                    for path in (f"/api/v1/nodes/{name}",
                                 f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"):
                        r = self.http.delete(self.server + path, timeout=30)
                        if r.status_code not in (200, 202, 404):
                            errors.append(f"deleting {path}: HTTP {r.status_code}")
                    nodes_deleted += 1
            except requests.RequestException as exc:
                errors.append(f"deleting the scenario's hollow nodes: {exc}")
        self.teardown_facts["hollow_nodes_deleted_by_harness"] = nodes_deleted
        errors += self.target.delete_all(self.log)
        left = self.target.wait_gone(60.0, sleep) if self.target.created else []
        if left:
            errors.append(f"target objects still there: {', '.join(o.text() for o in left)}")
        if self.claim is not None:
            try:
                release_namespace(self.http, self.server, self.claim)
            except (requests.RequestException, RuntimeError) as exc:
                errors.append(f"namespace cleanup failed ({self.claim.name}): {exc}")
        self.teardown_facts["seconds"] = round(time.monotonic() - t0, 3)
        self.teardown_facts["objects_deleted"] = len(self.driver.created) + len(self.target.created)
        return errors

    # ------------------------------------------------------------------------------------ report
    def _addresses(self) -> dict[str, Any] | None:
        """Where the harness reached the pods; None before it knew (a run that ended while they started)."""
        if self.settings is None or self.network is None:
            return None
        try:
            return {"agents": self.network.agent_addresses(self.settings.shards), "locust_web": self.network.locust_web(),
                    "prometheus": self.network.prometheus()}
        except DriverNetworkError:
            return None

    def section(self) -> dict[str, Any]:
        """``summary.incluster``: where the pods ran, how long images, setup and pods took."""
        s = self.settings
        agents = {p["name"]: p.get("node") for p in self.pod_times if p["name"].startswith("hollow-agent-")}
        return {
            "driver": self.network.description if self.network else None,
            # where each agent shard ran (pod hollow-agent-N runs shard N)
            "agent_nodes": agents,
            "namespace": {"name": self.claim.name, "created_by_run": self.claim.created} if self.claim else None,
            "shards": s.shards if s else None, "locust_workers": s.locust_workers if s else None,
            "ports": ({"agents": s.agent_ports, "locust_master": s.ports.locust_master,
                       "locust_web": s.ports.locust_web, "prometheus": s.ports.prometheus}
                      if s and s.ports else None),
            "addresses": self._addresses(),
            "images": self.images, "timings": self.timings, "pods": self.pod_times,
            "objects_created": [c.text() for c in self.target.created + self.driver.created],
            "teardown": self.teardown_facts,
        }
