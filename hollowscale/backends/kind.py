"""``cluster.backend: kind``: a kind cluster of nodes built here, run by the harness's own podman.

``up`` builds (or finds cached) the kind node image (:mod:`hollowscale.kindnode.image`), prepares
Debian's podman in the cache and loads the image into it (:mod:`hollowscale.kindnode.engine`), writes
the run's kind config (the shape of ``kind-config.yaml`` with our image and patches,
:func:`hollowscale.kindnode.cluster.render_kind_config`) into the run folder, records what the cluster
will change on the machine (:class:`hollowscale.kindnode.cluster.HostChanges`), and has kind v0.33.0
(built from its module) create the cluster named ``hollowscale`` when absent, loading the distill image
only when the scenario runs distillation jobs; then it waits until every node is Ready.  ``down``
deletes the cluster only when this run created it, then the ``kind`` network kind leaves behind when no
container uses it, and puts the machine back as it was.
"""

from __future__ import annotations

import time

import requests
import yaml

from hollowscale.backends.base import BackendSettings, ClusterAccess, ClusterFacts, apiserver_target
from hollowscale.cluster.binaries import ensure_module_tool
from hollowscale.cluster.kind import (
    DEFAULT_CONFIG,
    KindCluster,
    KindError,
    KindSettings,
    delete_kind_cluster,
    ensure_kind_cluster,
)
from hollowscale.kindnode.cluster import HostChanges, render_kind_config
from hollowscale.kindnode.engine import Podman, ensure_podman, load_image
from hollowscale.kindnode.image import build_node_image
from hollowscale.versions import KIND_VERSION
from kubecore.config import load_endpoint
from kubecore.watch import session_for

#: how long the workers may take to be Ready after kind's own wait for the control plane
NODES_READY_S = 300.0


def _not_ready(session: requests.Session, server: str) -> list[str]:
    items = session.get(f"{server}/api/v1/nodes", timeout=30).json().get("items") or []
    return [n["metadata"]["name"] for n in items
            if not any(c.get("type") == "Ready" and c.get("status") == "True"
                       for c in (n.get("status") or {}).get("conditions") or ())] or ([] if items else ["(none yet)"])


class KindBackend:
    """The kind cluster named ``hollowscale``, shaped by ``kind-config.yaml``, of nodes built here."""

    def __init__(self, settings: BackendSettings) -> None:
        self.settings = settings
        self.cluster: KindCluster | None = None
        self.podman: Podman | None = None
        self.host: HostChanges | None = None

    def up(self) -> ClusterAccess:
        log = self.settings.log
        node = build_node_image(lambda m: log(f"kind node image: {m}"))
        self.podman = ensure_podman(log)
        if load_image(self.podman, node.image.name, node.image.digest, node.image.archive):
            log(f"loaded {node.image.name} into hollowscale's podman")
        kind = ensure_module_tool("kind", "sigs.k8s.io/kind", KIND_VERSION, "sigs.k8s.io/kind", progress=log)
        config = self.settings.run_dir / "kind-config.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        doc = render_kind_config(yaml.safe_load(DEFAULT_CONFIG.read_text()), node.image.name, str(DEFAULT_CONFIG))
        config.write_text(f"# {DEFAULT_CONFIG.name} with the node image built here (hollowscale.kindnode)\n"
                          + yaml.safe_dump(doc, sort_keys=False))
        images = ("distill",) if self.settings.scenario.distill_jobs else ()
        self.host = HostChanges.record()
        try:
            self.cluster = ensure_kind_cluster(KindSettings(
                kubeconfig=self.settings.run_dir / "kubeconfig", config=config, images=images, kind=str(kind),
                engine="podman", env=self.podman.kind_env()))
            endpoint = load_endpoint(self.cluster.kubeconfig)
            self._wait_ready(endpoint.server, session_for(endpoint))
        except BaseException:
            self.down()
            raise
        labels = dict(node.image.labels)
        facts = ClusterFacts(profile=self.settings.scenario.cluster.profile,
                             kubernetes_version=labels.get("io.hollowscale.kubernetes"),
                             etcd_version=labels.get("io.hollowscale.etcd"),
                             reused=not self.cluster.created,
                             features={"kind": {"node_image": node.image.name, "engine": "podman",
                                                "config": str(config)}})
        return ClusterAccess(endpoint=endpoint, kubeconfig=self.cluster.kubeconfig, metrics=apiserver_target(endpoint),
                             facts=facts)

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
        if self.cluster is not None and self.cluster.created and not self.settings.keep_cluster:
            log(f"deleting the kind cluster {self.cluster.name} this run created")
            delete_kind_cluster(self.cluster)
            self.cluster = None
        if self.podman is not None and (self.cluster is None or not self.cluster.created):
            # kind leaves its network; in our own podman it is ours, and goes once no container uses it
            used = self.podman.run(["ps", "--all", "--quiet", "--filter", "network=kind"], check=False).stdout.strip()
            if not used:
                self.podman.run(["network", "rm", "kind"], check=False)
        if self.host is not None and (self.cluster is None):
            for line in self.host.restore():
                log(f"put back: {line}")
            self.host = None

