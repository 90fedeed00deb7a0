"""What a controller installed beside the local control plane provides to the cluster that runs it.

A controller such as JobSet is, in a real cluster, a Deployment with its CRDs, RBAC, webhooks and
certificates.  The local cluster (:mod:`hollowscale.cluster.local`) runs it as one more supervised process on
127.0.0.1 and gives it those same objects; this interface is the part the cluster's start, its state and its
metrics need, so that one more controller is one more implementation, not one more set of branches.  (Kueue,
which came first, still has its own branches in ``local.py``; it is to move behind this interface.)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from hollowscale.cluster.kubectl import Kubectl


class InstalledComponentError(RuntimeError):
    """The component could not be installed or started; one line saying why."""


class InstalledComponent(Protocol):
    """One controller installed and supervised by the local cluster.

    Attributes:
        name: its supervisor component name, log file stem and ``ClusterInfo.features`` key.
        port_names: the 127.0.0.1 ports it needs, allocated by the cluster with its own.
    """

    name: str
    port_names: tuple[str, ...]

    def check(self) -> None:
        """Raise :class:`InstalledComponentError` when it cannot run here (binary missing, ...)."""

    def prepare(self, pki_dir: Path, api: str, ports: Mapping[str, int], client_qps: tuple[float, int]) -> None:
        """Its certificates (from the cluster CA in ``pki_dir``), kubeconfig and configuration files."""

    def install_before_start(self, kubectl: Kubectl, timeout_s: float) -> None:
        """CRDs (Established), namespace and RBAC: what must exist before the process starts."""

    def argv(self) -> list[str]:
        """Its command line."""

    def ready(self, ports: Mapping[str, int]) -> bool:
        """Whether it serves (its readiness endpoint)."""

    def install_after_ready(self, kubectl: Kubectl, ports: Mapping[str, int], ca_pem: bytes) -> dict[str, Any]:
        """Webhooks (they need it serving) and tokens; returns what to add to its features."""

    def features(self, ports: Mapping[str, int]) -> dict[str, Any]:
        """What ``ClusterInfo.features[name]`` records of it (version, configuration, ports)."""

    def metrics(self, ports: Mapping[str, int]) -> tuple[str, Path] | None:
        """Its metrics URL and the bearer-token file Prometheus reads (None: no metrics)."""
