"""The cluster a run uses, behind one interface (KWOK's ``Runtime``, ``pkg/kwokctl/runtime``).

A backend brings a cluster up (or connects to one) and hands the run a :class:`ClusterAccess`: the
harness's endpoint, one kubeconfig for the agents and Locust, the control plane's Prometheus targets,
what the report says about the cluster (:class:`ClusterFacts`) and what the run can see of its control
plane (:class:`ControlPlane`).  ``down`` removes exactly what ``up`` made, and nothing when it made
nothing.  Implementations: :mod:`.local`, :mod:`.kind`, :mod:`.existing`; the registry is
:data:`hollowscale.backends.BACKENDS`, keyed by the scenario's ``cluster.backend``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hollowscale.cluster.realnode.access import NoRealNodes, RealNodeAccess
from hollowscale.measure.prom import Target
from hollowscale.scenario import Scenario
from kubecore.config import KubeEndpoint

Log = Callable[[str], None]


@dataclass(frozen=True)
class ClusterFacts:
    """What ``summary.json`` says about the cluster (``cluster``); a cluster hollowscale did not start
    leaves all but the profile the scenario asked for unknown.

    Attributes:
        profile: the cluster profile (:mod:`hollowscale.cluster.profiles`).
        kubernetes_version, etcd_version: what the control plane runs, when known.
        client_qps: component -> (client QPS, burst).
        flags: component -> its command line.
        features: gang gates, runtime config, Kueue (see :class:`hollowscale.cluster.local.ClusterInfo`).
        reused: whether ``up`` found the cluster running (None: not a cluster hollowscale starts).
        real_nodes: the real nodes (name, kubelet port, pod range, containerd socket, ...).
        supervised: the control plane's components run under hollowscale's supervisor (restarts, faults).
    """

    profile: str
    kubernetes_version: str | None = None
    etcd_version: str | None = None
    client_qps: dict[str, tuple[float, int]] = field(default_factory=dict)
    flags: dict[str, list[str]] = field(default_factory=dict)
    features: dict[str, Any] = field(default_factory=dict)
    reused: bool | None = None
    real_nodes: list[dict[str, Any]] = field(default_factory=list)
    supervised: bool = False


class ControlPlane(Protocol):
    """What a run can see of, and do to, the control plane's processes."""

    @property
    def audit_log(self) -> Path | None:
        """The apiserver's audit log (every apiserver process of the cluster), or None when unseen."""
        ...

    def problem(self) -> str | None:
        """Why the run cannot go on (its components are no longer supervised), or None."""
        ...

    def events(self) -> list[dict[str, Any]]:
        """The components' starts, exits, restarts, stalls and kills (the supervisor's event log)."""
        ...

    def fault(self, action: str, component: str, duration_s: float) -> dict[str, Any]:
        """Stall, kill or restart ``component``; the acknowledgement.  ValueError or TimeoutError when
        it cannot be done."""
        ...


class UnseenControlPlane:
    """A control plane hollowscale did not start (kind, an existing cluster): no supervisor to ask, no
    audit log to read, no component to fault."""

    audit_log: Path | None = None

    def problem(self) -> str | None:
        return None

    def events(self) -> list[dict[str, Any]]:
        return []

    def fault(self, action: str, component: str, duration_s: float) -> dict[str, Any]:
        raise ValueError("no local cluster of this run to inject it into")


@dataclass(frozen=True)
class ClusterAccess:
    """What a run gets from its backend once the cluster is up.

    Attributes:
        endpoint: how the harness reaches the API server.
        kubeconfig: one file for the agents and Locust (a ``$KUBECONFIG`` list flattened).
        metrics: the control plane's Prometheus scrape targets.
        facts: what the report says about the cluster.
        control_plane: the control plane's processes as far as the run can see them.
        started_pids: processes this run started for the cluster (recorded in ``pids.json``).
        real_nodes: how the run's real pods get onto the cluster's real nodes (images, host folders, the
            apiserver): :mod:`hollowscale.cluster.realnode.access`.
    """

    endpoint: KubeEndpoint
    kubeconfig: Path
    metrics: list[Target]
    facts: ClusterFacts
    control_plane: ControlPlane = field(default_factory=UnseenControlPlane)
    started_pids: dict[str, int] = field(default_factory=dict)
    real_nodes: RealNodeAccess = field(default_factory=NoRealNodes)


class ClusterBackend(Protocol):
    """One way to have a cluster for a run."""

    def up(self) -> ClusterAccess:
        """Bring the cluster up, or connect to it; what the run needs of it."""
        ...

    def down(self) -> None:
        """Remove what ``up`` made (nothing it found, nothing when asked to keep the cluster)."""
        ...


@dataclass(frozen=True)
class BackendSettings:
    """What every backend is built from.

    Attributes:
        scenario: the run's scenario (``cluster`` says where; ``variant`` asks for a fresh cluster).
        run_dir: the run's folder (a variant's cluster, a kubeconfig the run writes).
        keep_cluster: leave a cluster this run started running afterwards.
        log: the run's progress log.
    """

    scenario: Scenario
    run_dir: Path
    keep_cluster: bool
    log: Log


def apiserver_target(endpoint: KubeEndpoint) -> list[Target]:
    """The one scrape target of a cluster whose other components are out of reach: its apiserver,
    with the harness's own credentials."""
    hostport = endpoint.server.split("://", 1)[1]
    return [Target("apiserver", "https", [hostport], ca_file=endpoint.ca_file, cert_file=endpoint.cert_file,
                   key_file=endpoint.key_file, insecure=endpoint.insecure)]
