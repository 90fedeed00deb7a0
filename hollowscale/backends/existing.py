"""``cluster.backend: existing``: any cluster a kubeconfig reaches (the scenario's ``cluster.kubeconfig``,
else ``$KUBECONFIG``, a list merged as kubectl does, else ``~/.kube/config``).  The run makes nothing of
the cluster itself, so it takes nothing down."""

from __future__ import annotations

import os
from pathlib import Path

from hollowscale.backends.base import BackendSettings, ClusterAccess, ClusterFacts, apiserver_target
from kubecore.config import flatten_kubeconfig, load_endpoint


def agent_kubeconfig(path: str, run_dir: Path) -> Path:
    """One kubeconfig file for the agents and Locust (a ``$KUBECONFIG`` list is flattened into the run folder)."""
    if len(path.split(os.pathsep)) == 1:
        return Path(path)
    out = run_dir / "kubeconfig"
    flatten_kubeconfig(path, out)
    return out


class ExistingBackend:
    """A cluster someone else runs."""

    def __init__(self, settings: BackendSettings) -> None:
        self.settings = settings

    def up(self) -> ClusterAccess:
        c = self.settings.scenario.cluster
        path = c.kubeconfig_path()
        if path is None:
            raise RuntimeError(f"backend {c.backend}: no kubeconfig (set cluster.kubeconfig or $KUBECONFIG)")
        endpoint = load_endpoint(path)
        return ClusterAccess(endpoint=endpoint, kubeconfig=agent_kubeconfig(path, self.settings.run_dir),
                             metrics=apiserver_target(endpoint), facts=ClusterFacts(profile=c.profile))

    def down(self) -> None:
        """Nothing: the run made nothing of this cluster (its namespaces and objects go in the run's teardown)."""
