"""``cluster.backend: kind``: a kind cluster (:mod:`hollowscale.cluster.kind`), created when absent (with
the distill image loaded) and deleted afterwards only then; its kubeconfig is written into the run folder."""

from __future__ import annotations

from hollowscale.backends.base import BackendSettings, ClusterAccess, ClusterFacts, apiserver_target
from hollowscale.cluster.kind import KindCluster, KindSettings, delete_kind_cluster, ensure_kind_cluster
from kubecore.config import load_endpoint


class KindBackend:
    """The kind cluster named ``hollowscale`` from ``kind-config.yaml``."""

    def __init__(self, settings: BackendSettings) -> None:
        self.settings = settings
        self.cluster: KindCluster | None = None

    def up(self) -> ClusterAccess:
        self.cluster = ensure_kind_cluster(KindSettings(kubeconfig=self.settings.run_dir / "kubeconfig"))
        endpoint = load_endpoint(self.cluster.kubeconfig)
        return ClusterAccess(endpoint=endpoint, kubeconfig=self.cluster.kubeconfig, metrics=apiserver_target(endpoint),
                             facts=ClusterFacts(profile=self.settings.scenario.cluster.profile))

    def down(self) -> None:
        if self.cluster is not None and self.cluster.created and not self.settings.keep_cluster:
            self.settings.log(f"deleting the kind cluster {self.cluster.name} this run created")
            delete_kind_cluster(self.cluster)
