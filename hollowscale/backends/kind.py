"""``cluster.backend: kind``: a kind cluster of nodes built here, run by the harness's own podman.

``up`` builds (or finds cached) the kind node image (:mod:`hollowscale.kindnode.image`), prepares
Debian's podman in the cache and loads the image into it (:mod:`hollowscale.kindnode.engine`), writes
the run's kind config (the shape of ``cluster.kind_config``, by default ``kind-config.yaml``, with our
image and patches, :func:`hollowscale.kindnode.cluster.render_kind_config`) into the run folder, records
what the cluster will change on the machine (:class:`hollowscale.kindnode.cluster.HostChanges`), and has
kind v0.33.0 (built from its module) create the cluster named ``hollowscale`` when absent; then it waits
until every node is Ready.

- The workers are the run's real nodes (:class:`hollowscale.cluster.kind.KindRealNodes`): images go in
  with ``kind load image-archive`` when a feature asks, and with ``distill_jobs`` the teacher
  checkpoint's folder is mounted into them at creation.
- With ``cluster.real_node_gpus`` every worker advertises that many fake GPUs through hollowscale's device
  plugin, run on this machine with its registry mounted into the worker (:mod:`hollowscale.kindnode.gpus`).
- Prometheus scrapes the apiserver through its published port, and kube-scheduler and
  kube-controller-manager at the control-plane node's address on the cluster's network
  (:func:`control_plane_targets`), all with the harness's admin client certificate.

``down`` stops the device plugins, deletes the cluster only when this run created it, then the ``kind``
network kind leaves behind when no container uses it, and puts the machine back as it was.  Before the
node containers go (the delete, or the creation an interrupt or a failure ends, whose delete happens inside
:func:`ensure_kind_cluster`) the network namespace podman gave each is recorded
(:class:`hollowscale.kindnode.netns.Recorder`); those podman's own teardown left empty go after it.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from typing import Any

import requests
import yaml

from hollow.dra import GPU_MODELS
from hollowscale.backends.base import BackendSettings, ClusterAccess, ClusterFacts, apiserver_target
from hollowscale.cluster.binaries import ensure_module_tool
from hollowscale.cluster.kind import (
    KindCluster,
    KindError,
    KindRealNodes,
    KindSettings,
    delete_kind_cluster,
    ensure_kind_cluster,
)
from hollowscale.kindnode import netavark, netns
from hollowscale.kindnode.cluster import KIND_NETWORK, METRICS_PORTS, HostChanges, node_names, render_kind_config
from hollowscale.kindnode.engine import Podman, ensure_podman, load_image
from hollowscale.kindnode.gpus import FakeGpuPlugins
from hollowscale.kindnode.image import build_node_image
from hollowscale.measure.prom import Target
from hollowscale.versions import KIND_VERSION
from kubecore.config import KubeEndpoint, load_endpoint
from kubecore.watch import session_for

#: the cluster's name (kind's ``--name``): one kind cluster of hollowscale's at a time
CLUSTER_NAME = "hollowscale"
#: how long the workers may take to be Ready after kind's own wait for the control plane
NODES_READY_S = 300.0
#: how long the workers may take to advertise their fake GPUs once the plugins run
GPUS_ADVERTISED_S = 120.0
#: where the teacher checkpoint's folder is inside a worker: the path ``deploy/distill/teachers.yaml`` ships with
MODELS_IN_NODE = "/var/lib/hollowscale/models"


def _not_ready(session: requests.Session, server: str) -> list[str]:
    items = session.get(f"{server}/api/v1/nodes", timeout=30).json().get("items") or []
    return [n["metadata"]["name"] for n in items
            if not any(c.get("type") == "Ready" and c.get("status") == "True"
                       for c in (n.get("status") or {}).get("conditions") or ())] or ([] if items else ["(none yet)"])


def control_plane_targets(nodes: list[dict], endpoint: KubeEndpoint) -> list[Target]:
    """kube-scheduler's and kube-controller-manager's scrape targets: the control-plane node's
    InternalIP (its container's address on the kind network, which this machine routes to) and
    kubeadm's secure ports, with the kubeconfig's client certificate (their serving certificates are
    self-signed, so not verified)."""
    for node in nodes:
        if "node-role.kubernetes.io/control-plane" not in ((node.get("metadata") or {}).get("labels") or {}):
            continue
        ips = [a["address"] for a in (node.get("status") or {}).get("addresses") or ()
               if a.get("type") == "InternalIP"]
        if not ips:
            raise KindError(f"kind control-plane node {node['metadata']['name']} has no InternalIP")
        host = f"[{ips[0]}]" if ":" in ips[0] else ips[0]
        return [Target(job, "https", [f"{host}:{port}"], cert_file=endpoint.cert_file, key_file=endpoint.key_file,
                       insecure=True) for job, port in sorted(METRICS_PORTS.items())]
    raise KindError("the kind cluster has no node labelled node-role.kubernetes.io/control-plane")


class KindBackend:
    """The kind cluster named ``hollowscale``, shaped by ``cluster.kind_config``, of nodes built here."""

    def __init__(self, settings: BackendSettings) -> None:
        self.settings = settings
        self.cluster: KindCluster | None = None
        self.podman: Podman | None = None
        self.host: HostChanges | None = None
        self.gpus: FakeGpuPlugins | None = None
        self.netns: netns.Recorder | None = None

    def up(self) -> ClusterAccess:
        log = self.settings.log
        c = self.settings.scenario.cluster
        node = build_node_image(lambda m: log(f"kind node image: {m}"))
        self.podman = ensure_podman(log)
        if load_image(self.podman, node.image.name, node.image.digest, node.image.archive):
            log(f"loaded {node.image.name} into hollowscale's podman")
        kind = ensure_module_tool("kind", "sigs.k8s.io/kind", KIND_VERSION, "sigs.k8s.io/kind", progress=log)
        source = c.kind_config_path()
        config = self.settings.run_dir / "kind-config.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        shared = self._shared_folders()
        if c.real_node_gpus is not None:
            self.gpus = FakeGpuPlugins(c.real_node_gpus.count, GPU_MODELS[c.real_node_gpus.model].product,
                                       self.settings.run_dir)
        gpus = self.gpus

        def worker_mounts(index: int) -> list[dict[str, Any]]:
            return [*({"hostPath": host, "containerPath": inside, "readOnly": True} for host, inside in shared.items()),
                    *(gpus.worker_mounts(index) if gpus is not None else ())]

        names: list[str] = []
        try:
            doc = render_kind_config(yaml.safe_load(source.read_text()), node.image.name, str(source), worker_mounts)
            names = node_names(CLUSTER_NAME, doc)
            self.netns = recorder = self._netns_recorder(names)
            config.write_text(f"# {source} with the node image built here (hollowscale.kindnode)\n"
                              + yaml.safe_dump(doc, sort_keys=False))
            # before kind creates anything: the ledger of the exact run state our network will make
            self.host = HostChanges.record(self.podman.networks_dir, networks=(KIND_NETWORK,))
            for line in self.host.cleared:
                log(f"before the cluster: {line}")
            # recorded while kind creates the nodes: an interrupted or failed creation is deleted inside this call
            with recorder.watching():
                self.cluster = ensure_kind_cluster(KindSettings(
                    kubeconfig=self.settings.run_dir / "kubeconfig", config=config, name=CLUSTER_NAME, images=(),
                    kind=str(kind),
                    engine="podman", env=self.podman.kind_env()))
            endpoint = load_endpoint(self.cluster.kubeconfig)
            session = session_for(endpoint)
            self._wait_ready(endpoint.server, session)
            nodes = session.get(f"{endpoint.server}/api/v1/nodes", timeout=30).json().get("items") or []
            targets = apiserver_target(endpoint) + control_plane_targets(nodes, endpoint)
            workers = tuple(n for n, spec in zip(names, doc["nodes"], strict=True) if spec.get("role") == "worker")
            started = self._start_gpus(endpoint.server, session, workers) if gpus is not None else {}
        except BaseException:
            self.down()
            if self.cluster is None:
                self._remove_orphan_volumes(names)
            raise
        labels = dict(node.image.labels)
        facts = ClusterFacts(profile=c.profile,
                             kubernetes_version=labels.get("io.hollowscale.kubernetes"),
                             etcd_version=labels.get("io.hollowscale.etcd"),
                             reused=not self.cluster.created,
                             features={"kind": {"node_image": node.image.name, "engine": "podman",
                                                "config": str(config), "source": str(source),
                                                "fake_gpus_per_worker": gpus.count if gpus else 0}})
        return ClusterAccess(endpoint=endpoint, kubeconfig=self.cluster.kubeconfig, metrics=targets, facts=facts,
                             started_pids=started, real_nodes=KindRealNodes(self.cluster, workers, shared))

    def _netns_recorder(self, nodes: list[str]) -> netns.Recorder:
        """What records the network namespace podman gives each of ``nodes`` (kind's container names)."""
        podman = self.podman
        assert podman is not None

        def inspect(names: Sequence[str]) -> str:
            # exits non-zero when one of them does not exist (yet, or any more); the others are printed
            try:
                return podman.run(["container", "inspect", "--format", netns.INSPECT_FORMAT, *names], timeout_s=30,
                                  check=False).stdout
            except subprocess.TimeoutExpired:  # a container lock held by a killed podman: nothing this time
                return ""

        return netns.Recorder(inspect, nodes)

    def _remove_recorded_netns(self) -> list[str]:
        """After the node containers went: the recorded namespaces podman's teardown left (:mod:`netns`)."""
        podman, recorder = self.podman, self.netns
        if podman is None or recorder is None:
            return []
        ops = netns.SystemOps(lambda c: podman.run(["container", "exists", c], check=False).returncode == 0)
        return netns.remove_recorded(recorder.recorded, ops)

    def _remove_orphan_volumes(self, nodes: list[str]) -> None:
        """After a creation that did not finish: the ``/var`` volumes kind made for nodes whose containers it
        never started (kind labels each with its node's name; ``kind delete`` only removes those of nodes that
        exist).  Only when no container of the cluster is left, so a cluster found running keeps its own."""
        if self.podman is None:
            return
        left = self.podman.run(["ps", "--all", "--quiet", "--filter", f"label=io.x-k8s.kind.cluster={CLUSTER_NAME}"],
                               check=False).stdout.strip()
        if left:
            return
        for name in nodes:
            for volume in self.podman.run(["volume", "ls", "--quiet", "--filter", f"label={name}"],
                                          check=False).stdout.split():
                self.podman.run(["volume", "rm", "--force", volume], check=False)
                self.settings.log(f"removed volume {volume} kind made for {name} before it was interrupted")

    def _shared_folders(self) -> dict[str, str]:
        """This machine's folders the run's real pods read, mounted read-only into every worker (a kind node
        sees only what it was created with): the teacher checkpoint's folder for ``distill_jobs``, at the
        path ``deploy/distill`` names.  Made when missing (it is hollowscale's cache)."""
        if not self.settings.scenario.distill_jobs:
            return {}
        from distill.train_teacher import default_checkpoint

        models = default_checkpoint().parent
        models.mkdir(parents=True, exist_ok=True)
        return {str(models.resolve()): MODELS_IN_NODE}

    def _start_gpus(self, server: str, session: requests.Session, workers: tuple[str, ...]) -> dict[str, int]:
        """The fake device plugins of the workers, and the wait until every worker advertises its GPUs."""
        assert self.gpus is not None
        self.settings.log(f"fake GPU device plugins: {self.gpus.count} {self.gpus.model} per worker "
                          f"({', '.join(workers)})")
        started = self.gpus.start(workers)
        deadline = time.monotonic() + GPUS_ADVERTISED_S
        while True:
            have = {n["metadata"]["name"]: (n.get("status") or {}).get("allocatable", {}).get("nvidia.com/gpu")
                    for n in session.get(f"{server}/api/v1/nodes", timeout=30).json().get("items") or ()}
            missing = [w for w in workers if have.get(w) != str(self.gpus.count)]
            if not missing:
                return started
            if self.gpus.exited() or time.monotonic() > deadline:
                raise KindError(f"kind workers {', '.join(missing)} do not advertise {self.gpus.count} nvidia.com/gpu "
                                f"(device plugins exited: {self.gpus.exited() or 'none'}; logs: "
                                f"{self.settings.run_dir}/deviceplugin-*.log)")
            time.sleep(0.5)

    def _wait_ready(self, server: str, session: requests.Session) -> None:
        deadline = time.monotonic() + NODES_READY_S
        waiting = _not_ready(session, server)
        while waiting:
            if time.monotonic() > deadline:
                raise KindError(f"kind nodes not Ready {NODES_READY_S:.0f} s after the control plane: "
                                f"{', '.join(waiting)}")
            time.sleep(1)
            waiting = _not_ready(session, server)

    def down(self) -> None:
        log = self.settings.log
        if self.gpus is not None:  # before the cluster: each plugin removes its socket, then its folder goes
            self.gpus.stop()
            self.gpus = None
        if self.cluster is not None and self.cluster.created and not self.settings.keep_cluster:
            log(f"deleting the kind cluster {self.cluster.name} this run created")
            if self.netns is not None:  # while the containers exist: each one's namespace, as podman has it
                self.netns.record()
            delete_kind_cluster(self.cluster)
            self.cluster = None
        if self.cluster is None:  # deleted now, or by the creation that did not finish (recorded meanwhile)
            for line in self._remove_recorded_netns():
                log(f"put back: {line}")
            self.netns = None
        if self.podman is not None and (self.cluster is None or not self.cluster.created):
            # kind leaves its network; in our own podman it is ours, and goes once no container uses it
            used = self.podman.run(["ps", "--all", "--quiet", "--filter", f"network={KIND_NETWORK}"],
                                   check=False).stdout.strip()
            if not used:
                bridge = self.podman.run(["network", "inspect", KIND_NETWORK, "--format", "{{.NetworkInterface}}"],
                                         check=False).stdout.strip()
                self.podman.run(["network", "rm", KIND_NETWORK], check=False)
                for line in netavark.remove_leaked_bridge(bridge):  # nodes killed before their teardown
                    log(f"put back: {line}")
        if self.host is not None and (self.cluster is None):
            for line in self.host.restore():
                log(f"put back: {line}")
            self.host = None

